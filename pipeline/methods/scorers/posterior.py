"""The PoE-Gaussian posterior of a growing comparison set, for adaptive rounds: scores, their variances and the
variance of a score difference, at any N.

The model is PoE-Gaussian (:mod:`pipeline.methods.scorers.poe_gaussian`, PoE eq. 9) with a Gaussian expert on every
score as well (:func:`pipeline.methods.scorers.poe_gaussian.fit_with_prior`, Fathullah & Gales, UAI 2025):

    ``p(s) ∝ prod_k N(s_i - s_j; f(p_k), sigma^2) prod_i N(s_i; m_i, sigma^2 / w_i)``

where ``f(p)``, what one comparison says of ``s_i - s_j``, is given by the ``link``:

- ``"linear"``: ``f(p) = p - 1/2`` (PoE eq. 9 on debiased probabilities), the product's PoE-Gaussian;
- ``"logit"``: ``f(p) = logit(p)``, capped at ``±clip``: the Gaussian approximation of PoE-BT (PoE eq. 3, whose
  expert is maximised at ``s_i - s_j = logit(p)``). A judge whose log-odds grow with the score difference (the
  Bradley-Terry judge; LLM judges read by their label-word log-probabilities) gives a measurement of the
  difference that does not saturate: a far pair says how far, where ``p - 1/2`` stops at ``±1/2``. Scores are
  then on the log-odds scale.

The prior of item ``i`` is a warm start (an absolute score rescaled, weight ``w_i`` > 0) or, without one, a weak
ridge ``N(0, sigma^2 / ridge)``: it keeps the system nonsingular in the first rounds, when the comparison graph is
not yet connected. The posterior mean solves ``(W^T C W + diag(w)) s = W^T C f + w m`` and the covariance is
``sigma^2 (W^T C W + diag(w))^-1``, ``C`` the comparisons' weights (all 1 unless ``robust``).

Robust fit (``robust=c``)
-------------------------
A judge that sometimes answers the opposite of what it means gives a comparison far from every path around it; with
Gaussian experts one such answer moves both its items by a share of its whole error. ``robust=c`` uses Huber's expert
(Huber 1964): iteratively reweighted least squares, each comparison weighted ``min(1, c / |t_k|)``, ``t_k`` its
studentised residual ``r_k / (scale sqrt(1 - h_k))`` (``h_k = c_k (1/D_i + 1/D_j)``, ``D`` the weighted degrees plus
the prior precision; ``scale`` the normalised median absolute studentised residual), until the weights settle (at most
:data:`ROBUST_MAX_ITER` refits). A bridge (leverage above :data:`LEVERAGE_MAX`) keeps weight 1, and so does every
comparison while fewer than :data:`ROBUST_MIN_CHECKED` are checked by others. :attr:`Posterior.downweighted` counts
those weighted below :data:`OUTLIER_WEIGHT` (a studentised residual beyond ``2c``: 0.7% of Gaussian noise).

Answers at the cap (``censor=True``, logit link)
------------------------------------------------
A confident judge answers a far pair within ``exp(-clip)`` of 0 or 1: its log-odds sit at the cap whatever the
distance, so the answer says "``s_i - s_j`` is at least ``clip``". With ``censor`` a capped answer is a one-sided
expert, the squared hinge ``max(0, clip - sign(f_k) (s_i - s_j))^2`` (a censored Gaussian's mode, as in Tobit
regression), fitted by an active-set iteration (capped answers the fit places beyond the cap at weight 0, until the
set and Huber's weights settle). :attr:`Posterior.beyond_cap` marks them; neither the expert variance's degrees of
freedom nor the marginal variances count them.

Solvers and variances
---------------------
``variance="exact"`` (the default up to ``DENSE_MAX_ITEMS``): dense Cholesky, the exact covariance of the scores about
their mean (a pair's difference variance exact, covariance included). Otherwise preconditioned conjugate gradients on
the sparse operator (warm-started from the previous round's mean), and the marginal variances by ``"diagonal"``
(``sigma^2 / (d_i + w_i)``, O(N): ``var_i + var_j`` is the effective-resistance approximation of ``Var(s_i - s_j)``,
close on well-mixed graphs; von Luxburg, Radl & Hein 2014) or ``"sketch"`` (the Johnson-Lindenstrauss estimate of
:mod:`pipeline.methods.scorers.poe_gaussian` of the centred ``(P M^-1 P)_ii``, ``n_probes`` CG solves). Robust and
censored refits go by conjugate gradients in either mode. A path-like graph with a ridge far below the default can
take more than ``maxiter`` iterations: up to ``DENSE_MAX_ITEMS`` items the fit then factorises instead; above, the
error gives the pool's size and the ridge to raise. Without the covariance (large N) a pair's difference variance is
``var_i + var_j``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.scorers._common import adjacency_csr, degrees, dense_laplacian, pcg, scatter_difference
from pipeline.methods.scorers.comparison_checks import as_comparisons
from pipeline.methods.scorers.poe_gaussian import expert_means

__all__ = [
    "DENSE_MAX_ITEMS",
    "LINKS",
    "LOGIT_CLIP",
    "Posterior",
    "expert_values",
    "fit_posterior",
    "huber_weights",
]

#: Largest N fitted densely (exact covariance).
DENSE_MAX_ITEMS = 2000
#: Expert variance used while the residuals cannot estimate it (fewer comparisons than items): the variance of
#: ``p - 1/2`` for a judge whose probabilities are uniform on (0, 1).
SIGMA2_PRIOR = 1.0 / 12.0
#: Pseudo-observations of the prior guess in the expert-variance estimate.
SIGMA2_PSEUDO_DOF = 4.0

#: Cap of ``|logit(p)|`` under the logit link: p within about 4.5e-5 of 0 or 1 (and the 0 or 1 of a label word
#: the judge never gave) counts as this many log-odds.
LOGIT_CLIP = 10.0
#: Refits of the robust (Huber) fit at most; it stops earlier when no weight moves by more than ROBUST_TOL.
ROBUST_MAX_ITER = 20
ROBUST_TOL = 1e-3
#: A comparison with a leverage above this is a bridge of the comparison graph: no other path checks it.
LEVERAGE_MAX = 0.95
#: Fewer comparisons checked by others than this: no reweighting (the residuals cannot tell an outlier).
ROBUST_MIN_CHECKED = 8
#: A comparison the robust fit weights below this is counted as contradicted (:attr:`Posterior.downweighted`).
OUTLIER_WEIGHT = 0.5

VarianceMode = Literal["auto", "exact", "diagonal", "sketch"]
Link = Literal["linear", "logit"]
LINKS: tuple[str, ...] = ("linear", "logit")


def expert_values(
    p: NDArray[np.float64], link: str = "linear", clip: float = LOGIT_CLIP
) -> NDArray[np.float64]:
    """What each comparison says of ``s_i - s_j`` (module docstring): ``p - 1/2`` or ``logit(p)`` capped at
    ``±clip``."""
    if link == "linear":
        return expert_means(p)  # PoE eq. 9 with beta = 1/2, scale 1
    if link == "logit":
        if not (clip > 0 and math.isfinite(clip)):
            raise ValueError(f"clip must be positive and finite, got {clip!r}")
        from scipy.special import logit

        with np.errstate(divide="ignore"):
            return np.clip(logit(p), -clip, clip)
    raise ValueError(f"unknown link {link!r}; valid: {LINKS}")


def huber_weights(resid: NDArray[np.float64], leverage: NDArray[np.float64], c: float) -> NDArray[np.float64]:
    """Huber's weights ``min(1, c / |t_k|)`` of the studentised residuals (module docstring, "Robust fit")."""
    free = leverage < LEVERAGE_MAX
    out = np.ones_like(resid)
    if int(free.sum()) < ROBUST_MIN_CHECKED:
        return out
    t = resid[free] / np.sqrt(1.0 - leverage[free])
    scale = 1.4826 * float(np.median(np.abs(t)))
    if not scale > 0:
        return out
    a = np.abs(t) / scale
    out[free] = np.where(a > c, c / np.maximum(a, 1e-300), 1.0)
    return out


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
        CG iterations of the sparse fit (0 for dense), summed over the robust refits.
    weights : ndarray (K,) or None
        Each comparison's weight in the robust fit (None without ``robust``).
    link : str
        The link the comparisons were read with (the scale of the scores).
    beyond_cap : ndarray (K,) of bool or None
        The answers at the cap that the fit places beyond it, which therefore pull on nothing (None without
        ``censor``).
    """

    mean: NDArray[np.float64]
    var: NDArray[np.float64]
    sigma2: float
    variance: str
    cov: NDArray[np.float64] | None = None
    iterations: int = 0
    weights: NDArray[np.float64] | None = None
    link: str = "linear"
    beyond_cap: NDArray[np.bool_] | None = None

    @property
    def censored(self) -> int:
        """Answers at the cap that the fit places beyond it (0 without ``censor``)."""
        return 0 if self.beyond_cap is None else int(np.count_nonzero(self.beyond_cap))

    @property
    def downweighted(self) -> int:
        """Comparisons the robust fit weighted below :data:`OUTLIER_WEIGHT` (0 without ``robust``)."""
        return 0 if self.weights is None else int(np.count_nonzero(self.weights < OUTLIER_WEIGHT))

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
    link: Link = "linear",
    clip: float = LOGIT_CLIP,
    robust: float | None = None,
    censor: bool = False,
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
        Known expert variance; default: the (weighted) residual mean square over ``K - N + 1`` degrees of
        freedom, shrunk towards the mean square of ``f(p)`` (or :data:`SIGMA2_PRIOR` before two comparisons) by
        :data:`SIGMA2_PSEUDO_DOF` pseudo-observations.
    variance : {"auto", "exact", "diagonal", "sketch"}
        How to compute the marginal variances (module docstring); ``"auto"`` is exact up to
        :data:`DENSE_MAX_ITEMS`, diagonal above.
    link, clip : the link from a probability to a score difference, and the logit link's cap (module docstring).
    robust : float, optional
        Huber's threshold ``c`` in studentised residuals (1.345 is the textbook choice); None: Gaussian experts.
    censor : bool
        Read an answer at the logit link's cap as "at least ``clip`` log-odds" (module docstring, "Answers at the
        cap"); no effect with the linear link.
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
    w, m = _prior(n, ridge, prior_mean, prior_weight)
    if robust is not None and not (robust > 0 and math.isfinite(robust)):
        raise ValueError(f"robust must be a positive Huber threshold or None, got {robust!r}")
    f = expert_values(pp, link, clip)
    mode = variance if variance != "auto" else ("exact" if n <= DENSE_MAX_ITEMS else "diagonal")
    dense = mode == "exact"  # the covariance is wanted: a dense factorisation; else conjugate gradients
    k = ii.shape[0]
    # answers at the cap (censor): "at least clip log-odds" (module docstring, "Answers at the cap")
    capped = np.abs(f) >= clip if (censor and link == "logit") else np.zeros(k, dtype=bool)
    refitting = robust is not None or bool(capped.any())
    # the refits go by conjugate gradients (warm-started from the last refit); a dense fit factorises once, with
    # the final weights
    by_cg = not dense or refitting
    factor = None
    h = np.ones(k)  # Huber's weights
    beyond = np.zeros(k, dtype=bool)  # capped answers the fit places beyond the cap: no pull
    c = h
    iterations = 0
    s = None if x0 is None else np.asarray(x0, dtype=np.float64)
    import scipy.linalg  # a dense fit, or a sparse one that falls back to it

    refits = ROBUST_MAX_ITER if refitting else 0
    for refit in range(refits + 1):
        c = np.where(beyond, 0.0, h)
        deg = degrees(n, ii, jj, c)
        rhs = scatter_difference(n, ii, jj, c * f) + w * m
        if by_cg:
            adj = adjacency_csr(n, ii, jj, c)
            try:
                s, its = _solve(adj, deg, w, rhs, s, rtol, maxiter)
                iterations += its
            except NotConverged as exc:
                if n > DENSE_MAX_ITEMS:
                    raise RuntimeError(
                        f"the fit of {n} items from {k} comparisons did not converge: {exc}. The comparison graph "
                        f"is badly conditioned for ridge={ridge:g} (long chains of comparisons and a small ridge); "
                        "a larger ridge (adaptive.ridge in a rounds run) fits it"
                    ) from exc
                by_cg = (
                    False  # badly conditioned (long chains, a small ridge) and small: factorise from here on
                )
        if not by_cg:
            factor = _factorise(n, ii, jj, c, w)
            s = scipy.linalg.cho_solve(factor, rhs, check_finite=False)
        if refit == refits:
            break  # the weights c are those of this solve
        new, new_beyond = _reweight(s, ii, jj, f, c, deg, w, capped, clip, robust)
        if np.array_equal(new_beyond, beyond) and float(np.abs(new - h).max(initial=0.0)) <= ROBUST_TOL:
            break
        h, beyond = new, new_beyond
    cov = None
    if dense and factor is None:  # after refits: the exact solve with the final weights
        factor = _factorise(n, ii, jj, c, w)
        s = scipy.linalg.cho_solve(factor, rhs, check_finite=False)
    if dense:
        cov = _centred_covariance(factor, n)
    s2 = sigma2 if sigma2 is not None else _expert_variance(n, f - (s[ii] - s[jj]), f, c, beyond)
    if not (s2 > 0 and math.isfinite(s2)):
        raise ValueError(f"sigma2 must be positive and finite, got {sigma2!r}")
    if mode == "exact":
        assert cov is not None
        var = np.diag(cov).copy()
        cov = cov * s2
    elif mode == "diagonal":
        var = 1.0 / (deg + w)
    else:
        if rng is None:
            raise ValueError("variance='sketch' needs a numpy.random.Generator (rng)")
        var = _sketch_var(n, ii, jj, c, adjacency_csr(n, ii, jj, c), deg, w, rng, n_probes, rtol, maxiter)
    weights = h if robust is not None else None
    return Posterior(s, var * s2, s2, mode, cov, iterations, weights, link, beyond if censor else None)


def _prior(
    n: int, ridge: float, prior_mean: ArrayLike | None, prior_weight: ArrayLike | float | None
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Every item's prior precision (the ridge, plus a warm start's weight) and its prior mean."""
    w = np.full(n, float(ridge))
    m = np.zeros(n)
    if prior_weight is None:
        return w, m
    pw = np.broadcast_to(np.asarray(prior_weight, dtype=np.float64), (n,))
    if not (np.all(np.isfinite(pw)) and np.all(pw >= 0)):
        raise ValueError("prior_weight must be finite and non-negative")
    if prior_mean is None:
        raise ValueError("prior_weight needs prior_mean")
    pm = np.asarray(prior_mean, dtype=np.float64).reshape(-1)
    if pm.shape != (n,) or not np.all(np.isfinite(pm[pw > 0])):
        raise ValueError(f"prior_mean must have one finite value per item ({n})")
    w = w + pw
    return w, np.where(pw > 0, pm * pw / w, 0.0)  # the ridge pulls towards 0: combined prior mean


def _expert_variance(
    n: int,
    resid: NDArray[np.float64],
    f: NDArray[np.float64],
    c: NDArray[np.float64],
    beyond: NDArray[np.bool_],
) -> float:
    """The residual mean square, shrunk towards a prior guess by SIGMA2_PSEUDO_DOF pseudo-observations, so that it
    moves smoothly from the guess (few comparisons) to the data (many): the spread of the judge's answers about
    zero once there are some (all of it noise at worst; about zero, not about their mean, which would depend on
    which item of each pair is called i), else SIGMA2_PRIOR."""
    k = f.shape[0]
    guess = max(float(np.mean(f * f)), 1e-6) if k >= 2 else SIGMA2_PRIOR
    dof = max(k - int(beyond.sum()) - n + 1, 0)
    s2 = (float(c @ (resid * resid)) + SIGMA2_PSEUDO_DOF * guess) / (dof + SIGMA2_PSEUDO_DOF)
    return max(s2, 1e-9)


def _reweight(s, ii, jj, f, c, deg, w, capped, clip: float, robust: float | None):
    """The next refit's weights: Huber's of the studentised residuals (1 without ``robust``), and the capped answers
    the fit now places beyond the cap (no pull)."""
    d = s[ii] - s[jj]
    beyond = capped & (np.sign(f) * d > clip)
    new = np.ones(f.shape[0])
    if robust is not None:
        leverage = c * (1.0 / (deg[ii] + w[ii]) + 1.0 / (deg[jj] + w[jj]))
        pulling = ~beyond
        new[pulling] = huber_weights(f[pulling] - d[pulling], leverage[pulling], robust)
    return new, beyond


def _centred_covariance(factor, n: int) -> NDArray[np.float64]:
    """The covariance of ``s - mean(s)`` (in units of the expert variance) from the Cholesky factor: a shift of
    every score, which the weak ridge leaves loosely determined, changes no order; pair differences are unchanged
    by it."""
    import scipy.linalg

    cov = scipy.linalg.cho_solve(factor, np.eye(n), check_finite=False)
    row = cov.mean(axis=1)
    cov = cov - row[:, None] - row[None, :] + row.mean()
    return (cov + cov.T) / 2.0


def _factorise(n, ii, jj, c, w):
    """Cholesky factor of ``W^T C W + diag(w)``."""
    import scipy.linalg

    system = dense_laplacian(n, ii, jj, c)
    system[np.diag_indices(n)] += w
    return scipy.linalg.cho_factor(system, lower=True, check_finite=False)


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
        raise NotConverged(f"conjugate gradients did not converge in {maxiter} iterations")
    return start + dx, its


class NotConverged(RuntimeError):
    """Conjugate gradients stopped at ``maxiter`` short of the tolerance."""


def _sketch_var(n, ii, jj, c, adj, deg, w, rng, n_probes, rtol, maxiter) -> NDArray[np.float64]:
    """Johnson-Lindenstrauss estimate of diag(M^-1), M = W^T C W + diag(w) = B^T B (module docstring)."""
    if n_probes < 1:
        raise ValueError(f"n_probes must be positive, got {n_probes}")
    k = ii.shape[0]
    acc = np.zeros(n)
    sw = np.sqrt(w)
    for _ in range(n_probes):
        q = rng.choice([-1.0, 1.0], size=k + n) / math.sqrt(n_probes)
        b = scatter_difference(n, ii, jj, np.sqrt(c) * q[:k]) + sw * q[k:]
        y, _ = _solve(adj, deg, w, b, None, rtol, maxiter)
        y -= y.mean()  # about the mean of the scores, as the exact variance
        acc += y * y
    return acc
