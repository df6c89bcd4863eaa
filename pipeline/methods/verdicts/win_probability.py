"""The one definition of p(A wins) from the label words' first-token log-probabilities.

p(A wins) = p(A) / (p(A) + p(B)): the first-token probability of the A label words against the B label words
(EACL eq. 5), with p(A) the sum over the A words (logsumexp of their log-probabilities). With a tie option
(Chen et al. 2023: "(C) both equally good"), its probability is split evenly between the two candidates:
p(A wins) = (p(A) + p(tie) / 2) / (p(A) + p(B) + p(tie)), and p(tie) / (p(A) + p(B) + p(tie)) is kept for the
report and for Davidson's tie model (:mod:`pipeline.methods.scorers.davidson`).
"""

from __future__ import annotations

import numpy as np


def side_logprobs(label_logprobs: np.ndarray, n_a: int, n_tie: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """log p(any A word) and log p(any B word) per row (logsumexp over each side's words)."""
    from scipy.special import logsumexp

    lp = np.asarray(label_logprobs, dtype=np.float64)
    if lp.size == 0:
        return np.zeros(0), np.zeros(0)
    end_b = lp.shape[1] - n_tie
    return logsumexp(lp[:, :n_a], axis=1), logsumexp(lp[:, n_a:end_b], axis=1)


def tie_logprob(label_logprobs: np.ndarray, n_tie: int) -> np.ndarray:
    """log p(any tie word) per row; -inf without tie words."""
    from scipy.special import logsumexp

    lp = np.asarray(label_logprobs, dtype=np.float64)
    if lp.size == 0:
        return np.zeros(0)
    if not n_tie:
        return np.full(lp.shape[0], -np.inf)
    return logsumexp(lp[:, lp.shape[1] - n_tie :], axis=1)


def _shares(
    logprob_a: np.ndarray, logprob_b: np.ndarray, logprob_tie: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """p(A), p(B), p(tie) renormalised over the label words (stable for tiny probabilities)."""
    a = np.asarray(logprob_a, dtype=np.float64)
    b = np.asarray(logprob_b, dtype=np.float64)
    t = np.full_like(a, -np.inf) if logprob_tie is None else np.asarray(logprob_tie, dtype=np.float64)
    top = np.maximum(np.maximum(a, b), t)
    ea, eb, et = np.exp(a - top), np.exp(b - top), np.exp(t - top)
    total = ea + eb + et
    return ea / total, eb / total, et / total


def p_a_wins(
    logprob_a: np.ndarray, logprob_b: np.ndarray, logprob_tie: np.ndarray | None = None
) -> np.ndarray:
    """p(A wins) = (p(A) + p(tie) / 2) / (p(A) + p(B) + p(tie)): p(A) / (p(A) + p(B)) without a tie option."""
    pa_, _, pt = _shares(logprob_a, logprob_b, logprob_tie)
    return pa_ + pt / 2.0


def p_tie(logprob_a: np.ndarray, logprob_b: np.ndarray, logprob_tie: np.ndarray | None = None) -> np.ndarray:
    """p(tie) / (p(A) + p(B) + p(tie)); 0 without a tie option."""
    return _shares(logprob_a, logprob_b, logprob_tie)[2]


def label_mass(
    logprob_a: np.ndarray, logprob_b: np.ndarray, logprob_tie: np.ndarray | None = None
) -> np.ndarray:
    """p(A) + p(B) (+ p(tie)): the probability the judge puts on the label words at all (low = it answers
    something else)."""
    mass = np.exp(np.asarray(logprob_a, dtype=np.float64)) + np.exp(np.asarray(logprob_b, dtype=np.float64))
    if logprob_tie is not None:
        mass = mass + np.exp(np.asarray(logprob_tie, dtype=np.float64))
    return mass
