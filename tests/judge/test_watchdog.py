"""The dead-engine watch (pipeline.judge.hosting.watchdog) on real processes: a watched child that dies is seen and
recorded, an engine left behind by a killed worker is ended by the reaper, and the events of a stage say which
batches were cut short and how many prompts were judged again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import psutil

from pipeline.judge.hosting.watchdog import (
    EngineWatch,
    Reaper,
    descendants,
    engine_processes,
    interruptions,
)
from pipeline.storage.events import read_events, record_event


def wait_until(condition, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_watched_process_that_dies_is_recorded_with_what_was_in_flight(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    events = tmp_path / "logs" / "events.jsonl"
    fired = threading.Event()
    watch = EngineWatch([child.pid], lambda: 7, events, interval=0.05, on_death=fired.set)
    try:
        assert not watch.check()  # alive: nothing recorded
        assert read_events(events) == []
        child.kill()
        child.wait()
        assert fired.wait(10)
        [event] = read_events(events)
        assert event["event"] == "engine_died" and event["pids"] == [child.pid] and event["in_flight"] == 7
        assert watch.check()  # reported once; later checks only say it is dead
        assert len(read_events(events)) == 1
    finally:
        watch.stop()
        if child.poll() is None:
            child.kill()


def test_the_processes_below_a_worker_are_found_by_parent_pid_and_its_engine_by_name(caplog):
    """A worker with two processes below it, one titled as vLLM titles its engine core (``VLLM::EngineCore``, read
    from the command line here): both are below it, the titled one is its engine; once that one is gone, none is,
    and the warning names the worker and what is below it."""
    worker = subprocess.Popen(["bash", "-c", "(exec -a VLLM::EngineCore sleep 60) & sleep 60 & wait"])
    try:
        assert wait_until(lambda: len(descendants(worker.pid)) == 2)
        [engine] = [pid for pid, name in descendants(worker.pid) if "VLLM::EngineCore" in name]
        assert all(psutil.Process(pid).ppid() == worker.pid for pid, _ in descendants(worker.pid))
        assert engine_processes(worker.pid) == [engine]
        assert "no vLLM engine" not in caplog.text
        os.kill(engine, signal.SIGKILL)
        assert wait_until(lambda: len(descendants(worker.pid)) == 1)
        assert engine_processes(worker.pid) == []
        [other] = [pid for pid, _ in descendants(worker.pid)]
        assert (
            f"no vLLM engine process below this worker (pid {worker.pid}); below it: {other} sleep"
            in caplog.text
        )
    finally:
        for pid, _ in descendants(worker.pid):
            psutil.Process(pid).kill()
        worker.kill()
        worker.wait()


SPAWNING_WORKER = """
import multiprocessing, os, sys, time

def engine():
    # as in vLLM's engine core on CI: a variable of the environment changed before the title is set, the first
    # one here, which leaves the process untitled (the setproctitle package cannot find its command line then)
    os.environ[next(iter(os.environ))] += ":"
    import setproctitle
    setproctitle.setproctitle("VLLM::EngineCore")
    time.sleep(60)

if __name__ == "__main__":
    child = multiprocessing.get_context("spawn").Process(target=engine)
    child.start()
    open(sys.argv[1], "w").write(str(child.pid))
    time.sleep(60)
"""


def test_an_engine_started_by_spawn_is_found_whatever_its_title_and_vllms_record_is_kept(tmp_path):
    """A worker that starts its 'engine' as vLLM does in a Ray actor (multiprocessing's spawn, beside which runs
    multiprocessing's resource tracker), the engine's title lost: the engine is found, the tracker is not; a
    process vLLM records as its engine core (``known``) is watched whatever it looks like."""
    script, pid_file = tmp_path / "worker.py", tmp_path / "engine.pid"
    script.write_text(SPAWNING_WORKER)
    worker = subprocess.Popen([sys.executable, str(script), str(pid_file)])
    try:
        assert wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 30)
        engine = int(pid_file.read_text())
        assert wait_until(lambda: engine_processes(worker.pid) == [engine])
        [tracker] = [pid for pid, text in descendants(worker.pid) if "resource_tracker" in text]
        assert sorted(engine_processes(worker.pid, known=[tracker])) == sorted([tracker, engine])
    finally:
        for pid, _ in descendants(worker.pid):
            psutil.Process(pid).kill()
        worker.kill()
        worker.wait()


def test_a_stopped_watch_reports_no_death(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    events = tmp_path / "events.jsonl"
    fired = threading.Event()
    watch = EngineWatch([child.pid], lambda: 0, events, interval=0.05, on_death=fired.set)
    watch.stop()  # the worker shuts its engine down on purpose
    child.kill()
    child.wait()
    assert not watch.check() and not fired.wait(0.3)
    assert read_events(events) == []


def test_the_reaper_ends_the_engine_when_its_worker_is_killed(tmp_path):
    """A stand-in worker starts an 'engine' child and a reaper for it, then is killed with SIGKILL: the engine does
    not outlive it."""
    pid_file = tmp_path / "engine.pid"
    worker_code = f"""
import subprocess, sys, time
from pipeline.judge.hosting.watchdog import Reaper
engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
Reaper([engine.pid])
open({str(pid_file)!r}, "w").write(str(engine.pid))
time.sleep(120)
"""
    worker = subprocess.Popen([sys.executable, "-c", worker_code], cwd=os.getcwd())
    try:
        assert wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 30)
        engine = psutil.Process(int(pid_file.read_text()))
        assert engine.is_running()
        worker.send_signal(signal.SIGKILL)
        worker.wait()

        def gone() -> bool:
            try:
                return engine.status() == psutil.STATUS_ZOMBIE
            except psutil.NoSuchProcess:
                return True

        assert wait_until(gone, 20), "the engine outlived its killed worker"
    finally:
        if worker.poll() is None:
            worker.kill()


def test_a_stopped_reaper_leaves_the_engine_alone():
    engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        reaper = Reaper([engine.pid])
        assert reaper.process is not None and reaper.process.poll() is None
        reaper.stop()
        assert reaper.process is None and engine.poll() is None
    finally:
        engine.kill()
        engine.wait()


def test_events_of_several_writers_stay_whole_lines(tmp_path):
    events = tmp_path / "events.jsonl"

    def write(worker: str) -> None:
        for b in range(200):
            record_event(
                events, {"event": "batch_started", "worker": worker, "batch": f"b{b}", "rows": 8}, sync=False
            )

    threads = [threading.Thread(target=write, args=(f"w{k}",)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = events.read_text().splitlines()
    assert len(lines) == 800 and len(read_events(events)) == 800


def test_interrupted_batches_are_counted_once_per_worker_that_lost_them():
    def started(worker, batch, rows=8):
        return {"event": "batch_started", "worker": worker, "batch": batch, "rows": rows}

    def done(worker, batch, rows=8):
        return {"event": "batch_done", "worker": worker, "batch": batch, "rows": rows}

    events = [
        started("h:1", "a"),
        done("h:1", "a"),
        started("h:1", "b"),  # h:1's engine died with b in flight
        {"event": "engine_died", "worker": "h:1", "pids": [11], "in_flight": 5},
        started("h:2", "c", 6),  # h:2 was killed outright with c
        started("h:3", "b"),
        done("h:3", "b"),
        started("h:3", "c", 6),
        done("h:3", "c", 6),
        started("h:3", "d"),
        done("h:3", "d"),
    ]
    found = interruptions(events)
    assert [e["worker"] for e in found.engine_deaths] == ["h:1"]
    assert found.lost_workers == ["h:2"]  # h:1 is counted as an engine death, not twice
    assert found.redone == 8 + 6
    clean = interruptions([started("h:1", "a"), done("h:1", "a")])
    assert clean.engine_deaths == [] and clean.lost_workers == [] and clean.redone == 0


def test_the_drivers_record_of_a_lost_worker_counts_once_beside_the_workers_own():
    """The driver's pool records every worker it lost (pipeline.runtime.pool): that record counts, and the worker's
    own unfinished batch (written where the run folder is shared) is not counted again; a worker the driver never
    saw start ("") is no lost worker; nodes and drained workers are counted from the driver's records."""

    def started(worker, batch, rows=8):
        return {"event": "batch_started", "worker": worker, "batch": batch, "rows": rows}

    lost = {
        "event": "worker_lost",
        "worker": "h:2",
        "node": "n2",
        "cause": "node",
        "rows": 8,
        "queued_rows": 8,
    }
    events = [
        started("h:2", "a"),  # h:2's own line for the batch its node took with it
        lost,
        {"event": "node_lost", "node": "n2"},
        {"event": "worker_lost", "worker": "", "node": "", "cause": "node", "rows": 0, "queued_rows": 0},
        started("h:4", "x", 5),  # a worker of a folder the driver did not record (an older run's lines)
        {"event": "worker_drained", "worker": "h:3", "node": "n3"},
    ]
    found = interruptions(events)
    assert found.lost_workers == ["h:2", "h:4"]
    assert found.redone == 8 + 5  # h:2's batch once (the driver's record), h:4's from its own line
    assert found.lost_nodes == ["n2"] and found.drained_workers == ["h:3"]
    assert dict(found.counts()) == {
        "node(s) lost": 1,
        "worker(s) lost": 2,
        "engine death(s)": 0,
        "worker(s) released from drained nodes": 1,
        "prompt(s) judged again": 13,
    }
