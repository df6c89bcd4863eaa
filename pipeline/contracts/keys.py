"""The identity of a judged prompt, defined once: its key columns, the modes of the prompt stream, the stable hash,
and the content keys that order and seed everything drawn at random.

Content keys: a candidate's key is the stable hash of its text, a context's the stable hash of its text and its
candidates' keys (in sorted order), a pair's the hash of its two candidates' keys (in sorted order). Whatever is drawn
at random per context or per unit (the pairs of a partial design, the adaptive rounds, the bootstrap's units, the
folds of cross-fitting, the review's sample) is ordered and seeded by these keys, never by ids, names or the order of
rows: renaming a context, a candidate or a model, or shuffling the input, draws the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

# The identity of one judged prompt: mode "compare" for a pair (cand_a in slot A, cand_b in slot B), an absolute
# mode for one candidate (cand_a, with cand_b empty).
PROMPT_KEY = ("context_id", "mode", "attribute", "template_id", "cand_a", "cand_b")


# The mode of comparative prompts in the prompt stream (``PROMPTS.mode``).
COMPARE = "compare"


GENERATE = "generate"


# A checklist item's prompt (absolute mode checklist, TICK) is known by its template's id and the item's number
# from 1: ``<template>#<k>``; what the engine reads is its template's.
ITEM = "#"


def item_template(template_id: str, k: int) -> str:
    """The template id of a checklist template's prompt for item ``k`` (from 1)."""
    return f"{template_id}{ITEM}{k}"


def base_template(template_id: str) -> str:
    """The template a prompt's template id belongs to (itself, or a checklist item's template)."""
    return template_id.partition(ITEM)[0]


# A judged prompt of a context as CONTEXTS.done holds it (schemas.DONE).
DONE_KEY = ("mode", "attribute", "template_id", "cand_a", "cand_b")

# A row of the judgments table (schemas.JUDGMENTS): one ordering of one pair, by one judge.
JUDGMENT_KEY = ("context_id", "attribute", "template_id", "cand_a", "cand_b", "judge")


def stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def content_key(text: str) -> int:
    """A candidate's content key: the stable hash of its text."""
    return stable_hash(text)


def context_key(text: str, candidate_texts: Iterable[str]) -> int:
    """A context's content key: its text and its candidates' keys, in sorted order (module docstring)."""
    keys = sorted(content_key(t) for t in candidate_texts)
    return stable_hash("\x1f".join([text, *map(str, keys)]))


def pair_key(key_i: int, key_j: int) -> int:
    """An unordered pair's content key from its two candidates' keys (the same whichever is called i)."""
    lo, hi = sorted((key_i, key_j))
    return stable_hash(f"{lo}\x1f{hi}")
