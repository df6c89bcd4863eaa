"""SummEval from ../shared through the in-process executor (no Ray), with correlations against humans."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.stats import spearmanr

from pipeline.methods.metrics import merge_near_ties
from pipeline.run.context import run
from tests.conftest import compose

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def test_summeval_small_in_process(datasets, tmp_path):
    cfg = compose(
        [
            "experiment=summeval_3ctx",
            "runtime=inprocess",
            f"dataset.path={datasets / 'summeval' / 'summeval.jsonl'}",
            "dataset.max_contexts=2",
            "dataset.max_candidates=5",
            "judge.env.VLLM_CPU_KVCACHE_SPACE=2",
            f"paths.output_root={tmp_path}",
            "tracking.plots=false",
        ]
    )
    result = run(cfg)
    j = pl.read_parquet(result.run_dir / "tables" / "judgments.parquet")
    assert j.height == 2 * 5 * 4 and j["attribute"].unique().to_list() == ["coherence"]
    corr = pl.read_parquet(result.run_dir / "tables" / "correlations.parquet")
    assert set(corr["method"]) == set(cfg.scoring.methods)
    assert corr["n_contexts"].to_list() == [2] * corr.height
    # Spearman per article, averaged over the articles (the papers' protocol), recomputed with scipy after the
    # documented tie rule (scores a solver leaves a few ulps apart are ties: merge_near_ties)
    scores = pl.read_parquet(result.run_dir / "tables" / "scores.parquet")
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
