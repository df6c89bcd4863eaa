"""PoE-Gaussian scores: the product of Gaussian experts on score differences (PoE eq. 9, appendix A).

PoE = Liusie, Raina, Fathullah & Gales, "Efficient LLM Comparative Assessment: a Product of Experts
Framework for Pairwise Comparisons", 2024.

Each comparison ``k`` is an expert ``p(s_i - s_j | p_k) = N(f(p_k), sigma^2)`` with the linear mean
``f(p) = scale * (p - beta)`` (PoE eq. 9). The product over comparisons is Gaussian in ``s``; its mode is
the least-squares solution of ``W s = f`` where ``W`` is the K x N comparison matrix (+1 at ``i[k]``,
-1 at ``j[k]``), i.e. the solution of the Laplacian normal equations ``(W^T W) s = W^T f`` with one
degree of freedom pinned, and its covariance is ``sigma^2 (W^T W)^+`` on the pinned subspace
(PoE appendix A.1-A.2).

Solvers
-------
``n_items <= DENSE_MAX_ITEMS``: dense Cholesky of ``W^T W + 1 1^T / N`` (whose solution for a right-hand
side orthogonal to the constants is the mean-zero least-squares solution). Larger problems: conjugate
gradients with a Jacobi preconditioner on the sparse operator ``x -> W^T W x + mean(x)`` (the
Laplacian as a CSR matrix; relative residual :data:`CG_RTOL`), falling back to a sparse LU solve of the
reduced Laplacian if CG does not converge in :data:`CG_MAXITER` iterations. No explicit inverse is
formed to compute scores.

Standard errors
---------------
``stderr="exact"`` forms the posterior covariance ``sigma^2 (W^T W)^+`` densely (O(N^2) memory, O(N^3)
time: the covariance is the requested output, not a means to solve). ``stderr="sketch"`` estimates its
diagonal in O(n_probes x CG solve) time and O(N x n_probes) memory with a Johnson-Lindenstrauss random
projection, using ``(W^T W)^+_ii = ||W (W^T W)^+ e_i||^2`` (Spielman & Srivastava 2011): relative
error about ``sqrt(2 / n_probes)`` per item. ``"auto"`` (default) is exact for
``n_items <= DENSE_MAX_ITEMS`` and none above. Pinning item ``r`` reports the standard error of
``s_i - s_r``; the pinned item has standard error 0.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.scorers._common import (
    Pin,
    adjacency_csr,
    apply_pin,
    check_pin,
    degrees,
    dense_laplacian,
    hard_outcomes,
    pcg,
    scatter_difference,
)
from pipeline.methods.scorers.comparison_checks import as_comparisons, check_connected

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

__all__ = [
    "CG_MAXITER",
    "CG_RTOL",
    "DENSE_MAX_ITEMS",
    "SKETCH_PROBES",
    "GaussianFit",
    "expert_means",
    "fit",
    "laplacian_solve",
    "poe_gaussian",
    "poe_gaussian_hard",
]

logger = logging.getLogger(__name__)

#: Largest ``n_items`` solved densely (and with exact standard errors under ``stderr="auto"``).
DENSE_MAX_ITEMS = 2000
#: Relative residual ``||b - M x|| / ||b||`` at which conjugate gradients stops.
CG_RTOL = 1e-10
#: Iteration cap for conjugate gradients before the sparse-LU fallback.
CG_MAXITER = 5000
#: Default number of random projections for ``stderr="sketch"``.
SKETCH_PROBES = 200

StderrMode = Literal["auto", "exact", "sketch", "none"]


@dataclass(frozen=True)
class GaussianFit:
    """Result of :func:`fit`.

    Attributes
    ----------
    scores : ndarray, shape (N,)
        Posterior mean (= mode) of the scores, pinned as requested.
    stderr : ndarray, shape (N,), or None
        Posterior standard deviation of each score (of ``s_i - s_pin`` when an item is pinned); None
        when not computed (see the module docstring).
    sigma2 : float
        Expert (noise) variance: the value passed in, else the residual mean square
        ``||W s - f||^2 / (K - N + 1)``; NaN when ``K = N - 1`` (no residual degrees of freedom).
    dof : int
        Residual degrees of freedom ``K - N + 1``.
    stderr_method : str
        ``"exact"``, ``"sketch"`` or ``"none"``.
    """

    scores: NDArray[np.float64]
    stderr: NDArray[np.float64] | None
    sigma2: float
    dof: int
    stderr_method: str


def expert_means(
    p: NDArray[np.float64], *, hard: bool = False, beta: float | Literal["mean"] = 0.5, scale: float = 1.0
) -> NDArray[np.float64]:
    """Expert means ``f(p) = scale * (p - beta)`` (PoE eq. 9).

    With ``hard=True`` the probability is first replaced by the decision ``1[p > 0.5]`` (0.5 for a tie).
    ``beta="mean"`` uses the mean of the (hard or soft) probabilities, the one-ordering debiasing of
    PoE appendix A.6.
    """
    x = hard_outcomes(p) if hard else p
    if isinstance(beta, str):
        if beta != "mean":
            raise ValueError(f"beta must be a number or 'mean', got {beta!r}")
        b = float(x.mean()) if x.size else 0.5
    else:
        b = float(beta)
    if not (math.isfinite(b) and math.isfinite(scale) and scale > 0):
        raise ValueError(f"beta must be finite and scale positive, got beta={beta!r}, scale={scale!r}")
    return scale * (x - b)


def laplacian_solve(
    n: int,
    i: NDArray[np.int64],
    j: NDArray[np.int64],
    rhs: NDArray[np.float64],
    *,
    solver: str = "auto",
    adjacency: csr_matrix | None = None,
) -> NDArray[np.float64]:
    """Mean-zero solution of ``W^T W x = rhs`` on a connected graph (``rhs`` orthogonal to the constants).

    Conjugate gradients on the sparse, nonsingular ``W^T W + 1 1^T / N`` (whose solution is the mean-zero
    one) with a Jacobi preconditioner; sparse LU of the Laplacian with item 0 removed as the fallback
    (``solver="auto"``) or on request (``solver="splu"``). ``solver="cg"`` raises on non-convergence.
    """
    from scipy.sparse import diags
    from scipy.sparse.linalg import spsolve

    adj = adjacency if adjacency is not None else adjacency_csr(n, i, j)
    deg = degrees(n, i, j)
    if solver in ("auto", "cg", "dense"):

        def matvec(x: NDArray[np.float64]) -> NDArray[np.float64]:
            return deg * x - adj @ x + x.mean()

        x, its = pcg(matvec, rhs, 1.0 / (deg + 1.0 / n), rtol=CG_RTOL, maxiter=CG_MAXITER)
        if its >= 0:
            return x - x.mean()
        if solver == "cg":
            raise RuntimeError(
                f"conjugate gradients did not converge in {CG_MAXITER} iterations (rtol {CG_RTOL}); "
                "use solver='splu' for this comparison graph"
            )
        logger.warning("CG did not converge in %d iterations; falling back to sparse LU", CG_MAXITER)
    lap = (diags(deg) - adj).tocsc()
    x = np.zeros(n)
    x[1:] = spsolve(lap[1:, 1:], rhs[1:])  # pin item 0, then shift to mean zero
    return x - x.mean()


def fit(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    p: ArrayLike,
    *,
    hard: bool = False,
    beta: float | Literal["mean"] = 0.5,
    scale: float = 1.0,
    pin: Pin = "mean",
    stderr: StderrMode = "auto",
    sigma2: float | None = None,
    rng: np.random.Generator | None = None,
    n_probes: int = SKETCH_PROBES,
    solver: Literal["auto", "dense", "cg", "splu"] = "auto",
) -> GaussianFit:
    """Fit the Gaussian product of experts (PoE eq. 9, appendix A) with posterior standard errors.

    Parameters
    ----------
    n_items, i, j, p
        The comparisons (:func:`.comparison_checks.as_comparisons`); duplicated rows are independent experts.
    hard : bool, optional
        Use hard decisions ``1[p > 0.5]`` instead of probabilities (the "PoE-Gaussian hard" variant).
    beta : float or "mean", optional
        Mean shift in ``f(p) = scale (p - beta)``: 0.5 for debiased probabilities (both orderings
        averaged), ``"mean"`` (= mean of p) with one biased ordering (PoE appendix A.6).
    scale : float, optional
        The fixed scale ``alpha`` of ``f``; it only rescales the scores (and standard errors).
    pin : "mean" or int, optional
        Mean of the scores 0 (default), or ``scores[pin] = 0``.
    stderr : {"auto", "exact", "sketch", "none"}, optional
        How to compute standard errors (module docstring).
    sigma2 : float, optional
        Known expert variance; default: estimated from the residuals.
    rng : numpy.random.Generator, optional
        Required for ``stderr="sketch"``.
    n_probes : int, optional
        Random projections for ``stderr="sketch"``.
    solver : {"auto", "dense", "cg", "splu"}, optional
        Linear solver (module docstring).

    Returns
    -------
    GaussianFit

    Raises
    ------
    ComparisonError
        Malformed input or a disconnected comparison graph.
    RuntimeError
        ``solver="cg"`` did not converge.
    """
    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    check_pin(pin, n)
    if stderr not in ("auto", "exact", "sketch", "none"):
        raise ValueError(f"stderr must be 'auto', 'exact', 'sketch' or 'none', got {stderr!r}")
    if solver not in ("auto", "dense", "cg", "splu"):
        raise ValueError(f"solver must be 'auto', 'dense', 'cg' or 'splu', got {solver!r}")
    if stderr == "sketch" and rng is None:
        raise ValueError("stderr='sketch' needs a numpy.random.Generator (rng)")
    use_dense = solver == "dense" or (solver == "auto" and n <= DENSE_MAX_ITEMS)
    adj = None if use_dense else adjacency_csr(n, ii, jj)
    check_connected(n, ii, jj, method="poe_gaussian", adjacency=adj)
    f = expert_means(pp, hard=hard, beta=beta, scale=scale)
    k = ii.shape[0]
    if n == 1:
        return GaussianFit(np.zeros(1), np.zeros(1), float("nan"), 0, "exact")
    rhs = scatter_difference(n, ii, jj, f)
    mode = stderr if stderr != "auto" else ("exact" if n <= DENSE_MAX_ITEMS else "none")

    cov = None
    if use_dense:
        import scipy.linalg

        m = dense_laplacian(n, ii, jj) + 1.0 / n
        factor = scipy.linalg.cho_factor(m, lower=True, check_finite=False)
        s = scipy.linalg.cho_solve(factor, rhs, check_finite=False)
        if mode == "exact":
            # (W^T W + 1 1^T / N)^-1 = (W^T W)^+ + 1 1^T / N: the posterior covariance up to sigma^2
            cov = scipy.linalg.cho_solve(factor, np.eye(n), check_finite=False) - 1.0 / n
    else:
        s = laplacian_solve(n, ii, jj, rhs, solver=solver, adjacency=adj)
        if mode == "exact":
            import scipy.linalg

            m = dense_laplacian(n, ii, jj) + 1.0 / n
            cov = scipy.linalg.cho_solve(scipy.linalg.cho_factor(m, lower=True), np.eye(n)) - 1.0 / n
    s = s - s.mean()

    resid = f - (s[ii] - s[jj])
    dof = k - (n - 1)
    if sigma2 is None:
        s2 = float(resid @ resid) / dof if dof > 0 else float("nan")
    else:
        if not (sigma2 > 0 and math.isfinite(sigma2)):
            raise ValueError(f"sigma2 must be positive and finite, got {sigma2!r}")
        s2 = float(sigma2)

    se: NDArray[np.float64] | None = None
    if mode == "exact":
        assert cov is not None
        if isinstance(pin, str):
            var = np.diag(cov).copy()
        else:
            var = np.diag(cov) + cov[pin, pin] - 2.0 * cov[:, pin]
            var[pin] = 0.0
        se = np.sqrt(np.maximum(var, 0.0) * s2)
    elif mode == "sketch":
        assert rng is not None
        se = _sketch_stderr(n, ii, jj, s2, pin, rng, n_probes, solver, adj)
    return GaussianFit(apply_pin(s, pin), se, s2, dof, mode)


def _sketch_stderr(
    n: int,
    i: NDArray[np.int64],
    j: NDArray[np.int64],
    s2: float,
    pin: Pin,
    rng: np.random.Generator,
    n_probes: int,
    solver: str,
    adj: csr_matrix | None,
) -> NDArray[np.float64]:
    """Johnson-Lindenstrauss estimate of the posterior standard errors (module docstring)."""
    if n_probes < 1:
        raise ValueError(f"n_probes must be positive, got {n_probes}")
    if adj is None:
        adj = adjacency_csr(n, i, j)
    k = i.shape[0]
    y = np.empty((n, n_probes))
    for r in range(n_probes):
        q = rng.choice([-1.0, 1.0], size=k) / math.sqrt(n_probes)
        y[:, r] = laplacian_solve(n, i, j, scatter_difference(n, i, j, q), solver=solver, adjacency=adj)
    if not isinstance(pin, str):
        y -= y[pin]
    var = np.einsum("ir,ir->i", y, y)
    return np.sqrt(var * s2)


def poe_gaussian(
    n_items: int, i: ArrayLike, j: ArrayLike, p: ArrayLike, **options: Any
) -> NDArray[np.float64]:
    """PoE-Gaussian scores with soft probabilities (PoE eq. 9): the least-squares solution of ``W s = f(p)``.

    The options (``hard``, ``beta``, ``scale``, ``pin``) are :func:`fit`'s; this returns ``fit(...).scores``
    without standard errors. On the full comparison set it equals ``(N-1)/N`` times the average probability plus a
    constant (PoE appendix A.3).
    """
    return fit(n_items, i, j, p, **options, stderr="none").scores


def poe_gaussian_hard(
    n_items: int, i: ArrayLike, j: ArrayLike, p: ArrayLike, **options: Any
) -> NDArray[np.float64]:
    """PoE-Gaussian on hard decisions: ``f = scale (1[p > 0.5] - beta)`` (PoE section 4, "hard" experts); the
    options (``beta``, ``scale``, ``pin``) are :func:`poe_gaussian`'s."""
    return poe_gaussian(n_items, i, j, p, hard=True, **options)


@dataclass(frozen=True)
class PriorFit:
    """Result of :func:`fit_with_prior`: posterior mean and standard deviation of every score."""

    scores: NDArray[np.float64]
    stderr: NDArray[np.float64]
    sigma2: float


def fit_with_prior(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    p: ArrayLike,
    prior_mean: ArrayLike,
    prior_weight: ArrayLike,
    *,
    beta: float | Literal["mean"] = 0.5,
    scale: float = 1.0,
    sigma2: float,
) -> PriorFit:
    """PoE-Gaussian with a Gaussian expert on each score: the comparisons' experts ``N(s_i - s_j; f(p_k),
    sigma^2)`` times ``N(s_i; prior_mean_i, sigma^2 / prior_weight_i)`` (the combination of absolute and comparative
    information of Fathullah & Gales, UAI 2025).

    ``prior_weight_i`` is item ``i``'s prior precision relative to one comparison's (0: no prior for it). The
    mode solves ``(W^T W + diag(w)) s = W^T f + w * m``; with every weight positive the system is nonsingular,
    so a disconnected comparison graph is scored too (its parts placed by their priors). The posterior
    covariance is ``sigma^2 (W^T W + diag(w))^-1``. Scores are not re-centred: the priors fix their level.
    """
    import scipy.linalg

    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    m = np.asarray(prior_mean, dtype=np.float64).reshape(-1)
    w = np.asarray(prior_weight, dtype=np.float64).reshape(-1)
    if m.shape != (n,) or w.shape != (n,):
        raise ValueError(f"prior_mean and prior_weight must have one value per item ({n})")
    if not (np.all(np.isfinite(w)) and np.all(w >= 0)):
        raise ValueError("prior_weight must be finite and non-negative")
    m = np.where(w > 0, m, 0.0)
    if not np.all(np.isfinite(m)):
        raise ValueError("prior_mean must be finite where prior_weight is positive")
    f = expert_means(pp, beta=beta, scale=scale)
    rhs = scatter_difference(n, ii, jj, f) + w * m
    if not np.any(w > 0):
        check_connected(n, ii, jj, method="poe_gaussian")
        base = fit(n, ii, jj, pp, beta=beta, scale=scale, sigma2=sigma2)
        assert base.stderr is not None
        return PriorFit(base.scores, base.stderr, sigma2)
    system = dense_laplacian(n, ii, jj) + np.diag(w)
    try:
        factor = scipy.linalg.cho_factor(system, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        # an item with neither comparisons nor a prior: its score is not identified
        check_connected(n, ii, jj, method="poe_gaussian")
        raise
    s = scipy.linalg.cho_solve(factor, rhs, check_finite=False)
    cov = scipy.linalg.cho_solve(factor, np.eye(n), check_finite=False)
    return PriorFit(s, np.sqrt(np.maximum(np.diag(cov), 0.0) * sigma2), float(sigma2))
