"""Label words: the token id of each (each must be one token for the judge's tokenizer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pipeline.contracts.errors import ConfigError


class LabelError(ConfigError):
    """A label word is not a single token for the judge's tokenizer (or is listed for both sides)."""


class Encoder(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> Any: ...


@dataclass(frozen=True)
class Labels:
    words: tuple[str, ...]
    token_ids: tuple[int, ...]
    # The first n_a words are the A labels, the last n_tie the tie labels, the others the B labels.
    n_a: int
    n_tie: int = 0


def encode_words(tokenizer: Encoder, words: tuple[str, ...] | list[str]) -> list[list[int]]:
    """The token ids of each word on its own (no special tokens): one id each for a usable label word."""
    return [[int(t) for t in tokenizer.encode(word, add_special_tokens=False)] for word in words]


def resolve_labels(
    tokenizer: Encoder,
    words_a: list[str],
    words_b: list[str],
    model: str,
    words_tie: list[str] | tuple[str, ...] = (),
) -> Labels:
    """Token id of each label word; raise LabelError naming the word and the model if one is not a single token."""
    words = tuple(words_a) + tuple(words_b) + tuple(words_tie)
    ids = []
    for word, encoded in zip(words, encode_words(tokenizer, words), strict=True):
        if len(encoded) != 1:
            raise LabelError(
                f"label word {word!r} is {len(encoded)} tokens {encoded} for judge model {model}; each label "
                "word must be exactly one token: change prompt.label_words_a / label_words_b / label_words_tie"
            )
        ids.append(encoded[0])
    if len(set(ids)) != len(ids):
        raise LabelError(f"label words {list(words)} map to repeated token ids {ids} for judge model {model}")
    return Labels(words=words, token_ids=tuple(ids), n_a=len(words_a), n_tie=len(tuple(words_tie)))
