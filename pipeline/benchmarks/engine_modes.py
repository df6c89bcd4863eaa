"""``make engine-modes [ARGS="<overrides>"]``: measure this machine's engine modes for the run's judge, once.

The real workflow up to its prompts (the judge, its dtype for this device, the prompts as a run makes them), then the
vLLM engine started eager, and compiled twice (the first start fills vLLM's compile cache; the second is the start a
run sees, and the one recorded); each judges a sample of the prompts (whole contexts of the mean prompt length,
:func:`representative`) once untimed, then ``--passes`` times timed (the median rate), each from an empty prefix
cache (else it would time cache hits, where the compiled engine's faster prefill does not show). Each
start is where the run's engine starts: on a Ray worker with the judge worker's resources and process environment
for the Ray executor (the default; a CPU engine then runs inside the worker's process), in this process for
``runtime=inprocess``. The starts and rates go to ``<paths.cache_dir>/engine_modes.json``
(:mod:`pipeline.judge.engine_mode`), where ``judge.engine.enforce_eager=auto`` reads them; the crossover is printed.

    python -m pipeline.benchmarks.engine_modes [--prompts 256] [--passes 3] [overrides ...]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from dataclasses import replace
from typing import Any

from pipeline import PROJECT_ROOT
from pipeline.benchmarks.timing import workspace
from pipeline.config.hydra import compose
from pipeline.judge.cores import worker_process_env
from pipeline.judge.engine_mode import (
    KEY,
    Measured,
    ModeRecord,
    choose,
    machine_key,
    remember,
)
from pipeline.judge.hardware import read_cpu
from pipeline.judge.vllm_engine import VLLMEngine
from pipeline.prompts.pairs import generate_prompts, split_shards
from pipeline.run.context import run
from pipeline.runtime.logs import console
from pipeline.runtime.ray_data import init_ray
from pipeline.workflows.segments import mode_record


def representative(contexts: list[str], prompts: list[str], n: int) -> list[str]:
    """``n`` prompts of whole contexts (a run judges a context's prompts together, so the prefix cache holds its
    shares as in a run), those whose prompts' mean length is nearest the mean of all (the first article of SummEval
    has prompts of 667 tokens on average, the first nine 818: its rate overstated theirs), each context's prompts in
    the order given; ties by the context's first place."""
    by_context: dict[str, list[str]] = {}
    for context, prompt in zip(contexts, prompts, strict=True):
        by_context.setdefault(context, []).append(prompt)
    if not by_context:
        return []
    mean = sum(map(len, prompts)) / len(prompts)
    nearest = sorted(by_context.values(), key=lambda own: abs(sum(map(len, own)) / len(own) - mean))
    return [p for own in nearest for p in own][:n]


def run_prompts(cfg) -> tuple[Any, Any, list[str], list[str]]:
    """The run's judge, its prompt plan, and every prompt it would judge with its context, as the run makes them (its
    stages up to the judging, no engine)."""
    planned = run(cfg, PROJECT_ROOT, stop_after="shard_contexts").values
    plan, spec = planned["prompt_plan"], planned["judge"]
    chunks = [
        c for shard in split_shards(planned["contexts"]) for c in generate_prompts(shard, cfg.pairs, plan)
    ]
    contexts = [c for chunk in chunks for c in chunk.column("context_id").to_pylist()]
    return spec, plan, contexts, [p for chunk in chunks for p in chunk.column("prompt").to_pylist()]


def measure(spec, plan, prompts: list[str], eager: bool, passes: int = 1) -> tuple[Measured, list[float]]:
    """One start of the engine in this mode in this process, and its rate on ``prompts``: the median of ``passes``
    (>= 1) timed passes, each pass's rate given too, after an untimed one, each from an empty prefix cache (a host
    whose speed varies from one minute to the next moved one pass's rate by 30%; BENCHMARKS.md)."""
    engine = VLLMEngine(replace(spec, engine={**spec.engine, KEY: eager}))
    try:
        request = plan.requests()[plan.templates[0].id]
        engine.answer(prompts, plan.frame, request)
        rates = []
        for _ in range(passes):
            engine.llm.reset_prefix_cache()  # each timed pass computes its prompts as a run's first sight of them
            started = time.perf_counter()
            engine.answer(prompts, plan.frame, request)
            rates.append(len(prompts) / (time.perf_counter() - started))
        return Measured(engine.start_seconds, statistics.median(rates)), rates
    finally:
        engine.close()
        gc.collect()


class Meter:
    """A Ray worker started as the judge's are (:func:`pipeline.stages.judging.judge_steps`: its CPUs, GPUs and
    process environment), to measure an engine where a run's starts."""

    def measure(
        self, spec, plan, prompts: list[str], eager: bool, passes: int
    ) -> tuple[Measured, list[float]]:
        return measure(spec, plan, prompts, eager, passes)


def measure_where_runs_do(
    cfg, record: ModeRecord, spec, plan, prompts: list[str], eager: bool, passes: int
) -> tuple[Measured, list[float]]:
    """:func:`measure` where the record's runs start their engine: a fresh worker of the judge's kind on Ray, or this
    process."""
    if not record.in_actor:
        return measure(spec, plan, prompts, eager, passes)
    import ray

    init_ray(cfg.runtime)
    meter = (
        ray.remote(Meter)
        .options(
            num_cpus=cfg.judge.num_cpus_per_actor,
            num_gpus=cfg.judge.num_gpus_per_actor,
            runtime_env={"env_vars": worker_process_env(spec)},
        )
        .remote()
    )
    try:
        return ray.get(meter.measure.remote(spec, plan, prompts, eager, passes))
    finally:
        ray.kill(meter)


def _rates(rates: list[float]) -> str:
    return ", ".join(f"{r:.2f}" for r in rates)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=256, help="prompts each mode judges in a pass")
    parser.add_argument(
        "--passes", type=int, default=3, help="timed passes of each mode, >= 1 (their median rate)"
    )
    parser.add_argument("overrides", nargs="*", help="the run's Hydra overrides (its judge, dataset...)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.passes < 1 or args.prompts < 1:
        parser.error(f"--passes and --prompts must be at least 1 (given {args.passes} and {args.prompts})")
    work = workspace("engine-modes")
    cfg = compose([*args.overrides, f"paths.output_root={work}", "tracking.enabled=false"])
    spec, plan, contexts, every = run_prompts(cfg)
    prompts = representative(contexts, every, args.prompts)
    out = console()
    if len(prompts) < args.prompts:
        out.write(f"engine modes: measured on {len(prompts)} prompts (the config makes no more)\n")
    record = mode_record(cfg, PROJECT_ROOT)
    eager, eager_passes = measure_where_runs_do(cfg, record, spec, plan, prompts, True, args.passes)
    measure_where_runs_do(cfg, record, spec, plan, prompts, False, 1)  # fills the compile cache
    compiled, compiled_passes = measure_where_runs_do(cfg, record, spec, plan, prompts, False, args.passes)
    remember(record, spec, True, eager.start, eager.rate)
    remember(record, spec, False, compiled.start, compiled.rate)
    point = choose(spec, 0, record).crossover  # as runs read it (the record's rounding)
    out.write(
        "\n".join(
            [
                f"# engine modes  {time.strftime('%Y-%m-%dT%H:%M:%S')}",
                f"# cpu: {read_cpu().describe()}; judge {spec.name}, {spec.dtype}; {len(prompts)} prompts; "
                f"{'on a Ray worker, as the run' if record.in_actor else 'in this process, as runtime=inprocess'}",
                f"eager:    start {eager.start:5.1f} s, {eager.rate:6.2f} prompts/s (passes {_rates(eager_passes)})",
                f"compiled: start {compiled.start:5.1f} s, {compiled.rate:6.2f} prompts/s "
                f"({compiled.rate / eager.rate:.2f}x eager; passes {_rates(compiled_passes)})",
                f"the compiled engine pays from {point:,} prompts"
                if point is not None
                else "compiled never pays",
                f"for 200 prompts: {choose(spec, 200, record).reason}",
                f"for 2,000 prompts: {choose(spec, 2000, record).reason}",
                f"recorded in {record.path} for {machine_key(spec, record.in_actor)}",
            ]
        )
        + "\n"
    )
    out.flush()


if __name__ == "__main__":
    main()
