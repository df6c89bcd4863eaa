"""Seeded simulation of comparison data with known answers (for tests, benchmarks and sanity checks).

Scores follow a Bradley-Terry model: the judge's logit for "slot A beats slot B" is

    ``scale * (s_A - s_B) + bias + noise * eps,    eps ~ N(0, 1) independently per judgement``

and it reports ``p = sigmoid(logit)``. ``bias`` is the positional (slot-A) logit shift; ``noise`` makes the
judge imperfect: with ``noise = 0`` its decisions ``p > 0.5`` are always right.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "bias_for_prior",
    "judge_accuracy",
    "noise_for_accuracy",
    "simulate_context_set",
    "simulate_judge",
    "simulate_outcomes",
]


def _pairs(pairs: ArrayLike, n: int) -> NDArray[np.int64]:
    arr = np.asarray(pairs, dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"pairs must have shape (K, 2), got {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        raise ValueError(f"pairs index items outside range(n_items={n})")
    return arr


def simulate_judge(
    true_scores: ArrayLike,
    pairs: ArrayLike,
    rng: np.random.Generator,
    *,
    scale: float = 1.0,
    bias: float = 0.0,
    noise: float = 0.0,
) -> NDArray[np.float64]:
    """Judge probabilities that ``pairs[:, 0]`` (slot A) beats ``pairs[:, 1]`` (module docstring)."""
    from scipy.special import expit

    s = np.asarray(true_scores, dtype=np.float64)
    pr = _pairs(pairs, s.shape[0])
    logit = scale * (s[pr[:, 0]] - s[pr[:, 1]]) + bias
    if noise:
        logit = logit + noise * rng.standard_normal(pr.shape[0])
    return expit(logit)


def simulate_outcomes(
    true_scores: ArrayLike,
    pairs: ArrayLike,
    rng: np.random.Generator,
    *,
    scale: float = 1.0,
    bias: float = 0.0,
) -> NDArray[np.float64]:
    """Hard outcomes (1.0 if slot A wins) drawn from the Bradley-Terry model ``sigmoid(scale (s_A - s_B) + bias)``."""
    from scipy.special import expit

    s = np.asarray(true_scores, dtype=np.float64)
    pr = _pairs(pairs, s.shape[0])
    prob = expit(scale * (s[pr[:, 0]] - s[pr[:, 1]]) + bias)
    return (rng.random(pr.shape[0]) < prob).astype(np.float64)


def judge_accuracy(true_scores: ArrayLike, pairs: ArrayLike, p: ArrayLike) -> float:
    """Fraction of comparisons with different true scores whose decision ``p > 0.5`` is right (ties: 1/2)."""
    s = np.asarray(true_scores, dtype=np.float64)
    pr = _pairs(pairs, s.shape[0])
    pp = np.asarray(p, dtype=np.float64)
    truth = np.sign(s[pr[:, 0]] - s[pr[:, 1]])
    said = np.sign(pp - 0.5)
    valid = truth != 0
    return float(np.where(said == 0, 0.5, (said == truth).astype(np.float64))[valid].mean())


def noise_for_accuracy(accuracy: float, *, scale: float = 1.0, score_sd: float = 1.0) -> float:
    """Judge noise giving the expected per-judgement accuracy when true scores are i.i.d. N(0, score_sd^2).

    The score difference ``x = scale (s_A - s_B)`` is N(0, 2 scale^2 score_sd^2) and the judge's logit
    (no bias) is ``x + noise * eps``; for jointly Gaussian zero-mean variables
    ``P(sign agrees) = 1/2 + arcsin(rho) / pi`` with ``rho = sd(x) / sqrt(var(x) + noise^2)``.
    """
    if not 0.5 < accuracy < 1.0:
        raise ValueError(f"accuracy must be in (0.5, 1), got {accuracy!r}")
    rho = math.sin(math.pi * (accuracy - 0.5))
    sd_x = math.sqrt(2.0) * scale * score_sd
    return sd_x * math.sqrt(1.0 / rho**2 - 1.0)


def bias_for_prior(prior_a: float) -> float:
    """Slot-A logit shift whose judge, on equally good candidates, says A with probability ``prior_a``.

    ``logit(prior_a)``; with varied candidates and both orderings P(A) is close to (slightly below, the
    sigmoid being concave above 0.5) ``prior_a``.
    """
    if not 0.0 < prior_a < 1.0:
        raise ValueError(f"prior_a must be in (0, 1), got {prior_a!r}")
    return math.log(prior_a / (1.0 - prior_a))


def simulate_context_set(
    n_contexts: int,
    n_items: int,
    rng: np.random.Generator,
    *,
    scale: float = 1.0,
    bias: float = 0.0,
    noise: float = 0.0,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """A SummEval-like set: ``n_contexts`` contexts of ``n_items`` candidates, every ordered pair judged.

    Returns
    -------
    true_scores : ndarray, shape (n_contexts, n_items)
        i.i.d. N(0, 1).
    probs : ndarray, shape (n_contexts, n_items, n_items)
        ``probs[c, a, b]`` = judge probability that ``a`` (slot A) beats ``b``; NaN on the diagonal.
    """
    from scipy.special import expit

    s = rng.standard_normal((n_contexts, n_items))
    logit = scale * (s[:, :, None] - s[:, None, :]) + bias
    if noise:
        logit = logit + noise * rng.standard_normal(logit.shape)
    probs = expit(logit)
    idx = np.arange(n_items)
    probs[:, idx, idx] = np.nan
    return s, probs
