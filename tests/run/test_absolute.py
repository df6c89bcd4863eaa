"""Absolute beside comparative through a real local Ray and the real CPU vLLM engine: one run judges every pair
(with Chen et al.'s tie option) and every candidate once per absolute mode with the same engine, then scores,
combines, correlates and costs them; a rerun after losing the ratings judges exactly those again."""

from __future__ import annotations

import shutil

import numpy as np
import polars as pl
import pytest

from pipeline.contracts.keys import COMPARE
from pipeline.run.context import run
from tests.conftest import compose, run_fresh, run_notebook

pytestmark = [pytest.mark.ray, pytest.mark.engine, pytest.mark.slow]

N_CONTEXTS, N_CANDIDATES = 2, 4
MODES = ("prompt_score", "g_eval", "implicit", "explicit")
N_PAIRS = N_CONTEXTS * N_CANDIDATES * (N_CANDIDATES - 1)
N_RATINGS = N_CONTEXTS * N_CANDIDATES * len(MODES)
OVERRIDES = [
    f"dataset.demo.n_contexts={N_CONTEXTS}",
    f"dataset.demo.n_candidates={N_CANDIDATES}",
    "dataset.attributes=[coherence]",
    f"absolute.modes=[{','.join(MODES)}]",
    "+prompt=chen_tie",
    "scoring.methods=[win_ratio,avg_prob,poe_gaussian,davidson]",
    "judge.max_model_len=2048",
    "judge.env.VLLM_CPU_KVCACHE_SPACE=2",
    "tracking.experiment=absolute-test",
    "tracking.plots=true",
]


@pytest.fixture(scope="module")
def absolute_run(tmp_path_factory, ray_cluster):
    return run_fresh(tmp_path_factory, OVERRIDES)


def test_every_candidate_is_rated_once_per_mode_beside_the_comparisons(absolute_run):
    _, result = absolute_run
    judgments = pl.from_arrow(result.values["judgments"])
    ratings = pl.from_arrow(result.values["ratings"])
    assert judgments.height == N_PAIRS
    assert ratings.height == N_RATINGS
    per = ratings.group_by("mode", "context_id", "candidate_id").len()
    assert per["len"].to_list() == [1] * N_RATINGS
    assert sorted(ratings["mode"].unique().to_list()) == sorted(MODES)
    # one engine served both kinds of prompt
    assert judgments["worker"].unique().to_list() == ratings["worker"].unique().to_list()
    # the read modes carry a probability-weighted score inside their scale; no failure is ever a 0
    geval = ratings.filter(pl.col("mode") == "g_eval")
    assert geval["score"].is_between(1, 5).all() and (geval["label_mass"] > 0).all()
    implicit = ratings.filter(pl.col("mode") == "implicit")
    assert implicit["score"].is_between(0, 1).all()
    generated = ratings.filter(pl.col("mode").is_in(["prompt_score", "explicit"]))
    assert (generated["score"].is_null() == (generated["n_failed"] == 1)).all()


def test_the_tie_option_is_kept_and_scored(absolute_run):
    _, result = absolute_run
    judgments = pl.from_arrow(result.values["judgments"])
    assert (judgments["p_tie"] > 0).all() and (judgments["p_tie"] < 1).all()
    bias = pl.from_arrow(result.values["position_bias"])
    assert bias["p_tie"][0] == pytest.approx(judgments["p_tie"].mean())
    assert "tie option" in result.summary
    methods = set(pl.from_arrow(result.values["scores"])["method"].unique())
    assert {"davidson", "poe_gaussian"} <= methods


def test_correlations_costs_and_the_combined_method(absolute_run):
    _, result = absolute_run
    corr = pl.from_arrow(result.values["correlations"])
    methods = set(corr["method"])
    assert {*MODES, "implicit_max", "poe_gaussian", "combined:geval", "combined:s1"} <= methods
    cost = pl.from_arrow(result.values["cost"])
    assert set(cost["mode"]) == {COMPARE, *MODES}
    assert cost.filter(pl.col("mode") == COMPARE)["prompts"].sum() == N_PAIRS
    assert cost.filter(pl.col("mode") != COMPARE)["prompts"].to_list() == [N_CONTEXTS * N_CANDIDATES] * len(
        MODES
    )
    assert (cost["seconds"] > 0).all() and (cost["prompt_tokens"] > 0).all()
    assessment = pl.from_arrow(result.values["assessment"])
    combined = assessment.filter(pl.col("method") == "combined:geval").row(0, named=True)
    assert combined["approach"] == "combined" and combined["templates"] == "chen_pair+geval"
    assert combined["prompts"] == N_PAIRS + N_CONTEXTS * N_CANDIDATES
    assert combined["prompts_per_candidate"] == pytest.approx((N_PAIRS + N_CONTEXTS * N_CANDIDATES) / 8)
    run_dir = result.run_dir
    for name in ("cost.csv", "assessment.csv", "plots/spearman_by_mode.png", "tables/ratings.parquet"):
        assert (run_dir / name).exists(), name
    assert "could not be drawn" not in result.summary
    assert np.isfinite(result.metrics["coherence/combined:geval/weight"])


def test_the_mlflow_run_holds_the_absolute_results(absolute_run):
    import mlflow

    _, result = absolute_run
    client = mlflow.MlflowClient(tracking_uri=result.tracking_uri)
    logged = client.get_run(result.mlflow_run_id)
    assert "coherence/g_eval/spearman" in logged.data.metrics
    assert "coherence/combined:s1/spearman" in logged.data.metrics
    assert any(k.startswith("cost/coherence/g_eval/") for k in logged.data.metrics)
    artifacts = {a.path for a in client.list_artifacts(result.mlflow_run_id)}
    assert {"assessment.csv", "cost.csv"} <= artifacts


def test_the_notebook_shows_the_absolute_results(absolute_run, monkeypatch):
    _, result = absolute_run
    namespace = run_notebook(result.run_dir, monkeypatch)
    assert namespace["run"].ratings.height == N_RATINGS
    assert namespace["fig_absolute"] is not None


def test_a_rerun_judges_exactly_the_lost_ratings(absolute_run):
    cfg, result = absolute_run
    before = pl.from_arrow(result.values["ratings"])
    shutil.rmtree(result.run_dir / "ratings")
    cfg.paths.run_dir = str(result.run_dir)
    cfg.tracking.enabled = False
    again = run(cfg)
    assert again.judge_stats.judged_now == N_RATINGS
    after = pl.from_arrow(again.values["ratings"])
    keys = ["mode", "context_id", "candidate_id"]
    # greedy and exact reads: the same answers again
    joined = before.join(after, on=keys, suffix="_again")
    assert joined.height == N_RATINGS
    np.testing.assert_allclose(
        joined["score"].fill_null(-1).to_numpy(), joined["score_again"].fill_null(-1).to_numpy(), atol=1e-4
    )


# A user's per-candidate table of conversations (MT-Bench's shape: two user turns, the candidates the next assistant
# turn), each with a reference answer and a checklist (TICK), people's scores beside.
CONVERSATIONS = [
    ("What is 2 + 2?", "And doubled?", "8", ["Does it say 8?", "Is it one short sentence?"]),
    ("Name a colour of the sky.", "At sunset?", "Orange or red.", ["Does it name a colour?"]),
]
ANSWERS = ("The answer is 8.", "It is blue, I think, or maybe 5.", "Orange.")


def conversation_table(folder) -> str:
    rows = [
        {"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": "Sure."},
                      {"role": "user", "content": follow}],
         "reference": reference, "checklist": checklist, "model": f"m{k}", "response": answer, "quality": 3 - k}
        for q, follow, reference, checklist in CONVERSATIONS
        for k, answer in enumerate(ANSWERS)
    ]  # fmt: skip
    path = folder / "conversations.parquet"
    pl.DataFrame(rows).write_parquet(path)
    return str(path)


def test_workflow_absolute_rates_without_comparisons_and_asks_each_checklist_item(tmp_path, capsys):
    """workflow=absolute on a user's table of conversations with a reference and a checklist: one G-Eval prompt per
    candidate and one yes/no prompt per checklist item (TICK), no pairs; make check shows the prompt the judge reads
    (the conversation, the reference, the item asked) and plans what the run judges; a candidate's checklist score is
    the mean of its items' p(yes); the comparative tables are empty, the summary and the cost are the absolute ones
    (in-process, no Ray); the finished folder run again judges nothing."""
    from pipeline.run.check import main

    overrides = [
        "workflow=absolute",
        "absolute.modes=[g_eval,checklist]",
        "dataset.name=conversations",
        f"dataset.path={conversation_table(tmp_path)}",
        "dataset.attributes=[quality]",
        "dataset.context_noun=conversation",
        "dataset.candidate_noun=reply",
        "runtime=inprocess",
        "judge.env.VLLM_CPU_KVCACHE_SPACE=1",
        f"paths.output_root={tmp_path}",
        "tracking.enabled=false",
    ]
    items = sum(len(c[3]) for c in CONVERSATIONS) * len(ANSWERS)
    assert main(overrides) == 0
    plan = capsys.readouterr().out
    shown = "\n".join(
        line.removeprefix("  | ")
        for line in plan[plan.index("prompt (checklist, template tick)") :].splitlines()
    )
    for part in ("Conversation: User: What is 2 + 2?", "Assistant: Sure.", "Reference answer:\n8", "Checklist:\n1. Does it say 8?",
                 "Checklist question: Does it say 8?", "Answer:"):  # fmt: skip
        assert part in shown, (part, shown)
    assert f"prompts to judge: {items + 6} ({items} checklist, 6 g_eval)" in plan, plan
    cfg = compose(overrides)
    result = run(cfg)
    assert result.values["judgments"].num_rows == 0 and result.values["comparisons"].num_rows == 0
    ratings = pl.from_arrow(result.values["ratings"])
    assert ratings.filter(pl.col("mode") == "g_eval").height == 6
    asked = ratings.filter(pl.col("mode") == "checklist")
    assert asked.height == items and set(asked["template_id"]) == {"tick#1", "tick#2"}
    assert asked["score"].is_between(0, 1).all() and (asked["label_mass"] > 0).all()
    scores = pl.from_arrow(result.values["absolute_scores"]).filter(pl.col("method") == "checklist")
    mean = asked.group_by("context_id", "candidate_id").agg(pl.col("score").mean().alias("mean"))
    joined = scores.join(mean, on=["context_id", "candidate_id"])
    assert joined.height == 6 and np.allclose(joined["score"], joined["mean"], atol=1e-12)
    corr = pl.from_arrow(result.values["correlations"])
    assert sorted(corr["method"].to_list()) == ["checklist", "g_eval"]
    cost = pl.from_arrow(result.values["cost"])
    assert sorted(zip(cost["mode"], cost["template_id"], cost["prompts"], strict=True)) == [
        ("checklist", "tick", items), ("g_eval", "geval", 6)]  # fmt: skip
    assert "P(A)" not in result.summary and "g_eval" in result.summary and "checklist" in result.summary
    cfg.paths.run_dir = str(result.run_dir)
    assert run(cfg).judge_stats.judged_now == 0


def test_the_check_plans_what_the_run_judged_and_a_resumed_folder_is_planned_as_done(absolute_run):
    """make check on the same config (pipeline.run.check): the prompts it plans, by mode, are those the run judged,
    and the engines it plans are those that started (the run folder's events); on the finished folder it plans
    nothing more to judge. It creates no run folder."""
    from pipeline.config.hydra import compose as compose_config
    from pipeline.run.check import check
    from pipeline.storage.events import read_events

    _, result = absolute_run  # (its config is changed by the rerun's test: composed afresh here)
    root = result.run_dir.parents[2]
    folders = sorted(result.run_dir.parent.iterdir())
    plan = check(compose_config([*OVERRIDES, f"paths.output_root={root}"]))
    assert sorted(result.run_dir.parent.iterdir()) == folders  # nothing created
    judgments = pl.from_arrow(result.values["judgments"])
    ratings = pl.from_arrow(result.values["ratings"])
    judged = {COMPARE: judgments.height, **{m: n for m, n in ratings.group_by("mode").len().iter_rows()}}
    assert plan.by_mode == judged and plan.prompts == result.judge_stats.judged_now == N_PAIRS + N_RATINGS
    started = [
        e
        for e in read_events(result.run_dir / "logs" / "engine_events.jsonl")
        if e["event"] == "engine_started"
    ]
    # one engine per run of the folder (the rerun's test judges in it again): the plan's one start, as each run's
    assert [j.engine_starts for j in plan.judges] == ["1"] and plan.stored == 0
    assert started and len(started) == len({e["worker"] for e in started})
    # the prompt tokens the engine counted, against the estimate from a tokenized sample (a tenth either way)
    counted = result.judge_stats.prompt_tokens
    assert abs(plan.prompt_tokens - counted) < 0.1 * counted, (plan.prompt_tokens, counted)
    again = check(compose_config([*OVERRIDES, f"paths.run_dir={result.run_dir}"]))
    assert again.resumed and again.prompts == 0 and again.stored == N_PAIRS + N_RATINGS
    assert "0 already judged" in plan.text() and f"{N_PAIRS + N_RATINGS} already judged" in again.text()


def test_the_runs_are_listed_found_by_name_or_mlflow_id_and_served_in_the_mlflow_ui(absolute_run, tmp_path):
    """make runs, make review RUN=<name or id>, make mlflow (pipeline.run.runs) on the run's own output root: its
    status and numbers listed; found by folder, folder name and MLflow run id; a stopped run and a running one told
    apart; the MLflow UI a real server on the run's store that knows the run."""
    import json
    import os
    import signal
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    from pipeline.contracts.errors import UserError
    from pipeline.review.__main__ import _run_dir
    from pipeline.run.runs import find_run, runs, table
    from tests.conftest import ROOT

    _, result = absolute_run
    root = result.run_dir.parents[2]
    [found] = [r for r in runs(root) if r.folder == result.run_dir]
    assert (
        found.status == "finished"
        and found.judgments == N_PAIRS
        and found.mlflow_run_id == result.mlflow_run_id
    )
    assert found.method is not None and result.run_dir.name in table(runs(root))
    for ref in (str(result.run_dir), result.run_dir.name, result.mlflow_run_id, None):
        assert find_run(ref, root) == result.run_dir
        assert _run_dir(ref, str(root)) == result.run_dir  # the review finds it wherever the output root is
    with pytest.raises(UserError, match="no run folder, folder name or MLflow run id 'nope'"):
        find_run("nope", root)
    # a run stopped before its summary, and one a process holds
    stopped = root / "runs" / "2000-01-01" / "00-00-00-demo"
    shutil.copytree(result.run_dir, stopped, ignore=shutil.ignore_patterns("summary.txt", "tracking.json"))
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from pipeline.run.lock import "
         "run_folder_lock\nwith run_folder_lock(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(600)",
         str(result.run_dir)], cwd=ROOT, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        status = {r.folder: r.status for r in runs(root)}
        assert status[stopped] == "stopped" and status[result.run_dir] == "running"
    finally:
        holder.kill()
        holder.wait()
        shutil.rmtree(stopped)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ui = subprocess.Popen(
        [sys.executable, "-m", "pipeline.run.runs", "mlflow", "--root", str(root), "--port", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/api/2.0/mlflow/runs/get?run_id={result.mlflow_run_id}"
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(url, timeout=5) as reply:
                    body = json.loads(reply.read())
                break
            except OSError:
                assert ui.poll() is None and time.monotonic() < deadline, "the MLflow UI did not start"
                time.sleep(1)
        assert body["run"]["info"]["run_id"] == result.mlflow_run_id
    finally:
        os.killpg(ui.pid, signal.SIGTERM)  # the UI and its server's workers
        ui.wait(timeout=30)
