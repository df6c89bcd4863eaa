"""The PoE-Gaussian posterior of a growing comparison set, for adaptive rounds: scores, their variances and the
variance of a score difference, at any N.

The model is PoE-Gaussian (:mod:`pipeline.methods.poe_gaussian`, PoE eq. 9) with a Gaussian expert on every
score as well (:func:`pipeline.methods.poe_gaussian.fit_with_prior`, Fathullah & Gales, UAI 2025):

    ``p(s) ∝ prod_k N(s_i - s_j; f(p_k), sigma^2) prod_i N(s_i; m_i, sigma^2 / w_i)``

with ``f(p) = p - 1/2`` (debiased probabilities). The prior of item ``i`` is a warm start (an absolute score
rescaled, weight ``w_i`` > 0) or, without one, a weak ridge ``N(0, sigma^2 / ridge)``: it keeps the system
nonsingular in the first rounds, when the comparison graph is not yet connected. The posterior mean solves
``(W^T W + diag(w)) s = W^T f + w m`` and the covariance is ``sigma^2 (W^T W + diag(w))^-1``.

Solvers and variances
---------------------
``N <= DENSE_MAX_ITEMS``: dense Cholesky, exact covariance of the scores about their mean (kept, so a pair's
difference variance is exact, covariance included; the common shift of every score, which orders nothing and
which only the weak ridge determines, is taken out). Larger N: preconditioned conjugate gradients on the sparse operator (warm-started from
the previous round's mean), and the marginal variances by

- ``"diagonal"`` (default above ``DENSE_MAX_ITEMS``): ``sigma^2 / (d_i + w_i)``, the inverse of the precision
  matrix's diagonal; O(N) time and memory. Its use is the variance of a difference: ``var_i + var_j`` is
  ``sigma^2 (1/d_i + 1/d_j)``, the effective-resistance approximation of ``Var(s_i - s_j)``, close on the
  well-mixed graphs adaptive rounds build (von Luxburg, Radl & Hein 2014); it is not the variance of a score
  about the mean, which it underestimates.
- ``"sketch"``: the Johnson-Lindenstrauss estimate of :mod:`pipeline.methods.poe_gaussian`, here of the
  centred ``(P M^-1 P)_ii = ||B M^-1 P e_i||^2`` with ``M = B^T B``, ``B = [W; diag(sqrt(w))]``, ``P`` the
  centring; ``n_probes`` CG solves.

A pair's difference variance is ``var_i + var_j - 2 cov_ij``; without the covariance (large N) the covariance
term is dropped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._common import adjacency_csr, degrees, dense_laplacian, pcg, scatter_difference
from .validate import as_comparisons

__all__ = ["DENSE_MAX_ITEMS", "Posterior", "fit_posterior"]

#: Largest N fitted densely (exact covariance).
DENSE_MAX_ITEMS = 2000
#: Expert variance used while the residuals cannot estimate it (fewer comparisons than items): the variance of
#: ``p - 1/2`` for a judge whose probabilities are uniform on (0, 1).
SIGMA2_PRIOR = 1.0 / 12.0
#: Pseudo-observations of the prior guess in the expert-variance estimate.
SIGMA2_PSEUDO_DOF = 4.0

VarianceMode = Literal["auto", "exact", "diagonal", "sketch"]


@dataclass(frozen=True)
class Posterior:
    """The posterior after a round's fit.

    Attributes
    ----------
    mean : ndarray (N,)
        Posterior mean of every score.
    var : ndarray (N,)
        Posterior variance of every score relative to the mean of the scores (exact), or its diagonal
        approximation, or a sketch (``variance``).
    sigma2 : float
        Expert variance used.
    variance : str
        How ``var`` was computed.
    cov : ndarray (N, N) or None
        The exact covariance (dense fits only).
    iterations : int
        CG iterations of the sparse fit (0 for dense).
    """

    mean: NDArray[np.float64]
    var: NDArray[np.float64]
    sigma2: float
    variance: str
    cov: NDArray[np.float64] | None = None
    iterations: int = 0

    @property
    def n(self) -> int:
        return int(self.mean.shape[0])

    @property
    def sd(self) -> NDArray[np.float64]:
        return np.sqrt(self.var)

    def pair_sd(self, i: ArrayLike, j: ArrayLike) -> NDArray[np.float64]:
        """Posterior standard deviation of ``s_i - s_j`` for each pair (covariance included when known)."""
        ii = np.asarray(i, dtype=np.int64)
        jj = np.asarray(j, dtype=np.int64)
        v = self.var[ii] + self.var[jj]
        if self.cov is not None:
            v = v - 2.0 * self.cov[ii, jj]
        return np.sqrt(np.maximum(v, 1e-300))


def fit_posterior(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    p: ArrayLike,
    *,
    prior_mean: ArrayLike | None = None,
    prior_weight: ArrayLike | float | None = None,
    ridge: float = 1e-2,
    sigma2: float | None = None,
    variance: VarianceMode = "auto",
    x0: NDArray[np.float64] | None = None,
    rng: np.random.Generator | None = None,
    n_probes: int = 32,
    rtol: float = 1e-8,
    maxiter: int = 2000,
) -> Posterior:
    """Fit the posterior of the scores (module docstring).

    Parameters
    ----------
    n_items : int
        Number of items N.
    i, j, p : array_like, shape (K,)
        Comparisons: probability ``p`` that ``i`` beats ``j`` (debiased). K may be 0.
    prior_mean, prior_weight : array_like (N,), optional
        A warm start: item ``i``'s prior mean and its precision relative to one comparison's.
    ridge : float
        Prior precision added for every item (the weak ``N(0, sigma^2 / ridge)`` prior); > 0.
    sigma2 : float, optional
        Known expert variance; default: the residual mean square over ``K - N + 1`` degrees of freedom, shrunk
        towards the variance of ``p - 1/2`` (or :data:`SIGMA2_PRIOR` before two comparisons) by
        :data:`SIGMA2_PSEUDO_DOF` pseudo-observations.
    variance : {"auto", "exact", "diagonal", "sketch"}
        How to compute the marginal variances (module docstring); ``"auto"`` is exact up to
        :data:`DENSE_MAX_ITEMS`, diagonal above.
    x0 : ndarray (N,), optional
        Starting point of conjugate gradients (the previous round's mean).
    rng, n_probes :
        For ``variance="sketch"``.
    """
    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    if not (ridge > 0 and math.isfinite(ridge)):
        raise ValueError(f"ridge must be positive and finite, got {ridge!r}")
    if variance not in ("auto", "exact", "diagonal", "sketch"):
        raise ValueError(f"variance must be 'auto', 'exact', 'diagonal' or 'sketch', got {variance!r}")
    w = np.full(n, float(ridge))
    m = np.zeros(n)
    if prior_weight is not None:
        pw = np.broadcast_to(np.asarray(prior_weight, dtype=np.float64), (n,))
        if not (np.all(np.isfinite(pw)) and np.all(pw >= 0)):
            raise ValueError("prior_weight must be finite and non-negative")
        if prior_mean is None:
            raise ValueError("prior_weight needs prior_mean")
        pm = np.asarray(prior_mean, dtype=np.float64).reshape(-1)
        if pm.shape != (n,) or not np.all(np.isfinite(pm[pw > 0])):
            raise ValueError(f"prior_mean must have one finite value per item ({n})")
        w = w + pw
        m = np.where(pw > 0, pm * pw / w, 0.0)  # the ridge pulls towards 0: combined prior mean
    f = pp - 0.5
    rhs = scatter_difference(n, ii, jj, f) + w * m
    mode = variance if variance != "auto" else ("exact" if n <= DENSE_MAX_ITEMS else "diagonal")
    deg = degrees(n, ii, jj)
    cov = None
    iterations = 0
    if n <= DENSE_MAX_ITEMS or mode == "exact":
        import scipy.linalg

        system = dense_laplacian(n, ii, jj).astype(np.float64)
        system[np.diag_indices(n)] += w
        factor = scipy.linalg.cho_factor(system, lower=True, check_finite=False)
        s = scipy.linalg.cho_solve(factor, rhs, check_finite=False)
        if mode == "exact":
            cov = scipy.linalg.cho_solve(factor, np.eye(n), check_finite=False)
            # centred (the covariance of s - mean(s)): a shift of every score, which the weak ridge leaves
            # loosely determined, changes no order; pair differences are unchanged by it
            row = cov.mean(axis=1)
            cov = cov - row[:, None] - row[None, :] + row.mean()
            cov = (cov + cov.T) / 2.0
        adj = None
    else:
        adj = adjacency_csr(n, ii, jj)
        s, iterations = _solve(adj, deg, w, rhs, x0, rtol, maxiter)
    resid = f - (s[ii] - s[jj])
    k = ii.shape[0]
    if sigma2 is None:
        # the residual mean square, shrunk towards a prior guess by SIGMA2_PSEUDO_DOF pseudo-observations, so
        # that it moves smoothly from the guess (few comparisons) to the data (many): the spread of the judge's
        # answers once there are some (all of it noise at worst), else SIGMA2_PRIOR
        guess = max(float(np.var(f)), 1e-6) if k >= 2 else SIGMA2_PRIOR
        dof = max(k - n + 1, 0)
        s2 = (float(resid @ resid) + SIGMA2_PSEUDO_DOF * guess) / (dof + SIGMA2_PSEUDO_DOF)
        s2 = max(s2, 1e-9)
    else:
        if not (sigma2 > 0 and math.isfinite(sigma2)):
            raise ValueError(f"sigma2 must be positive and finite, got {sigma2!r}")
        s2 = float(sigma2)
    if mode == "exact":
        assert cov is not None
        var = np.diag(cov).copy()
        cov = cov * s2
    elif mode == "diagonal":
        var = 1.0 / (deg + w)
    else:
        if rng is None:
            raise ValueError("variance='sketch' needs a numpy.random.Generator (rng)")
        if adj is None:
            adj = adjacency_csr(n, ii, jj)
        var = _sketch_var(n, ii, jj, adj, deg, w, rng, n_probes, rtol, maxiter)
    return Posterior(s, var * s2, s2, mode, cov, iterations)


def _solve(adj, deg, w, rhs, x0, rtol, maxiter) -> tuple[NDArray[np.float64], int]:
    """``(L + diag(w)) x = rhs`` by Jacobi-preconditioned CG, from ``x0`` when given."""
    diag = deg + w

    def matvec(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return diag * x - adj @ x

    start = np.zeros_like(rhs) if x0 is None else np.asarray(x0, dtype=np.float64)
    # CG on the correction M dx = rhs - M x0, stopped when the full system's residual is rtol ||rhs||
    r0 = rhs - matvec(start)
    r0_norm = float(np.linalg.norm(r0))
    if r0_norm == 0.0:
        return start, 0
    scaled = rtol * float(np.linalg.norm(rhs)) / r0_norm
    dx, its = pcg(matvec, r0, 1.0 / diag, rtol=min(scaled, 0.5), maxiter=maxiter)
    if its < 0:
        raise RuntimeError(f"conjugate gradients did not converge in {maxiter} iterations")
    return start + dx, its


def _sketch_var(n, ii, jj, adj, deg, w, rng, n_probes, rtol, maxiter) -> NDArray[np.float64]:
    """Johnson-Lindenstrauss estimate of diag(M^-1), M = W^T W + diag(w) = B^T B (module docstring)."""
    if n_probes < 1:
        raise ValueError(f"n_probes must be positive, got {n_probes}")
    k = ii.shape[0]
    acc = np.zeros(n)
    sw = np.sqrt(w)
    for _ in range(n_probes):
        q = rng.choice([-1.0, 1.0], size=k + n) / math.sqrt(n_probes)
        b = scatter_difference(n, ii, jj, q[:k]) + sw * q[k:]
        y, _ = _solve(adj, deg, w, b, None, rtol, maxiter)
        y -= y.mean()  # about the mean of the scores, as the exact variance
        acc += y * y
    return acc
