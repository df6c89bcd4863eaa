"""Names as users and data give them (a judge called ``gpt-4o (2024)``, ``gpt+rag`` or ``/``) through a whole run with
MLflow on: every output written, every metric logged under a valid key that keeps the names apart, the MLflow run
FINISHED with its artifacts; a run whose results MLflow cannot take keeps its outputs and says so (exit 3)."""

from __future__ import annotations

import mlflow
import pytest

from pipeline.contracts.values import name_part, tracking_key
from pipeline.run.context import run
from tests.conftest import compose

BASE = ["experiment=judgebench_recorded", "runtime=inprocess", "jury.judges=[]", "tracking.plots=false"]


@pytest.mark.parametrize("name", ["gpt-4o (2024)", "gpt+rag"])
def test_an_odd_judge_name_runs_to_the_end_with_every_result_in_mlflow(tmp_path, name):
    result = run(compose([*BASE, f"judge.name='{name}'", f"paths.output_root={tmp_path}"]))
    assert result.reporting_error is None and result.mlflow_run_id
    logged = mlflow.tracking.MlflowClient(result.tracking_uri).get_run(result.mlflow_run_id)
    assert logged.info.status == "FINISHED"
    keys = set(logged.data.metrics)
    assert any(f"/{tracking_key(name)}/" in k for k in keys)  # the meta-evaluation's, per judge
    assert {k for k in keys if name in k} == set()  # the raw name, which MLflow refuses, is in no key
    finite = [k for k, v in result.metrics.items() if v == v and abs(v) != float("inf")]
    assert finite and all(tracking_key(k) in keys for k in finite)
    artifacts = {
        a.path for a in mlflow.tracking.MlflowClient(result.tracking_uri).list_artifacts(result.mlflow_run_id)
    }
    assert {"tables", "config.json", "run.log"} <= artifacts


def test_keys_are_valid_and_distinct_whatever_the_names():
    from mlflow.utils.validation import _validate_metric_name

    names = [
        "gpt-4o (2024)",
        "gpt-4o _2024_",
        "gpt+rag",
        "gpt_rag",
        "/",
        "//",
        ".",
        "..",
        "a" * 600,
        "é ü",
        "x:y",
    ]
    keys = [tracking_key(f"card/coherence/{n}/c1/accuracy") for n in names]
    for key in keys:
        _validate_metric_name(key)  # raises on a key MLflow refuses
    assert len(set(keys)) == len(keys)
    assert (
        tracking_key("card/coherence/judge/c1/accuracy") == "card/coherence/judge/c1/accuracy"
    )  # kept as it was
    assert len({name_part(n) for n in names}) == len(names)
    assert all("/" not in name_part(n) and name_part(n) not in (".", "..") for n in names)


def test_a_run_whose_results_mlflow_refuses_keeps_its_outputs_and_says_so(tmp_path, monkeypatch):
    """MLflow failing after the judging (a server that went away): the run returns, its outputs written, the error
    reported (the CLI's exit status 3), nothing raised."""
    from pipeline.run import tracking

    def refuse(self, metrics, step=None):
        if step is None:  # the final metrics, after every output is written
            raise mlflow.exceptions.MlflowException("the tracking server went away")

    monkeypatch.setattr(
        tracking.Tracker, "log_metrics", refuse
    )  # a tracking server that fails: stood in for here
    result = run(compose([*BASE, f"paths.output_root={tmp_path}"]))
    assert "the tracking server went away" in result.reporting_error
    assert (result.run_dir / "summary.txt").exists() and result.tables
    assert "could not be logged" in (result.run_dir / "run.log").read_text()


def test_model_names_from_the_data_reach_every_key_and_table_as_they_are(tmp_path):
    """A user's table whose models are called `gpt-4o (2024)`, `gpt+rag` and `a/b`, judged by a file of verdicts,
    leaderboard and all, with MLflow on: the tables keep the names as given, every key is valid, the run FINISHED."""
    import itertools
    import json

    import polars as pl

    models = ["gpt-4o (2024)", "gpt+rag", "a/b"]
    rows = [{"prompt": f"Question {q}?", "model": m, "response": f"Answer {q} by {m}.", "quality": 1 + (q + k) % 5}
            for q in range(4) for k, m in enumerate(models)]  # fmt: skip
    pl.DataFrame(rows).write_csv(tmp_path / "answers.csv")
    from pipeline.config.enums import Correlation
    from pipeline.data.source import load_input

    overrides = ["dataset.name=mine", f"dataset.path={tmp_path / 'answers.csv'}", "dataset.attributes=[quality]",
                 "dataset.candidate_noun=answer", "dataset.context_noun=question"]  # fmt: skip
    loaded = load_input(compose(overrides).dataset, Correlation.auto, tmp_path, tmp_path)
    cands = pl.from_arrow(loaded.candidates)
    verdicts = tmp_path / "verdicts.jsonl"
    with verdicts.open("w") as fh:
        for (cid,), group in cands.group_by(["context_id"]):
            for a, b in itertools.permutations(group["candidate_id"].to_list(), 2):
                fh.write(
                    json.dumps({"context_id": cid, "first": a, "second": b, "p_first": 0.7 if a < b else 0.4})
                    + "\n"
                )
    result = run(compose([*overrides, "judge=recorded", f"judge.model={verdicts}", "runtime=inprocess",
                          "tracking.plots=false", f"paths.output_root={tmp_path / 'out'}"]))  # fmt: skip
    assert result.reporting_error is None
    logged = mlflow.tracking.MlflowClient(result.tracking_uri).get_run(result.mlflow_run_id)
    assert logged.info.status == "FINISHED"
    board = pl.read_parquet(result.tables["leaderboard"])
    assert set(board["model"]) >= set(models)
    assert any(
        k.startswith("leaderboard/") and f"/{tracking_key('gpt-4o (2024)')}/" in k
        for k in logged.data.metrics
    )
