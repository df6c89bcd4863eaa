"""PoE-Laplace: the product of Laplace experts, a least-absolute-deviation linear program (PoE appendix B).

PoE = Liusie, Raina, Fathullah & Gales, "Efficient LLM Comparative Assessment: a Product of Experts
Framework for Pairwise Comparisons", 2024.

Each comparison is the expert ``p(s_i - s_j | p_k) ∝ exp(-|s_i - s_j - f(p_k)| / b)`` with the linear
mean ``f(p) = scale * (p - beta)`` of PoE eq. 9. The product is maximised by the least-absolute-deviation
(LAD) fit

    ``minimise_s  sum_k |s_i - s_j - f_k|``,

solved exactly as a linear program with HiGHS (``scipy.optimize.linprog``, sparse constraint
matrix). The primal LP (``W s - u + v = f``, ``u, v >= 0``, minimise ``1^T (u + v)``) has N + 2K
variables; its dual

    ``maximise f^T y   subject to   W^T y = 0,   -1 <= y <= 1``

has K box-bounded variables and N constraints and is ~100x faster with the dual simplex. The scores are
the optimal multipliers of ``W^T y = 0`` (LP duality), shifted to the requested pin; strong duality is
checked: the scores must attain the dual optimum ``f^T y*`` within :data:`LP_OPTIMALITY_TOL`. The LAD fit is robust: a minority of wildly wrong comparisons is ignored
(e.g. on a tree with each edge judged an odd number of times, each score difference is the median of
its edge's ``f``). When the minimiser is not unique -- common for unit-weight LAD on graphs with cycles,
where a whole face of the polytope can be optimal -- HiGHS returns one optimal vertex; every returned
solution attains the minimal objective.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.scorers._common import Pin, apply_pin, check_pin, incidence_csr
from pipeline.methods.scorers.comparison_checks import as_comparisons, check_connected
from pipeline.methods.scorers.poe_gaussian import expert_means

__all__ = ["LP_OPTIMALITY_TOL", "laplace_objective", "poe_laplace"]

#: Relative tolerance of the strong-duality check (LAD objective of the scores vs the LP optimum).
LP_OPTIMALITY_TOL = 1e-7


def laplace_objective(
    s: NDArray[np.float64], i: NDArray[np.int64], j: NDArray[np.int64], f: NDArray[np.float64]
) -> float:
    """``sum_k |s_i - s_j - f_k|``, the negative log product of Laplace experts (up to scale and constant)."""
    return float(np.abs(s[i] - s[j] - f).sum())


def poe_laplace(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    p: ArrayLike,
    *,
    beta: float | Literal["mean"] = 0.5,
    scale: float = 1.0,
    pin: Pin = "mean",
) -> NDArray[np.float64]:
    """PoE-Laplace scores: the LAD solution of ``W s = f(p)`` by linear programming (PoE appendix B).

    Parameters
    ----------
    n_items, i, j, p
        The comparisons (:func:`.comparison_checks.as_comparisons`); duplicated rows are independent experts.
    beta, scale : optional
        ``f(p) = scale * (p - beta)``; ``beta="mean"`` for one biased ordering (PoE appendix A.6).
    pin : "mean" or int, optional
        Mean of the scores 0, or ``scores[pin] = 0``.

    Returns
    -------
    ndarray, shape (n_items,)

    Raises
    ------
    ComparisonError
        Malformed input or a disconnected comparison graph.
    RuntimeError
        HiGHS did not report an optimal solution.
    """
    from scipy.optimize import linprog

    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    check_pin(pin, n)
    check_connected(n, ii, jj, method="poe_laplace")
    f = expert_means(pp, beta=beta, scale=scale)
    if n == 1:
        return np.zeros(1)
    # Dual LP: maximise f^T y subject to W^T y = 0, -1 <= y <= 1 (N equality constraints, K bounded
    # variables); the scores are the multipliers of the equality constraints.
    w_t = incidence_csr(n, ii, jj).T.tocsr()
    res = linprog(-f, A_eq=w_t, b_eq=np.zeros(n), bounds=(-1.0, 1.0), method="highs-ds")
    if res.status != 0:
        raise RuntimeError(f"PoE-Laplace linear program failed (HiGHS status {res.status}): {res.message}")
    optimum = -float(res.fun)
    tolerance = LP_OPTIMALITY_TOL * max(1.0, abs(optimum))
    # The optimal vertex exactly: the comparisons whose dual variable is inside its bounds have residual 0
    # (complementary slackness); where they connect every item, walking them gives the scores to machine
    # precision (the solver's multipliers carry its own tolerance, ~1e-7).
    exact = _tight_scores(n, ii, jj, f, np.asarray(res.x, dtype=np.float64))
    if exact is not None and abs(laplace_objective(exact, ii, jj, f) - optimum) <= tolerance:
        return apply_pin(exact, pin)
    # The multipliers' sign depends on the solver's convention: take the sign that attains the optimum.
    candidates = (-res.eqlin.marginals, res.eqlin.marginals)
    values = [laplace_objective(c, ii, jj, f) for c in candidates]
    best = int(np.argmin(values))
    if abs(values[best] - optimum) > 10 * tolerance:
        raise RuntimeError(
            f"PoE-Laplace: the LP multipliers do not attain the LP optimum ({float(values[best])!r} vs {optimum!r})"
        )
    return apply_pin(np.array(candidates[best], dtype=np.float64), pin)


def _tight_scores(
    n: int, ii: NDArray[np.int64], jj: NDArray[np.int64], f: NDArray[np.float64], y: NDArray[np.float64]
) -> NDArray[np.float64] | None:
    """Scores with ``s_i - s_j = f_k`` on every comparison whose dual ``y_k`` is strictly inside [-1, 1], found by
    walking those comparisons from item 0 (breadth first, in their order); None where they do not reach every
    item (a degenerate vertex: the multipliers are used instead)."""
    tight = np.flatnonzero(np.abs(y) < 1.0 - 1e-7)
    neighbours: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for k in tight.tolist():
        a, b, d = int(ii[k]), int(jj[k]), float(f[k])
        neighbours[a].append((b, -d))  # s_b = s_a - f
        neighbours[b].append((a, d))  # s_a = s_b + f
    s = np.full(n, np.nan)
    s[0] = 0.0
    queue = [0]
    for node in queue:
        for other, step in neighbours[node]:
            if np.isnan(s[other]):
                s[other] = s[node] + step
                queue.append(other)
    return None if np.isnan(s).any() else s
