"""Faults on a real local Ray with the real vLLM engine: the engine process of the judge actor is killed
mid-run, and the run carries on (a new actor, a new engine) with every prompt judged exactly once in the final
table and the redone prompts reported. A whole actor lost (with its node) is tests/run/test_nodes.py's."""

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


def test_a_judge_engine_killed_mid_run_is_replaced_and_nothing_is_judged_twice(tmp_path, ray_cluster):
    """judge.engine_process=own (vLLM's engine processes beside the worker, the default on a GPU): the engine
    process is killed with SIGKILL; the worker's watchdog records it and ends the worker, Ray starts a new one."""
    folder = tmp_path / "run"
    n_contexts, n_candidates = 3, 5
    n_prompts = n_contexts * n_candidates * (n_candidates - 1) * 2  # both orderings, two attributes
    before = {identity(p) for p in judge_engines()}  # (none, unless a run of this worker is still ending)
    # an empty judgement store: every prompt goes to the engine
    with running(small_run(tmp_path, "judge.engine_process=own")) as (worker, result):
        log = folder / "run.log"
        wait_for_a_first_batch(log, worker)
        engine = new_engine(before)
        [started] = started_engines(folder / "logs" / "engine_events.jsonl")
        assert engine.pid in started["pids"]  # the worker watches the engine this test found
        kill_in_a_batch(folder / "logs" / "engine_events.jsonl", started["worker"], engine.pid)
        worker.join(timeout=900)
    assert not worker.is_alive(), "the run hangs after its engine died"
    assert "error" not in result, result.get("error")
    done = result["value"]
    table = pl.read_parquet(folder / "tables" / "judgments.parquet")
    assert table.height == n_prompts and table.select(KEYS).n_unique() == n_prompts
    assert done.metrics["judge/engine_deaths"] == 1 and done.metrics["judge/lost_workers"] == 0
    redone = done.metrics["judge/redone_prompts"]
    assert redone == 8  # the batch in the engine when it died
    text = log.read_text(errors="replace")
    assert "1 judge engine(s) died during the run" in text
    assert "the 8 prompt(s) of the unfinished batches went to new workers" in text
    events = Path(folder / "logs" / "engine_events.jsonl").read_text()
    assert f'"pids": [{engine.pid}]' in events
    assert not [p for p in judge_engines() if identity(p) not in before]  # the new engine ends with the run


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
        worker.join(timeout=600)
    assert not worker.is_alive(), "the run hangs after its engine died"
    error = result.get("error")
    assert error is not None and "value" not in result
    message = str(error)
    assert "the judge stage stopped" in message and "runtime.max_engine_restarts=0" in message
    assert f"paths.run_dir={folder}" in message
    assert "1 judge engine(s) died during the run" in log.read_text(errors="replace")
    parts = list((folder / "judgments").glob("*.parquet"))
    stored = pl.concat([pl.read_parquet(p) for p in parts]).height if parts else 0
    assert re.search(rf"(\d+) of {3 * 5 * 4 * 2} prompt\(s\) were judged", message)[1] == str(stored)
    assert stored >= 8
    wait_for(
        lambda: not [p for p in judge_engines() if identity(p) not in before],
        "the engines to end",
        seconds=60,
    )


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
        worker.join(timeout=600)
    assert not worker.is_alive(), "the run hangs when its engine cannot start"
    error = result.get("error")
    assert error is not None and "value" not in result
    message = str(error)
    assert "the judge stage stopped" in message and "0 of 120 prompt(s) were judged" in message
    assert "could not start its engine" in message
    wait_for(
        lambda: not [p for p in judge_engines() if identity(p) not in before],
        "the engines to end",
        seconds=60,
    )


def test_a_killed_driver_leaves_no_engine_behind_and_the_same_command_continues_its_run(tmp_path, root):
    """The run as a user starts it (the CLI, its own local Ray), killed with SIGKILL after its first batches;
    its engine does not outlive it; the same command with paths.run_dir=latest finds the folder, and nothing
    judged before the kill is judged again (it comes from the judgement store); its console shows only the pipeline's
    lines."""
    import subprocess
    import sys

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
    driver = subprocess.Popen(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def judged() -> int:
        return stored_replies(store)

    deadline = time.monotonic() + 400
    while judged() < 16:  # two batches judged
        assert driver.poll() is None, "the run ended before it was killed"
        assert time.monotonic() < deadline, "the run judged nothing"
        time.sleep(0.5)
    # the run's engine: inside its judge actor (the CPU default), no engine process beside it
    [started] = started_engines(next((tmp_path / "runs").glob("*/*/logs/engine_events.jsonl")))
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

    again = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [folder] == list((tmp_path / "runs").glob("*/*"))  # the same folder, continued
    log = (folder / "run.log").read_text()
    assert f"paths.run_dir=latest: continuing {folder}" in again.stderr + again.stdout + log
    table = pl.read_parquet(folder / "tables" / "judgments.parquet")
    assert table.height == n_prompts and table.select(KEYS).n_unique() == n_prompts
    assert judged() == n_prompts  # every prompt judged once by an engine, across the two runs
    # what the killed run judged: flushed to its folder (skipped) or only in the store (answered from it)
    skipped = re.search(r"(\d+) prompts already judged in", log)
    reused = re.search(r"(\d+) of the \d+ prompt\(s\) were answered from the judgement store", log)
    assert (int(skipped[1]) if skipped else 0) + (int(reused[1]) if reused else 0) == stored

    # a quiet console: the pipeline's own lines and the summary (with the judge's card), no engine or Ray output;
    # that output is in the run folder
    assert "prompts to judge" in again.stderr
    assert "outputs:" in again.stdout and "MLflow run" in again.stdout
    console = (again.stdout + again.stderr).splitlines()
    assert len(console) <= 48, "\n".join(console)
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
