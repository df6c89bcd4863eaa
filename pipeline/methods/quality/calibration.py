"""Whether a judge's probabilities mean what they say: the calibration of P(i beats j) against people's
preferences, and a temperature fitted to them.

``p[k]`` is the judge's (debiased) probability that ``i[k]`` beats ``j[k]``; ``y[k]`` is 1 where people scored
``i[k]`` higher, 0 where they scored it lower (pairs people scored equal have no preference and are left out by the
caller).

- **Reliability** (Niculescu-Mizil & Caruana 2005; Guo et al. 2017, "On calibration of modern neural networks"):
  ``bins`` equal-width bins of ``p`` on [0, 1], bin ``b`` holding ``b / bins <= p < (b + 1) / bins`` (the last one
  closed), a ``p`` within ``EDGE_ATOL`` of an edge being on it (``p = 0.3`` is in the bin that starts at 0.3, and a
  temperature fitted to hard verdicts, which maps them exactly onto rationals such as 0.9, does not leave the last
  bit to decide the bin); per bin, the pairs in it, their mean ``p`` and the share of them people preferred ``i``
  in.
- **Expected calibration error** ``ECE = sum_b (n_b / N) |mean_p_b - freq_b|`` over those bins (Guo et al.);
  **Brier score** ``mean (p - y)^2``; **log loss** ``-mean (y log p + (1 - y) log (1 - p))`` with ``p`` kept in
  ``[EPS, 1 - EPS]``.
- **Temperature** (Guo et al. 2017; Platt scaling with one parameter): ``p_T = sigmoid(logit(p) / T)``, ``T > 0``
  minimising the log loss of ``p_T`` (bounded scalar search on ``log T`` in ``[T_MIN, T_MAX]``). ``T > 1``: the
  judge is over-confident (its probabilities are pulled towards 1/2); ``T < 1``: under-confident (pushed away from
  1/2). A pair read the other way round, ``(1 - p, 1 - y)``, adds the same loss term, so the fit does not depend on
  which candidate a pair calls i. A temperature at ``T_MAX`` says the judge's probabilities carry no information
  about people's preferences (they are all but flattened to 1/2); at ``T_MIN``, that its verdicts were right on every
  pair (nothing bounds the sharpening): :func:`temperature_reading` says it in words.
- **Cross-fitting**: the units (contexts; in a single pool, the pairs) are split into ``folds`` seeded folds, in
  the order of their keys (content keys: the folds do not move with names or row order); each fold's pairs are
  calibrated with the temperature fitted on the other folds' pairs, so no pair is calibrated by a temperature
  fitted on its own unit (its own preference, read either way round, is never among the fitted ones).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "EPS",
    "Reliability",
    "apply_temperature",
    "brier_score",
    "cross_fit_temperature",
    "expected_calibration_error",
    "fit_temperature",
    "log_loss",
    "reliability",
    "temperature_at_bound",
    "temperature_reading",
]

# Probabilities are kept in [EPS, 1 - EPS] for their logit and log loss (a judge that says exactly 0 or 1).
EPS = 1e-9
# A probability this close to a bin's edge is on the edge (reliability).
EDGE_ATOL = 1e-9
# The temperature's search range: a judge this far off is reported at the bound.
T_MIN, T_MAX = 1e-3, 1e3


def _pairs(p: ArrayLike, y: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    pp = np.asarray(p, dtype=np.float64)
    yy = np.asarray(y, dtype=np.float64)
    if pp.shape != yy.shape or pp.ndim != 1:
        raise ValueError(f"p and y must be 1-D arrays of one length, got {pp.shape} and {yy.shape}")
    if pp.size and not (np.all((pp >= 0) & (pp <= 1)) and np.all((yy == 0) | (yy == 1))):
        raise ValueError("p must hold probabilities in [0, 1] and y preferences in {0, 1}")
    return pp, yy


@dataclass(frozen=True)
class Reliability:
    """A reliability diagram: per bin, its edges, the pairs in it, their mean ``p`` and how often people agreed."""

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    count: NDArray[np.int64]
    mean_p: NDArray[np.float64]
    frequency: NDArray[np.float64]


def reliability(p: ArrayLike, y: ArrayLike, bins: int = 10) -> Reliability:
    """The reliability diagram of ``p`` against ``y`` in ``bins`` equal-width bins (the last one closed); empty bins
    have NaN means."""
    pp, yy = _pairs(p, y)
    edges = np.arange(bins + 1) / bins
    scaled = pp * bins
    nearest = np.round(scaled)
    on_edge = np.abs(scaled - nearest) <= EDGE_ATOL * bins
    which = np.clip(np.floor(np.where(on_edge, nearest, scaled)), 0, bins - 1).astype(np.int64)
    count = np.bincount(which, minlength=bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_p = np.bincount(which, weights=pp, minlength=bins) / count
        frequency = np.bincount(which, weights=yy, minlength=bins) / count
    return Reliability(edges[:-1], edges[1:], count.astype(np.int64), mean_p, frequency)


def expected_calibration_error(p: ArrayLike, y: ArrayLike, bins: int = 10) -> float:
    """``sum_b (n_b / N) |mean_p_b - freq_b|`` (NaN without pairs)."""
    pp, yy = _pairs(p, y)
    if not pp.size:
        return float("nan")
    r = reliability(pp, yy, bins)
    used = r.count > 0
    return float(np.sum(r.count[used] * np.abs(r.mean_p[used] - r.frequency[used])) / pp.size)


def brier_score(p: ArrayLike, y: ArrayLike) -> float:
    pp, yy = _pairs(p, y)
    return float(np.mean((pp - yy) ** 2)) if pp.size else float("nan")


def log_loss(p: ArrayLike, y: ArrayLike) -> float:
    pp, yy = _pairs(p, y)
    if not pp.size:
        return float("nan")
    q = np.clip(pp, EPS, 1 - EPS)
    return float(-np.mean(yy * np.log(q) + (1 - yy) * np.log1p(-q)))


def _logits(p: NDArray[np.float64]) -> NDArray[np.float64]:
    """``logit(p)`` with ``p`` kept ``EPS`` from 0 and 1, computed on the smaller of ``p`` and ``1 - p`` so that
    ``logit(1 - p) == -logit(p)`` exactly (``1 - p`` is exact for ``p >= 1/2``): a pair read the other way round
    gives the same temperature to the last bit."""
    low = np.maximum(np.minimum(p, 1.0 - p), EPS)
    z = np.log(low) - np.log1p(-low)
    return np.where(p > 0.5, -z, z)


def apply_temperature(p: ArrayLike, temperature: float) -> NDArray[np.float64]:
    """``sigmoid(logit(p) / T)`` (``p`` kept in ``[EPS, 1 - EPS]``)."""
    from scipy.special import expit

    if not (temperature > 0 and np.isfinite(temperature)):
        raise ValueError(f"a temperature must be a positive number, got {temperature!r}")
    return expit(_logits(np.asarray(p, dtype=np.float64)) / temperature)


def fit_temperature(p: ArrayLike, y: ArrayLike) -> float:
    """The ``T`` minimising the log loss of ``sigmoid(logit(p) / T)`` against ``y`` (NaN without pairs, or when every
    ``p`` is 1/2: nothing to scale); ``T_MIN`` or ``T_MAX`` where the minimum lies beyond them.

    The loss is convex in ``beta = 1 / T`` (a logistic regression's slope), so the minimum is the root of its
    derivative ``mean(s sigmoid(-beta s))`` with ``s = (2y - 1) logit(p)``, found by Brent's root finder to machine
    precision: a minimum found by comparing loss values is only located to about the square root of it, and would
    move with the order of the rows. The signed logits are summed in sorted order, so no row order moves it."""
    from scipy.optimize import brentq
    from scipy.special import expit

    pp, yy = _pairs(p, y)
    z = _logits(pp)
    if not pp.size or not np.any(z):
        return float("nan")
    signed = np.sort((2 * yy - 1) * z)

    def slope(beta: float) -> float:
        return float(np.mean(signed * expit(-beta * signed)))

    low, high = 1.0 / T_MAX, 1.0 / T_MIN
    if slope(low) <= 0:
        return T_MAX  # flatter than any temperature in range: no information
    if slope(high) >= 0:
        return T_MIN  # sharper than any: every verdict right
    beta = brentq(slope, low, high, xtol=1e-14, rtol=4 * np.finfo(float).eps, maxiter=500)
    return float(1.0 / beta)


#: How close (in log T) a fitted temperature must come to a bound of its search to be read as at the bound.
AT_BOUND = 1e-3


def temperature_at_bound(temperature: float) -> bool:
    """Whether a fitted temperature stopped at a bound of its search (``T_MIN`` or ``T_MAX``)."""
    if not np.isfinite(temperature):
        return False
    log_t = np.log(temperature)
    return bool(min(abs(log_t - np.log(T_MIN)), abs(log_t - np.log(T_MAX))) < AT_BOUND)


def temperature_reading(temperature: float, tolerance: float = 0.1) -> str:
    """What a fitted temperature means for a user of the judge's probabilities, in words."""
    if not np.isfinite(temperature):
        return "no temperature: no pair people scored apart, or every probability 1/2"
    if temperature_at_bound(temperature):
        if temperature > 1:
            return (
                f"the judge's probabilities carry no information about people's preferences: the temperature hit "
                f"its bound of {T_MAX:g}, which flattens every probability to 1/2"
            )
        return (
            f"the judge's verdicts agree with people on every pair: the temperature hit its bound of {T_MIN:g}, "
            "which pushes every probability to 0 or 1 (too few pairs to say how sure it should be)"
        )
    if temperature > 1 + tolerance:
        return (
            f"the judge is over-confident: dividing its log-odds by {temperature:.2f} pulls its probabilities "
            "towards 1/2"
        )
    if temperature < 1 - tolerance:
        return (
            f"the judge is under-confident: dividing its log-odds by {temperature:.2f} pushes its probabilities "
            "away from 1/2"
        )
    return f"the judge's probabilities are about as sure as people's preferences warrant (temperature {temperature:.2f})"


def cross_fit_temperature(
    p: ArrayLike,
    y: ArrayLike,
    groups: ArrayLike,
    folds: int = 5,
    seed: int = 0,
    known: ArrayLike | None = None,
    keys: ArrayLike | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Every pair calibrated with a temperature fitted on the other folds' pairs (module docstring): the calibrated
    ``p`` and the temperature each pair got. Folds are of groups (contexts), drawn seeded over the groups in sorted
    order (pass content keys, so that they do not move with names); a single group (a pool) is split by pairs, in the
    order of ``keys`` (one per pair, e.g. content keys; default their order). ``known``: the pairs with a preference
    (the others, ``y`` ignored, are calibrated and not fitted on; default all). Where the other folds identify no
    temperature the pair keeps its ``p`` (temperature NaN)."""
    pp = np.asarray(p, dtype=np.float64)
    mask = np.ones(pp.size, dtype=bool) if known is None else np.asarray(known, dtype=bool)
    yy = np.where(mask, np.asarray(y, dtype=np.float64), 0.0)
    pp, yy = _pairs(pp, yy)
    codes = np.unique(np.asarray(groups), return_inverse=True)[1].reshape(-1)
    if codes.shape != pp.shape:
        raise ValueError("groups must give one group per pair")
    if codes.max(initial=0) > 0:
        units = codes
    else:
        order = np.arange(pp.size) if keys is None else np.asarray(keys)
        if order.shape != pp.shape:
            raise ValueError("keys must give one key per pair")
        units = np.unique(order, return_inverse=True)[1].reshape(-1)
    rng = np.random.default_rng(seed)
    n_units = int(units.max(initial=-1)) + 1
    k = max(2, min(folds, n_units))
    fold_of_unit = rng.permutation(n_units) % k
    fold = fold_of_unit[units] if n_units else np.zeros(0, dtype=np.int64)
    calibrated = pp.copy()
    temperature = np.full(pp.size, np.nan)
    for f in range(k):
        held = fold == f
        if not held.any():
            continue
        fitted = ~held & mask
        t = fit_temperature(pp[fitted], yy[fitted])
        if np.isfinite(t):
            calibrated[held] = apply_temperature(pp[held], t)
            temperature[held] = t
    return calibrated, temperature
