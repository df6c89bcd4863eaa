"""PoE-BT: the soft Bradley-Terry product of experts (PoE eq. 3), fitted by L-BFGS-B.

PoE = Liusie, Raina, Fathullah & Gales, "Efficient LLM Comparative Assessment: a Product of Experts
Framework for Pairwise Comparisons", 2024.

Each comparison is the expert ``p(s_i - s_j | p_k) ∝ sigma(s_i - s_j)^p_k sigma(s_j - s_i)^(1 - p_k)``
(PoE eq. 3): a Bradley-Terry likelihood with the probability ``p_k`` as a soft outcome. The scores
maximise the log product

    ``sum_k p_k log sigma(d_k) + (1 - p_k) log sigma(-d_k)  -  l2/2 ||s||^2,    d_k = s_i - s_j + bias``

whose gradient is ``-W^T (sigma(d) - p) - l2 s``. Each term is maximised at ``d_k = logit(p_k)``, so
data generated exactly from a Bradley-Terry model are recovered exactly.

``bias`` is an optional slot-A logit shift for one biased ordering (``"mean"`` uses
``logit(mean p)``, the one-ordering debiasing of the PoE reference code); 0 for debiased probabilities.

Existence: with every ``p`` strictly inside (0, 1) the maximum exists and is unique up to a shift on a
connected comparison graph. A ``p`` of exactly 0 or 1 can push it to infinity (Ford's condition on the
"beats" graph); that case raises unless ``l2 > 0``.

Optimisation: L-BFGS-B (``scipy.optimize.minimize``) in the Jacobi-scaled variables
``t = sqrt(degree) * s``, stopping when the largest scaled gradient component is below ``gtol``. On very
large problems (K ~ 10^6) the line search reaches the precision of the summed objective first; that stop
is accepted when the scaled gradient is below ``100 * gtol`` (score error of order 1e-6). The result is then
polished by Newton's method (the Hessian is the graph Laplacian weighted by ``sigma(d)(1 - sigma(d))``, plus ``l2``;
each step solved by conjugate gradients) until a step is below 1e-13: a quasi-Newton stop leaves the scores ~1e-8
from the maximum, in a direction that moves with the order and orientation of the comparisons.
"""

from __future__ import annotations

import logging
import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.scorers._common import (
    adjacency_csr,
    bt_log_likelihood,
    degrees,
    pcg,
    scatter_difference,
)
from pipeline.methods.scorers.comparison_checks import as_comparisons, check_connected, check_maximum_exists

__all__ = [
    "POE_BT_GTOL",
    "POE_BT_MAX_ITER",
    "poe_bt",
    "poe_bt_value_and_gradient",
]

logger = logging.getLogger(__name__)

#: L-BFGS-B stops when max_i |d objective / d t_i| <= gtol, with t = sqrt(degree) * s.
POE_BT_GTOL = 1e-8
#: L-BFGS-B iteration cap.
POE_BT_MAX_ITER = 20_000
# Accept an L-BFGS-B stop for another reason (line search at machine precision) if the scaled gradient
# is within this factor of gtol.
_GTOL_SLACK = 100.0


def poe_bt_value_and_gradient(
    s: NDArray[np.float64],
    i: NDArray[np.int64],
    j: NDArray[np.int64],
    p: NDArray[np.float64],
    bias: float = 0.0,
    l2: float = 0.0,
) -> tuple[float, NDArray[np.float64]]:
    """Negative log product of soft Bradley-Terry experts (PoE eq. 3) plus ``l2/2 ||s||^2``, and its gradient.

    Value: ``sum_k [softplus(d_k) - p_k d_k] + l2/2 ||s||^2`` with ``d_k = s_i - s_j + bias``, which equals
    ``-sum_k [p_k log sigma(d_k) + (1 - p_k) log sigma(-d_k)]`` plus the ridge term.
    Gradient: ``W^T (sigma(d) - p) + l2 s``.
    """
    from scipy.special import expit

    d = s[i] - s[j] + bias
    value = -bt_log_likelihood(d, p) + 0.5 * l2 * float(np.dot(s, s))
    grad = scatter_difference(s.shape[0], i, j, expit(d) - p) + l2 * s
    return value, grad


def poe_bt(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    p: ArrayLike,
    *,
    bias: float | Literal["mean"] = 0.0,
    l2: float = 0.0,
    gtol: float = POE_BT_GTOL,
    max_iter: int = POE_BT_MAX_ITER,
) -> NDArray[np.float64]:
    """PoE-BT scores: maximise the product of soft Bradley-Terry experts (PoE eq. 3).

    Parameters
    ----------
    n_items, i, j, p
        The comparisons (:func:`.comparison_checks.as_comparisons`); duplicated rows are independent experts.
    bias : float or "mean", optional
        Slot-A logit shift (module docstring).
    l2 : float, optional
        Ridge penalty ``l2/2 ||s||^2`` (a Gaussian prior with variance ``1/l2``); needed only when some
        ``p`` are exactly 0 or 1 and the maximum would not exist.
    gtol : float, optional
        Gradient tolerance (module docstring).
    max_iter : int, optional
        L-BFGS-B iteration cap.

    Returns
    -------
    ndarray, shape (n_items,)
        Scores (logit scale) with mean 0.

    Raises
    ------
    ComparisonError
        Malformed input, a disconnected graph, or (``l2 = 0``) probabilities of exactly 0/1 for which
        the maximum does not exist.
    RuntimeError
        L-BFGS-B did not reach the gradient tolerance.
    """
    from scipy.optimize import minimize
    from scipy.special import logit

    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    check_connected(n, ii, jj, method="poe_bt")
    if not (l2 >= 0.0 and math.isfinite(l2)):
        raise ValueError(f"l2 must be a finite number >= 0, got {l2!r}")
    if isinstance(bias, str):
        if bias != "mean":
            raise ValueError(f"bias must be a number or 'mean', got {bias!r}")
        b = float(logit(pp.mean()))
    else:
        b = float(bias)
    if not math.isfinite(b):
        raise ValueError(f"bias must be finite, got {b!r} (mean p is 0 or 1?)")
    if n == 1:
        return np.zeros(1)
    if l2 == 0.0 and np.any((pp == 0.0) | (pp == 1.0)):
        check_maximum_exists(n, ii, jj, pp, method="PoE-BT", remedy="pass l2 > 0")
    scale = np.sqrt(degrees(n, ii, jj))

    def fun(t: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        value, grad = poe_bt_value_and_gradient(t / scale, ii, jj, pp, b, l2)
        return value, grad / scale

    res = minimize(
        fun,
        np.zeros(n),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": max_iter, "gtol": gtol, "ftol": 0.0, "maxcor": 20},
    )
    s = res.x / scale
    g = float(np.max(np.abs(poe_bt_value_and_gradient(s, ii, jj, pp, b, l2)[1] / scale)))
    if not (g <= gtol or (g <= _GTOL_SLACK * gtol and res.status != 1)):
        raise RuntimeError(
            f"PoE-BT L-BFGS-B did not converge in {res.nit} iterations (max scaled gradient {g:.3g} > "
            f"gtol {gtol:.3g}; {res.message})"
        )
    logger.debug("poe_bt: %d iterations, max scaled gradient %.3g", res.nit, g)
    s = _polish(s, ii, jj, pp, b, l2)
    return s - s.mean()


def _polish(
    s: NDArray[np.float64],
    ii: NDArray[np.int64],
    jj: NDArray[np.int64],
    pp: NDArray[np.float64],
    bias: float,
    l2: float,
    max_steps: int = 20,
) -> NDArray[np.float64]:
    """Newton's steps from ``s`` (module docstring); a step whose solve does not converge ends the polish."""
    from scipy.special import expit

    n = s.shape[0]
    for _ in range(max_steps):
        sig = expit(s[ii] - s[jj] + bias)
        grad = scatter_difference(n, ii, jj, sig - pp) + l2 * s
        if l2 == 0.0:
            grad -= grad.mean()  # the shift direction: the objective does not move along it
        weight = sig * (1.0 - sig)
        deg = degrees(n, ii, jj, weight) + l2
        adj = adjacency_csr(n, ii, jj, weight)

        def matvec(x: NDArray[np.float64], deg=deg, adj=adj) -> NDArray[np.float64]:
            return deg * x - adj @ x

        step, its = pcg(matvec, grad, 1.0 / np.maximum(deg, 1e-300), rtol=1e-14, maxiter=20 * n + 100)
        if its < 0 or not np.all(np.isfinite(step)):
            break
        if l2 == 0.0:
            step -= step.mean()
        s = s - step
        if float(np.max(np.abs(step))) < 1e-13:
            break
    return s
