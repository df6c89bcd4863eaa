"""Sharding and pair generation: seeded, complete, both orderings, prefix-friendly order, resume skipping."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest

from pipeline.config.assessment import PairsConfig, TemplateConfig
from pipeline.config.enums import Orderings, Strategy
from pipeline.config.validate import validate
from pipeline.contracts.errors import ConfigError
from pipeline.contracts.schemas import JUDGED_KEYS
from pipeline.data.contexts import group_by_context
from pipeline.data.words import PromptWords
from pipeline.prompts.chat import plain_frame
from pipeline.prompts.labels import Labels
from pipeline.prompts.pairs import (
    build_contexts,
    context_rng,
    generate_prompts,
    k_adjustments,
    oriented_pairs,
    prompts_per_context,
    shard_contexts,
    split_shards,
)
from pipeline.prompts.plan import PromptPlan
from pipeline.prompts.render import render_answer_prefix
from tests.conftest import candidates_table as candidates

WORDS = PromptWords("passage", "summary", {"coherence": "coherent", "fluency": "fluent"})
DEFAULT_TEMPLATES = (TemplateConfig(),)


def prompt_plan(attributes=("coherence",), templates=DEFAULT_TEMPLATES) -> PromptPlan:
    prefixes = {(t.id, a): render_answer_prefix(t, WORDS, a) for t in templates for a in attributes}
    labels = Labels((" A", " B"), (1, 2), 1)
    return PromptPlan(tuple(templates), tuple(attributes), WORDS, plain_frame(None), False, labels, prefixes)


def plan(attributes=("coherence",), templates=DEFAULT_TEMPLATES, chunk_rows=4096, **pairs):
    return PairsConfig(**pairs), prompt_plan(attributes, templates), chunk_rows


def generate(table, p, max_shards=4, judged=None):
    pairs, prompts, chunk_rows = p
    groups = group_by_context(table)
    contexts = build_contexts(
        groups, pairs, len(prompts.attributes), len(prompts.templates), max_shards, judged
    )
    shards = split_shards(contexts)
    chunks = [c for s in shards for c in generate_prompts(s, pairs, prompts, chunk_rows)]
    out = pa.concat_tables(chunks) if chunks else None
    remaining = sum(contexts.column("n_prompts").to_pylist())
    return out, remaining, shards


def test_all_pairs_both_orderings_exactly_once():
    out, remaining, _ = generate(candidates({"c1": 16, "c2": 5}), plan(("coherence", "fluency")))
    assert remaining == out.num_rows == (16 * 15 + 5 * 4) * 2
    keys = list(
        zip(
            *(out.column(c).to_pylist() for c in ("context_id", "attribute", "cand_a", "cand_b")), strict=True
        )
    )
    assert len(set(keys)) == len(keys)
    c1 = {(a, b) for cid, attr, a, b in keys if cid == "c1" and attr == "coherence"}
    assert c1 == {(f"c1:{i}", f"c1:{j}") for i, j in itertools.permutations(range(16), 2)}


def test_prompts_sharing_context_and_slot_a_are_adjacent():
    out, _, _ = generate(candidates({"c1": 6, "c2": 4}), plan(("coherence", "fluency")))
    runs = [
        (c, a)
        for c, a in zip(out.column("context_id").to_pylist(), out.column("cand_a").to_pylist(), strict=True)
    ]
    # each (context, slot A) appears as one contiguous run
    changes = [runs[0]] + [r for prev, r in itertools.pairwise(runs) if r != prev]
    assert len(changes) == len(set(changes)) == 6 + 4
    # the attributes of one (A, B) pair are adjacent too
    trip = list(zip(out.column("cand_a").to_pylist(), out.column("cand_b").to_pylist(), strict=True))
    assert all(trip[k] == trip[k + 1] for k in range(0, len(trip), 2))


def test_balanced_random_both_orderings_seeded():
    p = plan(strategy="balanced_random", k=5, seed=3)
    a, _, _ = generate(candidates({"c1": 8, "c2": 8}), p)
    b, _, _ = generate(candidates({"c1": 8, "c2": 8}), p, max_shards=1)  # sharding does not change the pairs
    assert sorted(a.to_pylist(), key=str) == sorted(b.to_pylist(), key=str)
    assert a.num_rows == 2 * 2 * 5
    for cid in ("c1", "c2"):
        rows = [
            (x, y)
            for c, x, y in zip(
                *(a.column(n).to_pylist() for n in ("context_id", "cand_a", "cand_b")), strict=True
            )
            if c == cid
        ]
        assert {(y, x) for x, y in rows} == set(rows)  # both orderings of every pair
        assert {x for x, _ in rows} == {f"{cid}:{k}" for k in range(8)}  # every candidate in a pair
    c, _, _ = generate(candidates({"c1": 8, "c2": 8}), plan(strategy="balanced_random", k=5, seed=4))
    assert sorted(c.to_pylist(), key=str) != sorted(a.to_pylist(), key=str)


def test_pairs_per_attribute_when_asked():
    p = plan(("coherence", "fluency"), strategy="balanced_random", k=6, same_pairs_for_all_attributes=False)
    out, _, _ = generate(candidates({"c1": 10}), p)
    by_attr = {}
    for attr, a, b in zip(
        *(out.column(n).to_pylist() for n in ("attribute", "cand_a", "cand_b")), strict=True
    ):
        by_attr.setdefault(attr, set()).add((a, b))
    assert by_attr["coherence"] != by_attr["fluency"]


@pytest.mark.parametrize(
    "strategy,orderings,k",
    [
        ("all_pairs", "both", None),
        ("all_ordered", "both", None),
        ("balanced_random", "both", 7),
        ("greedy_optimal", "both", 12),
        ("all_pairs", "one", None),
        ("all_ordered", "one", None),
        ("balanced_random", "one", 7),
        ("random", "one", 9),
        ("no_repeat", "one", 9),
        ("symmetric", "one", 9),
    ],
)
def test_prompt_counts_match_generation(strategy, orderings, k):
    cfg = PairsConfig(strategy=Strategy(strategy), orderings=Orderings(orderings), k=k)
    rows = oriented_pairs(cfg, 9, context_rng(0, 7, None))
    assert len(rows) == prompts_per_context(cfg, 9, 1, 1)
    assert len({tuple(r) for r in rows}) == len(rows)
    assert all(a != b for a, b in rows)


def test_one_ordering_of_unordered_pairs_balances_slots():
    rows = oriented_pairs(PairsConfig(strategy="all_pairs", orderings="one"), 30, context_rng(0, 7, None))
    first = sum(int(a < b) for a, b in rows) / len(rows)
    assert 0.4 < first < 0.6


def test_strategy_errors():
    from pipeline.config.run import RunConfig

    def check(**pairs):
        cfg = RunConfig()
        cfg.pairs = PairsConfig(**pairs)
        validate(cfg)

    with pytest.raises(ConfigError, match="selects ordered comparisons"):
        check(strategy=Strategy.random, k=3, orderings=Orderings.both)
    with pytest.raises(ConfigError, match="needs pairs.k or pairs.fraction"):
        check(strategy=Strategy.balanced_random)


def test_fraction_and_minimum_coverage():
    cfg = PairsConfig(strategy="balanced_random", fraction=0.01)
    assert prompts_per_context(cfg, 16, 1, 1) == 2 * 8  # raised to ceil(16/2) so every candidate is compared
    cfg = PairsConfig(strategy="balanced_random", fraction=0.5)
    assert prompts_per_context(cfg, 16, 1, 1) == 2 * 60


def test_k_wins_over_fraction_and_adjustments_are_counted():
    cfg = PairsConfig(strategy="balanced_random", k=10, fraction=0.5)
    assert prompts_per_context(cfg, 16, 1, 1) == 2 * 10
    # k=10 is below ceil(30/2) for a 30-candidate context and above the 6 pairs of a 4-candidate one
    assert k_adjustments(cfg, [16, 30, 4, 16]) == {"raised": 1, "lowered": 1}
    assert k_adjustments(PairsConfig(strategy="all_pairs"), [16, 2]) == {"raised": 0, "lowered": 0}


def test_shards_never_split_a_context_and_balance_load():
    weights = [100, 1, 1, 1, 50, 50]
    shards = shard_contexts(weights, 3)
    assert sorted(i for s in shards for i in s) == list(range(6))
    loads = sorted(sum(weights[i] for i in s) for s in shards)
    assert loads == [51, 52, 100]  # LPT: the largest context alone, the rest spread (max load is optimal)


def test_resume_skips_judged_prompts():
    table = candidates({"c1": 5, "c2": 5})
    p = plan(("coherence",))
    full, total, _ = generate(table, p)
    judged = full.slice(0, 13).select(JUDGED_KEYS.names)
    rest, remaining, _ = generate(table, p, judged=judged)
    assert remaining == rest.num_rows == total - 13
    assert {tuple(r.values()) for r in full.slice(13).to_pylist()} == {
        tuple(r.values()) for r in rest.to_pylist()
    }


def test_a_huge_pool_is_emitted_in_chunks():
    pairs, prompts, _ = plan()
    contexts = build_contexts(group_by_context(candidates({"pool": 30})), pairs, 1, 1, 8)
    shards = split_shards(contexts)
    chunks = list(generate_prompts(shards[0], pairs, prompts, 100))
    assert len(shards) == 1 and contexts.column("n_prompts").to_pylist() == [870]
    assert [c.num_rows for c in chunks] == [100] * 8 + [70]


def test_prompts_are_rendered_whole_with_the_plan():
    out, _, _ = generate(candidates({"c1": 3}), plan(("coherence",)))
    row = out.to_pylist()[0]
    assert row["prompt"] == (
        f"Passage: context c1\n\nSummary A: text c1 {row['cand_a'][-1]}\n\nSummary B: text c1 "
        f"{row['cand_b'][-1]}\n\nWhich summary is more coherent, Summary A or Summary B?\n\nAnswer: Summary"
    )


def test_judged_prompts_of_unknown_contexts_are_refused():
    judged = pa.table({name: ["elsewhere"] for name in JUDGED_KEYS.names}, schema=JUDGED_KEYS)
    with pytest.raises(ConfigError, match="not in the input"):
        generate(candidates({"c1": 3}), plan(), judged=judged)


def test_several_templates():
    t2 = TemplateConfig(
        id="c2", text="{context}\n{a}\n{b}\nWhich is more {adjective}?", answer_prefix="Answer:"
    )
    out, remaining, _ = generate(candidates({"c1": 4}), plan(templates=(TemplateConfig(), t2)))
    assert remaining == out.num_rows == 24
    assert set(out.column("template_id").to_pylist()) == {"c1", "c2"}
