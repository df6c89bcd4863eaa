"""Model leaderboards with bootstrap confidence intervals over inputs (vectorised, seeded).

A generate-then-evaluate run (or any data set whose candidates name their system) has, for every input
(context) and model, a score per scoring method and the model's soft wins and games against the other models'
outputs for that input. A model's leaderboard value is

- the **win rate** (EvaluLLM): the share of its comparisons it won, over all inputs (a comparison is won when the
  debiased probability of beating the other output is above 1/2; exactly 1/2 is half a win each);
- the **mean score** of a method (Bradley-Terry, PoE-Gaussian, ...) over the inputs where it was scored.

The uncertainty comes from which inputs were drawn: each bootstrap round draws the inputs with replacement (the
same draw for every model, so the models' values stay paired), and the interval is the ``(1 - level) / 2`` and
``(1 + level) / 2`` quantiles of the round values (arena-hard-auto's defaults: 100 rounds, 5-95 %), widened where
needed to hold the estimate on all inputs: where every round gives the estimate up to a rounding error, or a skewed
statistic puts both quantiles on one side of it, the bound on that side is the estimate itself (so ``lower <=
estimate <= upper`` always; arena-hard-auto reports the rounds' mean or median as its estimate instead). Rounds are
one matrix product: ``counts (rounds x inputs) @ values (inputs x models)``, so 10 models x 10,000 inputs x 1,000 rounds
take well under a second.

Statistical ranks follow FastChat's rule (the Chatbot Arena leaderboard, ``fastchat/serve/monitor/monitor.py:
recompute_final_ranking``; arena-hard-auto reports intervals and no such rank): a model's rank is 1 + the number of
models whose lower bound lies above its upper bound, so models whose intervals overlap share ranks.

Results do not depend on the order of models or inputs: inputs are put in order of their ids before drawing, and
models are columns named by id.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "Interval",
    "bootstrap_counts",
    "bootstrap_means",
    "bootstrap_ratio",
    "quantile_interval",
    "statistical_ranks",
    "tied_groups",
]


@dataclass(frozen=True)
class Interval:
    """Per model: the estimate on all inputs, and the bootstrap interval."""

    estimate: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]


# The widest level read off bootstrap rounds (a handful of units would ask for a level of 1).
MAX_LEVEL = 0.999


def expanded_level(level: float, n_units: int) -> float:
    """The level at which to read a percentile bootstrap of ``n_units`` units so that its interval is valid at small
    n (Hesterberg 2015, "What teachers should know about the bootstrap", the expanded percentile interval): the level
    whose normal quantile is ``sqrt(n / (n - 1)) t_{n-1}``, the small-sample widening of the t interval; simulated on
    win rates over inputs at level 0.90, 0.90 from 10 units against the plain percentile's 0.85."""
    from scipy.stats import norm, t

    if n_units < 2:
        return level
    z = np.sqrt(n_units / (n_units - 1)) * t.ppf((1 + level) / 2, n_units - 1)
    return float(min(2 * norm.cdf(z) - 1, MAX_LEVEL))


def bootstrap_counts(n_inputs: int, rounds: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """(rounds, n_inputs): how often each input is drawn in each round (each row sums to ``n_inputs``)."""
    if n_inputs < 1 or rounds < 1:
        raise ValueError(f"need at least one input and one round, got {n_inputs} inputs and {rounds} rounds")
    draws = rng.integers(0, n_inputs, size=(rounds, n_inputs), dtype=np.int64)
    offsets = (np.arange(rounds, dtype=np.int64) * n_inputs)[:, None]
    counts = np.bincount((draws + offsets).ravel(), minlength=rounds * n_inputs)
    return counts.reshape(rounds, n_inputs).astype(np.float64)


def _quantiles(samples: NDArray[np.float64], level: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    with warnings.catch_warnings():  # a column that is NaN in every round (not defined) stays NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        lower, upper = np.nanquantile(samples, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return lower, upper


def quantile_interval(estimate: NDArray[np.float64], rounds: NDArray[np.float64], level: float) -> Interval:
    """An estimate with the interval of its bootstrap rounds' values (rounds x models), holding the estimate (module
    docstring); NaN where the estimate or every round is NaN (not defined)."""
    est = np.asarray(estimate, dtype=np.float64)
    lower, upper = _quantiles(np.asarray(rounds, dtype=np.float64), level)
    defined = np.isfinite(est) & np.isfinite(lower) & np.isfinite(upper)
    nan = np.full_like(est, np.nan)
    return Interval(
        np.where(defined, est, nan),
        np.where(defined, np.fmin(lower, est), nan),
        np.where(defined, np.fmax(upper, est), nan),
    )


def bootstrap_ratio(
    numerator: NDArray[np.float64],
    denominator: NDArray[np.float64],
    counts: NDArray[np.float64],
    level: float,
) -> Interval:
    """Intervals of ``sum_inputs numerator / sum_inputs denominator`` per model (columns): a win rate is wins over
    games. ``numerator``/``denominator``: (inputs, models), zeros where a model has no games for an input."""
    num, den = np.asarray(numerator, dtype=np.float64), np.asarray(denominator, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        estimate = num.sum(axis=0) / den.sum(axis=0)
        rounds = (counts @ num) / (counts @ den)
    return quantile_interval(estimate, rounds, level)


def bootstrap_means(values: NDArray[np.float64], counts: NDArray[np.float64], level: float) -> Interval:
    """Intervals of each model's mean over inputs (NaN = not scored for that input: left out of its mean)."""
    v = np.asarray(values, dtype=np.float64)
    present = np.isfinite(v)
    return bootstrap_ratio(np.where(present, v, 0.0), present.astype(np.float64), counts, level)


#: Bounds closer than this share of the largest magnitude touch (their ulps decide nothing): as the rank
#: statistics read near-equal predictions (:data:`pipeline.methods.agreement.metrics.TIE_RTOL`).
TOUCH_RTOL = 1e-12
#: ... or closer than this at all: the fits stop within ``1e-8`` of their optimum (Bradley-Terry's ``BT_TOL``), so
#: two models every game tied may land ``1e-9`` apart in either order, and that decides nothing either.
TOUCH_ATOL = 1e-7


def _above(lo: NDArray[np.float64], up: NDArray[np.float64]) -> NDArray[np.bool_]:
    """``[m, k]``: model ``k``'s lower bound lies above model ``m``'s upper bound, by more than ``TOUCH_RTOL`` of
    the largest magnitude and more than ``TOUCH_ATOL``."""
    finite = np.concatenate([np.abs(lo), np.abs(up)])
    finite = finite[np.isfinite(finite)]
    slack = max(TOUCH_RTOL * (float(finite.max()) if finite.size else 0.0), TOUCH_ATOL)
    return lo[None, :] > up[:, None] + slack


def statistical_ranks(lower: NDArray[np.float64], upper: NDArray[np.float64]) -> NDArray[np.int64]:
    """1 + the number of models whose lower bound is above this model's upper bound (higher is better)."""
    lo, up = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    return 1 + _above(lo, up).sum(axis=1)


def tied_groups(
    names: Sequence[str], lower: NDArray[np.float64], upper: NDArray[np.float64]
) -> list[list[str]]:
    """For each model, the other models whose intervals overlap its own (statistically tied with it); a model without
    an interval given as (-inf, inf) is tied with every model, one not defined (NaN) with none."""
    lo, up = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    above = _above(lo, up)
    overlap = ~above & ~above.T & ~np.isnan(lo)[:, None] & ~np.isnan(lo)[None, :]
    return [[names[k] for k in np.flatnonzero(overlap[m]) if k != m] for m in range(len(names))]
