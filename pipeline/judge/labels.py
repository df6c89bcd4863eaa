"""Label words: their token ids (each must be one token), and the one definition of p(A wins).

p(A wins) = p(A) / (p(A) + p(B)): the first-token probability of the A label words against the B label words
(EACL eq. 5), with p(A) the sum over the A words (logsumexp of their log-probabilities). The judge stage
computes it for every prompt; the reduce, the benchmark and the tests read it from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from pipeline.errors import ConfigError


class LabelError(ConfigError):
    """A label word is not a single token for the judge's tokenizer (or is listed for both sides)."""


class Encoder(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> Any: ...


@dataclass(frozen=True)
class Labels:
    words: tuple[str, ...]
    token_ids: tuple[int, ...]
    # The first n_a words are the A labels, the rest the B labels.
    n_a: int


def resolve_labels(tokenizer: Encoder, words_a: list[str], words_b: list[str], model: str) -> Labels:
    """Token id of each label word; raise LabelError naming the word and the model if one is not a single token."""
    words = tuple(words_a) + tuple(words_b)
    ids = []
    for word in words:
        encoded = list(tokenizer.encode(word, add_special_tokens=False))
        if len(encoded) != 1:
            raise LabelError(
                f"label word {word!r} is {len(encoded)} tokens {encoded} for judge model {model}; each label "
                "word must be exactly one token: change prompt.label_words_a / prompt.label_words_b"
            )
        ids.append(int(encoded[0]))
    if len(set(ids)) != len(ids):
        raise LabelError(f"label words {list(words)} map to repeated token ids {ids} for judge model {model}")
    return Labels(words=words, token_ids=tuple(ids), n_a=len(words_a))


def side_logprobs(label_logprobs: np.ndarray, n_a: int) -> tuple[np.ndarray, np.ndarray]:
    """log p(any A word) and log p(any B word) per row (logsumexp over each side's words)."""
    from scipy.special import logsumexp

    lp = np.asarray(label_logprobs, dtype=np.float64)
    if lp.size == 0:
        return np.zeros(0), np.zeros(0)
    return logsumexp(lp[:, :n_a], axis=1), logsumexp(lp[:, n_a:], axis=1)


def p_a_wins(logprob_a: np.ndarray, logprob_b: np.ndarray) -> np.ndarray:
    """p(A wins) = p(A) / (p(A) + p(B)), renormalised over the label words; stable for tiny probabilities."""
    return 1.0 / (
        1.0 + np.exp(np.asarray(logprob_b, dtype=np.float64) - np.asarray(logprob_a, dtype=np.float64))
    )


def label_mass(logprob_a: np.ndarray, logprob_b: np.ndarray) -> np.ndarray:
    """p(A) + p(B): the probability the judge puts on the label words at all (low = it answers something else)."""
    return np.exp(np.asarray(logprob_a, dtype=np.float64)) + np.exp(np.asarray(logprob_b, dtype=np.float64))
