"""``make engine-modes [ARGS="<overrides>"]``: measure this machine's engine modes for the run's judge, once.

The real workflow up to its prompts (the judge, its dtype for this device, the prompts as a run makes them), then the
vLLM engine started eager, and compiled twice (the first start fills vLLM's compile cache; the second is the start a
run sees, and the one recorded); each judges a sample of the prompts twice, the second pass timed (its rate) from an
empty prefix cache (else it would time cache hits, where the compiled engine's faster prefill does not show). Each
start is where the run's engine starts: on a Ray worker with the judge worker's resources and process environment
for the Ray executor (the default; a CPU engine then runs inside the worker's process), in this process for
``runtime=inprocess``. The starts and rates go to ``<paths.cache_dir>/engine_modes.json``
(:mod:`pipeline.judge.engine_mode`), where ``judge.engine.enforce_eager=auto`` reads them; the crossover is printed.

    python -m pipeline.benchmarks.engine_modes [--prompts 256] [overrides ...]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from dataclasses import replace

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


def measure(spec, plan, prompts: list[str], eager: bool) -> Measured:
    """One start of the engine in this mode in this process, and its rate on ``prompts`` (the second of two
    passes)."""
    engine = VLLMEngine(replace(spec, engine={**spec.engine, KEY: eager}))
    try:
        request = plan.requests()[plan.templates[0].id]
        engine.answer(prompts, plan.frame, request)
        engine.llm.reset_prefix_cache()  # the timed pass computes its prompts as a run's first sight of them does
        started = time.perf_counter()
        engine.answer(prompts, plan.frame, request)
        return Measured(engine.start_seconds, len(prompts) / (time.perf_counter() - started))
    finally:
        engine.close()
        gc.collect()


class Meter:
    """A Ray worker started as the judge's are (:func:`pipeline.stages.judging.judge_steps`: its CPUs, GPUs and
    process environment), to measure an engine where a run's starts."""

    def measure(self, spec, plan, prompts: list[str], eager: bool) -> Measured:
        return measure(spec, plan, prompts, eager)


def measure_where_runs_do(cfg, record: ModeRecord, spec, plan, prompts: list[str], eager: bool) -> Measured:
    """:func:`measure` where the record's runs start their engine: a fresh worker of the judge's kind on Ray, or this
    process."""
    if not record.in_actor:
        return measure(spec, plan, prompts, eager)
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
        return ray.get(meter.measure.remote(spec, plan, prompts, eager))
    finally:
        ray.kill(meter)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=256, help="prompts each mode judges (twice)")
    parser.add_argument("overrides", nargs="*", help="the run's Hydra overrides (its judge, dataset...)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    work = workspace("engine-modes")
    cfg = compose([*args.overrides, f"paths.output_root={work}", "tracking.enabled=false"])
    planned = run(cfg, PROJECT_ROOT, stop_after="shard_contexts").values
    plan, spec = planned["prompt_plan"], planned["judge"]
    chunks = [
        c for shard in split_shards(planned["contexts"]) for c in generate_prompts(shard, cfg.pairs, plan)
    ]
    prompts = [p for chunk in chunks for p in chunk.column("prompt").to_pylist()][: args.prompts]
    out = console()
    if len(prompts) < args.prompts:
        out.write(f"engine modes: measured on {len(prompts)} prompts (the config makes no more)\n")
    record = mode_record(cfg, PROJECT_ROOT)
    eager = measure_where_runs_do(cfg, record, spec, plan, prompts, True)
    measure_where_runs_do(cfg, record, spec, plan, prompts, False)  # fills the compile cache
    compiled = measure_where_runs_do(cfg, record, spec, plan, prompts, False)
    remember(record, spec, True, eager.start, eager.rate)
    remember(record, spec, False, compiled.start, compiled.rate)
    point = choose(spec, 0, record).crossover  # as runs read it (the record's rounding)
    out.write(
        "\n".join(
            [
                f"# engine modes  {time.strftime('%Y-%m-%dT%H:%M:%S')}",
                f"# cpu: {read_cpu().describe()}; judge {spec.name}, {spec.dtype}; {len(prompts)} prompts; "
                f"{'on a Ray worker, as the run' if record.in_actor else 'in this process, as runtime=inprocess'}",
                f"eager:    start {eager.start:5.1f} s, {eager.rate:6.2f} prompts/s",
                f"compiled: start {compiled.start:5.1f} s, {compiled.rate:6.2f} prompts/s "
                f"({compiled.rate / eager.rate:.2f}x eager)",
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
