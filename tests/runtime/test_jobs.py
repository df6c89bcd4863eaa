"""Submitting to a cluster: the KubeRay RayJob manifest runs what jobs/submit.sh runs (entrypoint, runtime env),
with a GPU worker group, the auth token from a Secret and the cluster deleted after the job; submit.sh's token
handling; and a job in Ray's temporary working dir refuses outputs that would be deleted with it."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from pipeline.contracts.errors import ConfigError
from pipeline.runtime.jobs import check_job_storage, ray_working_dir
from tests.conftest import ROOT, compose

RAY_COPY = Path("/tmp/ray/session_2026/runtime_resources/working_dir_files/_ray_pkg_0123abcd")


def dry_run(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    return subprocess.run(
        ["bash", "jobs/submit.sh", *args],
        cwd=ROOT,
        env={
            **clean,
            "HOME": env.pop("HOME", "/nonexistent"),
            "RAY_ADDRESS": "http://head:8265",
            "DRY_RUN": "1",
            **env,
        },
        capture_output=True,
        text=True,
    )


def submitted(out: str) -> tuple[list[str], list[str]]:
    """(the ray command, the entrypoint after ``--``) of a dry run's line."""
    words = shlex.split(out)
    at = words.index("--")
    return words[:at], words[at + 1 :]


def test_the_rayjob_manifest_runs_what_submit_sh_runs():
    manifest = yaml.safe_load((ROOT / "jobs" / "rayjob.yaml").read_text())
    assert manifest["apiVersion"] == "ray.io/v1" and manifest["kind"] == "RayJob"
    spec = manifest["spec"]
    _, entrypoint = submitted(dry_run().stdout)
    assert entrypoint == ["python", "-m", "pipeline.cli", "runtime=cluster"]
    words = shlex.split(spec["entrypoint"])
    assert words[: len(entrypoint)] == entrypoint
    env = yaml.safe_load(spec["runtimeEnvYAML"])
    assert env.pop("working_dir") == "/app"
    assert env == yaml.safe_load((ROOT / "jobs" / "runtime_env.yaml").read_text())
    assert spec["shutdownAfterJobFinishes"] is True
    cluster = spec["rayClusterSpec"]
    assert cluster["rayVersion"] == "2.60.0"
    [gpus] = cluster["workerGroupSpecs"]
    [worker] = gpus["template"]["spec"]["containers"]
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == "1"
    containers = [
        cluster["headGroupSpec"]["template"]["spec"]["containers"][0],
        worker,
        spec["submitterPodTemplate"]["spec"]["containers"][0],
    ]
    for container in containers:
        env_vars = {e["name"]: e for e in container["env"]}
        assert env_vars["RAY_AUTH_MODE"]["value"] == "token"
        assert env_vars["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"] == {
            "name": "ca-ray-token",
            "key": "auth_token",
        }
    # its overrides are a valid run whose outputs are on shared storage (a job accepts them)
    cfg = compose(words[len(entrypoint) - 1 :])
    assert cfg.runtime.address == "auto" and cfg.paths.output_root == "/shared/ca-outputs"
    check_job_storage(cfg, RAY_COPY)


def test_submit_sh_turns_token_auth_on_where_there_is_a_token(tmp_path):
    assert not dry_run().stdout.startswith("RAY_AUTH_MODE")  # no token anywhere: as the cluster is
    assert dry_run(RAY_AUTH_TOKEN="abc").stdout.startswith("RAY_AUTH_MODE=token ")
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("abc")
    assert dry_run(HOME=str(tmp_path)).stdout.startswith("RAY_AUTH_MODE=token ")
    missing = dry_run(RAY_AUTH_MODE="token")
    assert missing.returncode == 2 and "no token" in missing.stderr
    command, entrypoint = submitted(dry_run("debug=quick", SUBMISSION_ID="again-2", NO_WAIT="1").stdout)
    at = command.index("--submission-id")
    assert command[at + 1] == "again-2" and "--no-wait" in command and entrypoint[-1] == "debug=quick"


def test_a_job_refuses_outputs_inside_rays_temporary_copy_of_the_project():
    assert ray_working_dir(RAY_COPY) and not ray_working_dir(ROOT)
    with pytest.raises(ConfigError) as refused:
        check_job_storage(compose([]), RAY_COPY)
    message = str(refused.value)
    assert (
        "paths.output_root=outputs" in message and "deleted" in message and "tracking.tracking_uri" in message
    )
    with pytest.raises(ConfigError, match="tracking.tracking_uri=mlruns"):
        check_job_storage(
            compose(["paths.output_root=/shared/out", "tracking.tracking_uri=mlruns"]), RAY_COPY
        )
    check_job_storage(compose(["paths.output_root=/shared/out"]), RAY_COPY)  # MLflow under shared storage
    check_job_storage(compose([]), ROOT)  # not a job: the defaults are fine
