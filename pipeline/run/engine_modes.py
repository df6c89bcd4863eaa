"""``make engine-modes [ARGS="<overrides>"]``: measure this machine's engine modes for the run's judge, once.

The real workflow up to its prompts (the judge, its dtype for this device, the prompts as a run makes them), then the
vLLM engine started compiled once (to fill vLLM's compile cache: the next start is the one a run sees), then eager and
compiled, each judging a sample of the prompts (whole contexts of the mean prompt length, :func:`representative`)
once untimed, then ``--passes`` times timed (the median rate), each from an empty prefix cache (else it would time
cache hits, where the compiled engine's faster prefill does not show). Where two judge workers fit, both engines stay
alive and their passes alternate (:func:`rounds`), so that a host's drift in speed slows both alike; else one after
the other. Each start is where the run's engine starts: on a Ray worker with the judge worker's resources and process
environment for the Ray executor (the default; a CPU engine then runs inside the worker's process), in this process
for ``runtime=inprocess``. The starts and rates go to ``<paths.cache_dir>/engine_modes.json``
(:mod:`pipeline.judge.vllm.mode`), where ``judge.engine.enforce_eager=auto`` reads them; the crossover is printed.

    python -m pipeline.run.engine_modes [--prompts 256] [--passes 4] [overrides ...]
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
from pipeline.config.derived import resolve_path
from pipeline.config.hydra import compose
from pipeline.judge.hardware import machine_header
from pipeline.judge.vllm.cores import worker_process_env
from pipeline.judge.vllm.engine import VLLMEngine
from pipeline.judge.vllm.mode import (
    KEY,
    Measured,
    ModeRecord,
    choose,
    machine_key,
    remember,
)
from pipeline.prompts.pairs import generate_prompts, split_shards
from pipeline.run.context import run
from pipeline.runtime.logs import console, workspace
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


class Meter:
    """One engine in one mode, started in this process (on a Ray worker, as a run's: :class:`Started`), with its
    sample judged once untimed (the first batch's one-off costs); then :meth:`rate` times one pass on demand."""

    def __init__(self, spec, plan, prompts: list[str], eager: bool):
        self.engine = VLLMEngine(replace(spec, engine={**spec.engine, KEY: eager}))
        self.prompts, self.frame = prompts, plan.frame
        self.request = plan.requests()[plan.templates[0].id]
        self.engine.answer(prompts, self.frame, self.request)  # from an empty prefix cache

    def start(self) -> float:
        return self.engine.start_seconds

    def rate(self) -> float:
        """One timed pass from an empty prefix cache (else it would time cache hits, where the compiled engine's faster
        prefill does not show): prompts per second."""
        self.engine.llm.reset_prefix_cache()
        started = time.perf_counter()
        self.engine.answer(self.prompts, self.frame, self.request)
        return len(self.prompts) / (time.perf_counter() - started)

    def close(self) -> None:
        self.engine.close()
        gc.collect()


class Started:
    """A :class:`Meter` where the record's runs start their engine, called alike: a fresh worker of the judge's kind
    on Ray (its CPUs, GPUs and process environment, as :func:`pipeline.stages.judging.judge_steps` starts one), or
    this process; ready when made (one engine starting at a time, so that its start is timed alone)."""

    def __init__(self, cfg, record: ModeRecord, spec, plan, prompts: list[str], eager: bool):
        self.actor = None
        if not record.in_actor:
            self.local = Meter(spec, plan, prompts, eager)
        else:
            self.actor = self.worker(cfg, spec, plan, prompts, eager)
        self.start: float = self.call("start")

    @staticmethod
    def worker(cfg, spec, plan, prompts: list[str], eager: bool) -> Any:
        import ray

        init_ray(cfg.runtime)
        return (
            ray.remote(Meter)
            .options(
                num_cpus=spec.placement.num_cpus,
                num_gpus=spec.placement.num_gpus,
                runtime_env={"env_vars": worker_process_env(spec)},
            )
            .remote(spec, plan, prompts, eager)
        )

    def call(self, name: str) -> Any:
        if self.actor is None:
            return getattr(self.local, name)()
        import ray

        return ray.get(getattr(self.actor, name).remote())

    def close(self) -> None:
        self.call("close")
        if self.actor is not None:
            import ray

            ray.kill(self.actor)


def rounds(meters: dict[str, Any], passes: int) -> dict[str, list[float]]:
    """``passes`` rounds, each one timed pass of every meter (anything with ``call("rate")``), the order reversed every
    other round (A B, B A, A B, ...): on a host whose speed drifts steadily, an even number of rounds gives each mode
    the same mean and median place in time, so the drift slows both alike rather than one."""
    rates: dict[str, list[float]] = {mode: [] for mode in meters}
    order = list(meters)
    for k in range(passes):
        for mode in order if k % 2 == 0 else order[::-1]:
            rates[mode].append(meters[mode].call("rate"))
    return rates


def room_for_two(cfg, spec, record: ModeRecord) -> bool:
    """Whether two judge workers fit at once (the run's executor is Ray, and the cluster's CPUs and GPUs hold two:
    nothing else runs here), so that both modes' engines stay alive and their passes alternate."""
    if not record.in_actor:
        return False  # one vLLM engine per process
    import ray

    init_ray(cfg.runtime)
    cluster = ray.cluster_resources()
    return all(
        cluster.get(kind, 0.0) >= 2 * need
        for kind, need in (("CPU", spec.placement.num_cpus), ("GPU", spec.placement.num_gpus))
    )


def measure_modes(
    cfg, record: ModeRecord, spec, plan, prompts: list[str], passes: int
) -> tuple[dict[str, Measured], dict[str, list[float]], bool]:
    """Each mode's start and median rate over ``passes`` timed passes, every pass's rate, and whether the passes
    alternated. The compiled engine starts once first to fill vLLM's compile cache (the start a run sees is the next
    one). Both engines then alive at once where two workers fit (:func:`room_for_two`; a host whose speed moved one
    pass's rate by 30% from one minute to the next moved the measured gain more than the gain itself, BENCHMARKS.md),
    else one after the other."""
    Started(cfg, record, spec, plan, prompts, False).close()  # fills the compile cache
    modes = {"eager": True, "compiled": False}
    together = room_for_two(cfg, spec, record)
    starts: dict[str, float] = {}
    rates: dict[str, list[float]] = {}
    for group in [list(modes)] if together else [[mode] for mode in modes]:
        meters = {mode: Started(cfg, record, spec, plan, prompts, modes[mode]) for mode in group}
        try:
            starts |= {mode: meter.start for mode, meter in meters.items()}
            rates |= rounds(meters, passes)
        finally:
            for meter in meters.values():
                meter.close()
    measured = {mode: Measured(starts[mode], statistics.median(rates[mode])) for mode in modes}
    return measured, rates, together


def _rates(rates: list[float]) -> str:
    return ", ".join(f"{r:.2f}" for r in rates)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompts", type=int, default=256, help="prompts each mode judges in a pass")
    parser.add_argument(
        "--passes",
        type=int,
        default=4,
        help="timed passes of each mode, >= 1 (their median rate; even: see rounds)",
    )
    parser.add_argument("overrides", nargs="*", help="the run's Hydra overrides (its judge, dataset...)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.passes < 1 or args.prompts < 1:
        parser.error(f"--passes and --prompts must be at least 1 (given {args.passes} and {args.prompts})")
    work = workspace("engine-modes")
    cfg = compose([f"paths.output_root={work}", "tracking.enabled=false", *args.overrides])
    spec, plan, contexts, every = run_prompts(cfg)
    prompts = representative(contexts, every, args.prompts)
    out = console()
    if len(prompts) < args.prompts:
        out.write(f"engine modes: measured on {len(prompts)} prompts (the config makes no more)\n")
    record = mode_record(cfg, resolve_path(cfg.paths.cache_dir, PROJECT_ROOT))
    modes, passes, together = measure_modes(cfg, record, spec, plan, prompts, args.passes)
    eager, compiled = modes["eager"], modes["compiled"]
    remember(record, spec, True, eager)
    remember(record, spec, False, compiled)
    point = choose(spec, 0, record).crossover  # as runs read it (the record's rounding)
    out.write(
        "\n".join(
            [
                *machine_header("engine modes", "pipeline.run.engine_modes", argv),
                f"# judge {spec.name}, {spec.dtype}; {len(prompts)} prompts; "
                f"{'on Ray workers, as the run' if record.in_actor else 'in this process, as runtime=inprocess'}; "
                f"{'passes alternated, both engines alive' if together else 'one engine after the other'}",
                f"eager:    start {eager.start:5.1f} s, {eager.rate:6.2f} prompts/s (passes {_rates(passes['eager'])})",
                f"compiled: start {compiled.start:5.1f} s, {compiled.rate:6.2f} prompts/s "
                f"({compiled.rate / eager.rate:.2f}x eager; passes {_rates(passes['compiled'])})",
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
