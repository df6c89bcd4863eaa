"""Selective verdicts with a guaranteed agreement with people ("Trust or Escalate", Jung, Brahman and Choi, ICLR
2025): keep a judge's verdict where its confidence is at least a threshold chosen on a calibration sample of people's
labels so that, in finite samples,

    P( P(the judge agrees with people | confidence >= threshold) >= 1 - alpha ) >= 1 - delta,

and abstain (escalate) below it.

**Fixed-sequence testing** over a grid of thresholds fixed in advance (:data:`GRID`), from the most confident down:
at threshold ``t`` the ``n(t)`` calibration items with confidence at least ``t`` show ``e(t)`` disagreements, and the
null hypothesis "the disagreement rate above ``t`` exceeds alpha" is rejected where the exact one-sided
Clopper-Pearson upper bound at level ``1 - delta`` is at most alpha::

    U(e, n) = the (1 - delta) quantile of Beta(e + 1, n - e)   (1 where e = n),  reject where U(e(t), n(t)) <= alpha.

The sequence stops at the first threshold not rejected; the certified threshold is the last one rejected (the
lowest, so the most verdicts kept). Each test is at level delta and the order is fixed before the labels are seen, so
the family-wise error is at most delta (Bauer 1991; Angelopoulos et al., "Learn then Test", 2021). The sequence starts
at the highest threshold with enough calibration items above it for its test to be able to reject at all
(:func:`labels_needed` with no disagreement): a threshold chosen by how many items it keeps, never by their labels.

A **cascade** (their Algorithm 2) calibrates each judge in turn on the calibration items the judges before it
abstained on, each at ``delta / k`` for ``k`` judges (a union bound: every judge's guarantee holds together with
probability ``1 - delta``); what no judge accepts is escalated to people.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.stats import beta

# Thresholds of the fixed sequence, on the verdict's probability (in [1/2, 1]): fixed before any label is seen.
GRID = np.round(np.linspace(1.0, 0.5, 501), 6)


def clopper_pearson_upper(errors: int, n: int, delta: float) -> float:
    """The exact one-sided ``1 - delta`` upper confidence bound on a binomial rate from ``errors`` of ``n``: the
    largest rate under which seeing at most ``errors`` has probability ``delta`` (1 for ``n == 0`` or
    ``errors == n``)."""
    if n <= 0 or errors >= n:
        return 1.0
    return float(beta.ppf(1.0 - delta, errors + 1, n - errors))


def exact_mean_interval(
    y: NDArray[np.float64], level: float, w: NDArray[np.float64] | None = None
) -> tuple[float, float]:
    """Clopper-Pearson's exact binomial interval at ``level`` for the mean of outcomes in [0, 1] (a half, a tie, counted
    as half a win: the beta quantiles at a fractional count); weighted labels count as their Kish effective number
    ``(sum w)^2 / sum w^2`` of draws at their weighted mean."""
    y = np.asarray(y, dtype=np.float64)
    wl = np.ones(len(y)) if w is None else np.asarray(w, dtype=np.float64) / np.mean(w)
    n = float(np.sum(wl) ** 2 / np.sum(wl**2))
    x = min(max(float(np.mean(wl * y)) * n, 0.0), n)
    tail = (1 - level) / 2
    lower = 0.0 if x <= 0 else float(beta.ppf(tail, x, n - x + 1))
    upper = 1.0 if x >= n else float(beta.ppf(1 - tail, x + 1, n - x))
    return lower, upper


def labels_needed(rate: float, alpha: float, delta: float, cap: int = 10**7) -> int | None:
    """The items at which a disagreement rate of ``rate`` (``round(rate * n)`` errors of ``n``) is certified below
    alpha at ``1 - delta`` and one fewer is not (:func:`labels_needed_each`: the fewest up to rounding, under which
    a lucky smaller count may certify too); None where no number of items does it (``rate >= alpha``)."""
    need = int(labels_needed_each(np.array([rate], dtype=np.float64), alpha, delta, cap)[0])
    return None if need < 0 else need


def labels_needed_each(
    rates: NDArray[np.float64], alpha: float, delta: float, cap: int = 10**7
) -> NDArray[np.int64]:
    """:func:`labels_needed` of each rate at once (-1: none): the item count doubled until the bound is under
    alpha, then bisected (the bound falls with n at a fixed rate, up to rounding)."""
    rates = np.asarray(rates, dtype=np.float64)

    def certifies(k: NDArray[np.intp], n: NDArray[np.int64]) -> NDArray[np.bool_]:
        return upper_bounds(np.round(rates[k] * n), n, delta) <= alpha

    possible = rates < alpha
    hi = np.ones(rates.shape, dtype=np.int64)
    doubling = possible.copy()
    while doubling.any():
        k = np.flatnonzero(doubling)
        done = certifies(k, hi[k])
        doubling[k[done]] = False
        short = k[~done]
        hi[short] *= 2
        over = short[hi[short] > cap]
        possible[over] = doubling[over] = False
    lo = np.ones_like(hi)
    while (searching := possible & (lo < hi)).any():
        k = np.flatnonzero(searching)
        mid = (lo[k] + hi[k]) // 2
        good = certifies(k, mid)
        hi[k[good]] = mid[good]
        lo[k[~good]] = mid[~good] + 1
    return np.where(possible, hi, -1)


@dataclass(frozen=True)
class Certificate:
    """One judge's certified threshold on its calibration items (None: none certified), the calibration items at or
    above it, their disagreements and the bound; and, where nothing was certified, how many labels would be needed
    at the disagreement observed (None: no number would do, or something was certified)."""

    threshold: float | None
    n_calibration: int
    accepted: int
    disagreements: int
    bound: float
    needed: int | None = None
    # the disagreement rate the estimate of ``needed`` was made at (its most confident verdicts')
    observed: float | None = None

    @property
    def certified(self) -> bool:
        return self.threshold is not None

    @property
    def agreement(self) -> float:
        """The empirical agreement on the accepted calibration items (NaN: none accepted)."""
        return 1.0 - self.disagreements / self.accepted if self.accepted else float("nan")


def fixed_sequence_threshold(
    confidence: NDArray[np.float64],
    agree: NDArray[np.bool_],
    alpha: float,
    delta: float,
    grid: NDArray[np.float64] = GRID,
) -> Certificate:
    """The certified threshold of one judge (module docstring): ``confidence`` of each calibration verdict (the
    probability of the judge's verdict) and whether people agreed with it."""
    c = np.asarray(confidence, dtype=np.float64)
    ok = np.asarray(agree, dtype=bool)
    if not 0 < alpha < 1 or not 0 < delta < 1:
        raise ValueError(f"alpha and delta must be in (0, 1), got alpha={alpha}, delta={delta}")
    n_total = len(c)
    start = labels_needed(0.0, alpha, delta) or n_total + 1
    order = np.argsort(-c, kind="stable")
    sorted_c, wrong = c[order], np.concatenate([[0], np.cumsum(~ok[order])])
    kept = np.searchsorted(-sorted_c, -np.asarray(grid, dtype=np.float64), side="right")  # n(t) per threshold
    tested = np.flatnonzero(kept >= start)  # the sequence starts where a test could reject
    if tested.size:
        n, errors = kept[tested], wrong[kept[tested]]
        bounds = upper_bounds(errors, n, delta)
        failed = np.flatnonzero(bounds > alpha)
        last = (
            failed[0] if failed.size else len(tested)
        ) - 1  # the last rejected before the first not rejected
        if last >= 0:
            t = float(grid[tested[last]])
            return Certificate(t, n_total, int(n[last]), int(errors[last]), float(bounds[last]))
    needed, observed = _needed(sorted_c, wrong[1:], grid, alpha, delta, n_total)
    return Certificate(None, n_total, 0, 0, 1.0, needed, observed)


def upper_bounds(errors: NDArray[np.int64], n: NDArray[np.int64], delta: float) -> NDArray[np.float64]:
    """:func:`clopper_pearson_upper` of each (errors, n)."""
    e, m = np.asarray(errors, dtype=np.float64), np.asarray(n, dtype=np.float64)
    out = np.ones_like(e)
    ok = (m > 0) & (e < m)
    out[ok] = beta.ppf(1.0 - delta, e[ok] + 1, m[ok] - e[ok])
    return out


def _needed(
    sorted_c: NDArray[np.float64],
    wrong: NDArray[np.int64],
    grid: NDArray[np.float64],
    alpha: float,
    delta: float,
    n_total: int,
) -> tuple[int | None, float | None]:
    """Where nothing is certified: the fewest labels that would certify some threshold at the disagreement its
    calibration items show (scaled by the share of items above it; the first threshold of the grid among equals),
    and that disagreement (the lowest any threshold shows where none would do)."""
    n = np.searchsorted(-sorted_c, -np.asarray(grid, dtype=np.float64), side="right")
    n = n[n > 0]
    if not n.size:
        return None, None
    rates = wrong[n - 1] / n
    need = labels_needed_each(rates, alpha, delta)
    if not (need >= 0).any():
        return None, float(rates.min())
    total = np.where(need >= 0, np.ceil(need * n_total / n), np.inf)
    best = int(np.argmin(total))
    return int(total[best]), float(rates[best])


@dataclass(frozen=True)
class CascadeStep:
    """A judge's place in a cascade: its certificate, and which of all the items it accepts (the items the judges
    before it did not)."""

    certificate: Certificate
    accepts: NDArray[np.bool_]


def cascade(
    confidences: list[NDArray[np.float64]],
    agrees: list[NDArray[np.bool_]],
    calibration: NDArray[np.bool_],
    alpha: float,
    delta: float,
    grid: NDArray[np.float64] = GRID,
) -> list[CascadeStep]:
    """Each judge in turn (``confidences[k]``, ``agrees[k]`` over every item, NaN where it has no verdict;
    ``agrees`` is read on the calibration items only) certified on the calibration items the judges before it
    abstained on, at ``delta / k``; each item accepted by the first judge whose threshold its confidence reaches."""
    n = len(calibration)
    open_ = np.ones(n, dtype=bool)  # not yet accepted
    steps = []
    share = delta / max(1, len(confidences))
    for c, ok in zip(confidences, agrees, strict=True):
        c = np.asarray(c, dtype=np.float64)
        judged = np.isfinite(c)  # NaN: this judge has no verdict on the item
        cal = calibration & open_ & judged
        certificate = fixed_sequence_threshold(c[cal], np.asarray(ok, dtype=bool)[cal], alpha, share, grid)
        accepts = (
            open_ & judged & (np.nan_to_num(c, nan=-1.0) >= certificate.threshold)
            if certificate.certified
            else np.zeros(n, dtype=bool)
        )
        steps.append(CascadeStep(certificate, accepts))
        open_ &= ~accepts
    return steps
