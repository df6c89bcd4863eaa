"""The invariance battery of the blind review's agreement: a run's comparisons made by the product's own stages
(:func:`tests.invariance.world.run_world`), its review sample drawn by the product (``open_sample``), simulated
reviewers answering in the slots the review page shows them (a reviewer prefers the better text, with noise and a
liking for slot 1 keyed by content), and the product's agreement report. Renaming the run's contexts, candidates,
judges and templates, shuffling its rows, or turning its pairs round changes no agreement figure, interval or count
(the reviewers keep their names: their own order and slots are seeded by them)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.contracts.keys import stable_hash
from pipeline.review import agreement as report
from pipeline.review.answers import AnswerLog
from pipeline.review.sample import Strategy, open_sample, shown
from tests.invariance.compare import assert_same, map_names
from tests.invariance.test_invariance import base, judges, renamings, turned
from tests.invariance.world import Names, Order, World, quality, run_world, text_of

REVIEWERS = ("ann", "bob", "cem")


@st.composite
def reviewed_worlds(draw) -> World:
    sizes = tuple(draw(st.lists(st.integers(3, 5), min_size=2, max_size=3)))
    return World(
        sizes=sizes,
        judges=tuple(draw(st.lists(judges(), min_size=1, max_size=2))),
        templates=draw(st.integers(1, 2)),
        tie=draw(st.booleans()),
        seed=draw(st.integers(0, 2**16)),
        rounds=5,
    )


def review(
    world: World, names: Names, order: Order, strategy: Strategy, n: int, between=None
) -> pl.DataFrame:
    """The agreement table of the world's run, reviewed by simulated reviewers."""
    out = run_world(world, base(), ("win_ratio",), names=names, order=order, between=between)
    where = {text_of(world, c, k): (c, k) for c, size in enumerate(world.sizes) for k in range(size)}
    with tempfile.TemporaryDirectory() as folder:
        run_dir = Path(folder) / "run"
        (run_dir / "tables").mkdir(parents=True)
        (run_dir / "config.json").write_text(json.dumps({"tracking": {"enabled": False}}))
        out.tables["comparisons"].write_parquet(run_dir / "tables" / "comparisons.parquet")
        candidates = out.tables["candidates"]
        candidates.write_parquet(run_dir / "tables" / "candidates.parquet")
        text = dict(
            zip(
                zip(candidates["context_id"], candidates["candidate_id"], strict=True),
                candidates["text"],
                strict=True,
            )
        )
        sample = open_sample(run_dir, run_dir / "review", strategy, n, 0)
        log = AnswerLog(run_dir / "review" / "answers.jsonl")
        for r, reviewer in enumerate(REVIEWERS):
            for item in sample.items.iter_rows(named=True):
                first, second = shown(item, reviewer, sample.spec.seed)
                c, a = where[text[(item["context_id"], first)]]
                _, b = where[text[(item["context_id"], second)]]
                rng = np.random.default_rng(
                    [world.seed, r, stable_hash(f"{c}:{min(a, b)}:{max(a, b)}:{item['attribute']}")]
                )
                margin = quality(world, c, a) - quality(world, c, b) + 0.3 * r + rng.normal(0, 0.7)
                choice = "tie" if abs(margin) < 0.15 else ("1" if margin > 0 else "2")
                log.add(
                    {
                        "reviewer": reviewer,
                        "item_id": item["item_id"],
                        "slot1": first,
                        "slot2": second,
                        "choice": choice,
                    }
                )
        return report.agreement(sample, log.read()).table


def canonical(table: pl.DataFrame, inverse: dict[str, str]) -> pl.DataFrame:
    return table.with_columns(
        pl.col("group").map_elements(lambda v: map_names(v, inverse), return_dtype=pl.String)
    ).sort(["scope", "group", "statistic"])


STRATEGIES = st.sampled_from([Strategy.STRATIFIED, Strategy.RANDOM])
# Each draw runs the product's path and the review's 1000-round bootstrap of every statistic two or three times:
# half the battery's draws.
FEWER = settings(max_examples=max(1, settings().max_examples // 2))


@FEWER
@given(data=st.data())
def test_invariance_review_agreement_under_names(data):
    world = data.draw(reviewed_worlds(), label="world")
    names = data.draw(renamings(world), label="names")
    strategy, n = data.draw(STRATEGIES, label="strategy"), data.draw(st.integers(3, 12), label="n")
    want = review(world, Names.plain(world), Order(), strategy, n)
    got = review(world, names, Order(), strategy, n)
    assert_same(
        "review agreement (names)", canonical(got, names.inverse(Names.plain(world))), canonical(want, {})
    )


@FEWER
@given(
    world=reviewed_worlds(),
    strategy=STRATEGIES,
    n=st.integers(3, 12),
    rows=st.integers(0, 2**16),
    seed=st.integers(0, 2**16),
)
def test_invariance_review_agreement_under_order_and_sides(world, strategy, n, rows, seed):
    plain = Names.plain(world)
    want = canonical(review(world, plain, Order(), strategy, n), {})
    shuffled = review(world, plain, Order(records=rows, judgments=rows), strategy, n)
    assert_same("review agreement (order)", canonical(shuffled, {}), want)
    sides = review(world, plain, Order(), strategy, n, between=turned(seed))
    assert_same("review agreement (sides)", canonical(sides, {}), want)
