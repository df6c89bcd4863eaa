"""Several engines on one machine, each on its own cores: ``VLLM_CPU_OMP_THREADS_BIND=auto`` claims cores no
other live process holds (a lock file per core), and a claim ends with its process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

CLAIM = textwrap.dedent(
    """
    import os, sys, time
    from pipeline.judge.vllm.cores import resolve_env
    env = resolve_env({"VLLM_CPU_OMP_THREADS_BIND": "auto", "CA_CORES_PER_WORKER": sys.argv[1]})
    print(env["VLLM_CPU_OMP_THREADS_BIND"], sorted(os.sched_getaffinity(0)), flush=True)
    sys.stdin.readline()  # hold the claim until told
    """
)


def claim(n: int, locks) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", CLAIM, str(n)],
        env={**os.environ, "CA_CORE_LOCKS": str(locks)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_engines_claim_disjoint_cores_and_release_them_when_they_end(tmp_path):
    first = claim(1, tmp_path)
    bind_1, affinity_1 = first.stdout.readline().split(" ", 1)
    second = claim(1, tmp_path)
    bind_2, affinity_2 = second.stdout.readline().split(" ", 1)
    assert bind_1 != bind_2  # each on its own core
    assert affinity_1.strip() == f"[{bind_1}]" and affinity_2.strip() == f"[{bind_2}]"  # and held to it
    first.communicate("\n")
    third = claim(1, tmp_path)  # the first one's core is free again
    assert third.stdout.readline().split(" ", 1)[0] == bind_1
    second.communicate("\n")
    third.communicate("\n")


def test_all_binds_every_core_of_the_process():
    from pipeline.judge.vllm.cores import resolve_env

    env = resolve_env({"VLLM_CPU_OMP_THREADS_BIND": "all", "CA_CORES_PER_WORKER": "1"})
    assert env == {"VLLM_CPU_OMP_THREADS_BIND": ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))}


def test_a_local_vllm_server_binds_the_cores_its_environment_lists_else_every_core(monkeypatch, tmp_path):
    # beside a test worker's engine bound to its core (tests/conftest.py), a server bound to every core spun its
    # threads against that engine's and answered at a fifth of its speed
    from pipeline.testing.serve import LocalVLLMServer

    server = LocalVLLMServer("/m", tmp_path / "vllm.log", kv_cache_gb=2)
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "1")
    assert server.environment()["VLLM_CPU_OMP_THREADS_BIND"] == "1"
    assert server.environment()["VLLM_CPU_KVCACHE_SPACE"] == "2"
    every = ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))
    for unlisted in ("all", "auto"):
        monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", unlisted)
        assert server.environment()["VLLM_CPU_OMP_THREADS_BIND"] == every
    monkeypatch.delenv("VLLM_CPU_OMP_THREADS_BIND")
    assert server.environment()["VLLM_CPU_OMP_THREADS_BIND"] == every


def spec(env=None, **kw):

    from pipeline.judge.spec import JudgeSpec

    return JudgeSpec(backend=kw.pop("backend", "vllm"), model="m", model_path="/m", name="m",
                     max_model_len=512, env=env or {}, **kw)  # fmt: skip


def test_a_cpu_engine_inside_its_actor_starts_with_the_openmp_runtime_and_threads_vllm_gives_its_own():
    from pipeline.judge.vllm.cores import torch_openmp, worker_process_env

    cores = sorted(os.sched_getaffinity(0))
    env = worker_process_env(spec({"VLLM_CPU_OMP_THREADS_BIND": "all"}))
    if torch_openmp() is not None and "gomp" not in os.environ.get("LD_PRELOAD", ""):
        assert env["LD_PRELOAD"].endswith(torch_openmp())
    assert env["GOMP_CPU_AFFINITY"] == " ".join(map(str, cores))
    assert env["OMP_NUM_THREADS"] == str(len(cores))
    listed = worker_process_env(spec({"VLLM_CPU_OMP_THREADS_BIND": "0-1,4"}))
    assert listed["GOMP_CPU_AFFINITY"] == "0 1 4" and listed["OMP_NUM_THREADS"] == "3"
    # cores claimed as the actor starts are not known before: unbound, as vLLM leaves them
    assert "GOMP_CPU_AFFINITY" not in worker_process_env(spec({"VLLM_CPU_OMP_THREADS_BIND": "auto"}))
    assert worker_process_env(spec({"OMP_NUM_THREADS": "1"})).get("OMP_NUM_THREADS") is None


def test_a_cpu_engine_in_its_own_processes_gets_the_priority_only():
    # its processes inherit the worker's niceness (Ray's 15 unless said); vLLM sets their OpenMP. No allocator
    # tunables (huge pages made the engine start 5x slower, BENCHMARKS.md), here or inside the worker
    from pipeline.config.enums import EngineProcess
    from pipeline.judge.vllm.cores import worker_process_env

    assert worker_process_env(spec(engine_process=EngineProcess.own)) == {"RAY_worker_niceness": "0"}
    assert "GLIBC_TUNABLES" not in worker_process_env(spec({"VLLM_CPU_OMP_THREADS_BIND": "all"}))


def test_every_other_engine_starts_with_the_environment_it_has():
    from pipeline.judge.vllm.cores import worker_process_env

    assert worker_process_env(spec(on_gpu=True)) == {}
    assert worker_process_env(spec(backend="hf")) == {}


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")
def test_a_process_started_with_that_environment_has_its_openmp_threads_one_per_core():
    # the worker's environment at its start, then PyTorch's OpenMP team working: each busy thread on one core
    from pipeline.judge.vllm.cores import worker_process_env

    env = worker_process_env(spec({"VLLM_CPU_OMP_THREADS_BIND": "all"}))
    script = textwrap.dedent(
        """
        import os, torch
        x = torch.randn(1500, 1500)
        for _ in range(20):
            x = torch.tanh(x @ x)
        pinned = set()
        for task in os.listdir("/proc/self/task"):
            status = open(f"/proc/self/task/{task}/status").read()
            cpus = [l.split()[1] for l in status.splitlines() if l.startswith("Cpus_allowed_list")][0]
            ticks = sum(int(v) for v in open(f"/proc/self/task/{task}/stat").read().rsplit(")", 1)[1].split()[11:13])
            if ticks > 5:
                pinned.add(cpus)
        print(" ".join(sorted(pinned)))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    busy = done.stdout.split()
    assert all("-" not in cpus and "," not in cpus for cpus in busy), busy  # no thread floats between cores
    assert len(set(busy)) >= 2, busy  # the team spread over the cores, one each
