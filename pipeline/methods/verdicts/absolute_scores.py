"""Absolute scores, one definition each: the first number of a generated text (prompt scoring, Chen's explicit
score), G-Eval's expected score, and the yes/no probability (Chen et al. 2023, 2.1).

A generation that does not parse (no number, a number out of range, a word such as "ten", nothing) is a
failure: counted, never scored as 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")


@dataclass(frozen=True)
class Parsed:
    value: float | None
    # Why there is no value: "empty", "no number", "out of range low-high".
    failure: str | None = None


def parse_score(text: str, low: float, high: float) -> Parsed:
    """The first number in a generated text, if it lies in [low, high] (decimals allowed); else a failure.

    Numbers written as words ("ten") are failures: counted and reported, never guessed.
    """
    if not text or not text.strip():
        return Parsed(None, "empty")
    match = _NUMBER.search(text)
    if match is None:
        return Parsed(None, "no number")
    value = float(match.group())
    if not math.isfinite(value) or not low <= value <= high:
        return Parsed(None, f"out of range {low:g}-{high:g}")
    return Parsed(value)


def expected_score(logprobs: np.ndarray, values: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """G-Eval's expected score per row, ``sum_s s p(s) / sum_s p(s)``, and the mass ``sum_s p(s)`` on the score
    tokens. ``logprobs``: (rows, words) first-token log-probabilities; ``values``: the score of each word."""
    lp = np.asarray(logprobs, dtype=np.float64).reshape(-1, len(values))
    v = np.asarray(values, dtype=np.float64)
    shifted = np.exp(lp - lp.max(axis=1, keepdims=True))  # stable for tiny probabilities
    score = (shifted * v).sum(axis=1) / shifted.sum(axis=1)
    return score, np.exp(lp).sum(axis=1)


def _rows(logprobs: np.ndarray) -> np.ndarray:
    """Log-probabilities as (rows, words); one row given as a flat array."""
    return np.atleast_2d(np.asarray(logprobs, dtype=np.float64))


def yes_no_mass(logprobs: np.ndarray, n_yes: int) -> tuple[np.ndarray, np.ndarray]:
    """p(any yes word) and p(any no word) per row: the sums of the exact first-token probabilities."""
    p = np.exp(_rows(logprobs))
    return p[:, :n_yes].sum(axis=1), p[:, n_yes:].sum(axis=1)


def yes_probability(logprobs: np.ndarray, n_yes: int) -> np.ndarray:
    """Chen et al.'s implicit score: p(yes) / (p(yes) + p(no)), renormalised over the yes and no words."""
    from scipy.special import logsumexp

    lp = _rows(logprobs)
    if lp.size == 0:
        return np.zeros(0)
    return 1.0 / (1.0 + np.exp(logsumexp(lp[:, n_yes:], axis=1) - logsumexp(lp[:, :n_yes], axis=1)))


def implicit_max(logprobs: np.ndarray, n_yes: int) -> np.ndarray:
    """Chen et al.'s ``max(p(yes), 1 - p(no))`` (unnormalised: the form used with top-k log-probabilities)."""
    p_yes, p_no = yes_no_mass(logprobs, n_yes)
    return np.maximum(p_yes, 1.0 - p_no)


def sample_scores(
    texts: Sequence[str], low: float, high: float
) -> tuple[float | None, list[float | None], list[str]]:
    """(mean of the parsed samples or None when none parsed, each sample's value, each failure's reason)."""
    parsed = [parse_score(t, low, high) for t in texts]
    values = [p.value for p in parsed]
    good = [v for v in values if v is not None]
    return (float(np.mean(good)) if good else None), values, [p.failure for p in parsed if p.failure]
