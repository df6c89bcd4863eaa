"""Sharding the contexts, and generating the prompts of each shard: comparisons, then absolute ratings.

A context is never split across shards; shards are balanced by the number of prompts they will produce.
Pair generation is seeded per context (and attribute), so the same config gives the same pairs whatever the
sharding. Prompts are emitted in chunks, ordered within a context by (template, slot A, slot B, attribute) for
comparisons and then by (template, candidate, attribute) for the absolute modes, so that prompts sharing a
prefix (the context, then the slot-A or rated candidate) are adjacent for the engine's prefix cache.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import pyarrow as pa

from pipeline.config.assessment import PairsConfig
from pipeline.config.enums import SAMPLING, Orderings, Strategy
from pipeline.contracts.errors import ConfigError
from pipeline.contracts.keys import COMPARE, DONE_KEY, context_key, stable_hash
from pipeline.contracts.schemas import CONTEXTS, PROMPTS, check_schema
from pipeline.data.contexts import Context
from pipeline.methods.adaptive.selection import UNORDERED_STRATEGIES, select_pairs
from pipeline.prompts.plan import PromptPlan


def _effective_strategy(cfg: PairsConfig) -> str:
    """all_ordered with both orderings is all_pairs (each unordered pair judged both ways)."""
    if cfg.strategy == Strategy.all_ordered and cfg.orderings == Orderings.both:
        return Strategy.all_pairs.value
    return str(cfg.strategy)


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
    if cfg.strategy == Strategy.balanced_random:
        # every candidate in at least one pair needs ceil(n/2) pairs
        k = max(k, math.ceil(n / 2))
    elif cfg.strategy == Strategy.greedy_optimal:
        # greedy-optimal starts from a chain of n-1 pairs
        k = max(k, n - 1)
    elif cfg.strategy == Strategy.symmetric:
        # rows come in (a, b), (b, a) couples
        k = max(2, k - k % 2)
    return min(k, total)


def context_rng(seed: int, context: int, attribute: str | None) -> np.random.Generator:
    """A generator seeded by (seed, the context's content key, attribute): independent of sharding, of process, of
    the context's id and of the input's order (:mod:`pipeline.contracts.keys`)."""
    key = [seed, context]
    if attribute is not None:
        key.append(stable_hash(attribute))
    return np.random.default_rng(key)


def oriented_pairs(cfg: PairsConfig, n: int, rng: np.random.Generator) -> np.ndarray:
    """(slot A, slot B) rows to judge for one context and attribute."""
    strategy = _effective_strategy(cfg)
    selected = np.asarray(select_pairs(strategy, n, resolve_k(cfg, n), rng), dtype=np.int64).reshape(-1, 2)
    if cfg.orderings == Orderings.both:
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


def prompts_per_context(
    cfg: PairsConfig, n: int, n_attributes: int, n_templates: int, n_absolute: int = 0
) -> int:
    """Exact number of prompts a context of n candidates produces (before skipping judged ones): its comparisons
    for ``n_templates`` comparative templates and every attribute, and ``n_absolute`` absolute prompts per
    candidate (:meth:`pipeline.prompts.plan.PromptPlan.rated_per_candidate` of its checklist's items)."""
    rated = n * n_absolute
    if not n_templates:
        return rated
    strategy = _effective_strategy(cfg)
    if strategy == Strategy.all_pairs:
        unordered = n * (n - 1) // 2
        per = 2 * unordered if cfg.orderings == Orderings.both else unordered
    elif strategy == Strategy.all_ordered:
        per = n * (n - 1)
    else:
        k = resolve_k(cfg, n)
        assert k is not None
        per = 2 * k if cfg.orderings == Orderings.both else k
    return per * n_attributes * n_templates + rated


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


def build_contexts(
    contexts: list[Context],
    cfg: PairsConfig,
    n_attributes: int,
    n_templates: int,
    max_shards: int,
    judged: pa.Table | None = None,
    n_absolute: Callable[[int], int] = lambda items: 0,
) -> pa.Table:
    """The CONTEXTS table: every context (:func:`pipeline.data.contexts.group_by_context`) with prompts left to
    judge, its candidates nested, its shard and the prompts already judged (``judged``: JUDGED_KEYS rows from the
    run folder, skipped by the pair stage). ``n_absolute``: the absolute prompts per candidate of a context whose
    checklist has so many items (:meth:`pipeline.prompts.plan.PromptPlan.rated_per_candidate`)."""
    done: dict[str, list[dict[str, str]]] = {}
    if judged is not None and judged.num_rows:
        for row in judged.to_pylist():
            done.setdefault(row.pop("context_id"), []).append(row)
    known = {c.context_id for c in contexts}
    strangers = sorted(set(done) - known)
    if strangers:
        raise ConfigError(
            f"paths.run_dir holds judgments of context(s) {strangers[:5]} that are not in the input; "
            "it belongs to a different input: use a new paths.run_dir"
        )
    weights = []
    for ctx in contexts:
        total = prompts_per_context(cfg, ctx.size, n_attributes, n_templates, n_absolute(len(ctx.checklist)))
        left = total - len(done.get(ctx.context_id, ()))
        if left < 0:
            raise ConfigError(
                f"context {ctx.context_id!r}: paths.run_dir holds {len(done[ctx.context_id])} judged prompts but "
                f"the plan has only {total}; it belongs to a different input: use a new paths.run_dir"
            )
        weights.append(left)
    rows: dict[str, list] = {name: [] for name in CONTEXTS.names}
    for shard, members in enumerate(shard_contexts(weights, max_shards)):
        for m in members:
            if weights[m] == 0:
                continue
            ctx = contexts[m]
            rows["context_id"].append(ctx.context_id)
            rows["context"].append(ctx.text)
            rows["candidate_ids"].append(list(ctx.candidate_ids))
            rows["texts"].append(list(ctx.texts))
            rows["shard"].append(shard)
            rows["n_prompts"].append(weights[m])
            rows["done"].append(done.get(ctx.context_id, []))
            rows["checklist"].append(list(ctx.checklist))
    return pa.table(rows, schema=CONTEXTS)


def split_shards(contexts: pa.Table) -> list[pa.Table]:
    """One CONTEXTS table per shard (the unit of pair generation), in shard order."""
    if not contexts.num_rows:
        return []
    shard = np.asarray(contexts.column("shard"))
    return [contexts.filter(pa.array(shard == s)) for s in np.unique(shard)]


def generate_prompts(
    contexts: pa.Table,
    pairs: PairsConfig,
    plan: PromptPlan,
    chunk_rows: int = 4096,
    given: Mapping[str, np.ndarray] | None = None,
) -> Iterator[pa.Table]:
    """The prompt step: yield PROMPTS chunks for every context of a CONTEXTS table (its comparisons, then its
    absolute ratings), skipping the prompts already judged. ``given``: the (slot A, slot B) candidate index rows of
    each context (adaptive rounds choose them), instead of the pairs config's selection; a context not in it has no
    comparisons."""
    contexts = check_schema(contexts, CONTEXTS, "prompt stage input")
    rows: dict[str, list] = {name: [] for name in PROMPTS.names}

    def add(context_id: str, mode: str, attribute: str, template_id: str, a: str, b: str, prompt: str):
        for name, value in zip(
            PROMPTS.names, (context_id, mode, attribute, template_id, a, b, prompt), strict=True
        ):
            rows[name].append(value)

    columns = ("context_id", "context", "candidate_ids", "texts", "done", "checklist")
    for context_id, context, cand_ids, texts, done, checklist in zip(
        *(contexts.column(name).to_pylist() for name in columns), strict=True
    ):
        done_set = {tuple(d[name] for name in DONE_KEY) for d in done}
        if plan.templates:
            if given is not None:
                rows_given = np.asarray(given.get(context_id, np.zeros((0, 2))), dtype=np.int64).reshape(
                    -1, 2
                )
                a = np.tile(rows_given, (len(plan.attributes), 1))
                attr_index = np.repeat(np.arange(len(plan.attributes)), rows_given.shape[0])
            else:
                a, attr_index = _context_pairs(pairs, plan, context_key(context, texts), len(cand_ids))
            order = np.lexsort((attr_index, a[:, 1], a[:, 0]))
            for template in plan.templates:
                for row in order:
                    ia, ib = int(a[row, 0]), int(a[row, 1])
                    attribute = plan.attributes[attr_index[row]]
                    if (COMPARE, attribute, template.id, cand_ids[ia], cand_ids[ib]) in done_set:
                        continue
                    prompt = plan.prompt(template, attribute, context, texts[ia], texts[ib])
                    add(context_id, COMPARE, attribute, template.id, cand_ids[ia], cand_ids[ib], prompt)
                    if len(rows["prompt"]) >= chunk_rows:
                        yield pa.table(rows, schema=PROMPTS)
                        rows = {name: [] for name in PROMPTS.names}
        for rated in plan.absolute:
            for candidate_id, text in zip(cand_ids, texts, strict=True):
                for attribute, template_id, item in rated.asked(plan.attributes, checklist):
                    if (str(rated.mode), attribute, template_id, candidate_id, "") in done_set:
                        continue
                    prompt = plan.rate_prompt(rated, attribute, context, text, item)
                    add(context_id, str(rated.mode), attribute, template_id, candidate_id, "", prompt)
                    if len(rows["prompt"]) >= chunk_rows:
                        yield pa.table(rows, schema=PROMPTS)
                        rows = {name: [] for name in PROMPTS.names}
    if rows["prompt"]:
        yield pa.table(rows, schema=PROMPTS)


def _context_pairs(pairs: PairsConfig, plan: PromptPlan, key: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(slot A, slot B) rows of one context (its content key ``key``) over every attribute, and the attribute index
    of each row."""
    per_attribute = []
    shared = None
    for attribute in plan.attributes:
        if pairs.same_pairs_for_all_attributes:
            if shared is None:
                shared = oriented_pairs(pairs, n, context_rng(pairs.seed, key, None))
            per_attribute.append(shared)
        else:
            per_attribute.append(oriented_pairs(pairs, n, context_rng(pairs.seed, key, attribute)))
    a = np.concatenate(per_attribute)
    attr_index = np.repeat(np.arange(len(plan.attributes)), [len(p) for p in per_attribute])
    return a, attr_index
