"""SummEval from ../shared through the in-process executor (no Ray), with correlations against humans (per article,
pooled and per system), the judge's report card and the length-controlled leaderboard of SummEval's systems, in the
run folder and in MLflow."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.stats import spearmanr

from pipeline.methods.agreement.metrics import merge_near_ties
from pipeline.run.context import run
from tests.conftest import compose, run_table

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def test_summeval_small_in_process(datasets, tmp_path):
    cfg = compose(
        [
            "experiment=summeval_3ctx",
            "runtime=inprocess",
            f"dataset.path={datasets / 'summeval' / 'summeval.jsonl'}",
            "dataset.max_contexts=3",
            "dataset.max_candidates=5",
            "judge.env.VLLM_CPU_KVCACHE_SPACE=2",
            f"paths.output_root={tmp_path}",
            "tracking.plots=false",
        ]
    )
    result = run(cfg)
    j = run_table(result, "judgments")
    assert j.height == 3 * 5 * 4 and j["attribute"].unique().to_list() == ["coherence"]
    corr = run_table(result, "correlations")
    assert set(corr["method"]) == set(cfg.scoring.methods)
    assert corr["n_contexts"].to_list() == [3] * corr.height
    # Spearman per article, averaged over the articles (the papers' protocol), recomputed with scipy after the
    # documented tie rule (scores a solver leaves a few ulps apart are ties: merge_near_ties)
    scores = run_table(result, "scores")
    for row in corr.iter_rows(named=True):
        method = scores.filter(pl.col("method") == row["method"])
        raw = method["score"].to_numpy()
        method = method.with_columns(pl.Series("score", merge_near_ties(raw)))
        per_context = [
            spearmanr(g["score"].to_numpy(), g["human_score"].to_numpy()).statistic
            for _, g in method.group_by("context_id")
        ]
        assert row["spearman"] == pytest.approx(np.mean(per_context), abs=1e-12)
    assert result.metrics["coherence/poe_gaussian/spearman"] == pytest.approx(
        corr.filter(pl.col("method") == "poe_gaussian")["spearman"][0]
    )
    assert result.metrics["judge/prefix_cache_share"] > 0.3  # the article is shared by every prompt

    # system-level: each system's mean score and mean human score over the articles, correlated across systems
    candidates = run_table(result, "candidates").select("context_id", "candidate_id", "system")
    for row in corr.iter_rows(named=True):
        per_system = (
            scores.filter(pl.col("method") == row["method"])
            .join(candidates, on=["context_id", "candidate_id"])
            .group_by("system")
            .agg(pl.col("score").mean(), pl.col("human_score").mean())
        )
        assert row["n_systems"] == per_system.height >= 3
        # the same tie rule: system means equal in exact arithmetic differ by the ulps of their sums' order
        means = merge_near_ties(per_system["score"].to_numpy())
        want = spearmanr(means, per_system["human_score"].to_numpy()).statistic
        assert row["spearman_system"] == pytest.approx(want, abs=1e-12)

    # the judge's card: its calibration against people, before and after the cross-fitted temperature
    card = run_table(result, "judge_card")
    assert card.height == 1 and card["n_pairs"][0] == 3 * 10
    row = card.row(0, named=True)
    assert 0 < row["n_human_pairs"] <= 30 and 0 <= row["ece"] <= 1 and row["temperature"] > 0
    assert row["p_a_debiased"] == pytest.approx(0.5) and 0 <= row["position_consistency"] <= 1
    assert row["n_length_pairs"] > 0 and row["length_coef"] is not None and row["method"] == "poe_gaussian"
    reliability = run_table(result, "judge_reliability")
    # every pair people scored apart, read both ways round
    assert reliability.height == 2 * 10
    assert reliability.filter(pl.col("calibrated"))["n"].sum() == 2 * row["n_human_pairs"]
    prefix = "card/coherence/smollm2-135m-instruct/c1"
    assert result.metrics[f"{prefix}/ece"] == pytest.approx(row["ece"])
    assert "judge card coherence (c1" in result.summary
    # what the temperature means, in words, in the card and the summary (at a bound: said so); for a judge not shown
    # to be informative here (SmolLM2 at chance), no calibration is claimed: a temperature fitted to noise is none
    if row["informative"]:
        assert row["temperature_reading"] in result.summary
    else:
        assert "no calibration (a temperature fitted to noise is not a calibration)" in result.summary
        assert result.summary.startswith("NOT INFORMATIVE: judge smollm2-135m-instruct, coherence (c1)")
    assert ("bound" in row["temperature_reading"]) == row["temperature_at_bound"]
    # the words say which way the number moves the judge's probabilities (this 135M judge's are near 1/2, and on
    # three articles may lean the people's way: then it reads under-confident, whatever the quality)
    t, reading = row["temperature"], row["temperature_reading"]
    if not row["temperature_at_bound"]:
        side = "over-" if t > 1.1 else "under-" if t < 0.9 else "about as sure"
        assert side in reading and f"{t:.2f}" in reading

    # the leaderboard of SummEval's systems, raw and with the summaries' length regressed out
    board = run_table(result, "leaderboard")
    for metric in ("win_rate", "win_rate:length_controlled", "bradley_terry:length_controlled"):
        part = board.filter(pl.col("metric") == metric)
        assert part.height == per_system.height and (part["lower"] <= part["upper"]).all(), metric

    import mlflow

    logged = mlflow.tracking.MlflowClient(result.tracking_uri).get_run(result.mlflow_run_id).data.metrics
    assert logged[f"{prefix}/ece"] == pytest.approx(row["ece"])
    assert logged[f"{prefix}/position_consistency"] == pytest.approx(row["position_consistency"])
