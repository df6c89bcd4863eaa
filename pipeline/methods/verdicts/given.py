"""Verdicts given elsewhere, read as the label words' first-token log-probabilities that the rest of the product
reads (:mod:`pipeline.methods.verdicts.win_probability`): a probability that the candidate shown first wins, or a
reward model's score for each candidate.

- A probability ``p`` that the first candidate wins puts ``p`` on the A words and ``1 - p`` on the B words (each
  side's mass shared evenly among its words, so that a side's log-sum-exp is ``log p``), nothing on a tie option;
  then p(A wins) is ``p`` again.
- A reward model's scores ``s_1, s_2`` (the first candidate's, the second's) are read as a Bradley-Terry model
  reads them: ``P(first wins) = sigmoid(s_1 - s_2)``, computed in log space (a difference of a thousand is still a
  finite log-probability on the losing side).

A verdict (first, second, tie, or none) is one sampled verdict: :mod:`pipeline.methods.verdicts.sampled`.
"""

from __future__ import annotations

import math

# The log-probability given to what has none (a tie option beside a probability; a side at probability 0): far below
# any answer, yet finite, so that every table stays finite.
FLOOR = math.log(1e-300)


def log_sigmoid(x: float) -> float:
    """``log(1 / (1 + exp(-x)))``, stable for any finite ``x``."""
    if x >= 0:
        return -math.log1p(math.exp(-x))
    return x - math.log1p(math.exp(x))


def side_logprobs(log_first: float, log_second: float, n_a: int, n_b: int, n_tie: int) -> list[float]:
    """Label-word log-probabilities (A words, B words, tie words, in the labels' order) with ``log_first`` on the A
    side and ``log_second`` on the B side, each shared evenly among its words; the tie words at :data:`FLOOR`."""
    a = max(log_first, FLOOR) - math.log(n_a)
    b = max(log_second, FLOOR) - math.log(n_b)
    return [a] * n_a + [b] * n_b + [FLOOR] * n_tie


def probability_logprobs(p_first: float, n_a: int, n_b: int, n_tie: int = 0) -> list[float]:
    """The label words' log-probabilities of a judge that gives the first candidate probability ``p_first``."""
    first = math.log(p_first) if p_first > 0 else FLOOR
    second = math.log1p(-p_first) if p_first < 1 else FLOOR
    return side_logprobs(first, second, n_a, n_b, n_tie)


def score_logprobs(s_first: float, s_second: float, n_a: int, n_b: int, n_tie: int = 0) -> list[float]:
    """The label words' log-probabilities of a reward model that scores the first candidate ``s_first`` and the
    second ``s_second``: ``P(first) = sigmoid(s_first - s_second)`` (module docstring)."""
    d = s_first - s_second
    return side_logprobs(log_sigmoid(d), log_sigmoid(-d), n_a, n_b, n_tie)
