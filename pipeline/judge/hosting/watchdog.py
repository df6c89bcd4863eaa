"""A dead engine must not hang the run.

vLLM runs its engine core in a child process of the judge actor. When that process dies (out of memory, a CUDA
fault, a kill), the engine's client logs "engine core exited unexpectedly" and the call waiting for it may never
return, so the actor hangs and the run with it. :class:`EngineWatch` watches the engine's processes from a
thread; when one is gone it records the death (the worker, how many prompts were in flight) in the run's
events file and ends the actor's process. The driver's pool then starts a new actor (a new engine) and gives the
batches the dead one held to the workers (:mod:`pipeline.runtime.pool`): what was being judged is judged again;
what reached the driver is not. Outside an actor (the local executor) the
main thread is interrupted instead, with everything stored so far on disk.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pipeline.judge.vllm.cores import in_ray_actor
from pipeline.storage.events import record_event

log = logging.getLogger(__name__)

# The exit status of an actor that ends itself because its engine died.
ENGINE_DIED_EXIT = 70


def process_text(process) -> str:
    """A process (a ``psutil.Process``) as the watch reads it: its name and command line."""
    return process.name() + " " + " ".join(process.cmdline())


def descendants(pid: int | None = None) -> list[tuple[int, str]]:
    """Every live process below ``pid`` (this process by default), with its :func:`process_text`, found by parent
    pids alone.

    psutil's ``children`` also drops a child that looks older than its parent, computing both start times from the
    boot time read afresh for each: a test once saw no engine below a judge actor whose engine was running, and
    a process whose parent pid is ours is our child whatever the clocks say."""
    import psutil

    below: dict[int, list[int]] = {}
    for child in psutil.pids():
        try:
            below.setdefault(psutil.Process(child).ppid(), []).append(child)
        except psutil.Error:
            continue
    found, stack = [], [os.getpid() if pid is None else pid]
    while stack:
        for child in below.get(stack.pop(), []):
            try:
                process = psutil.Process(child)
                if process.status() == psutil.STATUS_ZOMBIE:
                    continue
                text = process_text(process)
            except psutil.Error:
                continue
            found.append((child, text))
            stack.append(child)
    return found


def engine_like(text: str) -> bool:
    """Whether a process (its :func:`process_text`) is one of a vLLM engine's:
    titled ``VLLM::EngineCore`` / ``VLLM::Worker`` by vLLM, or, where that title did not take, a process started
    by multiprocessing's spawn, as vLLM starts its engine core and workers in a Ray actor (not multiprocessing's
    resource tracker, which runs beside them). vLLM sets titles with the setproctitle package, which leaves
    a process untitled when the first variable of its environment was changed before: a run on CI once had no
    titled engine below any judge actor."""
    return text.upper().startswith("VLLM") or "EngineCore" in text or "spawn_main" in text


def engine_processes(pid: int | None = None, known: Sequence[int] = ()) -> list[int]:
    """The engine's own processes below ``pid`` (this process by default): those vLLM records it started (``known``,
    its engine cores, see :meth:`pipeline.judge.vllm.engine.VLLMEngine.processes`) and those that look like an
    engine's (:func:`engine_like`: the cores' workers, or every one where vLLM keeps no record). None found is
    logged with what is below: the watchdog then cannot see the engine die."""
    pid = os.getpid() if pid is None else pid
    below = descendants(pid)
    found = [child for child, text in below if child in known or engine_like(text)]
    if not found:
        log.warning(
            "engine watch: no vLLM engine process below this worker (pid %d); below it: %s",
            pid,
            "; ".join(f"{child} {text[:60]}" for child, text in below) or "nothing",
        )
    return found


@dataclass(frozen=True)
class Interruptions:
    """What the events of a stage say was lost and judged again (:func:`interruptions`)."""

    engine_deaths: list[dict]
    # workers lost with a batch unfinished, their engine not recorded dead: the whole actor (its process, its
    # node) was lost
    lost_workers: list[str]
    # rows of the batches a worker started and never finished: judged again by another worker
    redone: int
    # nodes lost with workers on them, and workers released from a drained node (pipeline.runtime.pool)
    lost_nodes: list[str] = field(default_factory=list)
    drained_workers: list[str] = field(default_factory=list)

    def counts(self) -> tuple[tuple[str, int], ...]:
        """The summary's line: what was lost, by kind."""
        return (
            ("node(s) lost", len(self.lost_nodes)),
            ("worker(s) lost", len(self.lost_workers)),
            ("engine death(s)", len(self.engine_deaths)),
            ("worker(s) released from drained nodes", len(self.drained_workers)),
            ("prompt(s) judged again", self.redone),
        )


def interruptions(events: list[dict]) -> Interruptions:
    """Engine deaths, lost workers and nodes, and redone rows from a stage's events. The driver's pool records
    every worker it lost (``worker_lost``: the rows of the batch it was judging) and node (``node_lost``); a judge
    worker writes ``batch_started`` / ``batch_done`` around each batch and :class:`EngineWatch` ``engine_died``.
    A worker the driver recorded lost is counted from that record; otherwise (a run folder other processes write
    too) a batch it started and never finished counts as interrupted, its rows judged again."""
    deaths = [e for e in events if e.get("event") == "engine_died"]
    by_driver = [e for e in events if e.get("event") == "worker_lost"]
    lost_by_driver = {e["worker"] for e in by_driver}
    done = {(e["worker"], e["batch"]) for e in events if e.get("event") == "batch_done"}
    cut = [
        e
        for e in events
        if e.get("event") == "batch_started"
        and (e["worker"], e["batch"]) not in done
        and e["worker"] not in lost_by_driver
    ]
    dead = {e["worker"] for e in deaths}
    lost = sorted(({e["worker"] for e in cut} | lost_by_driver) - dead - {""})
    return Interruptions(
        deaths,
        lost,
        sum(int(e.get("rows", 0)) for e in [*cut, *by_driver]),
        sorted({e["node"] for e in events if e.get("event") == "node_lost"}),
        sorted({e["worker"] for e in events if e.get("event") == "worker_drained"}),
    )


class EngineWatch:
    """Polls the engine's processes every ``interval`` seconds; on a death, records it and calls ``on_death``
    (default: end this actor, or interrupt the main thread outside Ray). ``in_flight()`` gives the number of
    prompts the engine was answering."""

    def __init__(
        self,
        pids: list[int],
        in_flight: Callable[[], int],
        events: str | os.PathLike | None,
        interval: float = 1.0,
        on_death: Callable[[], None] | None = None,
    ):
        self.pids = list(pids)
        self.in_flight = in_flight
        self.events = events
        self.interval = interval
        self.on_death = on_death or self._end
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._fired = False
        self.worker = f"{socket.gethostname()}:{os.getpid()}"
        self._thread = threading.Thread(target=self._watch, name="engine-watch", daemon=True)
        if self.pids:
            # a process that is exiting shuts its engine down on purpose (vLLM's own exit handlers, registered
            # before this one, run after it): not a death
            atexit.register(self.stop)
            self._thread.start()

    def stop(self) -> None:
        """Stop watching (before the engine is shut down on purpose)."""
        self._stop.set()

    def _dead(self) -> list[int]:
        import psutil

        dead = []
        for pid in self.pids:
            try:
                if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                    dead.append(pid)
            except psutil.NoSuchProcess:
                dead.append(pid)
        return dead

    def _watch(self) -> None:
        while not self._stop.wait(self.interval):
            if self.check():
                return

    def check(self) -> bool:
        """Whether the engine is dead; if so (the first time), record it and call ``on_death``. Also called by
        the worker when an engine call fails, so that an error raised by a dead engine ends the worker as a
        hang would."""
        with self._lock:
            if self._fired or self._stop.is_set():
                return self._fired
            dead = self._dead()
            if not dead:
                return False
            self._fired = True
            n = self.in_flight()
            log.error(
                "the engine process(es) %s of %s died with %d prompt(s) in flight; ending this worker so that "
                "a new one (with a new engine) judges them again",
                dead,
                self.worker,
                n,
            )
            record_event(
                self.events,
                {
                    "event": "engine_died",
                    "worker": self.worker,
                    "pids": dead,
                    "in_flight": n,
                    "time": time.time(),
                },
            )
        self.on_death()
        return True

    @staticmethod
    def _end() -> None:
        if in_ray_actor():
            os._exit(ENGINE_DIED_EXIT)
        import _thread

        _thread.interrupt_main()


# A small process that outlives its parent (the judge worker) only long enough to end the engine's processes:
# it polls its parent id, and when the worker is gone (killed, or its node's Ray stopped) it kills the engine
# processes it was given, each checked by its start time so that a reused process id is never hit.
_REAPER = """
import os, signal, sys, time
parent = int(sys.argv[1])
targets = [(int(p), s) for p, s in (a.split(":", 1) for a in sys.argv[2:])]
def start(pid):
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
while os.getppid() == parent:
    time.sleep(1.0)
for pid, started in targets:
    if start(pid) == started:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
"""


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except OSError:
        return None


class Reaper:
    """Ends the engine's processes if the worker that owns them dies without shutting them down (a killed
    driver takes its Ray workers with it, but an engine core spawned by a worker would stay, holding memory and
    cores). Linux only (``/proc``); elsewhere it does nothing."""

    def __init__(self, pids: list[int]):
        import subprocess

        targets = [f"{pid}:{s}" for pid in pids if (s := _start_time(pid)) is not None]
        self.process = None
        if targets:
            self.process = subprocess.Popen(
                [sys.executable, "-c", _REAPER, str(os.getpid()), *targets],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # not in the worker's process group: it must outlive a group kill
            )

    def stop(self) -> None:
        """The worker shuts its engine down itself: the reaper is not needed."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None
