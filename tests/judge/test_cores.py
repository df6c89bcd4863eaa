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
    from pipeline.judge.cores import resolve_env
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
    from pipeline.judge.cores import resolve_env

    env = resolve_env({"VLLM_CPU_OMP_THREADS_BIND": "all", "CA_CORES_PER_WORKER": "1"})
    assert env == {"VLLM_CPU_OMP_THREADS_BIND": ",".join(str(c) for c in sorted(os.sched_getaffinity(0)))}
