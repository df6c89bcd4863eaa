"""Faults on a real local Ray with the real vLLM engine: a killed driver, and the rerun that continues its folder
with its judge worker killed mid-run: the run carries on (a new worker, a new engine) with every prompt judged
exactly once in the final table and the redone prompts reported. An engine process that dies more often than
allowed, or cannot start, stops the run. A whole actor lost (with its node) is tests/run/test_nodes.py's."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import psutil
import pytest

from pipeline.run.context import run
from tests.conftest import (
    ROOT,
    compose,
    identity,
    judge_engines,
    kill_in_a_batch,
    ray_worker,
    started_engines,
    stored_replies,
    vllm_processes,
    worker_pid,
)

pytestmark = [pytest.mark.ray, pytest.mark.engine, pytest.mark.slow]

KEYS = ["context_id", "attribute", "template_id", "cand_a", "cand_b"]


def wait_for(condition, what: str, seconds: float = 300.0, alive: threading.Thread | None = None) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        assert alive is None or alive.is_alive(), f"the run ended before {what}"
        time.sleep(0.2)


def new_engine(before: set) -> object:
    """The one judge engine process started since ``before`` (identities), with the machine's vLLM processes in the
    message otherwise."""
    engines = [p for p in judge_engines() if identity(p) not in before]
    assert len(engines) == 1, f"one new judge engine, found {engines}; vLLM processes: {vllm_processes()}"
    return engines[0]


def wait_for_a_first_batch(log: Path, worker: threading.Thread) -> None:
    """Until the run's log has its first progress line (``judged 8/120 prompts ...``, pipeline.runtime.progress)."""
    wait_for(
        lambda: (
            log.exists() and re.search(r"judged \d+/\d+ prompts", log.read_text(errors="replace")) is not None
        ),
        "a first batch",
        alive=worker,
    )


@contextmanager
def running(cfg) -> Iterator[tuple[threading.Thread, dict]]:
    """The run of ``cfg`` in a thread of this process (its ``value`` or ``error`` in the dict), waited for on the
    way out whatever the test found: a run left going would write to the next test's log and hold its engine."""
    result: dict = {}

    def target():
        try:
            result["value"] = run(cfg)
        except BaseException as exc:  # the test reports it
            result["error"] = exc

    worker = threading.Thread(target=target)
    worker.start()
    try:
        yield worker, result
    finally:
        worker.join(timeout=900)


def small_run(tmp_path, *extra: str):
    return compose(
        [
            "dataset.demo.n_contexts=3",
            "dataset.demo.n_candidates=5",
            "judge.batch_size=8",
            "judge.max_model_len=2048",
            f"paths.output_root={tmp_path}",
            f"paths.run_dir={tmp_path / 'run'}",
            f"judge.store_path={tmp_path / 'judgements.sqlite'}",
            *extra,
        ]
    )


def stopped(worker, result, when: str) -> str:
    """The error a run ended with, once its process ended (within ten minutes) with an error and no value."""
    worker.join(timeout=600)
    assert not worker.is_alive(), f"the run hangs {when}"
    error = result.get("error")
    assert error is not None and "value" not in result
    return str(error)


def engines_end(before: set) -> None:
    """Every judge engine started since ``before`` ends within a minute."""
    wait_for(
        lambda: not [p for p in judge_engines() if identity(p) not in before],
        "the engines to end",
        seconds=60,
    )


def test_an_engine_killed_more_often_than_allowed_stops_the_run_with_what_was_judged_on_disk(
    tmp_path, ray_cluster
):
    """runtime.max_engine_restarts=0: the first engine death ends the run, within a bounded time, naming the
    bound; the prompts judged before it are in the run folder and a rerun of the folder judges only the rest."""
    folder = tmp_path / "run"
    before = {identity(p) for p in judge_engines()}
    cfg = small_run(tmp_path, "runtime.max_engine_restarts=0", "judge.engine_process=own")
    with running(cfg) as (worker, result):
        log = folder / "run.log"
        wait_for_a_first_batch(log, worker)
        engine = new_engine(before)
        os.kill(engine.pid, signal.SIGKILL)
        message = stopped(worker, result, "after its engine died")
    assert "the judge stage stopped" in message and "runtime.max_engine_restarts=0" in message
    assert f"paths.run_dir={folder}" in message
    assert "1 judge engine(s) died during the run" in log.read_text(errors="replace")
    parts = list((folder / "judgments").glob("*.parquet"))
    stored = pl.concat([pl.read_parquet(p) for p in parts]).height if parts else 0
    assert re.search(rf"(\d+) of {3 * 5 * 4 * 2} prompt\(s\) were judged", message)[1] == str(stored)
    assert stored >= 8
    engines_end(before)


def test_an_engine_that_cannot_start_stops_the_run_at_once(tmp_path, ray_cluster):
    """A checkpoint whose weights are cut short (the driver reads its config and tokenizer; the engine cannot
    load it): the run stops after one attempt with the engine's error, and no engine is left behind."""
    from pipeline.judge.models import resolve_model

    source = Path(
        resolve_model("smollm2-135m-instruct", ROOT / ".cache").path
    )  # the project's converted checkpoint
    broken = tmp_path / "broken-checkpoint"
    broken.mkdir()
    for f in source.iterdir():
        if f.name != "model.safetensors":
            (broken / f.name).write_bytes(f.read_bytes())
    weights = (source / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(weights[: len(weights) // 3])
    before = {identity(p) for p in judge_engines()}
    with running(small_run(tmp_path, f"judge.model={broken}")) as (worker, result):
        message = stopped(worker, result, "when its engine cannot start")
    assert "the judge stage stopped" in message and "0 of 120 prompt(s) were judged" in message
    assert "could not start its engine" in message
    engines_end(before)


def test_a_killed_driver_leaves_no_engine_behind_and_the_rerun_replaces_a_killed_worker_judging_nothing_twice(
    tmp_path, root
):
    """The run as a user starts it (the CLI, its own local Ray), killed with SIGKILL after its first batches; its
    engine does not outlive it. The same command with paths.run_dir=latest finds the folder, and nothing judged
    before the kill is judged again (it comes from the judgement store). In that rerun the judge worker's process,
    its engine inside it (the CPU default), is SIGKILLed inside a batch: the pool starts a new worker, the batch is
    judged again, and the run ends 0 with every prompt once, the loss and the redone prompts in its log and MLflow.
    (An engine of its own processes, the GPU default, killed: the next test, whose watchdog path is the same up
    to the worker's end.) Its console shows only the pipeline's lines."""
    import json
    import subprocess
    import sys

    import mlflow

    n_contexts, n_candidates = 3, 5
    n_prompts = n_contexts * n_candidates * (n_candidates - 1) * 2
    store = tmp_path / "judgements.sqlite"
    command = [
        sys.executable,
        "-m",
        "pipeline.cli",
        f"dataset.demo.n_contexts={n_contexts}",
        f"dataset.demo.n_candidates={n_candidates}",
        "judge.batch_size=8",
        "judge.max_model_len=2048",
        f"judge.store_path={store}",
        f"paths.output_root={tmp_path}",
        "paths.run_dir=latest",
    ]
    before = {identity(p) for p in judge_engines()}  # (none, unless a run of this worker is still ending)
    driver = subprocess.Popen(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def judged() -> int:
        return stored_replies(store)

    deadline = time.monotonic() + 400
    while judged() < 16:  # two batches judged
        assert driver.poll() is None, "the run ended before it was killed"
        assert time.monotonic() < deadline, "the run judged nothing"
        time.sleep(0.5)
    # the run's engine: inside its judge actor (the CPU default), no engine process beside it
    events = next((tmp_path / "runs").glob("*/*/logs/engine_events.jsonl"))
    [started] = started_engines(events)
    assert started["inside"] is True and not judge_engines(under=driver.pid)
    ours = [psutil.Process(worker_pid(started))]
    assert ray_worker(ours[0])
    driver.kill()
    driver.wait()
    gone_by = time.monotonic() + 60
    while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ours):
        assert time.monotonic() < gone_by, f"engine processes outlived the killed driver: {ours}"
        time.sleep(0.5)
    [folder] = list((tmp_path / "runs").glob("*/*"))
    stored = judged()
    assert 16 <= stored < n_prompts

    rerun = subprocess.Popen(
        command,
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    output: dict = {}
    reader = threading.Thread(
        target=lambda: output.update(zip(("stdout", "stderr"), rerun.communicate(), strict=True))
    )
    reader.start()
    wait_for(lambda: len(started_engines(events)) == 2, "the rerun's engine", alive=reader)
    started = started_engines(events)[1]
    kill_in_a_batch(events, started["worker"], worker_pid(started))  # the worker, its engine inside it
    reader.join(timeout=900)
    assert rerun.returncode == 0, output["stderr"][-3000:]
    assert [folder] == list((tmp_path / "runs").glob("*/*"))  # the same folder, continued
    log = (folder / "run.log").read_text()
    assert f"paths.run_dir=latest: continuing {folder}" in output["stderr"] + output["stdout"] + log
    table = pl.read_parquet(folder / "tables" / "judgments.parquet")
    assert table.height == n_prompts and table.select(KEYS).n_unique() == n_prompts
    assert judged() == n_prompts  # every prompt judged once by an engine, across the two runs
    # what the killed run judged: flushed to its folder (skipped) or only in the store (answered from it)
    skipped = re.search(r"(\d+) prompts already judged in", log)
    reused = re.search(r"(\d+) of the \d+ prompt\(s\) were answered from the judgement store", log)
    assert (int(skipped[1]) if skipped else 0) + (int(reused[1]) if reused else 0) == stored
    # the killed worker: recorded, replaced, its batch judged again, and no engine left when the run ends
    assert f"1 judge worker(s) were lost during the run with a batch unfinished ({started['worker']})" in log
    assert "the 8 prompt(s) of the unfinished batches went to new workers" in log
    tracking = json.loads((folder / "tracking.json").read_text())
    metrics = mlflow.MlflowClient(tracking["tracking_uri"]).get_run(tracking["run_id"]).data.metrics
    assert metrics["judge/lost_workers"] == 1 and metrics["judge/lost_nodes"] == 0
    assert metrics["judge/redone_prompts"] == 8  # the batch in the engine when it died
    engines_end(before)

    # a quiet console: the pipeline's own lines and the summary (with the judge's card), no engine or Ray output;
    # that output is in the run folder
    assert "prompts to judge" in output["stderr"]
    assert "outputs:" in output["stdout"] and "MLflow run" in output["stdout"]
    console = (output["stdout"] + output["stderr"]).splitlines()
    # progress (every 10 s) and a stall (said every 30 s) come as often as the machine is slow: not counted
    periodic = re.compile(r"^\d\d:\d\d:\d\d (judged \d+/\d+ prompts|(WARNING )?no judge worker running)")
    steady = [line for line in console if not periodic.match(line)]
    assert len(steady) <= 50, "\n".join(console)  # 46 lines on 2026-11-28
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
