"""The whole pipeline through a real local Ray and the real CPU vLLM engine (SmolLM2-135M-Instruct).

One run on the demo set is shared by the checks below; a second run resumes it through the CLI after
"losing" part of its judgments, and must judge exactly the lost comparisons again.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from pipeline import schemas
from pipeline.run import run
from tests.conftest import ROOT, compose

pytestmark = [pytest.mark.ray, pytest.mark.engine, pytest.mark.slow]

N_CONTEXTS, N_CANDIDATES, ATTRIBUTES = 3, 5, ("coherence", "fluency")
OVERRIDES = [
    f"dataset.demo.n_contexts={N_CONTEXTS}",
    f"dataset.demo.n_candidates={N_CANDIDATES}",
    "judge.max_model_len=2048",
    "judge.batch_size=24",  # divides the 120 prompts: every block is one full batch (see the streaming test)
    "judge.env.VLLM_CPU_KVCACHE_SPACE=2",
    "runtime.max_shards=2",
    "scoring.methods=[win_ratio,avg_prob,bradley_terry,poe_gaussian,poe_bt]",
]
# the driver's view of the stream in the shared run: the size of every batch of results that reached the store
ARRIVED: list[int] = []


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return tmp_path_factory.mktemp("outputs")


@pytest.fixture(scope="module")
def demo_run(outputs):
    import ray

    from pipeline.store import JudgmentStore

    cfg = compose([*OVERRIDES, f"paths.output_root={outputs}"])
    add = JudgmentStore.add

    def record(self, batch):
        ARRIVED.append(batch.num_rows)
        add(self, batch)

    ray.init(num_cpus=2, include_dashboard=False)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(JudgmentStore, "add", record)
            result = run(cfg)
    finally:
        ray.shutdown()
    return cfg, result


def read(result, name):
    return pl.read_parquet(result.run_dir / "tables" / f"{name}.parquet")


def test_every_pair_judged_exactly_once_per_ordering(demo_run):
    _, result = demo_run
    j = read(result, "judgments")
    per_attribute = N_CANDIDATES * (N_CANDIDATES - 1)
    assert j.height == N_CONTEXTS * per_attribute * len(ATTRIBUTES)
    keys = j.select("context_id", "attribute", "template_id", "cand_a", "cand_b")
    assert keys.unique().height == j.height
    for _, group in j.group_by(["context_id", "attribute"]):
        cands = sorted(set(group["cand_a"]))
        assert len(cands) == N_CANDIDATES
        assert set(zip(group["cand_a"], group["cand_b"], strict=True)) == set(
            itertools.permutations(cands, 2)
        )


def test_results_stream_back_one_engine_batch_at_a_time(demo_run):
    # 120 prompts in shards of 80 and 40, judge.batch_size=24: rows reach the store batch by batch (what bounds
    # the work a crash can lose), never as several batches returned together at the end of one actor task.
    # (With a remainder block Ray Data may still bundle it with one full block at the tail; 24 divides 120.)
    assert demo_run and sum(ARRIVED) == N_CONTEXTS * N_CANDIDATES * (N_CANDIDATES - 1) * len(ATTRIBUTES)
    assert max(ARRIVED) <= 24 and len(ARRIVED) >= 5


def test_tables_follow_their_schemas(demo_run):
    _, result = demo_run
    parts = sorted((result.run_dir / "judgments").glob("part-*.parquet"))
    assert parts and pq.read_schema(parts[0]).remove_metadata().equals(schemas.JUDGMENTS)
    comparisons = pq.read_table(result.run_dir / "tables" / "comparisons.parquet")
    schemas.check_schema(comparisons, schemas.COMPARISONS, "comparisons table")
    scores = pq.read_table(result.run_dir / "tables" / "scores.parquet")
    schemas.check_schema(scores, schemas.SCORES, "scores table")
    for name in ("candidates", "human_scores", "position_bias", "correlations"):
        assert (result.run_dir / "tables" / f"{name}.parquet").exists()
    assert (result.run_dir / "scores.csv").exists() and (
        result.run_dir / "plots" / "predicted_vs_human.png"
    ).exists()


def test_probabilities_and_the_debiasing_identity(demo_run):
    _, result = demo_run
    j = read(result, "judgments")
    assert ((j["p_a"] > 0) & (j["p_a"] < 1)).all()
    comp = read(result, "comparisons")
    assert comp.height == N_CONTEXTS * N_CANDIDATES * (N_CANDIDATES - 1) // 2 * len(ATTRIBUTES)
    assert ((comp["p"] > 0) & (comp["p"] < 1)).all()
    # p(i beats j) after debiasing from the raw orderings, and p(j beats i) the same way: they sum to one
    p_j_beats_i = (comp["p_ji"] + 1 - comp["p_ij"]) / 2
    np.testing.assert_allclose((comp["p"] + p_j_beats_i).to_numpy(), 1.0, atol=1e-12)
    # each comparison's p agrees with the raw judgments it came from
    lookup = {
        (r["context_id"], r["attribute"], r["cand_a"], r["cand_b"]): r["p_a"] for r in j.iter_rows(named=True)
    }
    for r in comp.head(20).iter_rows(named=True):
        p_ij = lookup[(r["context_id"], r["attribute"], r["cand_i"], r["cand_j"])]
        p_ji = lookup[(r["context_id"], r["attribute"], r["cand_j"], r["cand_i"])]
        assert r["p"] == pytest.approx((p_ij + 1 - p_ji) / 2, abs=1e-12)
    bias = read(result, "position_bias")
    assert bias.height == len(ATTRIBUTES)
    np.testing.assert_allclose(bias["p_a_debiased"].to_numpy(), 0.5, atol=1e-12)


def test_scores_and_ranks_for_every_candidate(demo_run):
    cfg, result = demo_run
    scores = read(result, "scores")
    assert scores.height == N_CONTEXTS * N_CANDIDATES * len(ATTRIBUTES) * len(cfg.scoring.methods)
    for _, group in scores.group_by(["context_id", "attribute", "method"]):
        assert sorted(group["rank"].to_list())[0] == 1 and group["rank"].max() <= N_CANDIDATES
    assert scores["human_score"].null_count() == 0


def test_mlflow_run_holds_params_metrics_and_artifacts(demo_run):
    import mlflow

    cfg, result = demo_run
    client = mlflow.MlflowClient(tracking_uri=result.tracking_uri)
    mlrun = client.get_run(result.mlflow_run_id)
    assert mlrun.info.status == "FINISHED"
    assert mlrun.data.params["pairs.strategy"] == "all_pairs"
    assert mlrun.data.params["judge.model"] == "smollm2-135m-instruct"
    metrics = mlrun.data.metrics
    for attribute in ATTRIBUTES:
        for method in cfg.scoring.methods:
            assert -1 <= metrics[f"{attribute}/{method}/spearman"] <= 1
        assert 0 < metrics[f"{attribute}/p_a"] < 1
        assert metrics[f"{attribute}/p_a_debiased"] == pytest.approx(0.5)
    assert metrics["judge/comparisons"] == N_CONTEXTS * N_CANDIDATES * (N_CANDIDATES - 1) * len(ATTRIBUTES)
    assert 0 < metrics["judge/prefix_cache_share"] < 1
    artifacts = {a.path for a in client.list_artifacts(result.mlflow_run_id)}
    assert {"tables", "plots", "scores.csv", "summary.txt", "config.json"} <= artifacts
    tables = {a.path for a in client.list_artifacts(result.mlflow_run_id, "tables")}
    assert {"tables/judgments.parquet", "tables/scores.parquet", "tables/comparisons.parquet"} <= tables


def test_summary_names_methods_and_position_bias(demo_run):
    cfg, result = demo_run
    summary = (result.run_dir / "summary.txt").read_text()
    for method in cfg.scoring.methods:
        assert method in summary
    assert "P(A) raw" in summary and "prefix cache served" in summary


def test_notebook_runs_on_the_finished_run(demo_run, monkeypatch):
    _, result = demo_run
    notebook = json.loads((ROOT / "notebooks" / "explore_run.ipynb").read_text())
    monkeypatch.setenv("CA_RUN_DIR", str(result.run_dir))
    namespace: dict = {}
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            exec(compile("".join(cell["source"]), "explore_run.ipynb", "exec"), namespace)
    assert namespace["run"].scores.height > 0 and namespace["fig1"] is not None


def test_resume_through_the_cli_judges_only_what_was_lost(demo_run, outputs):
    """Drop the second half of the judgments on disk (as a crash before they were flushed would), rerun the
    CLI on the same folder: exactly the lost comparisons are judged again, none twice."""
    _, result = demo_run
    parts = sorted((result.run_dir / "judgments").glob("part-*.parquet"))
    table = pq.read_table(parts)
    keep = table.num_rows // 2
    for part in parts:
        part.unlink()
    pq.write_table(table.slice(0, keep), result.run_dir / "judgments" / "part-000000.parquet")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            *OVERRIDES,
            f"paths.output_root={outputs}",
            f"paths.run_dir={result.run_dir}",
            "runtime.num_cpus=2",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"{table.num_rows - keep} comparisons to judge" in proc.stderr
    assert f"({keep} already judged" in proc.stderr
    assert "outputs:" in proc.stdout and "MLflow run" in proc.stdout
    j = read(result, "judgments")
    assert j.height == table.num_rows
    assert j.select("context_id", "attribute", "cand_a", "cand_b").unique().height == table.num_rows
