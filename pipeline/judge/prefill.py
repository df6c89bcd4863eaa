"""The work a run's prompts give the engine: the tokens it computes for them (its prefill) with its prefix cache.

A judge's prompts share long prefixes (the instructions, then a context's article, then candidate A), and vLLM
computes only what its prefix cache does not hold: each prompt's tokens past the longest prefix it shares with a
prompt computed before it, that prefix counted in whole cache blocks (``block`` tokens: 128 for vLLM's CPU engine,
16 on a GPU) and never the whole prompt (the last token is always computed). Two runs of the same judge may
compute very different tokens per prompt (SummEval's first article: 696 tokens a prompt, 86.5% from the cache; nine
articles: 81.8%), so a judging rate measured on one set of prompts is carried over to another per computed token
(:mod:`pipeline.judge.engine_mode`), not per prompt.

The count is made with the judge's own tokenizer on a sample of whole contexts, assuming a cache
that keeps every block of the run (the judge judges prompts sharing a prefix together, so what a prompt shares is
computed shortly before it)."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any


def shared_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the longest common prefix of two token sequences."""
    n = min(len(a), len(b))
    k = 0
    while k < n and a[k] == b[k]:
        k += 1
    return k


def computed_tokens(prompts: Sequence[Sequence[int]], block: int) -> list[int]:
    """The tokens the engine computes for each prompt, judged in this order from an empty prefix cache that keeps
    everything: its length less the longest prefix it shares with any earlier prompt (the longest among all earlier
    prompts is with a neighbour in sorted order), cut down to whole blocks of ``block`` tokens and to at most its
    length less one."""
    if block < 1:
        raise ValueError(f"a prefix cache block holds at least one token (given {block})")
    seen: list[tuple[int, ...]] = []
    computed = []
    for tokens in prompts:
        key = tuple(tokens)
        at = bisect.bisect_left(seen, key)
        longest = max(
            (shared_prefix(key, seen[k]) for k in (at - 1, at) if 0 <= k < len(seen)),
            default=0,
        )
        cached = (min(longest, len(key) - 1) // block) * block if key else 0
        computed.append(len(key) - cached)
        seen.insert(at, key)
    return computed


def per_prompt(ids: Sequence[Sequence[int]], block: int) -> float | None:
    """The mean tokens a prompt of ``ids`` (token ids, judged in this order) makes the engine compute (None: no
    prompts)."""
    if not ids:
        return None
    return sum(computed_tokens(ids, block)) / len(ids)


def work_of(spec: Any, frame: Any, prompts: Callable[[], Sequence[str]]) -> Callable[[int], float | None]:
    """The tokens per prompt the engine computes for the prompts ``prompts()`` makes (a sample of the run's, in
    judging order, :func:`pipeline.prompts.pairs.sample_prompts`) with a prefix cache of a given block: made and
    tokenized as the engine does (``frame.encode`` with the judge's tokenizer) once, when first asked (a run whose
    record holds no tokens makes none); None where the judge has no exact tokenizer here or there are no prompts."""
    ids: list[list[int]] | None = None

    def work(block: int) -> float | None:
        nonlocal ids
        if ids is None:
            from pipeline.judge.tokenizers import is_exact, load_tokenizer

            tokenizer = load_tokenizer(spec)
            ids = frame.encode(tokenizer, list(prompts())) if is_exact(tokenizer) else []
        return per_prompt(ids, block)

    return work
