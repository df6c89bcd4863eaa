"""Adaptive rounds end to end with the real CPU judge, run as a user runs them (the CLI, its own local Ray): a pool
built from the shared SummEval data (dataset.pool, the summeval_pool preset), ranked in rounds. The run is killed
with SIGKILL in the middle of round 1, and its engine does not outlive it; the same command with
paths.run_dir=latest finds its folder and resumes the rounds, and in that rerun the rounds' kept judge worker is
SIGKILLed inside a batch (its engine inside it, the CPU default): the pool starts it again, the batch is judged again,
and every prompt is judged once across both runs, the loss in the log and MLflow; the rounds' curve in MLflow as a
step series, and a console that shows only the pipeline's lines. (A worker lost with its node:
tests/run/test_nodes.py.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time

import polars as pl
import psutil
import pytest

from pipeline.config.enums import Debias, Orderings
from pipeline.methods.scorers.contradiction import contradicted
from pipeline.scoring.reduce import reduce_judgments
from tests.conftest import (
    judge_engines,
    kill_in_a_batch,
    ray_worker,
    started_engines,
    stored_replies,
    worker_pid,
)

pytestmark = [pytest.mark.ray, pytest.mark.engine, pytest.mark.slow]

KEYS = ["context_id", "attribute", "template_id", "cand_a", "cand_b"]
#: The rerun's console but its periodic progress lines: its log lines, the summary, the rounds and the ranking (76
#: on 2026-12-05).
STEADY_LINES = 80


def gone(pids: list[int], what: str) -> None:
    """Every judge worker of ``pids`` (its engine inside it) ends within a minute of ``what``."""

    def running(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    deadline = time.monotonic() + 60
    while alive := [pid for pid in pids if running(pid)]:
        assert time.monotonic() < deadline, f"judge workers {alive} outlived {what}"
        time.sleep(0.5)


def test_a_killed_driver_in_round_1_and_a_killed_worker_in_its_rerun_judge_every_prompt_once(
    tmp_path, root, datasets
):
    store = tmp_path / "judgements.sqlite"
    n_items = 16  # the summaries of one SummEval article
    command = [
        sys.executable,
        "-m",
        "pipeline.cli",
        "experiment=summeval_pool",
        f"dataset.path={datasets / 'summeval' / 'summeval.jsonl'}",
        "dataset.max_contexts=1",
        "adaptive.first_round=0.5",  # 8 pairs a round: a matching, then 25% of what is judged (at least 8)
        "adaptive.later_round=0.5",
        "adaptive.budget.calls_per_item=4",  # 64 calls: 32 pairs in 4 rounds of 16 prompts
        "adaptive.stop.criterion=null",
        "judge.batch_size=4",
        "judge.max_model_len=2048",
        f"judge.store_path={store}",
        f"paths.output_root={tmp_path}",
        "paths.run_dir=latest",
    ]

    def judged() -> int:
        return stored_replies(store)

    driver = subprocess.Popen(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while not list((tmp_path / "runs").glob("*/*/rounds/round-00001.parquet")) or judged() < 16 + 4:
        assert driver.poll() is None, "the run ended before it was killed"
        assert time.monotonic() < deadline, "the run did not reach round 1"
        time.sleep(0.3)
    [folder] = list((tmp_path / "runs").glob("*/*"))
    events = folder / "logs" / "engine_events.jsonl"
    # killed inside round 1: its pairs chosen (on disk) and some, not all, of its 16 prompts judged; its engine
    # inside its judge actor (the CPU default), no engine process beside it, and none outlives the driver
    [started] = started_engines(events)
    assert started["inside"] is True and not judge_engines(under=driver.pid)
    assert ray_worker(psutil.Process(worker_pid(started)))
    driver.kill()
    driver.wait()
    gone([worker_pid(started)], "the killed driver")
    stored = judged()
    assert 20 <= stored < 32  # inside round 1

    rerun = subprocess.Popen(command, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    output: dict = {}
    reader = threading.Thread(
        target=lambda: output.update(zip(("stdout", "stderr"), rerun.communicate(), strict=True))
    )
    reader.start()
    deadline = time.monotonic() + 600
    while len(started_engines(events)) < 2:
        assert reader.is_alive(), "the rerun ended before its engine started"
        assert time.monotonic() < deadline, "the rerun started no engine"
        time.sleep(0.2)
    started = started_engines(events)[1]
    kill_in_a_batch(events, started["worker"], worker_pid(started))  # the worker, its engine inside it
    reader.join(timeout=1200)
    assert rerun.returncode == 0, output["stderr"][-4000:]
    assert [folder] == list((tmp_path / "runs").glob("*/*"))  # the same folder, continued
    log = (folder / "run.log").read_text()
    assert f"paths.run_dir=latest: continuing {folder}" in output["stderr"] + output["stdout"] + log
    assert "continuing adaptive rounds in" in log
    # the killed worker: recorded, replaced, its batch judged again
    assert f"1 judge worker(s) were lost during the run with a batch unfinished ({started['worker']})" in log
    assert "the 4 prompt(s) of the unfinished batches went to new workers" in log
    # one judge worker (one engine start) per run, kept for all its rounds, and the one that replaced the worker
    # that was killed: the killed run's one and the rerun's two
    assert len(list((folder / "logs").glob("judge-*.log"))) == 3
    gone([worker_pid(e) for e in started_engines(events)], "the rerun")  # with the engines inside them

    rounds = pl.read_parquet(folder / "tables" / "rounds.parquet").sort("round")
    assert rounds.get_column("round").to_list() == [0, 1, 2, 3, 4]
    assert rounds.get_column("pairs").to_list() == [0, 8, 16, 24, 32]
    assert rounds.get_column("calls").to_list() == [0, 16, 32, 48, 64]
    assert rounds.get_column("stopped").to_list()[-1] == "call budget spent"
    assert rounds.filter(pl.col("round") > 0).get_column("spearman").is_not_null().all()
    assert (rounds.get_column("items") == n_items).all()

    table = pl.read_parquet(folder / "tables" / "judgments.parquet")
    assert table.height == 64 and table.select(KEYS).n_unique() == 64
    # the last fit's count of pairs whose orderings contradict each other is the rule's on the judged rows
    pairs = reduce_judgments(table, Debias.average, Orderings.both).comparisons
    expected = contradicted(pairs.get_column("p_ij").to_numpy(), pairs.get_column("p_ji").to_numpy())
    assert pairs.height == 32 and rounds.get_column("contradicted").to_list()[-1] == int(expected.sum())
    assert rounds.get_column("contradicted").null_count() == 0
    chosen = pl.read_parquet(folder / "tables" / "round_pairs.parquet")
    assert chosen.height == 64 and chosen.get_column("round").unique().sort().to_list() == [0, 1, 2, 3]
    # every judged row has its round, and every pair is there in both orderings
    joined = table.join(chosen, on=["context_id", "attribute", "cand_a", "cand_b"], how="left")
    assert joined.get_column("round").null_count() == 0
    flipped = chosen.select("round", pl.col("cand_b").alias("cand_a"), pl.col("cand_a").alias("cand_b"))
    assert chosen.join(flipped, on=["cand_a", "cand_b"], how="anti").height == 0
    # each prompt judged by an engine once, across the killed run and the resumed one: the store holds one answer
    # per distinct prompt (two pooled summaries with the same text make the same prompt, judged once)
    texts = dict(
        pl.read_parquet(folder / "tables" / "candidates.parquet").select("candidate_id", "text").iter_rows()
    )
    prompts = {(texts[a], texts[b]) for a, b in table.select("cand_a", "cand_b").iter_rows()}
    assert len(prompts) > 60 and judged() == len(prompts)

    # the final scores are the comparative methods on the adaptive comparisons, correlated with humans
    scores = pl.read_parquet(folder / "tables" / "scores.parquet")
    assert scores.filter(pl.col("method") == "poe_gaussian").height == n_items
    # the preset's first method, the rounds' model, with a standard error for every item
    logit_scores = scores.filter(pl.col("method") == "poe_logit")
    assert logit_scores.height == n_items and logit_scores.get_column("stderr").null_count() == 0

    # the report: the criterion over rounds, and the ranking by the rounds' model with per-item intervals
    summary = (folder / "summary.txt").read_text()
    assert f"adaptive rounds, pool ({n_items} items): stopping criterion none (the budget only)" in summary
    assert "call budget spent" in summary and "ranking by poe_logit with 95% intervals" in summary
    ranking = pl.read_csv(folder / "ranking.csv")
    assert ranking.height == n_items and ranking.get_column("lower").null_count() == 0
    assert pl.read_csv(folder / "rounds.csv").get_column("calls").to_list() == [0, 16, 32, 48, 64]
    assert (folder / "plots" / "rounds.png").exists() and (folder / "plots" / "ranking.png").exists()

    # the curve: one point per round in the resumed run's MLflow run (earlier rounds logged again)
    import mlflow

    tracking = json.loads((folder / "tracking.json").read_text())
    client = mlflow.MlflowClient(tracking["tracking_uri"])
    history = client.get_metric_history(tracking["run_id"], "adaptive/calls")
    assert sorted((m.step, m.value) for m in history) == [(r, 16.0 * r) for r in range(5)]
    assert [m.step for m in client.get_metric_history(tracking["run_id"], "adaptive/spearman")] != []
    # the scoring stage left out (and counted) the same contradicting pairs as the rounds' last fit
    metrics = client.get_run(tracking["run_id"]).data.metrics
    assert metrics["scoring/poe_logit_contradicted"] == float(expected.sum())
    assert metrics["judge/lost_workers"] == 1 and metrics["judge/lost_nodes"] == 0
    assert metrics["judge/redone_prompts"] == 4  # the batch in the engine when it died

    # a quiet console: the pipeline's own lines and the summary, no engine or Ray output; that output is in the run
    # folder
    assert "outputs:" in output["stdout"] and "MLflow run" in output["stdout"]
    console = (output["stdout"] + output["stderr"]).splitlines()
    # progress (every 10 s) and a stall (said every 30 s) come as often as the machine is slow: not counted
    periodic = re.compile(r"^\d\d:\d\d:\d\d (judged \d+/\d+ prompts|(WARNING )?no judge worker running)")
    steady = [line for line in console if not periodic.match(line)]
    assert len(steady) <= STEADY_LINES, "\n".join(console)
    noises = (
        "MapWorker",
        "EngineCore",
        "Triton",
        "core_worker",
        "FutureWarning",
        "Warning:",
        "streaming_executor",
        "worker.py",
        "oneDNN",
        "safetensors",
        "mlflow.store",
    )
    for noise in noises:
        assert not any(noise in line for line in console), noise
    assert "Started a local Ray instance" in log
    assert any("vllm" in p.read_text().lower() for p in (folder / "logs").glob("*.log"))
