"""Faults on a real local Ray with the real vLLM engine: an engine process that dies more often than allowed, or
cannot start, stops the run with what was judged on disk. A killed driver whose engine must not outlive it, and a
judge worker killed inside a batch of its rerun: tests/run/test_adaptive.py (the adaptive rounds, run from the CLI);
a whole actor lost with its node: tests/run/test_nodes.py."""

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
import pytest

from pipeline.run.context import run
from tests.conftest import ROOT, compose, identity, judge_engines, vllm_processes

pytestmark = [pytest.mark.ray, pytest.mark.engine, pytest.mark.slow]


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
