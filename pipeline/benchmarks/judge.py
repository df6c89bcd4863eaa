"""Judge the same SummEval prompts three ways and print comparisons per second and their ratios.

1. the pipeline: the pair and judge steps on Ray Data (one vLLM actor), as a run does;
2. vLLM ``LLM.generate`` called directly on every prompt at once;
3. Hugging Face transformers, one prompt per forward pass (how the papers' code judges), on a subset;
4. with ``--api``: the pipeline again, its judge behind a local OpenAI-compatible vLLM server (``judge.backend=api``,
   no reply cache) on the same checkpoint and dtype; server and client share this machine's cores;
5. with ``--own``: the pipeline again with ``judge.engine_process=own`` (vLLM's engine processes beside the actor)
   against the default on the CPU (the engine inside the actor), alternated with the other rounds: engine start,
   judging rate and answers.

The prompts, the judge and its dtype come from the real workflow (its stages up to ``shard_contexts``), so the
benchmark measures what ``make run`` does on this machine: the dtype chosen for this CPU unless
``judge.engine.dtype`` is given. Rates exclude engine start-up (reported separately): the pipeline is timed from
the moment its actor's engine is ready to the last judged row arriving at the driver, so every Ray overhead
during judging is included. The CPU (model and flags) and the dtype are printed with the results.

    python -m pipeline.benchmarks.judge [--contexts 2] [--hf-prompts 48] [--rounds 3] [--api] [--own] [overrides ...]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import logging
import os
import platform
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipeline import PROJECT_ROOT
from pipeline.config.enums import EngineProcess
from pipeline.config.hydra import compose
from pipeline.judge.cores import engine_inside
from pipeline.judge.hardware import read_cpu
from pipeline.judge.hf_engine import HFEngine
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.vllm_engine import VLLMEngine
from pipeline.judge.worker import JudgeWorker
from pipeline.methods.labels import p_a_wins, side_logprobs
from pipeline.prompts.pairs import generate_prompts, split_shards
from pipeline.run.context import run
from pipeline.runtime.logs import capture_process_output, captured_output_path, console, setup_logging
from pipeline.stages.judging import judge_steps

log = logging.getLogger("pipeline.benchmarks.judge")


class TimedJudgeWorker(JudgeWorker):
    """The judge worker plus the wall-clock moment its engine was ready (same machine as the driver)."""

    def __init__(self, spec, reads, frame, **kwargs):
        super().__init__(spec, reads, frame, **kwargs)
        self.ready_at = time.time()

    def __call__(self, batch: pa.Table) -> pa.Table:
        out = super().__call__(batch)
        n = out.num_rows
        return out.append_column("ready_at", pa.array([self.ready_at] * n)).append_column(
            "engine_start_s", pa.array([self.start_seconds] * n)
        )


@dataclass
class Timing:
    seconds: float
    start_seconds: float
    cache_share: float


def run_pipeline(cfg, shards, plan, spec, log_dir: Path) -> tuple[Timing, pa.Table]:
    """The pair and judge steps on Ray Data, timed from the actor's engine being ready to the last row."""
    import ray

    from pipeline.runtime.ray_data import RayDataExecutor

    steps = judge_steps(
        cfg.pairs, cfg.judge, cfg.runtime.pair_chunk_rows, plan, spec, worker=TimedJudgeWorker
    )
    try:
        batches = list(RayDataExecutor(cfg.runtime, log_dir).stream(shards, steps))
        done_at = time.time()
    finally:
        ray.shutdown()
    table = pa.concat_tables(batches)
    ready_at = min(table.column("ready_at").to_pylist())
    timing = Timing(done_at - ready_at, max(table.column("engine_start_s").to_pylist()), cache_share(table))
    gc.collect()
    return timing, table


class Direct:
    """One vLLM engine in this process; each ``measure`` is one ``LLM.generate`` call on every prompt (the same
    token ids the judge worker builds), from an empty prefix cache. The engine idles (no CPU) between calls."""

    def __init__(self, spec, plan, pairs: pa.Table):
        self.engine = VLLMEngine(spec)
        self.read = plan.requests()[plan.templates[0].id]
        self.ids = plan.frame.encode(self.engine.tokenizer, pairs.column("prompt").to_pylist())
        self.dtype = self.engine.dtype

    def measure(self) -> tuple[Timing, np.ndarray]:
        llm = self.engine.llm
        llm.reset_prefix_cache()
        started = time.perf_counter()
        outputs = llm.generate(
            [{"prompt_token_ids": x} for x in self.ids], self.engine.params(self.read), use_tqdm=False
        )
        seconds = time.perf_counter() - started
        token_ids = self.read.token_ids
        lp = np.array([[o.outputs[0].logprobs[0][t].logprob for t in token_ids] for o in outputs])
        share = sum(o.num_cached_tokens or 0 for o in outputs) / sum(len(o.prompt_token_ids) for o in outputs)
        return Timing(seconds, self.engine.start_seconds, share), lp

    def close(self) -> None:
        self.engine.close()
        gc.collect()


def run_hf(spec, plan, ids: list[list[int]], dtype: str) -> tuple[Timing, np.ndarray]:
    """Hugging Face transformers, one prompt per forward pass, in the dtype vLLM ran in."""
    hf = HFEngine(replace(spec, engine={"dtype": dtype}))
    started = time.perf_counter()
    results = hf.run(ids, plan.requests()[plan.templates[0].id])
    seconds = time.perf_counter() - started
    hf.close()
    return Timing(seconds, hf.start_seconds, 0.0), np.array([r.token_logprobs for r in results])


def run_api(cfg, shards, plan, spec, dtype: str, rounds: int, work: Path) -> tuple[list[Timing], pa.Table]:
    """The pipeline with its judge behind a local vLLM server on the same checkpoint and dtype (no reply cache:
    every round sends every prompt); timed as :func:`run_pipeline`, the server's start-up excluded."""
    from pipeline.config.enums import Backend
    from pipeline.judge.serve import LocalVLLMServer

    served = "bench-judge"
    with LocalVLLMServer(spec.model_path, work / "vllm-server.log", served, dtype=dtype) as server:
        api = cfg.judge.api
        api_spec = replace(
            spec,
            backend=Backend.api,
            engine={},
            api={
                "base_url": server.url,
                "model": served,
                "concurrency": api.concurrency,
                "timeout": api.timeout,
                "max_retries": api.max_retries,
                "retry_for": api.retry_for,
                "cache_path": None,
            },
        )
        runs = []
        for round_ in range(rounds):
            timing, table = run_pipeline(cfg, shards, plan, api_spec, work / "logs")
            runs.append(replace(timing, start_seconds=server.start_seconds))
            log.info("API round %d/%d: %.2f/s", round_ + 1, rounds, table.num_rows / timing.seconds)
    return runs, table


def run_actors(cfg, shards, plan, spec, actors: int, rounds: int, work: Path) -> list[Timing]:
    """The pipeline with ``actors`` judge actors on this machine, each claiming its own cores
    (``VLLM_CPU_OMP_THREADS_BIND=auto``). Ray's CPUs are scheduling slots: one per actor and one for the
    prompt tasks (with the actors holding nearly every slot, Ray Data starved the prompt tasks here)."""
    cores = len(os.sched_getaffinity(0))
    many = replace(
        cfg,
        judge=replace(cfg.judge, num_actors=actors, num_cpus_per_actor=1),
        runtime=replace(cfg.runtime, num_cpus=actors + 1),
    )
    pinned = replace(
        spec,
        env={
            **spec.env,
            "VLLM_CPU_OMP_THREADS_BIND": "auto",
            "CA_CORES_PER_WORKER": str(max(1, cores // actors)),
        },
    )
    runs = []
    for round_ in range(rounds):
        timing, table = run_pipeline(many, shards, plan, pinned, work / "logs")
        runs.append(timing)
        log.info(
            "%d actors, round %d/%d: %.2f/s", actors, round_ + 1, rounds, table.num_rows / timing.seconds
        )
    return runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--contexts", type=int, default=2, help="SummEval articles (240 ordered pairs each)")
    parser.add_argument("--attribute", default="coherence")
    parser.add_argument(
        "--hf-prompts", type=int, default=48, help="prompts judged by the one-at-a-time baseline"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="pipeline/direct rounds, alternated (medians shown)"
    )
    parser.add_argument(
        "--api", action="store_true", help="also judge through a local vLLM server (judge.backend=api)"
    )
    parser.add_argument(
        "--own",
        action="store_true",
        help="also run the pipeline with judge.engine_process=own (vLLM's engine processes beside the actor)",
    )
    parser.add_argument(
        "--actors",
        type=int,
        default=1,
        help="also run the pipeline with this many judge actors, each pinned to its own cores "
        "(VLLM_CPU_OMP_THREADS_BIND=auto), against one actor on every core",
    )
    parser.add_argument("--verbose", action="store_true", help="the engines' and Ray's output on the console")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. judge.batch_size=128")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-judge-"))
    if not args.verbose:
        capture_process_output(work / "output.log")
    setup_logging("INFO", args.verbose)
    cfg = compose(
        [
            "dataset=summeval",
            f"dataset.max_contexts={args.contexts}",
            f"dataset.attributes=[{args.attribute}]",
            f"paths.output_root={work}",
            "tracking.enabled=false",
            *args.overrides,
        ]
    )
    # The real workflow up to the shards: input, judge (dtype for this CPU), prompts, an empty run folder.
    planned = run(cfg, PROJECT_ROOT, stop_after="shard_contexts").values
    plan, spec = planned["prompt_plan"], planned["judge"]
    shards = split_shards(planned["contexts"])
    pairs = pa.concat_tables(
        [
            chunk
            for shard in shards
            for chunk in generate_prompts(shard, cfg.pairs, plan, cfg.runtime.pair_chunk_rows)
        ]
    )
    total = pairs.num_rows
    log.info("%d prompts (%d SummEval contexts, %s, both orderings)", total, args.contexts, args.attribute)

    # Alternate the two so drift of this shared machine hits both; the direct engine stays loaded (idle) while
    # the pipeline's actor runs, and starts each measurement from an empty prefix cache.
    direct = Direct(spec, plan, pairs)
    pipeline_runs: list[Timing] = []
    direct_runs: list[Timing] = []
    own_runs: list[Timing] = []
    own_spec = replace(spec, engine_process=EngineProcess.own)
    try:
        for round_ in range(args.rounds):
            timing, pipe = run_pipeline(cfg, shards, plan, spec, work / "logs")
            pipeline_runs.append(timing)
            if args.own:
                timing, own = run_pipeline(cfg, shards, plan, own_spec, work / "logs")
                own_runs.append(timing)
                log.info(
                    "round %d/%d: engine in its own processes %.2f/s",
                    round_ + 1,
                    args.rounds,
                    total / timing.seconds,
                )
            timing, direct_lp = direct.measure()
            direct_runs.append(timing)
            log.info(
                "round %d/%d: pipeline %.2f/s, direct %.2f/s",
                round_ + 1,
                args.rounds,
                total / pipeline_runs[-1].seconds,
                total / direct_runs[-1].seconds,
            )
    finally:
        direct.close()
    ids, dtype = direct.ids, direct.dtype

    # agreement: the pipeline judged the same prompts to (nearly) the same log-probabilities
    def keys(table: pa.Table) -> list[tuple[str, str]]:
        return list(zip(table.column("cand_a").to_pylist(), table.column("cand_b").to_pylist(), strict=True))

    pipe_by_key = dict(zip(keys(pipe), pipe.column("token_logprobs").to_pylist(), strict=True))
    pipe_lp = np.array([pipe_by_key[k] for k in keys(pairs)])
    n_a = plan.labels.n_a  # the first n_a label columns are A words
    max_diff = float(np.abs(pipe_lp - direct_lp).max())
    pipe_pa, direct_pa = p_a(pipe_lp, n_a), p_a(direct_lp, n_a)

    api_runs: list[Timing] = []
    api_diff = float("nan")
    if args.api:
        api_runs, api_lp = run_api(cfg, shards, plan, spec, dtype, args.rounds, work)
        api_by_key = dict(zip(keys(api_lp), api_lp.column("token_logprobs").to_pylist(), strict=True))
        api_diff = float(np.abs(np.array([api_by_key[k] for k in keys(pairs)]) - direct_lp).max())

    actor_runs: list[Timing] = []
    if args.actors > 1:
        actor_runs = run_actors(cfg, shards, plan, spec, args.actors, args.rounds, work)

    n_hf = min(args.hf_prompts, len(ids))
    hf_timing, hf_lp = run_hf(spec, plan, ids[:n_hf], dtype)
    hf_diff = float(np.abs(hf_lp - direct_lp[:n_hf]).max())
    hf_pa = p_a(hf_lp, n_a)

    pipe_rate = float(np.median([total / t.seconds for t in pipeline_runs]))
    direct_rate = float(np.median([total / t.seconds for t in direct_runs]))
    paired = [d.seconds / p.seconds for p, d in zip(pipeline_runs, direct_runs, strict=True)]
    hf_rate = n_hf / hf_timing.seconds
    rows = [
        (f"pipeline (Ray Data, 1 vLLM actor, {engine_where(spec)})", total, pipe_rate),
        ("vLLM generate, direct", total, direct_rate),
        ("HF transformers, one at a time", n_hf, hf_rate),
    ]
    api_rate = float(np.median([total / t.seconds for t in api_runs])) if api_runs else float("nan")
    if api_runs:
        rows.append(("pipeline, API (local vLLM server)", total, api_rate))
    actors_rate = float(np.median([total / t.seconds for t in actor_runs])) if actor_runs else float("nan")
    if actor_runs:
        rows.append((f"pipeline, {args.actors} actors (pinned)", total, actors_rate))
    cpu = read_cpu()
    lines = [
        f"# judge benchmark  {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"# cpu: {cpu.describe()}",
        f"# {platform.node()}; python {platform.python_version()}",
        f"# dtype {dtype} for all ({spec.dtype_reason})",
        f"# command: python -m pipeline.benchmarks.judge {' '.join(argv if argv is not None else __import__('sys').argv[1:])}",
        "",
        f"{'method':<50} {'prompts':>7} {'cmp/s':>7} {'x direct':>9} {'x HF':>7}",
    ]
    for name, n, rate in rows:
        lines.append(f"{name:<50} {n:>7d} {rate:>7.2f} {rate / direct_rate:>9.2f} {rate / hf_rate:>7.2f}")
    lines += [
        "",
        "rounds (cmp/s): pipeline "
        + ", ".join(f"{total / t.seconds:.2f}" for t in pipeline_runs)
        + "; direct "
        + ", ".join(f"{total / t.seconds:.2f}" for t in direct_runs),
        f"pipeline / direct, per round: {', '.join(f'{r:.2f}' for r in paired)} (median {np.median(paired):.2f})",
        f"engine start (excluded above): pipeline actor {pipeline_runs[-1].start_seconds:.1f} s, "
        f"direct {direct_runs[-1].start_seconds:.1f} s, HF {hf_timing.start_seconds:.1f} s",
        f"prefix cache share of prompt tokens: pipeline {pipeline_runs[-1].cache_share:.1%}, "
        f"direct {direct_runs[-1].cache_share:.1%}",
        f"max |label logprob| difference: pipeline vs direct {max_diff:.2e}, HF vs direct {hf_diff:.2e}",
        f"p(A wins) vs direct: pipeline mean |diff| {np.abs(pipe_pa - direct_pa).mean():.2e} "
        f"(max {np.abs(pipe_pa - direct_pa).max():.2e}, same decision {np.mean((pipe_pa > 0.5) == (direct_pa > 0.5)):.1%}); "
        f"HF mean |diff| {np.abs(hf_pa - direct_pa[:n_hf]).mean():.2e} "
        f"(max {np.abs(hf_pa - direct_pa[:n_hf]).max():.2e}, "
        f"same decision {np.mean((hf_pa > 0.5) == (direct_pa[:n_hf] > 0.5)):.1%})",
        f"judge.engine {dict(spec.engine)}; judge.batch_size {cfg.judge.batch_size}",
    ]
    if api_runs:
        lines += [
            f"API judge ({cfg.judge.api.concurrency} requests in flight, token-id path, no reply cache): rounds "
            f"{', '.join(f'{total / t.seconds:.2f}' for t in api_runs)} cmp/s; "
            f"{api_rate / pipe_rate:.2f}x the in-process pipeline (median rates); server start "
            f"{api_runs[-1].start_seconds:.1f} s (excluded); max |label logprob| vs direct {api_diff:.2e}",
        ]
    if own_runs:
        own_by_key = dict(zip(keys(own), own.column("token_logprobs").to_pylist(), strict=True))
        own_diff = float(np.abs(np.array([own_by_key[k] for k in keys(pairs)]) - pipe_lp).max())
        own_rate = float(np.median([total / t.seconds for t in own_runs]))
        lines += [
            f"engine inside the actor (judge.engine_process={spec.engine_process}) against its own processes "
            f"(own): engine start {pipeline_runs[-1].start_seconds:.1f} s against {own_runs[-1].start_seconds:.1f} s "
            f"({own_runs[-1].start_seconds / max(pipeline_runs[-1].start_seconds, 1e-9):.1f}x); judging "
            f"{pipe_rate:.2f} against {own_rate:.2f} cmp/s ({pipe_rate / own_rate:.2f}x; own rounds "
            f"{', '.join(f'{total / t.seconds:.2f}' for t in own_runs)}); max |label logprob| difference "
            f"{own_diff:.2e}",
        ]
    if actor_runs:
        lines += [
            f"{args.actors} judge actors, each pinned to its own core(s): rounds "
            f"{', '.join(f'{total / t.seconds:.2f}' for t in actor_runs)} cmp/s; {actors_rate / pipe_rate:.2f}x "
            f"one actor on all {len(os.sched_getaffinity(0))} cores (median rates; from the first actor ready)",
        ]
    if captured_output_path() is not None:
        lines.append(f"(engine and Ray output: {captured_output_path()} and {work / 'logs'})")
    out = console()
    out.write("\n".join(lines) + "\n")
    out.flush()


def engine_where(spec: JudgeSpec) -> str:
    """Where the pipeline's engine ran: inside its Ray actor or in vLLM's own processes (judge.engine_process)."""
    return "engine inside" if engine_inside(spec, in_actor=True) else "engine own"


def p_a(label_logprobs: np.ndarray, n_a: int) -> np.ndarray:
    return p_a_wins(*side_logprobs(label_logprobs, n_a))


def cache_share(table: pa.Table) -> float:
    prompt = np.asarray(table.column("prompt_tokens")).sum()
    return float(np.asarray(table.column("cached_tokens")).sum() / prompt) if prompt else 0.0


if __name__ == "__main__":
    main()
