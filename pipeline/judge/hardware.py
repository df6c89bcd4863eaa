"""What this machine's CPU can do, and the dtype a CPU judge should compute in.

The CPU build of vLLM runs its linear layers through oneDNN. In bfloat16 that needs native bfloat16 support
(x86: the ``avx512_bf16`` or ``amx_bf16`` flag; Arm: ``bf16``). Without it oneDNN refuses ("Failed to create
oneDNN linear, fallback to torch linear") and the engine falls back to plain torch matmuls: measured on an AMD
EPYC with AVX2 only, the demo judged at 0.5/s in bfloat16 and 5.5/s in float32. So a CPU judge computes in
bfloat16 where the CPU has it natively and in float32 elsewhere, unless ``judge.engine.dtype`` says otherwise.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
from dataclasses import dataclass
from pathlib import Path

# Flags that mean native bfloat16 arithmetic (x86: AVX512-BF16, AMX-BF16; Arm: FEAT_BF16).
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")
# The flags worth printing beside a timing (vector width and low-precision support).
SPEED_FLAGS = (
    "avx2",
    "avx512f",
    "avx512_core",
    "avx512bw",
    "avx512_vnni",
    "avx512_bf16",
    "amx_bf16",
    "amx_tile",
    "asimd",
    "sve",
    "bf16",
    "i8mm",
)


@dataclass(frozen=True)
class Cpu:
    model: str
    machine: str
    cores: int
    flags: frozenset[str]

    @property
    def native_bf16(self) -> bool:
        return any(flag in self.flags for flag in BF16_FLAGS)

    def speed_flags(self) -> list[str]:
        return [flag for flag in SPEED_FLAGS if flag in self.flags]

    def describe(self) -> str:
        """One line for logs and benchmarks: model, architecture, cores and the flags that matter for speed."""
        flags = " ".join(self.speed_flags()) or "none of " + "/".join(SPEED_FLAGS[:3])
        return f"{self.model} ({self.machine}, {self.cores} cores; flags: {flags})"


def read_cpu(cpuinfo: str | None = None) -> Cpu:
    """The CPU from ``/proc/cpuinfo`` (Linux); model 'unknown' and no flags elsewhere."""
    if cpuinfo is None:
        path = Path("/proc/cpuinfo")
        cpuinfo = path.read_text(errors="replace") if path.exists() else ""
    model, flags = "", frozenset[str]()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "hardware", "cpu model") and not model:
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = frozenset(value.split())
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return Cpu(model or platform.processor() or "unknown", platform.machine(), cores, flags)


@dataclass(frozen=True)
class DtypeChoice:
    dtype: str | None  # None: the engine's own default (the model's dtype), e.g. on a GPU
    reason: str


def engine_dtype(configured: str | None, on_gpu: bool, cpu: Cpu | None = None) -> DtypeChoice:
    """The dtype a judge engine runs in: ``judge.engine.dtype`` when set, else chosen from the hardware."""
    if configured is not None:
        return DtypeChoice(str(configured), "set by judge.engine.dtype")
    if on_gpu:
        return DtypeChoice(None, "the model's own dtype (GPU)")
    cpu = cpu or read_cpu()
    if cpu.native_bf16:
        found = [flag for flag in BF16_FLAGS if flag in cpu.flags]
        return DtypeChoice("bfloat16", f"this CPU has native bfloat16 ({', '.join(found)})")
    return DtypeChoice(
        "float32",
        f"this CPU has no native bfloat16 (no {'/'.join(BF16_FLAGS)} flag), where bfloat16 falls back to plain "
        "matmuls, about 10x slower; set +judge.engine.dtype=bfloat16 to use it anyway",
    )


def machine_header(title: str, module: str, argv: list[str] | None) -> list[str]:
    """What a measurement's output starts with: what it measures and when, this machine's CPU (model and flags), its
    host and Python, and the command that repeats it (``python -m <module>``; ``argv``: the arguments given, None:
    this process's)."""
    given = " ".join(sys.argv[1:] if argv is None else argv)
    return [
        f"# {title}  {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"# cpu: {read_cpu().describe()}",
        f"# {platform.node()}; python {platform.python_version()}",
        f"# command: python -m {module} {given}".rstrip(),
    ]
