"""A jury of two prompt templates end to end: SummEval through the in-process executor and the real CPU vLLM
engine, every prompt judged under both templates, the jury's scores beside the methods', its jurors' lines and
agreement in the run folder and in MLflow."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.methods import poe_gaussian
from pipeline.run.context import run
from tests.conftest import compose

pytestmark = [pytest.mark.engine, pytest.mark.slow]


def test_a_jury_of_two_templates(datasets, tmp_path):
    cfg = compose(
        [
            "experiment=jury_templates",
            "runtime=inprocess",
            f"dataset.path={datasets / 'summeval' / 'summeval.jsonl'}",
            "dataset.max_contexts=2",
            "dataset.max_candidates=4",
            "judge.env.VLLM_CPU_KVCACHE_SPACE=2",
            f"paths.output_root={tmp_path}",
            "tracking.plots=false",
        ]
    )
    result = run(cfg)
    tables = result.run_dir / "tables"
    j = pl.read_parquet(tables / "judgments.parquet")
    prompts = j.group_by("context_id", "cand_a", "cand_b").agg(pl.col("template_id").sort())
    assert prompts.height == 2 * 4 * 3 and set(map(tuple, prompts["template_id"].to_list())) == {("c1", "c2")}

    scores = pl.read_parquet(tables / "scores.parquet")
    jury = scores.filter(pl.col("judge") == "jury")
    assert set(jury["method"]) == {"jury_poe", "jury_majority", "jury_mean"}
    assert jury.height == 3 * 2 * 4 and jury["template_id"].unique().to_list() == ["c1:c2"]
    assert jury["human_score"].null_count() == 0 and jury["rank"].min() == 1
    # jury_mean is PoE-Gaussian on the two templates' answers pooled, context by context
    for (ctx,), rows in j.group_by(["context_id"]):
        cands = sorted(set(rows["cand_a"]))
        index = {c: k for k, c in enumerate(cands)}
        want = poe_gaussian.poe_gaussian(
            len(cands),
            np.array([index[c] for c in rows["cand_a"]]),
            np.array([index[c] for c in rows["cand_b"]]),
            rows["p_a"].to_numpy(),
        )
        got = jury.filter((pl.col("method") == "jury_mean") & (pl.col("context_id") == ctx))
        got_scores = dict(zip(got["candidate_id"], got["score"], strict=True))
        np.testing.assert_allclose([got_scores[c] for c in cands], want, atol=1e-9)

    jurors = pl.read_parquet(tables / "jurors.parquet")
    assert sorted(jurors["template_id"]) == ["c1", "c2"] and jurors["share"].sum() == pytest.approx(1.0)
    assert (jurors["answers"] == 24).all()
    agreement = pl.read_parquet(tables / "juror_agreement.parquet")
    assert agreement.height == 1 and agreement["pairs"][0] == 2 * 6
    assert 0.0 <= agreement["raw_agreement"][0] <= 1.0

    corr = pl.read_parquet(tables / "correlations.parquet")
    assert {"jury_poe", "jury_majority", "jury_mean"} <= set(corr["method"])
    judge = j["judge"][0]
    for template in ("c1", "c2"):
        share = jurors.filter(pl.col("template_id") == template)["share"][0]
        assert result.metrics[f"jury/coherence/{judge}/{template}/share"] == pytest.approx(share)
