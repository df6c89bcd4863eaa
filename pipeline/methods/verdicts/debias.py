"""Positional-bias estimation and removal.

EACL = Liusie, Manakul & Gales, "LLM Comparative Assessment", EACL 2024 (section 4, eqs. 8-10).
PoE = Liusie, Raina, Fathullah & Gales, "Efficient LLM Comparative Assessment: a Product of Experts
Framework", 2024 (section 4.2, appendix A.6).

All functions take ``p``, the probability that the candidate in slot A wins, over a comparison set.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "ALPHA_XTOL",
    "average_orderings",
    "balanced_threshold",
    "balancing_alpha",
    "decision_threshold",
    "mean_shift_beta",
    "positional_prior",
    "reweight",
]

# Absolute tolerance on log(alpha) for the root finder. d mean(p') / d log(alpha) <= 1/4, so the mean of
# the reweighted probabilities is within 2.5e-14 of 0.5 at the returned alpha (well inside 1e-9).
ALPHA_XTOL = 1e-13


def _probs(p: ArrayLike, name: str = "p") -> NDArray[np.float64]:
    arr = np.asarray(p, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array, got shape {arr.shape}")
    bad = np.flatnonzero(~((arr >= 0.0) & (arr <= 1.0)))
    if bad.size:
        raise ValueError(f"{name}[{int(bad[0])}]={float(arr[bad[0]])!r} is not a probability in [0, 1]")
    return arr


def positional_prior(p: ArrayLike) -> tuple[float, float]:
    """Positional priors ``(P(A), P(B))`` of a comparison set (EACL eq. 8).

    ``P(A) = (1/|S|) sum_{(i,j) in S} p(A wins)`` and ``P(B) = 1 - P(A)``; an unbiased judge has
    ``P(A) = 0.5`` on a set with both orderings of every pair.
    """
    arr = _probs(p)
    pa = float(arr.mean())
    return pa, 1.0 - pa


def reweight(p: ArrayLike, alpha: float) -> NDArray[np.float64]:
    """Prior-reweighted probabilities ``p' = alpha p / (alpha p + 1 - p)`` (EACL eq. 9).

    Computed in the logit domain, ``logit(p') = logit(p) + log(alpha)``, which is exact and stable for
    ``p`` in {0, 1} (left unchanged) and for extreme ``alpha``.
    """
    from scipy.special import expit, logit

    if not (alpha > 0.0 and math.isfinite(alpha)):
        raise ValueError(f"alpha must be a positive finite number, got {alpha!r}")
    arr = _probs(p)
    with np.errstate(divide="ignore"):
        return expit(logit(arr) + math.log(alpha))


def balancing_alpha(p: ArrayLike) -> float:
    """The ``alpha`` for which the reweighted probabilities have ``P(A) = P(B) = 0.5`` (EACL eqs. 9-10).

    ``mean(reweight(p, alpha))`` is increasing in ``alpha``; the root in ``log(alpha)`` is found with
    Brent's method (``scipy.optimize.brentq``) on a bracket that is widened until it contains the root,
    to absolute tolerance :data:`ALPHA_XTOL`.

    Raises
    ------
    ValueError
        If no alpha balances the set: reweighting leaves ``p = 0`` and ``p = 1`` unchanged, so a root
        exists only when fewer than half of the ``p`` are exactly 1 and fewer than half exactly 0.
    """
    from scipy.optimize import brentq
    from scipy.special import expit, logit

    arr = _probs(p)
    n_one = int(np.count_nonzero(arr == 1.0))
    n_zero = int(np.count_nonzero(arr == 0.0))
    if 2 * n_one >= arr.size or 2 * n_zero >= arr.size:
        raise ValueError(
            f"no alpha makes P(A) = 0.5: {n_one} of {arr.size} probabilities are exactly 1 and {n_zero} "
            "exactly 0, which reweighting cannot move (need fewer than half of each)"
        )
    with np.errstate(divide="ignore"):
        z = logit(arr)

    def excess(log_alpha: float) -> float:
        return float(expit(z + log_alpha).mean()) - 0.5

    lo, hi = -1.0, 1.0
    while excess(lo) > 0.0:
        lo *= 2.0
    while excess(hi) < 0.0:
        hi *= 2.0
    root = brentq(excess, lo, hi, xtol=ALPHA_XTOL, rtol=4 * np.finfo(float).eps, maxiter=500)
    return math.exp(root)


def decision_threshold(alpha: float) -> float:
    """Decision threshold equivalent to reweighting by ``alpha`` (EACL eq. 10).

    ``reweight(p, alpha) > 0.5  <=>  p > tau`` with ``tau = 1 / (1 + alpha)``.
    """
    if not (alpha > 0.0 and math.isfinite(alpha)):
        raise ValueError(f"alpha must be a positive finite number, got {alpha!r}")
    return 1.0 / (1.0 + alpha)


# The grid the EACL release searches for its balanced threshold (src/evaluation/loader.py: np.arange(0, 1, 0.001)).
THRESHOLD_GRID = 0.001


def balanced_threshold(p: ArrayLike) -> float:
    """The EACL release's balanced threshold (``adianliusie/comparative-assessment``,
    ``src/evaluation/loader.py: SystemLoader.get_balanced_thresholds``): the first ``t`` of the grid
    ``0, 0.001, ..., 0.999`` with ``mean(p < t) >= 0.5``, so that half of the hard decisions ``p > t`` say "A".

    Beside :func:`balancing_alpha` (the paper's soft rule, mean reweighted probability 0.5): the two agree on a
    judge whose probabilities are symmetric about their median and split where they are lopsided (a few very
    sure "B" answers move the mean, not the median). The release's own loop returns its last grid point when no
    ``t`` qualifies; that can only happen where fewer than half of the ``p`` lie below 0.999, and it is 0.999 here
    too."""
    arr = _probs(p)
    grid = np.arange(0.0, 1.0, THRESHOLD_GRID)
    below = (arr[None, :] < grid[:, None]).mean(axis=1)
    hits = np.flatnonzero(below >= 0.5)
    return float(grid[hits[0]] if hits.size else grid[-1])


def average_orderings(p_ab: ArrayLike, p_ba: ArrayLike) -> NDArray[np.float64]:
    """Debias by averaging both orderings (PoE section 4.2).

    ``p_ab[k]``: probability that the item in slot A of the first ordering wins; ``p_ba[k]``: the same
    pair judged in the swapped order (probability that the other item, now in slot A, wins). Returns
    ``(p_ab + 1 - p_ba) / 2``, the debiased probability that the first-ordering slot-A item wins.
    """
    a = _probs(np.atleast_1d(p_ab), "p_ab")
    b = _probs(np.atleast_1d(p_ba), "p_ba")
    if a.shape != b.shape:
        raise ValueError(f"p_ab and p_ba must have the same shape, got {a.shape} and {b.shape}")
    return (a + 1.0 - b) / 2.0


def mean_shift_beta(p: ArrayLike) -> float:
    """Mean shift ``beta`` for PoE-Gaussian with one ordering only (PoE appendix A.6).

    With a positionally biased judge and a single ordering per pair, the Gaussian expert mean
    ``f(p) = p - beta`` is shifted by the average probability, ``beta = mean(p)``, instead of 0.5.
    """
    return float(_probs(p).mean())
