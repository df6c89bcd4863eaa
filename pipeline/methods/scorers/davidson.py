"""Davidson's tie model: Bradley-Terry with a tie outcome, fitted to soft win / loss / tie probabilities.

Model (Davidson 1970): with strengths ``pi = exp(s)`` and tie parameter ``nu > 0``,

    ``P(i beats j) = pi_i / D``,  ``P(j beats i) = pi_j / D``,  ``P(tie) = nu sqrt(pi_i pi_j) / D``,
    ``D = pi_i + pi_j + nu sqrt(pi_i pi_j)``.

Each comparison ``k`` gives the judge's probabilities: ``tie[k]`` for the tie option and ``p[k]`` for "i beats j"
with the tie split evenly (``p = p(i) + tie / 2``, :func:`pipeline.methods.verdicts.win_probability.p_a_wins`), so the soft outcome
is ``(p - tie / 2, 1 - p - tie / 2, tie)`` (clipped at 0). The scores maximise the expected log-likelihood of
those outcomes plus the prior of :mod:`.bradley_terry` (``prior`` virtual wins and losses of every item against a
reference item of strength 1: ``prior * sum_i [log sigma(s_i) + log sigma(-s_i)]``), so they exist for any data.
Without ties (``tie = 0``) ``nu`` goes to 0 and the model is Bradley-Terry on soft outcomes. Scores have mean 0.

The log-likelihood is concave in ``(s, log nu)`` (a log-sum-exp of linear functions, subtracted), so the maximum
found by L-BFGS-B is polished by Newton's method with the exact Hessian (up to :data:`POLISH_MAX_ITEMS` items) to
machine precision: a quasi-Newton stop leaves the scores ~1e-8 from the maximum, in a direction that moves with the
order of the comparisons.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.scorers._common import reference_prior, reference_prior_gradient
from pipeline.methods.scorers.comparison_checks import as_comparisons, check_connected

__all__ = ["DAVIDSON_PRIOR", "davidson", "davidson_fit"]

#: Default virtual wins (and losses) of each item against the reference item (as Bradley-Terry's).
DAVIDSON_PRIOR = 1.0
# log nu is kept in [-LOG_NU_BOUND, LOG_NU_BOUND] (nu = 0 is the limit without ties).
LOG_NU_BOUND = 20.0
#: Newton's polish (module docstring) runs up to this many items (its Hessian is dense).
POLISH_MAX_ITEMS = 500


def _outcomes(p: NDArray[np.float64], tie: NDArray[np.float64]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = np.clip(tie, 0.0, 1.0)
    w = np.clip(p - t / 2.0, 0.0, None)
    lose = np.clip(1.0 - p - t / 2.0, 0.0, None)
    total = w + lose + t
    return w / total, lose / total, t / total


def davidson_fit(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    p: ArrayLike,
    tie: ArrayLike | None = None,
    *,
    prior: float = DAVIDSON_PRIOR,
) -> tuple[NDArray[np.float64], float]:
    """(scores with mean 0, nu) of Davidson's model (module docstring)."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp

    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    tt = np.zeros_like(pp) if tie is None else np.asarray(tie, dtype=np.float64).reshape(-1)
    if tt.shape != pp.shape:
        raise ValueError(f"tie must have one value per comparison ({pp.shape[0]}), got {tt.shape[0]}")
    if prior == 0:
        check_connected(n, ii, jj, method="davidson")
    w, lose, t = _outcomes(pp, tt)

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        s, eta = x[:n], x[n]
        si, sj = s[ii], s[jj]
        tie_logit = eta + (si + sj) / 2.0
        log_d = logsumexp(np.stack([si, sj, tie_logit]), axis=0)
        value = float(np.sum(w * (si - log_d) + lose * (sj - log_d) + t * (tie_logit - log_d)))
        ri, rj, rt = np.exp(si - log_d), np.exp(sj - log_d), np.exp(tie_logit - log_d)
        grad = np.zeros(n + 1)
        np.add.at(grad, ii, w + t / 2.0 - (ri + rt / 2.0))
        np.add.at(grad, jj, lose + t / 2.0 - (rj + rt / 2.0))
        grad[n] = float(np.sum(t - rt))
        if prior:
            value += prior * reference_prior(s)
            grad[:n] += prior * reference_prior_gradient(s)
        return -value, -grad

    start = np.zeros(n + 1)
    start[n] = np.log(max(float(t.mean()), 1e-6)) if t.size else -LOG_NU_BOUND
    bounds = [(None, None)] * n + [(-LOG_NU_BOUND, LOG_NU_BOUND)]
    result = minimize(
        objective,
        start,
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"maxiter": 10_000, "gtol": 1e-10, "ftol": 1e-14},
    )
    if not result.success and "ABNORMAL" not in str(result.message):
        raise RuntimeError(f"Davidson fit did not converge: {result.message}")
    x = result.x
    if n <= POLISH_MAX_ITEMS:
        x = _polish(x, objective, _hessian(n, ii, jj, prior))
    s = x[:n]
    return s - s.mean(), float(np.exp(x[n]))


def _hessian(n: int, ii: np.ndarray, jj: np.ndarray, prior: float):
    """The Hessian of the negative log posterior at ``x`` (dense, ``(n + 1)^2``, built from each comparison's
    terms): per comparison the covariance ``C`` of its three outcomes carried by their linear maps ``s_i``, ``s_j``
    and ``eta + (s_i + s_j) / 2``, and the prior's diagonal."""
    from scipy.special import expit, softmax

    maps = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])  # the outcomes' coefficients on (s_i, s_j)

    def hessian(x: np.ndarray) -> np.ndarray:
        s, eta = x[:n], x[n]
        r = softmax(np.stack([s[ii], s[jj], eta + (s[ii] + s[jj]) / 2.0], axis=1), axis=1)
        cov = r[:, :, None] * np.eye(3)[None] - r[:, :, None] * r[:, None, :]
        block = np.einsum("ai,kab,bj->kij", maps, cov, maps)  # (s_i, s_j) x (s_i, s_j)
        cross = np.einsum("ai,ka->ki", maps, cov[:, :, 2])  # (s_i, s_j) x eta
        h = np.zeros((n + 1, n + 1))
        np.add.at(h, (ii, ii), block[:, 0, 0])
        np.add.at(h, (ii, jj), block[:, 0, 1])
        np.add.at(h, (jj, ii), block[:, 1, 0])
        np.add.at(h, (jj, jj), block[:, 1, 1])
        for side, column in ((ii, 0), (jj, 1)):
            np.add.at(h, (side, n), cross[:, column])
            np.add.at(h, (n, side), cross[:, column])
        h[n, n] += float(cov[:, 2, 2].sum())
        if prior:
            sig = expit(s)
            h[np.arange(n), np.arange(n)] += 2.0 * prior * sig * (1.0 - sig)
        return h

    return hessian


def _polish(x: np.ndarray, objective, hessian, max_iter: int = 30) -> np.ndarray:
    """Newton's steps on the concave log posterior from ``x`` until they are below 1e-13 (``log nu`` held where it
    sits on its bound: no ties, or all but)."""
    n = x.shape[0] - 1
    free = np.ones(n + 1, dtype=bool)
    free[n] = abs(x[n]) < LOG_NU_BOUND - 1e-6
    x = x.copy()
    for _ in range(max_iter):
        _, grad = objective(x)
        h = hessian(x)[np.ix_(free, free)] + 1e-12 * np.eye(int(free.sum()))
        step = np.linalg.solve(h, grad[free])
        x[free] -= step
        if np.max(np.abs(step)) < 1e-13:
            break
    return x


def davidson(n_items: int, i: ArrayLike, j: ArrayLike, p: ArrayLike, **options: Any) -> NDArray[np.float64]:
    """Davidson tie-model scores (higher is better); the options (``tie``: the judge's tie probability per
    comparison, ``prior``) are :func:`davidson_fit`'s."""
    return davidson_fit(n_items, i, j, p, **options)[0]
