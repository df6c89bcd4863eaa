"""The invariance battery of adaptive rounds (``workflow=adaptive``): the product's rounds stage with its run folder
and judge stage, the simulated engine where the engine would be (:func:`tests.invariance.world.rounds_run`), then
the score segment. Renaming the contexts and candidates, or shuffling the input, changes no round, no chosen pair
(as names), no judgment and no score: the rounds draw in the order of the items' content keys, seeded by the
context's content key. A failure names the table and the column; hypothesis shrinks the pool."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from pipeline.config.adaptive_rounds import AdaptiveConfig, BudgetConfig, StopConfig
from pipeline.config.enums import RoundStrategy
from tests.invariance.test_invariance import assert_metrics_same, assert_tables_same, base, renamings
from tests.invariance.world import Judge, Names, Order, World, rounds_run

METHODS = ("poe_logit", "poe_gaussian", "win_ratio")


@st.composite
def pools(draw) -> tuple[World, AdaptiveConfig]:
    sizes = (
        (draw(st.integers(6, 12)),)
        if draw(st.booleans())
        else tuple(draw(st.lists(st.integers(4, 7), min_size=2, max_size=3)))
    )
    world = World(
        sizes=sizes,
        judges=(
            Judge(
                scale=draw(st.floats(1.0, 4.0)),
                bias=draw(st.floats(-0.5, 0.5)),
                noise=draw(st.floats(0.0, 1.0)),
            ),
        ),
        seed=draw(st.integers(0, 2**16)),
    )
    adaptive = AdaptiveConfig(
        strategy=draw(st.sampled_from(list(RoundStrategy))),
        budget=BudgetConfig(calls_per_item=draw(st.sampled_from([3, 4]))),
        stop=StopConfig(criterion=None),
        seed=draw(st.integers(0, 99)),
    )
    return world, adaptive


def run(world, adaptive, names=None, order=None):
    cfg = dataclasses.replace(base(), scoring=dataclasses.replace(base().scoring, methods=list(METHODS)))
    with tempfile.TemporaryDirectory() as folder:
        return rounds_run(world, cfg, adaptive, Path(folder), names=names, order=order or Order())


@given(data=st.data())
def test_invariance_rounds_names_change_no_round_pair_or_score(data):
    world, adaptive = data.draw(pools(), label="pool")
    names = data.draw(renamings(world), label="names")
    want = run(world, adaptive)
    got = run(world, adaptive, names=names)
    inverse = names.inverse(Names.plain(world))
    assert_tables_same("rounds names", got, want, inverse)
    assert_metrics_same("rounds names", got.metrics, want.metrics, inverse)


@given(pool=pools(), records=st.integers(0, 2**16))
def test_invariance_rounds_order_of_the_input_changes_nothing(pool, records):
    world, adaptive = pool
    want = run(world, adaptive)
    got = run(world, adaptive, order=Order(records=records))
    assert_tables_same("rounds order", got, want, {}, keep_input_order=False)
