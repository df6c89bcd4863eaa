"""Where an engine computes: the cores it binds to (claimed per engine on a shared machine) and the environment
it starts in.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pipeline.config.backends import Trait, backend
from pipeline.config.enums import MULTIPROCESSING_ENV, EngineProcess
from pipeline.judge.spec import JudgeSpec

log = logging.getLogger(__name__)


# Cores claimed by engines on this machine (``VLLM_CPU_OMP_THREADS_BIND=auto``): one lock file per core, held
# by the process that uses it for as long as it lives.
CORE_LOCKS = Path(os.environ.get("CA_CORE_LOCKS", f"/tmp/ca-cores-{os.getuid()}"))


# This process's claims (kept open: closing a file releases its lock).
_claimed: list[Any] = []


def claim_cores(n: int, folder: Path = CORE_LOCKS) -> list[int]:
    """``n`` cores of this process's affinity that no other engine on this machine has claimed, held until
    the process ends; where fewer are free, the free ones and then the first ones (logged)."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    available = sorted(os.sched_getaffinity(0))
    n = max(1, min(n, len(available)))
    got: list[int] = []
    for core in available:
        if len(got) == n:
            break
        handle = open(folder / f"core-{core}.lock", "w")  # noqa: SIM115 (held for the process's life)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _claimed.append(handle)
        got.append(core)
    if len(got) < n:
        extra = [c for c in available if c not in got][: n - len(got)]
        log.warning("only %d free core(s) of %d wanted: sharing %s with another engine", len(got), n, extra)
        got += extra
    return sorted(got)


def resolve_env(env: Mapping[str, str]) -> dict[str, str]:
    """The engine's environment. ``VLLM_CPU_OMP_THREADS_BIND``: ``all`` becomes every core this process may
    use; ``auto`` claims ``CA_CORES_PER_WORKER`` cores no other engine on this machine holds (several judge
    actors on one machine, each on its own cores) and restricts this process to them."""
    out = {str(k): str(v) for k, v in env.items()}
    per_worker = int(out.pop("CA_CORES_PER_WORKER", "0") or 0)
    if out.get("VLLM_CPU_OMP_THREADS_BIND") == "all":
        cores = sorted(os.sched_getaffinity(0))
        out["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in cores)
    elif out.get("VLLM_CPU_OMP_THREADS_BIND") == "auto":
        cores = claim_cores(per_worker or len(os.sched_getaffinity(0)))
        os.sched_setaffinity(0, cores)
        out["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in cores)
        log.info("engine threads pinned to core(s) %s", out["VLLM_CPU_OMP_THREADS_BIND"])
    return out


def apply_env(env: Mapping[str, str]) -> None:
    """Set the engine's environment (e.g. VLLM_CPU_KVCACHE_SPACE) before the engine is imported here."""
    os.environ.update(resolve_env(env))


def in_ray_actor() -> bool:
    """Whether this process is a Ray actor's. Ray is loaded in its workers before any code of ours runs, so it is
    read where it is loaded and never imported here (a process without Ray loaded is no Ray worker)."""
    ray = sys.modules.get("ray")
    if ray is None:
        return False
    try:
        return bool(ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None)
    except Exception:  # not connected
        return False


def engine_inside(spec: JudgeSpec, in_actor: bool) -> bool:
    """Whether the vLLM engine runs inside this process (``judge.engine_process``): ``auto`` is inside for a
    CPU engine on a Ray actor (a process of its own for the engine), in processes of its own elsewhere."""
    if spec.engine_process == EngineProcess.worker:
        return True
    if spec.engine_process == EngineProcess.own:
        return False
    return in_actor and not spec.on_gpu


def expand_cores(bind: str | None) -> list[int]:
    """The cores ``VLLM_CPU_OMP_THREADS_BIND`` gives an engine, in order (its first rank's list: ``0-3``, ``0,1,4``,
    ``0-3|4-7``); empty where it names none (unset, ``all``, ``auto``, ``nobind``)."""
    cores: list[int] = []
    for part in (bind or "").split("|")[0].split(","):
        first, _, last = part.strip().partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            return []
        cores += [c for c in range(int(first), int(last or first) + 1) if c not in cores]
    return cores


def bound_cores(bind: str | None) -> int | None:
    """The number of cores ``VLLM_CPU_OMP_THREADS_BIND`` gives an engine; None where it names none."""
    return len(expand_cores(bind)) or None


# vLLM saves its compiled model and loads it at the next start (``VLLM_USE_AOT_COMPILE``). On the CPU, vLLM 0.32 with
# torch 2.13 cannot load what it saved ("'function' object has no attribute 'finalize_loading'", a warning) and
# compiles afresh: 40-55 s of a 51-81 s start on 2 cores. pipeline.judge.vllm.compile_cache lets it load, inside this
# process (14 s starts in a Ray worker on 2 cores) and, as vLLM's plugin, in vLLM's own processes (26 s against
# 34-47 s); where the plugin does not run there, torch.compile's earlier cache loads instead (off with AOT).
# BENCHMARKS.md, "The compiled engine's saved model" and "The compiled engine's start". judge.env may set either.
AOT_COMPILE_ENV = "VLLM_USE_AOT_COMPILE"
# The vLLM plugin that runs pipeline.judge.vllm.compile_cache's loader in every process of vLLM's own (pyproject.toml).
PLUGINS, PLUGIN = "vllm.general_plugins", "ca_compile_cache"


@functools.cache
def _plugin_registered() -> bool:
    return bool(importlib.metadata.entry_points(group=PLUGINS, name=PLUGIN))


def in_vllm_processes(env: Mapping[str, str]) -> bool:
    """Whether vLLM runs the loader in each process of its own started with ``env``: the plugin is registered in this
    environment and ``VLLM_PLUGINS`` (vLLM's list of the plugins to load; unset: all) names it."""
    allowed = env.get("VLLM_PLUGINS")
    return _plugin_registered() and (allowed is None or PLUGIN in allowed.split(","))


def aot_compile(spec: JudgeSpec, inside: bool) -> str | None:
    """``AOT_COMPILE_ENV`` for the engine: as ``judge.env`` sets it; else on the CPU ``1`` where vLLM's saved model
    loads (inside this process; in vLLM's own processes where its plugin runs the loader there) and ``0`` elsewhere
    (the note above); None on a GPU (vLLM's default)."""
    given = {str(k): str(v) for k, v in spec.env.items()}
    if AOT_COMPILE_ENV in given:
        return given[AOT_COMPILE_ENV]
    if spec.on_gpu:
        return None
    return "1" if inside or in_vllm_processes({**os.environ, **given}) else "0"


def vllm_env(spec: JudgeSpec, inside: bool) -> dict[str, str]:
    """The environment of a vLLM engine: ``judge.env`` resolved (:func:`resolve_env`), vLLM's multiprocessing
    switch, on the CPU the compile cache that loads (:func:`aot_compile`), and for an engine inside this process the
    OpenMP threads of its bound cores (a Ray actor's ``OMP_NUM_THREADS`` is its CPU count, one by default: the engine
    would compute on one thread; vLLM's own engine process sets it itself)."""
    env = resolve_env(spec.env)
    env[MULTIPROCESSING_ENV] = "0" if inside else "1"
    aot = aot_compile(spec, inside)
    if aot is not None:
        env[AOT_COMPILE_ENV] = aot
    cores = bound_cores(env.get("VLLM_CPU_OMP_THREADS_BIND"))
    if inside and cores and "OMP_NUM_THREADS" not in spec.env:
        env["OMP_NUM_THREADS"] = str(cores)
    return env


# OpenMP runtimes that, preloaded, the engine's bound threads use instead of the one the process loaded first.
_OPENMP = ("libgomp", "libiomp", "libomp")


def torch_openmp() -> str | None:
    """PyTorch's own OpenMP runtime (``torch/lib/libgomp*.so*`` or ``torch.libs/``), found without importing
    torch; None where this install has none (a build linked to the system's)."""
    found = importlib.util.find_spec("torch")
    if found is None or not found.submodule_search_locations:
        return None
    package = Path(next(iter(found.submodule_search_locations)))
    for folder in (package / "lib", package.parent / "torch.libs"):
        libs = sorted(folder.glob("libgomp*.so*"))
        if libs:
            return str(libs[0])
    return None


def preloads_openmp(ld_preload: str | None) -> bool:
    return any(name in (ld_preload or "") for name in _OPENMP)


def worker_process_env(spec: JudgeSpec) -> dict[str, str]:
    """The environment a judge worker's process must start with (read as it loads, before any code of ours), for
    a vLLM engine on the CPU inside the worker: what vLLM gives the engine processes it spawns itself.

    - PyTorch's OpenMP runtime preloaded (``LD_PRELOAD``, vllm-project/vllm#27369): without it the engine's bound
      threads spin against each other (on 2 cores, 480 SummEval prompts took 73 CPU-seconds at 13/s against 59 at
      16/s with it; BENCHMARKS.md, bench-judge).
    - Its OpenMP threads bound one per core (``VLLM_CPU_OMP_THREADS_BIND``): an explicit list as
      ``GOMP_CPU_AFFINITY``, as vLLM's process manager sets it; ``all`` as ``OMP_PLACES=cores`` and
      ``OMP_PROC_BIND=close``, the cores of whichever node the worker lands on; and their number. OpenMP reads
      these once, as the process loads: set later, the threads float between the cores and the engine judged 5-8%
      slower than vLLM's own process on 2 cores (BENCHMARKS.md, bench-judge). ``auto`` (several actors on one
      machine, each claiming its cores as it starts) cannot be known before the process starts: unbound.
    - The worker at Ray's default priority for a task (``RAY_worker_niceness``), not below the system's: Ray starts
      its workers at niceness 15 (seen with ``ps -o ni``), and an engine at 15 (inside the worker, or in processes of
      its own, which inherit it) gives its cores to every daemon of Ray at 0.

    No huge pages: glibc's allocator asking for them (``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``) made the actor's
    engine start in 27.3 s against 5.4 s without, with the same judging rate after (2 cores, a VM; BENCHMARKS.md,
    bench-judge): the first touch of the KV cache in 2 MiB pages was the cost.

    The priority holds for a CPU engine in processes of its own too (they inherit it; vLLM sets their OpenMP
    itself); the rest is for an engine inside the worker. Empty for every other engine."""
    if Trait.WORKER_ENV not in backend(spec.backend).traits or spec.on_gpu:
        return {}
    env = {"RAY_worker_niceness": "0"}
    if not engine_inside(spec, in_actor=True):
        return env
    current = os.environ.get("LD_PRELOAD", "")
    library = torch_openmp()
    if library is not None and not preloads_openmp(current):
        env["LD_PRELOAD"] = f"{current}:{library}" if current else library
    bind = {str(k): str(v) for k, v in spec.env.items()}.get("VLLM_CPU_OMP_THREADS_BIND", "all")
    threads = bound_cores(bind)
    if bind == "all":
        cores = sorted(os.sched_getaffinity(0))
        env["GOMP_CPU_AFFINITY"] = " ".join(str(c) for c in cores)
        threads = len(cores)
    elif threads is not None:
        env["GOMP_CPU_AFFINITY"] = " ".join(str(c) for c in expand_cores(bind))
    if threads and "OMP_NUM_THREADS" not in spec.env:
        env["OMP_NUM_THREADS"] = str(threads)
    return env
