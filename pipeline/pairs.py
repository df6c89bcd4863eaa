"""Stages 1 and 2: shard the contexts, then generate the comparison prompts of each shard.

A context is never split across shards; shards are balanced by the number of prompts they will produce.
Pair generation is seeded per context (and attribute), so the same config gives the same pairs whatever the
sharding. Prompts are emitted in chunks, ordered by (template, slot A, slot B, attribute) within a context, so
that prompts sharing a prefix (context, then slot-A candidate) are adjacent for the engine's prefix cache.
"""

from __future__ import annotations

import hashlib
import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pipeline.config import PairsConfig, TemplateConfig
from pipeline.methods.selection import ORDERED_STRATEGIES, UNORDERED_STRATEGIES, select_pairs
from pipeline.prompts import PromptWords, render_message
from pipeline.schemas import PAIRS, SHARD, check_schema

# Strategies whose pairs are judged in both orderings (ordered selections are for one-ordering runs).
BOTH_ORDERINGS = frozenset(UNORDERED_STRATEGIES | {"all_ordered"})
SAMPLING = frozenset({"balanced_random", "greedy_optimal", "random", "no_repeat", "symmetric"})


@dataclass(frozen=True)
class PairPlan:
    """What the pair stage needs (picklable; built on the driver)."""

    pairs: PairsConfig
    attributes: tuple[str, ...]
    templates: tuple[TemplateConfig, ...]
    words: PromptWords
    chunk_rows: int = 4096


def check_strategy(cfg: PairsConfig) -> None:
    known = UNORDERED_STRATEGIES | ORDERED_STRATEGIES
    if cfg.strategy not in known:
        raise ValueError(f"config pairs.strategy={cfg.strategy!r} is not one of {sorted(known)}")
    if cfg.orderings == "both" and cfg.strategy not in BOTH_ORDERINGS:
        raise ValueError(
            f"config pairs.strategy={cfg.strategy!r} selects ordered comparisons; with pairs.orderings=both use "
            f"one of {sorted(BOTH_ORDERINGS)}, or set pairs.orderings=one"
        )
    if cfg.strategy in SAMPLING and cfg.k is None and cfg.fraction is None:
        raise ValueError(f"config pairs.strategy={cfg.strategy!r} needs pairs.k or pairs.fraction")


def distinct_pairs(cfg: PairsConfig, n: int) -> int:
    """Pairs a context of n candidates has: unordered for unordered strategies, ordered otherwise."""
    return n * (n - 1) // 2 if cfg.strategy in UNORDERED_STRATEGIES else n * (n - 1)


def requested_k(cfg: PairsConfig, n: int) -> int | None:
    """The comparisons per context the config asks for (``k`` wins over ``fraction``), before any adjustment."""
    if cfg.strategy not in SAMPLING:
        return None
    return cfg.k if cfg.k is not None else round(cfg.fraction * distinct_pairs(cfg, n))


def resolve_k(cfg: PairsConfig, n: int) -> int | None:
    """Comparisons per context for sampling strategies (unordered pairs, or ordered ones for ordered strategies).

    The requested k is raised to the strategy's minimum (every candidate in a pair, greedy's starting chain)
    and capped at the number of distinct pairs; ``k_adjustments`` reports where that happened.
    """
    k = requested_k(cfg, n)
    if k is None:
        return None
    total = distinct_pairs(cfg, n)
    if cfg.strategy == "balanced_random":
        # every candidate in at least one pair needs ceil(n/2) pairs
        k = max(k, math.ceil(n / 2))
    elif cfg.strategy == "greedy_optimal":
        # greedy-optimal starts from a chain of n-1 pairs
        k = max(k, n - 1)
    elif cfg.strategy == "symmetric":
        # rows come in (a, b), (b, a) couples
        k = max(2, k - k % 2)
    return min(k, total)


def _stable_int(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def context_rng(seed: int, context_id: str, attribute: str | None) -> np.random.Generator:
    """A generator seeded by (seed, context, attribute): independent of sharding and of process."""
    key = [seed, _stable_int(context_id)]
    if attribute is not None:
        key.append(_stable_int(attribute))
    return np.random.default_rng(key)


def oriented_pairs(cfg: PairsConfig, n: int, rng: np.random.Generator) -> np.ndarray:
    """(slot A, slot B) rows to judge for one context and attribute."""
    strategy = "all_pairs" if cfg.strategy == "all_ordered" and cfg.orderings == "both" else cfg.strategy
    selected = np.asarray(select_pairs(strategy, n, resolve_k(cfg, n), rng), dtype=np.int64).reshape(-1, 2)
    if cfg.orderings == "both":
        return np.concatenate([selected, selected[:, ::-1]])
    if strategy in UNORDERED_STRATEGIES:
        # one ordering of an unordered pair: a seeded coin decides which candidate takes slot A
        flip = rng.random(len(selected)) < 0.5
        selected = np.where(flip[:, None], selected[:, ::-1], selected)
    return selected


def k_adjustments(cfg: PairsConfig, sizes: list[int]) -> dict[str, int]:
    """How many contexts had their requested k raised to the strategy's minimum, or lowered (to the number of
    distinct pairs, or to an even number for ``symmetric``)."""
    raised = lowered = 0
    for n in sizes:
        want, used = requested_k(cfg, n), resolve_k(cfg, n)
        if want is None or used is None:
            continue
        raised += used > want
        lowered += used < want
    return {"raised": raised, "lowered": lowered}


def prompts_per_context(cfg: PairsConfig, n: int, n_attributes: int, n_templates: int) -> int:
    """Exact number of prompts a context of n candidates produces (before skipping judged ones)."""
    strategy = "all_pairs" if cfg.strategy == "all_ordered" and cfg.orderings == "both" else cfg.strategy
    if strategy == "all_pairs":
        unordered = n * (n - 1) // 2
        per = 2 * unordered if cfg.orderings == "both" else unordered
    elif strategy == "all_ordered":
        per = n * (n - 1)
    else:
        k = resolve_k(cfg, n)
        assert k is not None
        per = 2 * k if cfg.orderings == "both" else k
    return per * n_attributes * n_templates


def done_key(attribute: str, template_id: str, cand_a: str, cand_b: str) -> str:
    return f"{attribute}\t{template_id}\t{cand_a}\t{cand_b}"


def shard_contexts(weights: list[int], max_shards: int) -> list[list[int]]:
    """Split contexts (by index) into at most ``max_shards`` shards of balanced total weight (LPT greedy).

    A context is never split; shard order and the order of contexts inside a shard follow the input order.
    """
    n_shards = max(1, min(max_shards, len(weights)))
    heap = [(0, s) for s in range(n_shards)]
    members: list[list[int]] = [[] for _ in range(n_shards)]
    for index in sorted(range(len(weights)), key=lambda c: -weights[c]):
        load, s = heapq.heappop(heap)
        members[s].append(index)
        heapq.heappush(heap, (load + weights[index], s))
    return [sorted(m) for m in members if m]


def generate_pairs(shard: pa.Table, plan: PairPlan) -> Iterator[pa.Table]:
    """The pair stage: yield PAIRS chunks for every context of a SHARD table, skipping judged prompts."""
    shard = check_schema(shard, SHARD, "pair stage input")
    cfg = plan.pairs
    rows: dict[str, list] = {name: [] for name in PAIRS.names}
    for context_id, context, cand_ids, texts, done in zip(
        *(shard.column(name).to_pylist() for name in SHARD.names), strict=True
    ):
        n = len(cand_ids)
        done_set = set(done)
        per_attribute = []
        shared = None
        for attribute in plan.attributes:
            if cfg.same_pairs_for_all_attributes:
                if shared is None:
                    shared = oriented_pairs(cfg, n, context_rng(cfg.seed, context_id, None))
                per_attribute.append(shared)
            else:
                per_attribute.append(oriented_pairs(cfg, n, context_rng(cfg.seed, context_id, attribute)))
        a = np.concatenate(per_attribute)
        attr_index = np.repeat(np.arange(len(plan.attributes)), [len(p) for p in per_attribute])
        order = np.lexsort((attr_index, a[:, 1], a[:, 0]))
        for template in plan.templates:
            for row in order:
                ia, ib = int(a[row, 0]), int(a[row, 1])
                attribute = plan.attributes[attr_index[row]]
                if done_set and done_key(attribute, template.id, cand_ids[ia], cand_ids[ib]) in done_set:
                    continue
                rows["context_id"].append(context_id)
                rows["attribute"].append(attribute)
                rows["template_id"].append(template.id)
                rows["cand_a"].append(cand_ids[ia])
                rows["cand_b"].append(cand_ids[ib])
                rows["message"].append(
                    render_message(template, plan.words, attribute, context, texts[ia], texts[ib])
                )
                if len(rows["message"]) >= plan.chunk_rows:
                    yield pa.table(rows, schema=PAIRS)
                    rows = {name: [] for name in PAIRS.names}
    if rows["message"]:
        yield pa.table(rows, schema=PAIRS)


def build_shards(
    candidates: pa.Table, plan: PairPlan, max_shards: int, done: dict[str, list[str]] | None = None
) -> tuple[list[pa.Table], int]:
    """Group the CANDIDATES table by context into balanced SHARD tables.

    Returns the shards and the number of prompts still to judge (all prompts minus those in ``done``,
    a mapping context id -> judged keys from :func:`done_key`).
    """
    done = done or {}
    ids = candidates.column("context_id").to_pylist()
    contexts = candidates.column("context").to_pylist()
    cand_ids = candidates.column("candidate_id").to_pylist()
    texts = candidates.column("text").to_pylist()
    grouped: dict[str, tuple[str, list[str], list[str]]] = {}
    for cid, context, cand, text in zip(ids, contexts, cand_ids, texts, strict=True):
        entry = grouped.setdefault(cid, (context, [], []))
        entry[1].append(cand)
        entry[2].append(text)
    order = list(grouped)
    weights = []
    remaining = 0
    for cid in order:
        total = prompts_per_context(
            plan.pairs, len(grouped[cid][1]), len(plan.attributes), len(plan.templates)
        )
        left = total - len(done.get(cid, ()))
        if left < 0:
            raise ValueError(
                f"context {cid!r}: {len(done[cid])} judged comparisons on disk but the plan has only {total}; "
                "the output folder belongs to a different configuration"
            )
        weights.append(left)
        remaining += left
    shards = []
    for members in shard_contexts(weights, max_shards):
        members = [m for m in members if weights[m] > 0]
        if not members:
            continue
        shards.append(
            pa.table(
                {
                    "context_id": [order[m] for m in members],
                    "context": [grouped[order[m]][0] for m in members],
                    "candidate_ids": [grouped[order[m]][1] for m in members],
                    "texts": [grouped[order[m]][2] for m in members],
                    "done": [done.get(order[m], []) for m in members],
                },
                schema=SHARD,
            )
        )
    return shards, remaining
