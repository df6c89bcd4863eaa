"""A real Ray cluster on this machine (a head started with `ray start`, token authentication on) and jobs/submit.sh
run against it as the README says: a small run succeeds as a job in the runtime environment the project ships, its
outputs and MLflow run land in the configured shared folder; a job pointed at the default relative output folder is
refused with a clear message; a client without the token is turned away.

One node, not two: raylets started on one machine share one session folder, and a job's pip environment (built by
each node's agent from jobs/runtime_env.yaml) would be built by the second node into the folder the first one built
and uses (the clone refuses an existing folder, and Ray deletes the "incomplete" environment: the first node's).
A real cluster (a disk per node) never does that. Lost, drained and added nodes are tested in test_nodes.py and
test_adaptive.py, whose nodes run without a pip environment."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import ROOT
from tests.run.nodes import BIN, free_ports, own_ports

pytestmark = [pytest.mark.ray, pytest.mark.engine, pytest.mark.slow, pytest.mark.cluster]


class Cluster:
    """A head of 2 CPUs (the driver, the judge's worker and the step's tasks beside it) with the job server, token
    authentication on, in a temp dir of its own; :meth:`said` tells a failed test whether the head is still up and,
    if not, why; :meth:`start` starts it again after it went away (:func:`submit`)."""

    def __init__(self, logs: Path, shared: Path):
        self.token = secrets.token_hex(16)
        self.logs, self.shared = logs, shared
        self.env = {
            **os.environ,
            "PATH": f"{BIN}:{os.environ['PATH']}",
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": self.token,
        }
        self.env.pop("RAY_ADDRESS", None)
        self.starts = 0
        self.start()

    def start(self) -> None:
        gcs, dashboard, *agents = free_ports(6)
        self.address = f"http://127.0.0.1:{dashboard}"
        self.log = self.logs / f"head-{self.starts}.log"
        self.starts += 1
        # its own temp dir (short: Ray's socket paths must stay under 107 characters), so that this cluster's
        # address file does not send later ray.init() calls of the machine to it
        self.temp = Path(tempfile.mkdtemp(prefix="ca-ray-", dir="/tmp"))
        self.head = subprocess.Popen(
            [
                str(BIN / "ray"),
                "start",
                "--head",
                f"--port={gcs}",
                f"--dashboard-port={dashboard}",
                "--dashboard-host=127.0.0.1",
                "--include-dashboard=true",
                "--block",
                "--node-ip-address=127.0.0.1",
                "--num-cpus=2",
                "--object-store-memory=300000000",
                f"--temp-dir={self.temp}",
                *own_ports(agents),
            ],
            env=self.env,
            stdout=(written := open(self.log, "w")),  # noqa: SIM115 (the head's own log, open while it runs)
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.written = written
        deadline = time.monotonic() + 120
        while True:
            try:
                with socket.create_connection(("127.0.0.1", dashboard), timeout=1):
                    break
            except OSError:
                assert self.head.poll() is None, self.said()
                assert time.monotonic() < deadline, "the head's dashboard did not come up"
                time.sleep(1)
        # the dashboard answers before the head's job agent is ready ("No available agent to submit job"):
        # wait until a trivial job is accepted
        while True:
            probe = subprocess.run(
                [str(BIN / "ray"), "job", "submit", f"--address={self.address}", "--no-wait", "--", "true"],
                env=self.env,
                capture_output=True,
                text=True,
            )
            if probe.returncode == 0:
                break
            assert self.head.poll() is None, self.said()
            assert time.monotonic() < deadline + 240, (
                f"the job server never took a job: {probe.stderr[-2000:]}"
            )
            time.sleep(3)

    def up(self) -> bool:
        return self.head.poll() is None

    def said(self, tail: int = 3000) -> str:
        """Whether the head is up and, once it is not, why: ``ray start --block`` kills the whole head when one of
        its processes exits, naming that process and the last lines of its log in the head's log."""
        if self.up():
            return "\n--- the head is up ---"
        said = [f"\n--- the head exited with {self.head.returncode}; {self.log.name} ---\n"]
        said.append(self.log.read_text(errors="replace")[-tail:])
        exits = self.temp / "session_latest" / "logs" / "ray_process_exit.log"
        if exits.exists():
            said.append(f"\n--- {exits.name} ---\n{exits.read_text(errors='replace')[-tail:]}")
        return "".join(said)

    def stop(self) -> None:
        # the head's processes are in its `ray start`'s process group (Ray's reaper makes it their leader): the whole
        # group killed at once, as a lost machine would be (a graceful stop waits ~30 s for nothing kept here)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.head.pid, signal.SIGKILL)
        self.head.wait(timeout=60)
        self.written.close()
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    head = Cluster(tmp_path_factory.mktemp("ray-logs"), tmp_path_factory.mktemp("shared"))
    try:
        yield head
    finally:
        head.stop()


def submit(
    cluster: Cluster,
    *overrides: str,
    token: bool = True,
    submission_id: str | None = None,
    runtime_env: Path | None = None,
    fresh: Path | None = None,
) -> subprocess.CompletedProcess:
    """jobs/submit.sh against the cluster; ``runtime_env`` None: one that installs nothing (the cluster is this venv).

    A head that went away under the job (on CI once, its job server gone in the middle of a job that only had to be
    refused, the next test's client then refused a connection; the head's log was not kept) is not what these tests
    are about: the job is submitted once more to a head started again, with ``fresh`` (its output folder) emptied,
    and the head's death is reported as a warning with its log. A second death fails the test with both logs."""
    deaths = []
    for _ in range(2):
        if not cluster.up():
            deaths.append(cluster.said())
            warnings.warn(
                f"the test cluster's head went away and is started again:{deaths[-1]}", stacklevel=2
            )
            cluster.stop()
            cluster.start()
            if fresh is not None:
                shutil.rmtree(fresh, ignore_errors=True)
        done = _submit(cluster, overrides, token, submission_id, runtime_env)
        if done.returncode != 0:  # a head whose process exited is gone within `ray start --block`'s second
            with contextlib.suppress(subprocess.TimeoutExpired):
                cluster.head.wait(timeout=5)
        if cluster.up():
            return done
    raise AssertionError(
        "the test cluster's head went away twice under the job:" + "".join(deaths) + cluster.said()
    )


def _submit(cluster, overrides, token, submission_id, runtime_env) -> subprocess.CompletedProcess:
    shared = cluster.shared
    if runtime_env is None:
        runtime_env = shared / "runtime_env.yaml"
        runtime_env.write_text(
            "excludes: [.venv, .cache, outputs, .git, '**/__pycache__', '*.egg-info']\n"
            "env_vars: {PYTHONUNBUFFERED: '1'}\n"
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env |= {
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "RAY_ADDRESS": cluster.address,
        "RUNTIME_ENV": str(runtime_env),
    }
    env["HOME"] = str(shared)  # no ~/.ray/auth_token of the machine's user
    if token:
        env["RAY_AUTH_TOKEN"] = cluster.token
    if submission_id:
        env["SUBMISSION_ID"] = submission_id
    return subprocess.run(
        ["bash", "jobs/submit.sh", *overrides],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )


def worker_logs(outputs: Path, tail: int = 3000) -> str:
    """The end of each worker's log and the pool's events of the runs under ``outputs``: what a failed job's own
    output (cut to its last lines by Ray) does not say."""
    said = []
    for log in sorted((outputs / "runs").glob("*/*/logs/*")):
        said.append(f"\n--- {log.name} ---\n{log.read_text(errors='replace')[-tail:]}")
    return "".join(said)


def test_a_client_without_the_token_is_turned_away(cluster):
    refused = submit(cluster, "debug=quick", token=False)
    out = refused.stdout + refused.stderr
    assert refused.returncode != 0
    assert "uthentication" in out, out[-3000:] + cluster.said()


def test_a_job_writing_into_rays_temporary_copy_is_refused(cluster):
    refused = submit(cluster, "debug=quick", "tracking.enabled=false")
    assert refused.returncode != 0
    out = refused.stdout + refused.stderr
    assert "Ray's temporary copy of the project" in out and "paths.output_root=outputs" in out, (
        out[-3000:] + cluster.said()
    )


def test_a_job_runs_on_the_cluster_and_writes_to_the_shared_folder(cluster):
    # in the runtime environment the project ships (jobs/runtime_env.yaml, as a user submits it): Ray builds the
    # job's environment from its pip list, a virtualenv of the cluster's Python with every package the project imports
    # beside Ray and vLLM (here all are the cluster's already: pip finds each satisfied and downloads nothing), and
    # the leaderboard's length-controlled win rate against a baseline (scikit-learn: AlpacaEval's solver) is reached
    outputs = cluster.shared / "ca-outputs"
    done = submit(
        cluster,
        "debug=quick",
        "leaderboard.baseline=damage-0",
        f"paths.output_root={outputs}",
        f"paths.cache_dir={ROOT / '.cache'}",
        submission_id="ca-test-quick",
        runtime_env=ROOT / "jobs" / "runtime_env.yaml",
        fresh=outputs,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:] + worker_logs(outputs) + cluster.said()
    [run_dir] = list((outputs / "runs").glob("*/*"))
    table = pl.read_parquet(run_dir / "tables" / "judgments.parquet")
    assert table.height == 24  # debug=quick: 2 contexts x 4 candidates, one attribute, both orderings
    board = pl.read_parquet(run_dir / "tables" / "leaderboard.parquet")
    lc = board.filter((pl.col("metric") == "win_rate:alpaca_eval_lc") & (pl.col("model") != "damage-0"))
    assert lc.height == 3 and lc["estimate"].is_not_null().all()
    tracking = json.loads((run_dir / "tracking.json").read_text())
    import mlflow

    client = mlflow.MlflowClient(tracking["tracking_uri"])
    run = client.get_run(tracking["run_id"])
    assert run.info.status == "FINISHED" and run.data.tags["run_dir"] == str(run_dir)
    assert str(outputs) in tracking["tracking_uri"]
    env = {
        **os.environ,
        "RAY_ADDRESS": cluster.address,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": cluster.token,
    }
    status = subprocess.run(
        [str(BIN / "ray"), "job", "status", "ca-test-quick"], env=env, capture_output=True, text=True
    )
    assert "ca-test-quick' succeeded" in status.stdout + status.stderr
