"""Sharding and pair generation: seeded, complete, both orderings, prefix-friendly order, resume skipping."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest

from pipeline.config import PairsConfig, TemplateConfig
from pipeline.pairs import (
    PairPlan,
    build_shards,
    check_strategy,
    context_rng,
    done_key,
    generate_pairs,
    k_adjustments,
    oriented_pairs,
    prompts_per_context,
    shard_contexts,
)
from pipeline.prompts import PromptWords
from pipeline.schemas import CANDIDATES

WORDS = PromptWords("passage", "summary", {"coherence": "coherent", "fluency": "fluent"})


def candidates(sizes: dict[str, int]) -> pa.Table:
    rows = {name: [] for name in CANDIDATES.names}
    for cid, n in sizes.items():
        for k in range(n):
            rows["context_id"].append(cid)
            rows["context"].append(f"context {cid}")
            rows["candidate_id"].append(f"{cid}:{k}")
            rows["candidate_index"].append(k)
            rows["system"].append(None)
            rows["text"].append(f"text {cid} {k}")
    return pa.table(rows, schema=CANDIDATES)


DEFAULT_TEMPLATES = (TemplateConfig(),)


def plan(attributes=("coherence",), templates=DEFAULT_TEMPLATES, chunk_rows=4096, **pairs):
    return PairPlan(PairsConfig(**pairs), tuple(attributes), tuple(templates), WORDS, chunk_rows)


def generate(table, p, max_shards=4, done=None):
    shards, remaining = build_shards(table, p, max_shards, done)
    chunks = [c for s in shards for c in generate_pairs(s, p)]
    out = pa.concat_tables(chunks) if chunks else None
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
    cfg = PairsConfig(strategy=strategy, orderings=orderings, k=k)
    check_strategy(cfg)
    rows = oriented_pairs(cfg, 9, context_rng(0, "c", None))
    assert len(rows) == prompts_per_context(cfg, 9, 1, 1)
    assert len({tuple(r) for r in rows}) == len(rows)
    assert all(a != b for a, b in rows)


def test_one_ordering_of_unordered_pairs_balances_slots():
    rows = oriented_pairs(PairsConfig(strategy="all_pairs", orderings="one"), 30, context_rng(0, "c", None))
    first = sum(int(a < b) for a, b in rows) / len(rows)
    assert 0.4 < first < 0.6


def test_strategy_errors():
    with pytest.raises(ValueError, match="selects ordered comparisons"):
        check_strategy(PairsConfig(strategy="random", k=3, orderings="both"))
    with pytest.raises(ValueError, match="needs pairs.k or pairs.fraction"):
        check_strategy(PairsConfig(strategy="balanced_random"))
    with pytest.raises(ValueError, match="not one of"):
        check_strategy(PairsConfig(strategy="best"))


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
    done: dict[str, list[str]] = {}
    for row in full.slice(0, 13).to_pylist():
        done.setdefault(row["context_id"], []).append(
            done_key(row["attribute"], row["template_id"], row["cand_a"], row["cand_b"])
        )
    rest, remaining, _ = generate(table, p, done=done)
    assert remaining == rest.num_rows == total - 13
    assert {tuple(r.values()) for r in full.slice(13).to_pylist()} == {
        tuple(r.values()) for r in rest.to_pylist()
    }


def test_a_huge_pool_is_emitted_in_chunks():
    p = plan(chunk_rows=100)
    shards, remaining = build_shards(candidates({"pool": 30}), p, 8)
    chunks = list(generate_pairs(shards[0], p))
    assert len(shards) == 1 and remaining == 870
    assert [c.num_rows for c in chunks] == [100] * 8 + [70]


def test_several_templates():
    t2 = TemplateConfig(
        id="c2", text="{context}\n{a}\n{b}\nWhich is more {adjective}?", answer_prefix="Answer:"
    )
    out, remaining, _ = generate(candidates({"c1": 4}), plan(templates=(TemplateConfig(), t2)))
    assert remaining == out.num_rows == 24
    assert set(out.column("template_id").to_pylist()) == {"c1", "c2"}
