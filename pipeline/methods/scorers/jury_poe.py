"""A jury: several judges' soft verdicts on the same comparisons combined in one product of experts that knows each
judge's bias, scale and reliability.

Each judge ``k`` reads a prompt "A = item a, B = item b" and says ``P(A wins)``; its capped log-odds
``x = logit(p)`` (capped at ``±clip``, :func:`pipeline.methods.scorers.posterior.expert_values`) is an expert on the score
difference with a judge's own line and noise::

    x = beta_k (s_a - s_b) + gamma_k + e,    e ~ N(0, sigma_k^2)

- ``gamma_k``: what judge ``k`` adds whatever the two items are (its position bias left after debiasing, or all of
  it on raw probabilities: both orderings of a pair make it identifiable);
- ``beta_k``: how many log-odds of judge ``k`` one unit of score is (a confident judge answers in larger log-odds);
- ``sigma_k^2``: judge ``k``'s noise about its line.

Given the judges' lines, the scores maximise the product of the experts (Gaussian in ``s``): the weighted least
squares ``sum_k sum_rows w_k (s_a - s_b - (x - gamma_k) / beta_k)^2`` with ``w_k = beta_k^2 / sigma_k^2``, the
information one answer of judge ``k`` carries about a score difference. Given the scores, each judge's line is an
ordinary least-squares fit of its answers on ``s_a - s_b``. :func:`fit_jury` alternates the two (a block
coordinate ascent of the joint likelihood; each step cannot lower it) from the plain average of the judges, with
the scores rescaled to unit standard deviation after each solve (the likelihood fixes ``beta s``, not ``s``) and
oriented as that plain average (the direction "the judges are right on the whole"). A judge that is pure noise
gets ``beta_k`` near 0 and so a weight near 0; a judge that is precise gets most of the weight. The weights
``w_k`` are reported, as shares.

Beside it, the two simple combinations the jury literature uses (Verga et al., 2024, "Replacing Judges with
Juries"): :func:`plain_average` (every judge's answer an expert of equal weight: PoE-Gaussian on all judges'
rows, which equals averaging their probabilities per pair) and :func:`majority_vote` (each judge's verdict on a
pair, both orderings averaged, then the majority; the items scored by their win ratio over the majority's
verdicts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.scorers._common import adjacency_csr, degrees, hard_outcomes, pcg, scatter_difference
from pipeline.methods.scorers.comparison_checks import as_comparisons
from pipeline.methods.scorers.posterior import LOGIT_CLIP, expert_values

__all__ = ["JudgeLine", "JuryFit", "fit_jury", "majority_vote", "plain_average"]

#: Prior precision of every score relative to the judges' information: fixes the mean of each unconnected group.
#: The answers a judge needs for its line (scale, bias, noise) to be estimated.
MIN_ANSWERS = 3
RIDGE = 1e-6
#: Smallest noise variance a judge is given (a judge whose answers fit its line exactly is not infinitely sure).
MIN_SIGMA2 = 1e-6
#: Alternations stop when no score moves by more than this (scores have unit standard deviation).
TOL = 1e-8
MAX_ITER = 200


@dataclass(frozen=True)
class JudgeLine:
    """One judge's line and its share of the jury's information.

    Attributes
    ----------
    scale, bias, sigma2 : float
        ``beta_k``, ``gamma_k`` and ``sigma_k^2`` (module docstring), in the log-odds of this judge per unit of
        score (the scores have unit standard deviation).
    weight : float
        ``beta_k^2 / sigma_k^2``: what one answer of this judge tells about a score difference.
    share : float
        This judge's part of the jury's information: ``n_k w_k / sum_l n_l w_l``.
    n : int
        Answers of this judge in the fit.
    """

    scale: float
    bias: float
    sigma2: float
    weight: float
    share: float
    n: int


@dataclass(frozen=True)
class JuryFit:
    """Result of :func:`fit_jury`: scores (mean 0, standard deviation 1), one :class:`JudgeLine` per judge (in
    judge index order), the alternations used and whether they converged."""

    scores: NDArray[np.float64]
    judges: tuple[JudgeLine, ...]
    iterations: int
    converged: bool


def _judges(judge: ArrayLike, k: int, least: int = MIN_ANSWERS) -> tuple[NDArray[np.int64], int]:
    """The judge codes and how many judges, each with at least ``least`` answers (a judge's line needs
    :data:`MIN_ANSWERS`; the majority vote and the plain average need one)."""
    codes = np.asarray(judge)
    if codes.shape != (k,):
        raise ValueError(f"judge must have one entry per comparison ({k}), got shape {codes.shape}")
    if k and not np.issubdtype(codes.dtype, np.integer):
        raise ValueError(f"judge must hold integer judge indices 0..J-1, got dtype {codes.dtype}")
    codes = codes.astype(np.int64)
    if k and codes.min() < 0:
        raise ValueError(f"judge indices must be >= 0, got {int(codes.min())}")
    n_judges = int(codes.max()) + 1 if k else 0
    missing = np.flatnonzero(np.bincount(codes, minlength=n_judges) < least)
    if missing.size:
        raise ValueError(
            f"judge {int(missing[0])} has fewer than {least} answers: its line (scale, bias, noise) cannot be "
            "estimated"
        )
    return codes, n_judges


def _solve(n: int, ii: NDArray, jj: NDArray, weight: NDArray, target: NDArray) -> NDArray[np.float64]:
    """The scores minimising ``sum weight (s_i - s_j - target)^2 + RIDGE mean(weight) |s|^2`` (CG, Jacobi)."""
    ridge = RIDGE * max(float(weight.mean()), 1e-300)
    deg = degrees(n, ii, jj, weight)
    adj = adjacency_csr(n, ii, jj, weight)
    rhs = scatter_difference(n, ii, jj, weight * target)

    def matvec(x: NDArray[np.float64]) -> NDArray[np.float64]:
        return deg * x - adj @ x + ridge * x

    x, its = pcg(matvec, rhs, 1.0 / (deg + ridge), rtol=1e-12, maxiter=20 * n + 100)
    if its < 0:
        raise RuntimeError(f"the jury's weighted solve of {n} items did not converge")
    return x


def _unit(s: NDArray[np.float64], reference: NDArray[np.float64]) -> NDArray[np.float64]:
    """``s`` centred, scaled to standard deviation 1 and oriented as ``reference``."""
    s = s - s.mean()
    sd = float(s.std())
    if sd == 0.0 or not math.isfinite(sd):
        return np.zeros_like(s)
    s = s / sd
    return -s if float(s @ reference) < 0 else s


def _lines(codes, n_judges, d, x) -> tuple[NDArray, NDArray, NDArray]:
    """Each judge's least-squares line ``x = scale d + bias`` and its residual variance."""
    count = np.bincount(codes, minlength=n_judges).astype(np.float64)
    mean_d = np.bincount(codes, weights=d, minlength=n_judges) / count
    mean_x = np.bincount(codes, weights=x, minlength=n_judges) / count
    dc, xc = d - mean_d[codes], x - mean_x[codes]
    sdd = np.bincount(codes, weights=dc * dc, minlength=n_judges)
    sdx = np.bincount(codes, weights=dc * xc, minlength=n_judges)
    scale = np.divide(sdx, sdd, out=np.zeros(n_judges), where=sdd > 0)
    bias = mean_x - scale * mean_d
    resid = x - scale[codes] * d - bias[codes]
    sigma2 = np.maximum(
        np.bincount(codes, weights=resid * resid, minlength=n_judges) / (count - 2), MIN_SIGMA2
    )
    return scale, bias, sigma2


def fit_jury(
    n_items: int,
    judge: ArrayLike,
    i: ArrayLike,
    j: ArrayLike,
    p: ArrayLike,
    *,
    clip: float = LOGIT_CLIP,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
) -> JuryFit:
    """Fit the jury (module docstring).

    Parameters
    ----------
    n_items : int
        Number of items N.
    judge : array_like of int, shape (K,)
        Which judge (0..J-1) gave each answer; every judge needs at least 3 answers.
    i, j : array_like of int, shape (K,)
        The items in positions A and B of each answer's prompt (both orderings of a pair are two rows).
    p : array_like of float, shape (K,)
        ``P(A wins)`` as the judge said it (debiased or raw: a judge's constant bias is fitted).
    clip : float
        The log-odds cap.
    """
    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    codes, n_judges = _judges(judge, ii.shape[0])
    x = expert_values(pp, "logit", clip)
    # start: every answer of equal weight (the plain average), which also fixes the scores' orientation
    s = _solve(n, ii, jj, np.ones_like(x), x)
    reference = s - s.mean()
    s = _unit(s, reference)
    converged = False
    iterations = 0
    while iterations < max_iter:
        iterations += 1
        scale, bias, sigma2 = _lines(codes, n_judges, s[ii] - s[jj], x)
        weight = scale * scale / sigma2
        if not np.any(weight > 0):
            break  # no judge's answers follow any ordering of the items
        w_row = weight[codes]
        safe = np.where(scale != 0.0, scale, 1.0)
        target = np.where(w_row > 0, (x - bias[codes]) / safe[codes], 0.0)
        new = _unit(_solve(n, ii, jj, w_row, target), reference)
        moved = float(np.abs(new - s).max(initial=0.0))
        s = new
        if moved <= tol:
            converged = True
            break
    scale, bias, sigma2 = _lines(codes, n_judges, s[ii] - s[jj], x)
    weight = scale * scale / sigma2
    count = np.bincount(codes, minlength=n_judges)
    info = count * weight
    total = float(info.sum())
    judges = tuple(
        JudgeLine(
            float(scale[k]),
            float(bias[k]),
            float(sigma2[k]),
            float(weight[k]),
            float(info[k] / total) if total > 0 else 0.0,
            int(count[k]),
        )
        for k in range(n_judges)
    )
    return JuryFit(s, judges, iterations, converged)


def plain_average(
    n_items: int, judge: ArrayLike, i: ArrayLike, j: ArrayLike, p: ArrayLike
) -> NDArray[np.float64]:
    """Every judge's answer an expert of equal weight on ``p - 1/2`` (PoE-Gaussian on all the judges' rows); the
    scores are those of averaging the judges' probabilities per pair."""
    from pipeline.methods.scorers.poe_gaussian import poe_gaussian

    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    _judges(judge, ii.shape[0], least=1)
    return poe_gaussian(n, ii, jj, pp)


def majority_vote(
    n_items: int, judge: ArrayLike, i: ArrayLike, j: ArrayLike, p: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Each judge's verdict on each pair (its answers on the pair averaged over orderings and repeats, then
    ``> 1/2``), the judges' majority per pair (a tied vote counts a half win each), and every item's win ratio over
    the majority's verdicts. Returns ``(scores, agreement)``: the win ratios, and per pair (in the order of
    ``np.unique`` over ``(min, max)`` item pairs) the share of judges who voted with the majority."""
    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    codes, n_judges = _judges(judge, ii.shape[0], least=1)
    lo, hi = np.minimum(ii, jj), np.maximum(ii, jj)
    p_lo = np.where(ii == lo, pp, 1.0 - pp)  # P(the lower-indexed item wins)
    pairs, pair = np.unique(lo * n + hi, return_inverse=True)
    cell = pair * n_judges + codes
    size = pairs.shape[0] * n_judges
    total = np.bincount(cell, weights=p_lo, minlength=size)
    count = np.bincount(cell, minlength=size)
    voted = count > 0
    mean = np.divide(total, count, out=np.full(size, 0.5), where=voted)
    votes = hard_outcomes(mean).reshape(-1, n_judges)
    voters = voted.reshape(-1, n_judges).sum(axis=1)
    share_lo = np.where(voted.reshape(-1, n_judges), votes, 0.0).sum(axis=1) / voters
    outcome = hard_outcomes(share_lo)
    agreement = np.maximum(share_lo, 1.0 - share_lo)
    a, b = pairs // n, pairs % n
    wins = np.bincount(a, weights=outcome, minlength=n) + np.bincount(b, weights=1.0 - outcome, minlength=n)
    played = np.bincount(a, minlength=n) + np.bincount(b, minlength=n)
    scores = np.divide(wins, played, out=np.full(n, 0.5), where=played > 0)
    return scores, agreement
