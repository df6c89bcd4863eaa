"""Leaderboard bootstrap: coverage on simulated systems with known strengths, the closed-form width, ratios by hand,
statistical ties, and invariance to the order of models and inputs."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest

from pipeline.contracts.schemas import CANDIDATES, HUMAN_SCORES
from pipeline.methods.agreement.bootstrap import (
    bootstrap_counts,
    bootstrap_means,
    bootstrap_ratio,
    statistical_ranks,
    tied_groups,
)
from pipeline.scoring.leaderboard import Board, leaderboard_table

NO_PEOPLE = HUMAN_SCORES.empty_table()


def test_counts_draw_every_input_count_times_per_round():
    counts = bootstrap_counts(50, 30, np.random.default_rng(0))
    assert counts.shape == (30, 50) and (counts.sum(axis=1) == 50).all()
    assert not np.array_equal(counts[0], counts[1])
    np.testing.assert_array_equal(counts, bootstrap_counts(50, 30, np.random.default_rng(0)))


def test_the_95_percent_interval_covers_the_true_mean_about_95_percent_of_the_time():
    """Systems with known strengths mu and per-input scores mu + N(0, 1): over 300 seeded repetitions of 100
    inputs, the 95% interval covers each system's mu in roughly 95% of them."""
    mu = np.array([0.0, 0.3, -0.5, 1.0])
    rng = np.random.default_rng(7)
    covered = np.zeros(len(mu))
    reps = 300
    for _ in range(reps):
        values = mu + rng.standard_normal((100, len(mu)))
        interval = bootstrap_means(values, bootstrap_counts(100, 400, rng), 0.95)
        covered += (interval.lower <= mu) & (mu <= interval.upper)
    coverage = covered / reps
    assert np.all((coverage > 0.90) & (coverage < 0.99)), coverage


def test_the_interval_width_matches_the_standard_error():
    """The mean of n unit-variance scores has standard error 1/sqrt(n): the 90% interval is about 2 x 1.645 / sqrt(n)."""
    rng = np.random.default_rng(3)
    n = 2000
    values = rng.standard_normal((n, 1))
    interval = bootstrap_means(values, bootstrap_counts(n, 2000, rng), 0.90)
    width = float(interval.upper[0] - interval.lower[0])
    assert width == pytest.approx(2 * 1.6449 / np.sqrt(n), rel=0.1)
    assert interval.estimate[0] == pytest.approx(values.mean())


def test_ratios_and_missing_scores_by_hand():
    # model 0: wins 1.5 of 2 games on input 0 and 0.5 of 2 on input 1: 2 / 4
    wins = np.array([[1.5, 0.5], [0.5, 1.5]])
    games = np.array([[2.0, 2.0], [2.0, 2.0]])
    # one round that draws input 0 twice: 3 / 4 for model 0
    counts = np.array([[2.0, 0.0]])
    interval = bootstrap_ratio(wins, games, counts, 0.9)
    assert interval.estimate.tolist() == [0.5, 0.5]
    # the round's 0.75 and 0.25, each interval widened to hold its estimate on all inputs
    assert interval.lower.tolist() == [0.5, 0.25]
    assert interval.upper.tolist() == [0.75, 0.5]
    # a NaN score (not scored for that input) is left out of that model's mean
    means = bootstrap_means(np.array([[1.0, np.nan], [3.0, 4.0]]), np.array([[1.0, 1.0]]), 0.9)
    assert means.estimate.tolist() == [2.0, 4.0]


def test_statistical_ranks_and_ties():
    lower, upper = np.array([0.6, 0.5, 0.1]), np.array([0.8, 0.7, 0.3])
    # model 2's upper bound lies below both others' lower bounds; models 0 and 1 overlap
    assert statistical_ranks(lower, upper).tolist() == [1, 1, 3]
    assert tied_groups(["a", "b", "c"], lower, upper) == [["b"], ["a"], []]


def run_tables(models: list[str], inputs: list[str], seed: int = 0):
    """Comparisons and scores of every pair of the models' outputs per input, a known strength per model."""
    rng = np.random.default_rng(seed)
    strength = {m: k * 0.4 for k, m in enumerate(sorted(models))}
    cands, comps, scores = [], [], []
    for c in inputs:
        for m in models:
            cands.append(
                {
                    "context_id": c,
                    "context": "x",
                    "candidate_id": f"{c}:{m}",
                    "candidate_index": 0,
                    "system": m,
                    "text": "t",
                }
            )
            scores.append(
                {
                    "judge": "j",
                    "attribute": "quality",
                    "template_id": "t1",
                    "method": "poe_gaussian",
                    "context_id": c,
                    "candidate_id": f"{c}:{m}",
                    "score": strength[m] + float(rng.normal()),
                }
            )
        for a in range(len(models)):
            for b in range(a + 1, len(models)):
                i, j = sorted([f"{c}:{models[a]}", f"{c}:{models[b]}"])
                d = strength[i.split(":")[1]] - strength[j.split(":")[1]]
                comps.append(
                    {
                        "judge": "j",
                        "attribute": "quality",
                        "template_id": "t1",
                        "context_id": c,
                        "cand_i": i,
                        "cand_j": j,
                        "p": float(1 / (1 + np.exp(-d))),
                    }
                )
    return pl.DataFrame(comps), pl.DataFrame(scores), pa.Table.from_pylist(cands, schema=CANDIDATES)


def shuffled_board(comps: pl.DataFrame, scores: pl.DataFrame, cands: pa.Table, rounds: int) -> pl.DataFrame:
    """The leaderboard of the same tables with their rows shuffled (seeded)."""
    return leaderboard_table(
        comps.sample(fraction=1.0, shuffle=True, seed=1),
        scores.sample(fraction=1.0, shuffle=True, seed=2),
        cands.take(np.random.default_rng(3).permutation(cands.num_rows)),
        ["poe_gaussian"],
        Board(rounds, 0.9, 0),
    )


def test_the_leaderboard_does_not_depend_on_the_order_of_models_or_inputs():
    models = ["m-a", "m-b", "m-c", "m-d"]
    inputs = [f"in{k:02d}" for k in range(20)]
    comps, scores, cands = run_tables(models, inputs)
    board = leaderboard_table(comps, scores, cands, ["poe_gaussian"], Board(200, 0.9, 0))
    key = ["metric", "model"]
    assert board.sort(key).equals(shuffled_board(comps, scores, cands, 200).sort(key))
    win = board.filter(pl.col("metric") == "win_rate").sort("estimate", descending=True)
    assert win["model"].to_list() == ["m-d", "m-c", "m-b", "m-a"]
    assert (win["n_inputs"] == 20).all() and (win["n_games"] == 60).all()
    assert set(board["metric"]) == {
        "win_rate",
        "poe_gaussian",
        "win_rate:length_controlled",
        "bradley_terry:length_controlled",
    }


def test_candidates_without_systems_have_no_leaderboard():
    comps, scores, cands = run_tables(["x", "y"], ["a", "b"])
    nameless = cands.set_column(
        cands.schema.get_field_index("system"), "system", pa.nulls(cands.num_rows, pa.string())
    )
    assert leaderboard_table(comps, scores, nameless, ["poe_gaussian"], Board(10, 0.9, 0)).height == 0


def pool_tables(models: list[str], per_model: int, pairs: int, seed: int = 0):
    """One context (a pool) holding ``per_model`` items of each model, a known strength per model plus each item's
    own spread, and ``pairs`` comparisons between items of different models (every item in one at least)."""
    rng = np.random.default_rng(seed)
    strength = {m: k * 0.4 for k, m in enumerate(sorted(models))}
    items = [(m, f"{m}/{k}", strength[m] + float(rng.normal())) for m in models for k in range(per_model)]
    cands = [
        {
            "context_id": "pool",
            "context": "",
            "candidate_id": c,
            "candidate_index": n,
            "system": m,
            "text": "t",
        }
        for n, (m, c, _) in enumerate(items)
    ]
    group = {"judge": "j", "attribute": "quality", "template_id": "t1", "context_id": "pool"}
    scores = [{**group, "method": "poe_gaussian", "candidate_id": c, "score": v} for _, c, v in items]
    comps = []
    while len(comps) < pairs:
        # every item is compared at least once (as in a connected pool), then random pairs
        a = len(comps) if len(comps) < len(items) else int(rng.integers(len(items)))
        b = int(rng.integers(len(items)))
        if items[a][0] == items[b][0]:
            continue
        d = items[a][2] - items[b][2]
        comps.append(
            {**group, "cand_i": items[a][1], "cand_j": items[b][1], "p": float(1 / (1 + np.exp(-d)))}
        )
    return pl.DataFrame(comps), pl.DataFrame(scores), pa.Table.from_pylist(cands, schema=CANDIDATES), items


def test_a_pool_is_resampled_over_its_items():
    """One context (a pool) has one input, so the bootstrap draws its items: each model's mean score gets an
    interval about as wide as the normal one of the mean of its items, and the win rate one too."""
    models = ["m-a", "m-b", "m-c", "m-d"]
    comps, scores, cands, items = pool_tables(models, per_model=60, pairs=600)
    board = leaderboard_table(comps, scores, cands, ["poe_gaussian"], Board(2000, 0.9, 0))
    assert (board["unit"] == "item").all()
    mean = board.filter(pl.col("metric") == "poe_gaussian").sort("model")
    assert (mean["n_inputs"] == 60).all()
    for row in mean.iter_rows(named=True):
        values = np.array([v for m, _, v in items if m == row["model"]])
        assert row["estimate"] == pytest.approx(values.mean())
        normal = 2 * 1.645 * values.std(ddof=1) / np.sqrt(values.size)
        assert row["upper"] - row["lower"] == pytest.approx(normal, rel=0.2)
    win = board.filter(pl.col("metric") == "win_rate")
    assert (win["upper"] > win["lower"]).all()
    assert win.sort("estimate")["model"].to_list() == models  # strengths 0, 0.4, 0.8, 1.2 apart by 0.4
    assert (win["n_games"].sum()) == 2 * comps.height
    # the pool's items are the units: the board does not depend on the order of items or comparisons
    key = ["metric", "model"]
    assert board.sort(key).equals(shuffled_board(comps, scores, cands, 2000).sort(key))


def ranked(stage, comps, scores, cands) -> dict:
    """The leaderboard stage run on the tables, with no human scores."""

    class Ctx:
        metrics: dict[str, float] = {}

    return stage.run(
        Ctx(),
        comparisons=comps.to_arrow(),
        scores=scores.to_arrow(),
        candidates=cands,
        human_scores=NO_PEOPLE,
    )


def test_a_model_of_fewer_than_ten_units_has_no_interval_and_is_tied_with_every_model(caplog):
    """One input with one candidate per model, or three inputs: too few units for a bootstrap interval that holds its
    level, so none (never a point), said once, every model tied; a pool of ten items per model is resampled, its
    intervals read at the expanded level (wider than the plain percentile's) and not warned about."""
    from pipeline.methods.agreement.bootstrap import expanded_level
    from pipeline.stages.scoring import Leaderboard

    stage = Leaderboard(("poe_gaussian",), Board(50, 0.9, 0))
    for inputs in (["pool"], ["in0", "in1", "in2"]):
        comps, scores, cands = run_tables(["m-a", "m-b", "m-c"], inputs)
        caplog.clear()
        with caplog.at_level("INFO", logger="pipeline"):
            board = ranked(stage, comps, scores, cands)["leaderboard"]
        assert board["lower"].null_count() == board["upper"].null_count() == board.height, inputs
        assert board["estimate"].null_count() < board.height and (board["rank"] == 1).all()
        win = board.filter(pl.col("metric") == "win_rate")
        assert all(len(t.split(", ")) == 2 for t in win["tied_with"])  # tied with both others
        assert "too few for a bootstrap interval that holds its level: no model has one" in caplog.text
    caplog.clear()
    comps, scores, cands, _ = pool_tables(["m-a", "m-b", "m-c"], per_model=10, pairs=60)
    with caplog.at_level("INFO", logger="pipeline"):
        board = ranked(stage, comps, scores, cands)["leaderboard"]
    assert "one pool (up to 10 item(s) per model, resampled)" in caplog.text and "too few" not in caplog.text
    assert board["lower"].null_count() == 0
    assert 0.9 < expanded_level(0.9, 30) < expanded_level(0.9, 10) < 0.95


def test_games_per_ordering_count_each_orderings_own_verdict_as_arena_hard_auto_does():
    """Two models on three inputs, one pair each: slot A's model wins both orderings by its raw verdict (0.9 for
    a in slot A, 0.6 for b in slot A). The averaged, debiased verdict gives a every pair (0.65); counted per ordering,
    a wins half of its six games."""
    cands = pa.table(
        {
            "context_id": [c for c in ("x", "y", "z") for _ in range(2)],
            "context": ["ctx"] * 6,
            "candidate_id": [f"{c}:{m}" for c in ("x", "y", "z") for m in ("a", "b")],
            "candidate_index": [0, 1] * 3,
            "system": ["a", "b"] * 3,
            "text": ["short", "a much longer text"] * 3,
        }
    )
    comps = pl.DataFrame(
        {
            "judge": ["j"] * 3,
            "attribute": ["quality"] * 3,
            "template_id": ["t1"] * 3,
            "context_id": ["x", "y", "z"],
            "cand_i": ["x:a", "y:a", "z:a"],
            "cand_j": ["x:b", "y:b", "z:b"],
            "p_ij": [0.9] * 3,
            "p_ji": [0.6] * 3,
            "p": [(0.9 + 1 - 0.6) / 2] * 3,
            "p_tie": [0.0] * 3,
        }
    )
    scores = pl.DataFrame(schema={"judge": pl.String, "attribute": pl.String, "method": pl.String})
    pair = leaderboard_table(comps, scores, cands, [], Board(20, 0.9, 0, games="pair", control=()))
    ordering = leaderboard_table(comps, scores, cands, [], Board(20, 0.9, 0, games="ordering", control=()))
    pair_a = pair.filter(pl.col("model") == "a").row(0, named=True)
    ordering_a = ordering.filter(pl.col("model") == "a").row(0, named=True)
    assert pair_a["estimate"] == 1.0 and pair_a["n_games"] == 3
    assert ordering_a["estimate"] == 0.5 and ordering_a["n_games"] == 6
