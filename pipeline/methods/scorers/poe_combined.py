"""Absolute and comparative information in one Product-of-Experts solve (after Fathullah & Gales, UAI 2025).

Every context has comparisons ``(i, j, p)`` (PoE-Gaussian experts on score differences, :mod:`.poe_gaussian`)
and an absolute score ``a_i`` for some or all of its candidates. The absolute scores become Gaussian experts on
the scores themselves, ``N(s_i; slope * (a_i - mean_c(a)), sigma_c^2 / weight)``, and the mode of the product is
one least-squares solve (:func:`.poe_gaussian.fit_with_prior`).

Absolute scores live on their own scale (1-10, 0-100, a probability), so the map onto the comparative scale and
the weight are estimated over all contexts of a group (empirical Bayes):

1. fit PoE-Gaussian to each context's comparisons alone: scores ``s^c``, their posterior variances and the
   experts' residual variance, pooled over contexts as ``sigma_c^2``;
2. regress the centred ``s^c`` on the centred absolute scores through the origin: ``slope`` (clipped at 0: an
   absolute score that orders candidates against the comparisons carries no usable information here);
3. the absolute experts' variance ``sigma_a^2`` is the regression's residual variance less the part due to the
   comparative scores' own estimation error (floored at 5 % of the residual variance), and
   ``weight = sigma_c^2 / sigma_a^2``, the absolute expert's precision relative to one comparison's.

A set ``weight`` replaces step 3. The estimate takes the comparisons as the reference scale: where the
absolute scores do not agree with them (slope 0) the combination follows the comparisons, even if the absolute
scores are the better ones (only human scores could tell). Candidates without an absolute score get no prior; a context whose
comparison graph is disconnected is still scored when the priors connect it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pipeline.methods.scorers import poe_gaussian
from pipeline.methods.scorers.comparison_checks import ComparisonError

__all__ = ["CombineEstimate", "ContextData", "combine", "estimate"]

# Floor of sigma_a^2 as a share of the regression's residual variance (keeps the weight finite).
MIN_ABSOLUTE_VARIANCE_SHARE = 0.01


@dataclass(frozen=True)
class ContextData:
    """One context: ``n`` candidates, comparisons ``(i, j, p)`` and absolute scores (NaN where missing)."""

    n: int
    i: NDArray[np.int64]
    j: NDArray[np.int64]
    p: NDArray[np.float64]
    absolute: NDArray[np.float64]


@dataclass(frozen=True)
class CombineEstimate:
    slope: float
    weight: float
    sigma2_comparative: float
    sigma2_absolute: float
    # the weight was estimated (False: set by the user)
    estimated: bool
    # contexts used for the estimate (those whose comparisons alone could be fitted)
    n_contexts: int


def _centred(values: NDArray[np.float64], rated: NDArray[np.bool_]) -> NDArray[np.float64]:
    out = np.zeros_like(values)
    if rated.any():
        out[rated] = values[rated] - values[rated].mean()
    return out


def estimate(
    contexts: Sequence[ContextData], *, weight: float | None = None, beta: float = 0.5
) -> CombineEstimate:
    """The slope, variances and weight of a group of contexts (module docstring)."""
    xs, ys, variances = [], [], []
    sum_sq = dof = 0.0
    used = 0
    for ctx in contexts:
        rated = np.isfinite(ctx.absolute)
        if rated.sum() < 2:
            continue
        try:
            # unit expert variance: the standard errors are sqrt(diag((W^T W)^+)), scaled by sigma_c^2 below
            fit = poe_gaussian.fit(ctx.n, ctx.i, ctx.j, ctx.p, beta=beta, stderr="exact", sigma2=1.0)
        except ComparisonError:
            continue
        used += 1
        f = poe_gaussian.expert_means(np.asarray(ctx.p, dtype=np.float64), beta=beta)
        residual = f - (fit.scores[ctx.i] - fit.scores[ctx.j])
        sum_sq += float(residual @ residual)
        dof += fit.dof
        xs.append(_centred(ctx.absolute, rated)[rated])
        ys.append(_centred(fit.scores, rated)[rated])
        assert fit.stderr is not None
        variances.append(fit.stderr[rated] ** 2)
    if not used:
        raise ComparisonError("no context has both a fitted comparison graph and two absolute scores")
    x, y, unit_var = np.concatenate(xs), np.concatenate(ys), np.concatenate(variances)
    sxx = float(x @ x)
    slope = max(float(x @ y) / sxx, 0.0) if sxx > 0 else 0.0
    resid = float(np.mean((y - slope * x) ** 2))
    if dof <= 0:
        raise ComparisonError(
            "the comparisons leave no residual degrees of freedom (each context has at most N - 1 comparisons), "
            "so the comparative experts' variance cannot be estimated; set absolute.combine_weight"
        )
    sigma2_c = sum_sq / dof
    if not (np.isfinite(sigma2_c) and sigma2_c > 0):
        raise ComparisonError(f"the comparative experts' variance is {sigma2_c}; set absolute.combine_weight")
    sigma2_a = max(resid - sigma2_c * float(np.mean(unit_var)), MIN_ABSOLUTE_VARIANCE_SHARE * resid, 1e-12)
    if weight is None:
        return CombineEstimate(slope, sigma2_c / sigma2_a, sigma2_c, sigma2_a, True, used)
    return CombineEstimate(slope, float(weight), sigma2_c, sigma2_c / float(weight), False, used)


def combine(ctx: ContextData, est: CombineEstimate, *, beta: float = 0.5) -> poe_gaussian.PriorFit:
    """Combined scores of one context with the group's estimate."""
    rated = np.isfinite(ctx.absolute)
    prior_mean = est.slope * _centred(np.where(rated, ctx.absolute, 0.0), rated)
    prior_weight = np.where(rated, est.weight, 0.0)
    return poe_gaussian.fit_with_prior(
        ctx.n, ctx.i, ctx.j, ctx.p, prior_mean, prior_weight, beta=beta, sigma2=est.sigma2_comparative
    )
