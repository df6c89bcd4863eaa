"""Whether a judge's probabilities mean what they say: the calibration of P(i beats j) against people's
preferences, and a temperature fitted to them.

``p[k]`` is the judge's (debiased) probability that ``i[k]`` beats ``j[k]``; ``y[k]`` is 1 where people scored
``i[k]`` higher, 0 where they scored it lower (pairs people scored equal have no preference and are left out by the
caller).

- **Reliability** (Niculescu-Mizil & Caruana 2005; Guo et al. 2017, "On calibration of modern neural networks"):
  ``bins`` equal-width bins of ``p`` on [0, 1]; per bin, the pairs in it, their mean ``p`` and the share of them
  people preferred ``i`` in.
- **Expected calibration error** ``ECE = sum_b (n_b / N) |mean_p_b - freq_b|`` over those bins (Guo et al.);
  **Brier score** ``mean (p - y)^2``; **log loss** ``-mean (y log p + (1 - y) log (1 - p))`` with ``p`` kept in
  ``[EPS, 1 - EPS]``.
- **Temperature** (Guo et al. 2017; Platt scaling with one parameter): ``p_T = sigmoid(logit(p) / T)``, ``T > 0``
  minimising the log loss of ``p_T`` (bounded scalar search on ``log T``). ``T > 1``: the judge is over-confident;
  ``T < 1``: under-confident.
- **Cross-fitting**: the groups (contexts) are split into ``folds`` seeded folds; each fold's pairs are calibrated
  with the temperature fitted on the other folds, so no pair is judged by a temperature fitted on it. One group (a
  pool) is split by pairs instead.
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
]

# Probabilities are kept in [EPS, 1 - EPS] for their logit and log loss (a judge that says exactly 0 or 1).
EPS = 1e-9
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
    edges = np.linspace(0.0, 1.0, bins + 1)
    which = np.clip(np.searchsorted(edges, pp, side="right") - 1, 0, bins - 1)
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
    q = np.clip(p, EPS, 1 - EPS)
    return np.log(q) - np.log1p(-q)


def apply_temperature(p: ArrayLike, temperature: float) -> NDArray[np.float64]:
    """``sigmoid(logit(p) / T)`` (``p`` kept in ``[EPS, 1 - EPS]``)."""
    from scipy.special import expit

    if not (temperature > 0 and np.isfinite(temperature)):
        raise ValueError(f"a temperature must be a positive number, got {temperature!r}")
    return expit(_logits(np.asarray(p, dtype=np.float64)) / temperature)


def fit_temperature(p: ArrayLike, y: ArrayLike) -> float:
    """The ``T`` minimising the log loss of ``sigmoid(logit(p) / T)`` against ``y`` (NaN without pairs, or when
    people preferred one side in every pair: no temperature is identified)."""
    from scipy.optimize import minimize_scalar
    from scipy.special import log_expit

    pp, yy = _pairs(p, y)
    if not pp.size or yy.min() == yy.max():
        return float("nan")
    z = _logits(pp)
    sign = 2 * yy - 1

    def loss(log_t: float) -> float:
        return float(-np.mean(log_expit(sign * z / np.exp(log_t))))

    found = minimize_scalar(
        loss, bounds=(np.log(T_MIN), np.log(T_MAX)), method="bounded", options={"xatol": 1e-10}
    )
    return float(np.exp(found.x))


def cross_fit_temperature(
    p: ArrayLike,
    y: ArrayLike,
    groups: ArrayLike,
    folds: int = 5,
    seed: int = 0,
    known: ArrayLike | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Every pair calibrated with a temperature fitted on the other folds' pairs (module docstring): the calibrated
    ``p`` and the temperature each pair got. Folds are of groups (contexts), seeded; a single group is split by
    pairs. ``known``: the pairs with a preference (the others, ``y`` ignored, are calibrated and not fitted on;
    default all). Where the other folds identify no temperature the pair keeps its ``p`` (temperature NaN)."""
    pp = np.asarray(p, dtype=np.float64)
    mask = np.ones(pp.size, dtype=bool) if known is None else np.asarray(known, dtype=bool)
    yy = np.where(mask, np.asarray(y, dtype=np.float64), 0.0)
    pp, yy = _pairs(pp, yy)
    codes = np.unique(np.asarray(groups), return_inverse=True)[1].reshape(-1)
    if codes.shape != pp.shape:
        raise ValueError("groups must give one group per pair")
    rng = np.random.default_rng(seed)
    units = codes if codes.max(initial=0) > 0 else np.arange(pp.size)
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
