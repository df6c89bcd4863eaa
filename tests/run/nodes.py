"""A multi-node Ray cluster on this machine, for the tests of node loss, drains and nodes that join: a head that runs
the driver and no judge (no CPU slot) and worker nodes, each its own raylet started with ``ray start --block`` in a
process group of its own, so that a node is lost the way a machine is: its raylet, its object store and every
process below them killed at once (``os.killpg``)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def free_ports(n: int) -> list[int]:
    """``n`` different ports free now: each socket is held until all are drawn (a port let go may be drawn again at
    once: a head once got the same port for its dashboard and its metrics and did not start)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(n)]
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]


def own_ports(ports: list[int]) -> list[str]:
    """Each node's agents on ports of their own (four of ``free_ports``, drawn with the node's other ports): the
    defaults (52365 for the dashboard agent's HTTP server, which takes the jobs) are held by the session's local
    Rays of the other end-to-end tests, and a head would then have no job agent ("No available agent to submit
    job")."""
    listen, grpc, runtime_env, metrics = ports
    return [
        f"--dashboard-agent-listen-port={listen}",
        f"--dashboard-agent-grpc-port={grpc}",
        f"--runtime-env-agent-port={runtime_env}",
        f"--metrics-export-port={metrics}",
    ]


class Nodes:
    """The head (0 CPU slots: the driver's node) and the worker nodes added to it."""

    def __init__(self, logs: Path):
        self.logs = logs
        self.gcs, *head_ports = free_ports(5)
        self.address = f"127.0.0.1:{self.gcs}"
        # its own temp dir (short: Ray's socket paths must stay under 107 characters), so that this cluster's
        # address file does not send later ray.init() calls of the machine to it
        self.temp = Path(tempfile.mkdtemp(prefix="ca-nodes-", dir="/tmp"))
        # token authentication (Ray's default) is tested with the job server (tests/run/test_cluster.py); here
        # every process of the cluster is this test's
        self.env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "RAY_AUTH_MODE": "disabled"}
        # the control store checks each node every second, not every 3 s (Ray's default): a lost node is known dead
        # after its 5 failed checks in some 5 s, not 15 (a pool replaces its workers only then); the checks' 10 s
        # timeout is Ray's, so a node slow to answer on the loaded machine is not taken for dead
        self.env["RAY_health_check_period_ms"] = "1000"
        self.env.pop("RAY_ADDRESS", None)
        self.processes: list[subprocess.Popen] = []
        self.head = self._start(
            "head.log",
            ["--head", f"--port={self.gcs}", "--include-dashboard=false", "--num-cpus=0"],
            head_ports,
        )
        self.wait_for(bool, "its head", 300)

    def _start(self, name: str, args: list[str], ports: list[int] | None = None) -> subprocess.Popen:
        process = subprocess.Popen(
            [
                str(BIN / "ray"),
                "start",
                *args,
                "--block",
                "--node-ip-address=127.0.0.1",
                "--object-store-memory=200000000",
                f"--temp-dir={self.temp}",
                *own_ports(ports or free_ports(4)),
            ],
            env=self.env,
            stdout=open(self.logs / name, "w"),  # noqa: SIM115 (the node's own log, open while it runs)
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: the node's raylet and everything below it
        )
        self.processes.append(process)
        return process

    def add(self, cpus: int = 2, attempts: int = 3) -> subprocess.Popen:
        """A worker node of ``cpus`` CPU slots, joined (waited for). ``ray start`` gives a raylet 30 s to register
        and gives up on a loaded machine (two test workers judging beside it): then it is started again."""
        before = self.answered()
        for _ in range(attempts):
            name = f"node-{len(self.processes)}.log"
            node = self._start(name, [f"--address={self.address}", f"--num-cpus={cpus}"])
            self.wait_for(
                lambda ids, node=node: bool(ids - before) or node.poll() is not None, "the new node", 180
            )
            time.sleep(2)
            if node.poll() is None and self.alive() - before:
                return node
            self.processes.remove(node)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGKILL)
            node.wait(timeout=60)
        raise AssertionError(
            f"no worker node joined in {attempts} attempts: {(self.logs / name).read_text()[-2000:]}"
        )

    def alive(self) -> set[str]:
        """The alive nodes' ids, by Ray's control store (a node killed a moment ago may still be among them). A probe
        that hangs (seen once in the suite: a head starting on a machine loaded by the other test worker let the probe
        wait on its pubsub past 120 s) counts as no answer yet, and the caller asks again until its own deadline."""
        try:
            out = self._probe()
        except subprocess.TimeoutExpired:
            return set()
        lines = out.stdout.strip().splitlines()
        return set(lines[-1].split()) if out.returncode == 0 and lines else set()

    def answered(self) -> set[str]:
        """The alive nodes' ids once the control store answers (never empty: the head is among them)."""
        deadline = time.monotonic() + 120
        while not (ids := self.alive()):
            assert self.head.poll() is None, (self.logs / "head.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the cluster's control store never answered"
            time.sleep(1)
        return ids

    def _probe(self) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable,
                "-c",
                "import ray, sys; ray.init(address=sys.argv[1], log_to_driver=False); "
                "print(' '.join(n['NodeID'] for n in ray.nodes() if n['Alive']))",
                self.address,
            ],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def wait_for(self, joined, what: str, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while not joined(self.alive()):
            assert self.head.poll() is None, (self.logs / "head.log").read_text()[-2000:]
            assert time.monotonic() < deadline, f"the cluster never had {what}"
            time.sleep(1)

    def node_of(self, pid: int) -> subprocess.Popen:
        """The worker node (its ``ray start`` process) a process of the cluster runs on: by its ancestors, the first
        in a node's process group (Ray starts each worker in a process group of its own, below the node's raylet)."""
        import psutil

        groups = {p.pid: p for p in self.processes}
        process: psutil.Process | None = psutil.Process(pid)
        while process is not None:
            group = os.getpgid(process.pid)
            if group in groups:
                assert groups[group] is not self.head, f"process {pid} runs on the head"
                return groups[group]
            process = process.parent()
        raise AssertionError(f"process {pid} is on no node of this cluster")

    def kill_node_of(self, pid: int) -> None:
        """Lose the worker node that holds process ``pid`` (:meth:`kill`)."""
        self.kill(self.node_of(pid))

    def kill(self, node: subprocess.Popen) -> None:
        """Lose a worker node the way a machine goes: its raylet, its object store and every process below them
        killed at once."""
        import psutil

        below = psutil.Process(node.pid).children(recursive=True)
        os.killpg(node.pid, signal.SIGKILL)
        for process in below:
            with contextlib.suppress(psutil.Error):
                process.send_signal(signal.SIGKILL)
        node.wait(timeout=60)

    @staticmethod
    @contextlib.contextmanager
    def paused(pid: int):
        """A worker that stops answering for a while (a slow or overloaded machine): process ``pid`` and every process
        below it (its engine) SIGSTOPped inside the block and SIGCONTed after. Ray sees nothing: its node and raylet
        answer; only the batches the worker holds wait. A test pauses a worker so that the run cannot end before
        something slow on a loaded machine (a node that joins) has happened."""
        import psutil

        top = psutil.Process(pid)
        processes = [top, *top.children(recursive=True)]
        for process in processes:
            process.suspend()
        try:
            yield
        finally:
            for process in processes:
                with contextlib.suppress(psutil.Error):
                    process.resume()

    def drain(self, node_id: str, deadline_s: int = 120) -> None:
        """A preemption notice for a node (``ray drain-node``): no new work there, and it goes at the deadline."""
        done = subprocess.run(
            [
                str(BIN / "ray"),
                "drain-node",
                f"--address={self.address}",
                f"--node-id={node_id}",
                "--reason=DRAIN_NODE_REASON_PREEMPTION",
                "--reason-message=a preemption notice in the test",
                f"--deadline-remaining-seconds={deadline_s}",
            ],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr

    def stop(self) -> None:
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        for process in self.processes:
            with contextlib.suppress(Exception):
                process.wait(timeout=60)
        shutil.rmtree(self.temp, ignore_errors=True)
