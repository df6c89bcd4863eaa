"""The whole pipeline through a real local Ray and the real CPU vLLM engine (SmolLM2-135M-Instruct).

One run on the demo set is shared by the checks below; then the CLI is pointed at its folder: with another
engine dtype it is refused before any judging. (A run continued through the CLI, with its quiet console:
``tests/run/test_adaptive.py``, after its driver is killed.)
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

from pipeline.contracts import schemas
from pipeline.contracts.errors import ConfigError
from pipeline.judge.hardware import engine_dtype
from pipeline.methods.scorers import poe_gaussian
from pipeline.methods.verdicts.win_probability import p_a_wins, side_logprobs
from pipeline.run.context import run
from tests.conftest import ROOT, compose, run_notebook

pytestmark = [pytest.mark.ray, pytest.mark.engine, pytest.mark.slow]

N_CONTEXTS, N_CANDIDATES, ATTRIBUTES = 3, 5, ("coherence", "fluency")
N_PROMPTS = N_CONTEXTS * N_CANDIDATES * (N_CANDIDATES - 1) * len(ATTRIBUTES)
OVERRIDES = [
    f"dataset.demo.n_contexts={N_CONTEXTS}",
    f"dataset.demo.n_candidates={N_CANDIDATES}",
    "judge.max_model_len=2048",
    "judge.batch_size=24",  # divides the 120 prompts: every block is one full batch (see the streaming test)
    "judge.env.VLLM_CPU_KVCACHE_SPACE=2",
    "runtime.max_shards=2",
    "scoring.methods=[win_ratio,avg_prob,bradley_terry,poe_gaussian,poe_bt]",
    "tracking.plots=true",
]
# the driver's view of the stream in the shared run: the size of every batch of results that reached the store
ARRIVED: list[int] = []


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    return tmp_path_factory.mktemp("outputs")


@pytest.fixture(scope="module")
def demo_run(outputs, ray_cluster):
    from pipeline.storage.parts import JudgmentParts

    cfg = compose([*OVERRIDES, f"paths.output_root={outputs}"])
    add = JudgmentParts.add

    def record(self, batch):
        ARRIVED.append(batch.num_rows)
        add(self, batch)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(JudgmentParts, "add", record)
        result = run(cfg)
    return cfg, result


def read(result, name):
    return pl.read_parquet(result.run_dir / "tables" / f"{name}.parquet")


def cli(outputs, *overrides: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *OVERRIDES, f"paths.output_root={outputs}", *overrides],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_every_pair_judged_exactly_once_per_ordering(demo_run):
    _, result = demo_run
    j = read(result, "judgments")
    assert j.height == N_PROMPTS
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
    assert demo_run and sum(ARRIVED) == N_PROMPTS
    assert max(ARRIVED) <= 24 and len(ARRIVED) >= 5


def test_tables_follow_their_schemas(demo_run):
    _, result = demo_run
    parts = sorted((result.run_dir / "judgments").glob("part-*.parquet"))
    assert parts and pq.read_schema(parts[0]).remove_metadata().equals(schemas.JUDGMENTS)
    for name, schema in (
        ("comparisons", schemas.COMPARISONS),
        ("scores", schemas.SCORES),
        ("position_bias", schemas.POSITION_BIAS),
        ("correlations", schemas.CORRELATIONS),
        ("candidates", schemas.CANDIDATES),
        ("human_scores", schemas.HUMAN_SCORES),
        ("unscored", schemas.UNSCORED),
    ):
        assert pq.read_schema(result.run_dir / "tables" / f"{name}.parquet").equals(schema), name
    assert (result.run_dir / "scores.csv").exists() and (
        result.run_dir / "plots" / "predicted_vs_human.png"
    ).exists()
    assert "could not be drawn" not in result.summary  # every figure the tables allow


def test_the_judge_ran_in_the_dtype_chosen_for_this_cpu(demo_run):
    _, result = demo_run
    judge = json.loads((result.run_dir / "judge.json").read_text())
    chosen = engine_dtype(None, on_gpu=False)
    assert (
        judge["dtype"] == judge["engine"]["dtype"] == chosen.dtype and judge["dtype_reason"] == chosen.reason
    )
    # and the engine itself says so in its log in the run folder
    engine_logs = "".join(p.read_text() for p in (result.run_dir / "logs").glob("judge-*.log"))
    assert f"'dtype': '{chosen.dtype}'" in engine_logs or f"dtype=torch.{chosen.dtype}" in engine_logs


def test_probabilities_and_the_debiasing_identity(demo_run):
    _, result = demo_run
    j = read(result, "judgments")
    # p(A wins) is the renormalised label probability of the label log-probabilities read from the engine
    lp = np.array(j["label_logprobs"].to_list())
    np.testing.assert_allclose(j["p_a"].to_numpy(), p_a_wins(*side_logprobs(lp, 2)), rtol=1e-12)
    comp = read(result, "comparisons")
    assert comp.height == N_PROMPTS // 2
    # each comparison's p agrees with the raw judgments it came from
    lookup = {
        (r["context_id"], r["attribute"], r["cand_a"], r["cand_b"]): r["p_a"] for r in j.iter_rows(named=True)
    }
    for r in comp.iter_rows(named=True):
        p_ij = lookup[(r["context_id"], r["attribute"], r["cand_i"], r["cand_j"])]
        p_ji = lookup[(r["context_id"], r["attribute"], r["cand_j"], r["cand_i"])]
        assert (r["p_ij"], r["p_ji"]) == (p_ij, p_ji)
        assert r["p"] == pytest.approx((p_ij + 1 - p_ji) / 2, abs=1e-12)
    bias = read(result, "position_bias")
    assert bias.height == len(ATTRIBUTES)
    for row in bias.iter_rows(named=True):
        assert row["p_a"] == pytest.approx(j.filter(pl.col("attribute") == row["attribute"])["p_a"].mean())


def test_scores_are_the_methods_on_the_comparisons(demo_run):
    cfg, result = demo_run
    scores = read(result, "scores")
    assert scores.height == N_CONTEXTS * N_CANDIDATES * len(ATTRIBUTES) * len(cfg.scoring.methods)
    assert scores["human_score"].null_count() == 0
    comp = read(result, "comparisons")
    for (context, attribute), group in comp.group_by(["context_id", "attribute"]):
        ids = sorted(set(group["cand_i"]) | set(group["cand_j"]))
        index = {c: n for n, c in enumerate(ids)}
        fit = poe_gaussian.fit(
            len(ids),
            np.array([index[c] for c in group["cand_i"]]),
            np.array([index[c] for c in group["cand_j"]]),
            group["p"].to_numpy(),
        )
        got = scores.filter(
            (pl.col("context_id") == context)
            & (pl.col("attribute") == attribute)
            & (pl.col("method") == "poe_gaussian")
        )
        by_id = dict(zip(got["candidate_id"], got["score"], strict=True))
        np.testing.assert_allclose([by_id[c] for c in ids], fit.scores, atol=1e-9)
        # rank 1 is the best score
        assert got.sort("score", descending=True)["rank"][0] == 1


def test_mlflow_run_holds_params_metrics_and_artifacts(demo_run):
    import mlflow

    cfg, result = demo_run
    client = mlflow.MlflowClient(tracking_uri=result.tracking_uri)
    mlrun = client.get_run(result.mlflow_run_id)
    assert mlrun.info.status == "FINISHED"
    assert mlrun.data.params["pairs.strategy"] == "all_pairs"
    assert mlrun.data.params["judge.model"] == "smollm2-135m-instruct"
    metrics = mlrun.data.metrics
    corr = read(result, "correlations")
    for row in corr.iter_rows(named=True):
        assert metrics[f"{row['attribute']}/{row['method']}/spearman"] == pytest.approx(row["spearman"])
    assert metrics["judge/comparisons"] == N_PROMPTS
    assert metrics["stage/judge/seconds"] > 0
    assert 0 < metrics["judge/prefix_cache_share"] < 1
    artifacts = {a.path for a in client.list_artifacts(result.mlflow_run_id)}
    assert {
        "tables",
        "plots",
        "scores.csv",
        "summary.txt",
        "config.json",
        "judge.json",
        "run.log",
    } <= artifacts
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
    namespace = run_notebook(result.run_dir, monkeypatch)
    assert namespace["run"].scores.height > 0 and namespace["fig1"] is not None
    assert namespace["card"].height >= 1 and namespace["fig_card"] is not None  # the judge's report card
    # every table the run wrote, by name; one it did not write is an empty frame
    tables = namespace["run"]
    assert {"scores", "comparisons", "judge_card", "leaderboard"} <= set(tables.names())
    assert tables.judge_card.height >= 1 and tables.no_such_table.is_empty()


def test_the_notebook_runs_in_its_jupyter_kernel(demo_run, monkeypatch):
    """The notebook as Jupyter runs it: every cell in the python3 kernel the notebook extra installs, none failing."""
    import json

    import nbclient
    import nbformat

    _, result = demo_run
    monkeypatch.setenv("CA_RUN_DIR", str(result.run_dir))
    notebook = nbformat.read(ROOT / "notebooks" / "explore_run.ipynb", as_version=4)
    assert notebook.metadata.kernelspec.name == "python3"
    nbclient.NotebookClient(notebook, timeout=600, resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"], json.dumps(outputs)[:2000]
    assert any(o.output_type in ("display_data", "execute_result") for o in outputs)


def test_resume_false_on_a_folder_with_judgments_is_refused_at_once(demo_run, outputs):
    _, result = demo_run
    parts = sorted((result.run_dir / "judgments").glob("part-*.parquet"))
    cfg = compose(
        [
            *OVERRIDES,
            f"paths.output_root={outputs}",
            f"paths.run_dir={result.run_dir}",
            "runtime.resume=false",
        ]
    )
    with pytest.raises(ConfigError, match="runtime.resume=false but paths.run_dir=.* holds"):
        run(cfg)
    assert sorted((result.run_dir / "judgments").glob("part-*.parquet")) == parts


def test_resuming_with_another_engine_dtype_is_refused_before_judging(demo_run, outputs):
    _, result = demo_run
    import mlflow

    parts = sorted((result.run_dir / "judgments").glob("part-*.parquet"))
    config = (result.run_dir / "config.json").read_text()
    client = mlflow.MlflowClient(tracking_uri=result.tracking_uri)
    runs_before = len(client.search_runs([client.get_run(result.mlflow_run_id).info.experiment_id]))
    other = "bfloat16" if engine_dtype(None, on_gpu=False).dtype == "float32" else "float32"
    proc = cli(outputs, f"paths.run_dir={result.run_dir}", f"+judge.engine.dtype={other}")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "judge.engine.dtype" in proc.stderr and f'"{other}"' in proc.stderr
    assert "Traceback" not in proc.stderr and "HYDRA_FULL_ERROR" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if "different judging configuration" in line]) == 1
    # nothing of the folder changed: its judgments, its config.json, and no MLflow run was started
    assert sorted((result.run_dir / "judgments").glob("part-*.parquet")) == parts
    assert (result.run_dir / "config.json").read_text() == config
    assert len(client.search_runs([client.get_run(result.mlflow_run_id).info.experiment_id])) == runs_before
