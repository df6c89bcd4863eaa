"""Bradley-Terry scores from hard outcomes by Zermelo's / Hunter's MM iteration.

Model: ``P(i beats j) = pi_i / (pi_i + pi_j)`` (Bradley & Terry 1952), fitted to the hard decisions
``1[p > threshold]`` (EACL section 3; a decision exactly at the threshold is half a win each). Scores
are ``s = log pi`` with mean 0.

Prior
-----
The PoE authors' reference code adds ``1 / (N - 1)`` virtual wins of every item over every other item:
one virtual win and one virtual loss per item in total, so that the estimate exists for undefeated and
winless items. Spreading them over all ``N - 1`` opponents costs O(N^2) per iteration (10^10 at
N = 100,000). Here each item instead plays its virtual games against a *reference item* of fixed
strength 1 (the geometric-mean strength): ``prior`` virtual wins and ``prior`` virtual losses, default
1 -- the same prior weight, equal to the reference code's prior when the opponents' strengths are at the
reference, O(N) per iteration, and a proper prior (a standard logistic density on each ``s_i``). The
maximum-a-posteriori estimate then exists and is unique for any data. ``prior=0`` gives the plain
maximum-likelihood estimate, which exists only when the directed "beats" graph is strongly connected
(Ford 1957); that is checked.

Iteration
---------
Hunter (2004, eq. 3), Zermelo (1929): ``pi_i <- (W_i + prior) / (sum_k 1 / (pi_i + pi_j) +
2 prior / (pi_i + 1))`` over the comparisons ``k`` of item ``i`` (``W_i`` its wins) -- the MM update of
the augmented data in which the reference item's strength is held at 1. Each update increases the log
posterior. By default the MM map is accelerated with SQUAREM (Varadhan & Roland 2008, scheme S3), with
the standard safeguard that a step is kept only if it does not decrease the log posterior, so the
sequence stays monotone and converges to the same fixed point. The iteration stops when an MM update
changes no log-strength by more than ``tol``; :class:`RuntimeError` after ``max_iter`` MM updates.
"""

from __future__ import annotations

import logging
import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.scorers._common import bt_log_likelihood, hard_outcomes, reference_prior
from pipeline.methods.scorers.comparison_checks import as_comparisons, check_connected, check_maximum_exists

__all__ = ["BT_MAX_ITER", "BT_PRIOR", "BT_TOL", "bradley_terry", "bt_log_posterior"]

logger = logging.getLogger(__name__)

#: Convergence tolerance: the largest change of a log-strength made by one MM update.
BT_TOL = 1e-8
#: Cap on the number of MM updates; a :class:`RuntimeError` is raised beyond it.
BT_MAX_ITER = 10_000
#: Default virtual wins (and losses) of each item against the reference item.
BT_PRIOR = 1.0


def bt_log_posterior(
    s: NDArray[np.float64],
    i: NDArray[np.int64],
    j: NDArray[np.int64],
    y: NDArray[np.float64],
    prior: float,
) -> float:
    """Log posterior (up to a constant) maximised by :func:`bradley_terry`.

    ``sum_k [y_k log sigma(s_i - s_j) + (1 - y_k) log sigma(s_j - s_i)]
    + prior * sum_i [log sigma(s_i) + log sigma(-s_i)]``, with ``y`` the hard outcomes.
    """
    value = bt_log_likelihood(s[i] - s[j], y)
    return value + prior * reference_prior(s) if prior else value


def bradley_terry(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    p: ArrayLike,
    *,
    threshold: float = 0.5,
    prior: float = BT_PRIOR,
    tol: float = BT_TOL,
    max_iter: int = BT_MAX_ITER,
    accelerate: bool = True,
) -> NDArray[np.float64]:
    """Bradley-Terry log-strengths from hard decisions, by the MM (Zermelo) iteration.

    Parameters
    ----------
    n_items, i, j, p
        The comparisons (:func:`.comparison_checks.as_comparisons`); only the decision ``p > threshold`` is used, and duplicated rows are separate games.
    threshold : float, optional
        Decision threshold (``debias.decision_threshold(alpha)`` for prior debiasing, EACL eq. 10).
    prior : float, optional
        Virtual wins and losses of every item against the reference item (module docstring); 0 for the
        plain maximum-likelihood estimate.
    tol : float, optional
        Stop when an MM update changes no log-strength by more than ``tol``.
    max_iter : int, optional
        Cap on the number of MM updates.
    accelerate : bool, optional
        SQUAREM acceleration (module docstring); False runs the plain MM iteration.

    Returns
    -------
    ndarray, shape (n_items,)
        ``log pi`` with mean 0.

    Raises
    ------
    ComparisonError
        Malformed input, a disconnected comparison graph (the relative strength of the components
        would rest on the prior alone), or with ``prior=0`` a win graph that is not strongly connected.
    RuntimeError
        No convergence within ``max_iter`` MM updates.
    """
    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    if not (prior >= 0.0 and math.isfinite(prior)):
        raise ValueError(f"prior must be a finite number >= 0, got {prior!r}")
    check_connected(n, ii, jj, method="bradley_terry")
    if n == 1:
        return np.zeros(1)
    y = hard_outcomes(pp, threshold)
    if prior == 0.0:
        check_maximum_exists(n, ii, jj, y, method="Bradley-Terry (prior=0)", remedy="use a positive prior")
    wins = np.bincount(ii, weights=y, minlength=n) + np.bincount(jj, weights=1.0 - y, minlength=n) + prior

    def mm_update(s: NDArray[np.float64]) -> NDArray[np.float64]:
        pi = np.exp(s)
        inv = 1.0 / (pi[ii] + pi[jj])
        denom = np.bincount(ii, weights=inv, minlength=n) + np.bincount(jj, weights=inv, minlength=n)
        if prior:
            denom += 2.0 * prior / (pi + 1.0)
        new = np.log(wins / denom)
        if not prior:
            new -= new.mean()  # the likelihood alone is invariant to a common shift
        return new

    def objective(s: NDArray[np.float64]) -> float:
        return bt_log_posterior(s, ii, jj, y, prior)

    s = np.zeros(n)
    n_updates = 0
    change = float("inf")
    if not accelerate:
        while n_updates < max_iter:
            new = mm_update(s)
            n_updates += 1
            change = float(np.max(np.abs(new - s)))
            s = new
            if change <= tol:
                return _done(s, n_updates)
    else:
        value = objective(s)
        while n_updates + 2 <= max_iter:
            s1 = mm_update(s)
            s2 = mm_update(s1)
            n_updates += 2
            change = float(np.max(np.abs(s2 - s1)))
            if change <= tol:
                return _done(s2, n_updates)
            r = s1 - s
            v = s2 - s1 - r
            vv = float(v @ v)
            step = -math.sqrt(float(r @ r) / vv) if vv > 0.0 else -1.0
            step = min(step, -1.0)
            candidate = s - 2.0 * step * r + step * step * v
            if n_updates < max_iter and np.all(np.isfinite(candidate)):
                s3 = mm_update(candidate)
                n_updates += 1
                v3 = objective(s3)
                if math.isfinite(v3) and v3 >= value:
                    s, value = s3, v3
                    continue
            s, value = s2, objective(s2)
    raise RuntimeError(
        f"Bradley-Terry MM did not converge in {max_iter} iterations (last change {change:.3g} > tol {tol:.3g})"
    )


def _done(s: NDArray[np.float64], n_updates: int) -> NDArray[np.float64]:
    logger.debug("bradley_terry: converged after %d MM updates", n_updates)
    return s - s.mean()
