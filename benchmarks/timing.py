"""What the benchmarks share: the header every one prints (what, when, the machine, the command), the judge worker
that stamps its batches, the pipeline streamed and timed from its engine being ready to the last row at the driver
(with that window split), and the per-round lines and rates every engine benchmark prints (judge, generate,
reasoning)."""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.contracts.keys import PROMPT_KEY
from pipeline.judge.hardware import machine_header
from pipeline.judge.hosting.worker import JudgeWorker, Task


def header(title: str, module: str, argv: list[str] | None) -> list[str]:
    """:func:`pipeline.judge.hardware.machine_header` for ``python -m benchmarks.<module>``."""
    return machine_header(title, f"benchmarks.{module}", argv)


def bench_config(work: Path, overrides: list[str]) -> Any:
    """The run config of a benchmark's run: its output in ``work``, no tracking, then ``overrides`` (which may
    change either)."""
    from pipeline.config.hydra import compose

    return compose([f"paths.output_root={work}", "tracking.enabled=false", *overrides])


# The part of the pipeline's window spent inside its batches (:attr:`Timing.split`).
IN_BATCHES = "in batches"


class TimedJudgeWorker(JudgeWorker):
    """The judge worker plus the wall-clock moment its engine was ready (same machine as the driver)."""

    def __init__(self, spec, **kwargs):
        super().__init__(spec, **kwargs)
        self.ready_at = time.time()

    def __call__(self, batch: pa.Table, task: Task) -> pa.Table:
        started = time.time()
        out = super().__call__(batch, task)
        n = out.num_rows
        extra = {
            "ready_at": self.ready_at,
            "engine_start_s": self.start_seconds,
            "batch_started": started,
            "batch_done": time.time(),
        }
        for name, value in extra.items():
            out = out.append_column(name, pa.array([value] * n))
        return out


@dataclass
class Timing:
    seconds: float
    start_seconds: float
    cache_share: float
    # The pipeline's judging window split (seconds, by part): before the actor's first batch, inside its batches (a
    # worker's, averaged over the workers), between them, and from its last batch to the driver holding every row.
    # Empty for direct vLLM (one call).
    split: dict[str, float] = field(default_factory=dict)
    # After the window: from the last row at the driver to the stream's end (the pool closing its workers and their
    # engines), outside the rate as direct vLLM's close is.
    closing: float = 0.0


def stream_timed(runtime, blocks: list, steps: list, log_dir: Path) -> tuple[pa.Table, Timing]:
    """Stream ``blocks`` through ``steps`` (whose engine step runs :class:`TimedJudgeWorker`) on Ray Data, timed from
    the actor's engine being ready to the last row at the driver, with that window split (see :class:`Timing`)."""
    import ray

    from pipeline.runtime.ray_data import RayDataExecutor

    batches, arrived = [], []
    try:
        for batch in RayDataExecutor(runtime, log_dir).stream(blocks, steps):
            batches.append(batch)
            arrived.append(time.time())
        ended_at = time.time()  # the stream's end: the pool's workers closed (their engines shut down)
    finally:
        ray.shutdown()
    done_at = max(arrived)
    table = pa.concat_tables(batches)
    ready_at = min(table.column("ready_at").to_pylist())
    starts, ends = table.column("batch_started").to_pylist(), table.column("batch_done").to_pylist()
    spans = sorted(set(zip(starts, ends, strict=True)))
    # in batches: each worker's, averaged over the workers (k workers judge side by side, not one after another)
    busy = sum(end - start for start, end in spans) / len(set(table.column("worker").to_pylist()))
    timing = Timing(
        done_at - ready_at,
        max(table.column("engine_start_s").to_pylist()),
        0.0,
        split={
            "first batch": spans[0][0] - ready_at,
            IN_BATCHES: busy,
            "between batches": spans[-1][1] - spans[0][0] - busy,
            "last batch to the driver": done_at - spans[-1][1],
        },
        closing=ended_at - done_at,
    )
    gc.collect()
    return table, timing


def rate(runs: list[Timing], total: int) -> float:
    """The median of the rounds' rates (prompts per second); NaN for an arm that did not run."""
    return float(np.median([total / t.seconds for t in runs])) if runs else float("nan")


def rates(runs: list[Timing], total: int) -> str:
    return ", ".join(f"{total / t.seconds:.2f}" for t in runs)


def round_lines(unit: str, pipeline: list[float], direct: list[float], digits: int = 2) -> list[str]:
    """The pipeline's and direct vLLM's rate in every alternated round, and their ratio per round with its median
    (the lines every engine benchmark prints)."""
    ratios = [p / d for p, d in zip(pipeline, direct, strict=True)]

    def listed(values: list[float], d: int) -> str:
        return ", ".join(f"{v:.{d}f}" for v in values)

    return [
        f"rounds ({unit}): pipeline {listed(pipeline, digits)}; direct {listed(direct, digits)}",
        f"pipeline / direct, per round: {listed(ratios, 2)} (median {float(np.median(ratios)):.2f})",
    ]


def time_split(pipeline: list[Timing], direct: list[Timing]) -> str:
    """The pipeline's window against direct vLLM's one call: waiting for the first batch, engine calls, between
    batches, and from the last batch to the driver."""

    def med(values: list[float]) -> float:
        return float(np.median(values))

    total, direct_s = med([t.seconds for t in pipeline]), med([t.seconds for t in direct])
    split = ", ".join(f"{part} {med([t.split[part] for t in pipeline]):.1f} s" for part in pipeline[0].split)
    closing = med([t.closing for t in pipeline])
    return (
        f"{total:.1f} s = {split}; direct vLLM's call {direct_s:.1f} s; then the workers' close {closing:.1f} s "
        "(outside both rates)"
    )


def in_order(table: pa.Table, pairs: pa.Table, column: str = "token_logprobs") -> np.ndarray:
    """A judged table's ``column`` in the order of the prompts ``pairs`` (keyed by the prompt's key,
    :data:`pipeline.contracts.keys.PROMPT_KEY`): the pipeline's answers beside the direct engine's, which come in the
    prompts' order."""

    def keys(t: pa.Table) -> list[tuple[str, ...]]:
        return list(zip(*(t.column(c).to_pylist() for c in PROMPT_KEY), strict=True))

    by_key = dict(zip(keys(table), table.column(column).to_pylist(), strict=True))
    return np.array([by_key[k] for k in keys(pairs)])


def cache_share(table: pa.Table) -> float:
    prompt = np.asarray(table.column("prompt_tokens")).sum()
    return float(np.asarray(table.column("cached_tokens")).sum() / prompt) if prompt else 0.0
