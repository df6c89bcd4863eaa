"""``make bench-judge ARGS="--standin 200,1000"``: the pipeline against a stand-in engine at GPU rates
(:mod:`benchmarks.standin`), one and several workers, each against the stand-in called directly in the same
process in batches of ``judge.batch_size`` (the engine's own time, which no pipeline can beat), rounds alternated."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from benchmarks.standin import StandinEngine, StandinWorker, standin_spec
from benchmarks.timing import Timing, header, rate, stream_timed, time_split
from pipeline.stages.judging import judge_steps


def direct(spec: Any, plan: Any, prompts: list[str], batch_size: int) -> Timing:
    """The stand-in called in this process on every prompt, ``batch_size`` at a time, one call after another."""
    engine = StandinEngine(spec)
    request = plan.requests()[plan.templates[0].id]
    started = time.perf_counter()
    for k in range(0, len(prompts), batch_size):
        engine.answer(prompts[k : k + batch_size], plan.frame, request)
    return Timing(time.perf_counter() - started, 0.0, 0.0)


def pipeline(s: Any, spec: Any, workers: int) -> Timing:
    """The pair and judge steps on Ray Data with ``workers`` stand-in workers (half a CPU slot each: the stand-in
    sleeps as a GPU computes), timed from the first worker ready to the last row at the driver."""
    cfg = replace(s.cfg, runtime=replace(s.cfg.runtime, num_cpus=max(2, workers + 1)))
    spec = replace(spec, placement=replace(spec.placement, workers=(workers, workers), num_cpus=0.5))
    steps = judge_steps(cfg.pairs, cfg.runtime.pair_chunk_rows, s.plan, spec, worker=StandinWorker)
    table, timing = stream_timed(cfg.runtime, s.shards, steps, s.work / "logs")
    if table.num_rows != s.pairs.num_rows:
        raise RuntimeError(f"the pipeline judged {table.num_rows} of {s.pairs.num_rows} prompts")
    return timing


def standin_rows(args: Any, s: Any, argv: list[str]) -> list[str]:
    rates_ = [float(r) for r in args.standin.split(",") if r]
    workers_ = [int(w) for w in args.standin_workers.split(",") if w]
    prompts = s.pairs.column("prompt").to_pylist()
    total, batch = len(prompts), s.cfg.judge.batch_size
    lines = [
        *header("judge benchmark, stand-in engine at GPU rates", "judge", argv),
        f"# {total} prompts, judge.batch_size {batch}, {args.rounds} alternated rounds (medians)",
        "",
        f"{'stand-in':<34} {'pipeline/s':>10} {'direct/s':>9} {'x direct':>9}  where the pipeline's time went",
    ]
    for r in rates_:
        spec = standin_spec(s.spec, r, prompts, batch)
        for workers in workers_:
            pipe: list[Timing] = []
            alone: list[Timing] = []
            for _ in range(args.rounds):
                alone.append(direct(spec, s.plan, prompts, batch))
                pipe.append(pipeline(s, spec, workers))
            # the direct reference for k workers: k engines at the measured rate of one
            reference = [replace(t, seconds=t.seconds / workers) for t in alone]
            p, d = rate(pipe, total), rate(reference, total)
            ratios = [total / a.seconds / (total / b.seconds) for a, b in zip(pipe, reference, strict=True)]
            lines.append(
                f"{f'{r:g}/s per worker, {workers} worker(s)':<34} {p:>10.1f} {d:>9.1f} {p / d:>9.3f}  "
                + time_split(pipe, reference)
            )
            lines.append(
                f"{'':<34} per round x direct: {', '.join(f'{x:.3f}' for x in ratios)} "
                f"(median {float(np.median(ratios)):.3f})"
            )
    return lines
