"""Judge the same SummEval prompts three ways and print comparisons per second and their ratios.

1. the pipeline: the pair and judge steps on Ray Data (one vLLM actor), as a run does;
2. vLLM ``LLM.generate`` called directly on every prompt at once;
3. Hugging Face transformers, one prompt per forward pass (how the papers' code judges), on a subset;
4. with ``--api``: the pipeline again, its judge behind a local OpenAI-compatible vLLM server (``judge.backend=api``,
   no reply cache) on the same checkpoint and dtype; server and client share this machine's cores;
5. with ``--variant "OVERRIDES"``: the pipeline again with those Hydra overrides on top of the others (the same
   prompts), alternated with the other rounds: engine start, judging rate, per-round ratios and answers
   (``--variant judge.engine_process=own``: vLLM's engine processes beside the actor, against the engine inside it).

The prompts, the judge and its dtype come from the real workflow (its stages up to ``shard_contexts``), so the
benchmark measures what ``make run`` does on this machine: the dtype chosen for this CPU unless
``judge.engine.dtype`` is given. Rates exclude engine start-up (reported separately): the pipeline is timed from
the moment its actor's engine is ready to the last judged row arriving at the driver, so every Ray overhead
during judging is included. The CPU (model and flags) and the dtype are printed with the results.

    python -m benchmarks.judge [--contexts 2] [--hf-prompts 48] [--rounds 3] [--api] [--variant OVERRIDES]
        [overrides ...]
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.timing import (
    IN_BATCHES,
    TimedJudgeWorker,
    Timing,
    bench_config,
    cache_share,
    header,
    in_order,
    rate,
    rates,
    round_lines,
    stream_timed,
    time_split,
)
from pipeline import PROJECT_ROOT
from pipeline.judge.hf_engine import HFEngine
from pipeline.judge.spec import ApiEndpoint, JudgeSpec
from pipeline.judge.vllm.cores import engine_inside
from pipeline.judge.vllm.engine import VLLMEngine
from pipeline.methods.verdicts.win_probability import p_a_wins, side_logprobs
from pipeline.prompts.pairs import generate_prompts, split_shards
from pipeline.run.context import run
from pipeline.runtime.logs import captured_output_path, console, workspace
from pipeline.stages.judging import judge_steps

log = logging.getLogger("benchmarks.judge")


def run_pipeline(cfg, shards, plan, spec, log_dir: Path) -> tuple[Timing, pa.Table]:
    """The pair and judge steps on Ray Data, timed from the actor's engine being ready to the last row."""
    steps = judge_steps(cfg.pairs, cfg.runtime.pair_chunk_rows, plan, spec, worker=TimedJudgeWorker)
    table, timing = stream_timed(cfg.runtime, shards, steps, log_dir)
    return replace(timing, cache_share=cache_share(table)), table


class Direct:
    """One vLLM engine in this process; each ``measure`` is one ``LLM.generate`` call on every prompt (the same
    token ids the judge worker builds), from an empty prefix cache."""

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
    from pipeline.testing.serve import LocalVLLMServer

    served = "bench-judge"
    with LocalVLLMServer(spec.model_path, work / "vllm-server.log", served, dtype=dtype) as server:
        settings = replace(cfg.judge.endpoint, base_url=server.url, model=served, cache=False)
        api_spec = replace(spec, backend="api", engine={}, endpoint=ApiEndpoint(settings, served))
        runs, table = pipeline_rounds("API", cfg, shards, plan, api_spec, rounds, work)
    return [replace(t, start_seconds=server.start_seconds) for t in runs], table


def run_actors(cfg, shards, plan, spec, actors: int, rounds: int, work: Path) -> list[Timing]:
    """The pipeline with ``actors`` judge actors on this machine, each claiming its own cores
    (``VLLM_CPU_OMP_THREADS_BIND=auto``). Ray's CPUs are scheduling slots: one per actor (the prompts are made on
    the driver)."""
    cores = len(os.sched_getaffinity(0))
    many = replace(cfg, runtime=replace(cfg.runtime, num_cpus=actors))
    env = {"VLLM_CPU_OMP_THREADS_BIND": "auto", "CA_CORES_PER_WORKER": str(max(1, cores // actors))}
    place = replace(spec.placement, workers=(actors, actors), num_cpus=1)
    pinned = replace(spec, env={**spec.env, **env}, placement=place)
    return pipeline_rounds(f"{actors} actors", many, shards, plan, pinned, rounds, work)[0]


def pipeline_rounds(
    what: str, cfg, shards, plan, spec, rounds: int, work: Path
) -> tuple[list[Timing], pa.Table]:
    """``rounds`` pipeline runs one after the other (:func:`run_pipeline`), each one's rate logged."""
    runs = []
    for k in range(rounds):
        timing, table = run_pipeline(cfg, shards, plan, spec, work / "logs")
        runs.append(timing)
        log.info("%s, round %d/%d: %.2f/s", what, k + 1, rounds, table.num_rows / timing.seconds)
    return runs, table


def parse_args(argv: list[str] | None) -> argparse.Namespace:
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
        "--variant",
        default="",
        help="also run the pipeline with these Hydra overrides (space-separated, on top of the others; the same "
        "prompts), alternated with the other arms, e.g. runtime.prestart_workers=true",
    )
    parser.add_argument(
        "--actors",
        type=int,
        default=1,
        help="also run the pipeline with this many judge actors, each pinned to its own cores "
        "(VLLM_CPU_OMP_THREADS_BIND=auto), against one actor on every core",
    )
    parser.add_argument(
        "--standin",
        default="",
        help="also judge with a stand-in engine at these GPU rates (prompts/s per worker, e.g. 200,1000): the "
        "pipeline against the stand-in called directly in batches of judge.batch_size (benchmarks.standin)",
    )
    parser.add_argument("--standin-prompts", type=int, default=10000, help="prompts of the stand-in rows")
    parser.add_argument("--standin-workers", default="1,2", help="judge workers of the stand-in rows")
    parser.add_argument("--standin-only", action="store_true", help="only the stand-in rows (no CPU engine)")
    parser.add_argument("--verbose", action="store_true", help="the engines' and Ray's output on the console")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. judge.batch_size=128")
    args = parser.parse_args(argv)
    args.variant = args.variant.split()
    return args


@dataclass
class Setup:
    """The real workflow up to the shards: the config, the prompt plan, the judge (dtype for this CPU), the
    shards and every prompt they make, and the benchmark's scratch folder; the ``--variant`` arm's the same way, with
    its further overrides (the same prompts)."""

    cfg: Any
    plan: Any
    spec: JudgeSpec
    shards: list[pa.Table]
    pairs: pa.Table
    work: Path
    variant: Setup | None = None
    overrides: tuple[str, ...] = ()


def prepare(args: argparse.Namespace, variant: list[str] | None = None) -> Setup:
    """The real workflow up to the shards for ``args`` (contexts, attribute, overrides), and for ``variant`` (more
    overrides, ``--variant``) where given."""
    work = workspace("bench-judge", args.verbose)
    data = [
        "dataset=summeval",
        f"dataset.max_contexts={args.contexts}",
        f"dataset.attributes=[{args.attribute}]",
    ]
    cfg, plan, spec, shards = planned(work, [*data, *args.overrides])
    chunks = [
        chunk
        for shard in shards
        for chunk in generate_prompts(shard, cfg.pairs, plan, cfg.runtime.pair_chunk_rows)
    ]
    pairs = pa.concat_tables(chunks)
    log.info(
        "%d prompts (%d SummEval contexts, %s, both orderings)", pairs.num_rows, args.contexts, args.attribute
    )
    other = (
        Setup(*planned(work, [*data, *args.overrides, *variant]), pairs, work, overrides=tuple(variant))
        if variant
        else None
    )
    return Setup(cfg, plan, spec, shards, pairs, work, other)


def planned(work: Path, overrides: list[str]) -> tuple[Any, Any, JudgeSpec, list[pa.Table]]:
    """The workflow's config, prompt plan, judge and shards for ``overrides`` (its stages up to the shards)."""
    cfg = bench_config(work, overrides)
    values = run(cfg, PROJECT_ROOT, stop_after="shard_contexts").values
    return cfg, values["prompt_plan"], values["judge"], split_shards(values["contexts"])


@dataclass
class Measured:
    """Every arm's timings, by arm (direct, pipeline, variant, api, actors, hf), and what it answered: its label
    log-probabilities in the setup's prompts' order (HF's for its first prompts)."""

    runs: defaultdict[str, list[Timing]] = field(default_factory=lambda: defaultdict(list))
    answers: dict[str, np.ndarray] = field(default_factory=dict)
    dtype: str = ""


def measure(args: argparse.Namespace, s: Setup) -> Measured:
    """Alternate the direct engine and the pipeline (and its ``--variant``) so drift of this shared machine hits
    every arm, each alone on the machine: the direct engine starts for its measurement (from an empty prefix
    cache) and is shut down before the pipeline's Ray starts (loaded and idle beside the pipeline, it cost the
    pipeline 2.3%: 6.42 against 6.57 cmp/s, medians of 3 alternated rounds; BENCHMARKS.md); each pipeline arm
    starts its own Ray and shuts it down. The order of the arms is reversed every other round (direct first, then
    last), so that what one arm leaves the machine in (its load just ended, the host's clock after a minute at
    full load) falls on each arm alike. Then the API, pinned-actor and one-at-a-time arms."""
    m = Measured()
    total = s.pairs.num_rows
    ids: list[list[int]] = []
    tables: dict[str, pa.Table] = {}

    def direct_arm() -> None:
        nonlocal ids
        direct = Direct(s.spec, s.plan, s.pairs)
        try:
            timing, m.answers["direct"] = direct.measure()
        finally:
            direct.close()
        m.runs["direct"].append(timing)
        ids, m.dtype = direct.ids, direct.dtype

    def pipeline_arm(name: str, arm: Setup) -> Callable[[], None]:
        def timed() -> None:
            timing, tables[name] = run_pipeline(arm.cfg, arm.shards, arm.plan, arm.spec, s.work / "logs")
            m.runs[name].append(timing)

        return timed

    arms = [
        direct_arm,
        pipeline_arm("pipeline", s),
        *([pipeline_arm("variant", s.variant)] if s.variant else []),
    ]
    for round_ in range(args.rounds):
        direct_first = round_ % 2 == 0
        for arm in arms if direct_first else arms[::-1]:
            arm()
        last = {arm: total / runs[-1].seconds for arm, runs in m.runs.items()}
        variant_rate = f", variant {last['variant']:.2f}/s" if s.variant else ""
        log.info(
            "round %d/%d (%s first): pipeline %.2f/s, direct %.2f/s%s",
            round_ + 1,
            args.rounds,
            "direct" if direct_first else "pipeline",
            last["pipeline"],
            last["direct"],
            variant_rate,
        )
    if args.api:
        m.runs["api"], tables["api"] = run_api(s.cfg, s.shards, s.plan, s.spec, m.dtype, args.rounds, s.work)
    m.answers |= {arm: in_order(table, s.pairs) for arm, table in tables.items()}
    if args.actors > 1:
        m.runs["actors"] = run_actors(s.cfg, s.shards, s.plan, s.spec, args.actors, args.rounds, s.work)
    hf, m.answers["hf"] = run_hf(s.spec, s.plan, ids[: min(args.hf_prompts, total)], m.dtype)
    m.runs["hf"].append(hf)
    return m


def report(args: argparse.Namespace, s: Setup, m: Measured, argv: list[str]) -> list[str]:
    """The rate table (against direct and HF) and what it rests on: rounds, engine starts, agreement."""
    runs, lp = m.runs, m.answers
    total, n_hf = s.pairs.num_rows, len(lp["hf"])
    direct_rate, hf_rate = rate(runs["direct"], total), n_hf / runs["hf"][0].seconds
    rows = [
        (f"pipeline (Ray Data, 1 vLLM actor, {engine_where(s.spec)})", total, rate(runs["pipeline"], total)),
        ("vLLM generate, direct", total, direct_rate),
        ("HF transformers, one at a time", n_hf, hf_rate),
    ]
    if runs["api"]:
        rows.append(("pipeline, API (local vLLM server)", total, rate(runs["api"], total)))
    if runs["actors"]:
        rows.append((f"pipeline, {args.actors} actors (pinned)", total, rate(runs["actors"], total)))
    lines = [
        *header("judge benchmark", "judge", argv),
        f"# dtype {m.dtype} for all ({s.spec.dtype_reason})",
        "",
        f"{'method':<50} {'prompts':>7} {'cmp/s':>7} {'x direct':>9} {'x HF':>7}",
    ]
    for name, n, r in rows:
        lines.append(f"{name:<50} {n:>7d} {r:>7.2f} {r / direct_rate:>9.2f} {r / hf_rate:>7.2f}")
    return lines + [""] + details(args, s, m)


def details(args: argparse.Namespace, s: Setup, m: Measured) -> list[str]:
    runs, lp = m.runs, m.answers
    total, n_hf, n_a = s.pairs.num_rows, len(lp["hf"]), s.plan.labels.n_a
    pipe_pa, direct_pa, hf_pa = p_a(lp["pipeline"], n_a), p_a(lp["direct"], n_a), p_a(lp["hf"], n_a)
    lines = [
        *round_lines(
            "cmp/s",
            [total / t.seconds for t in runs["pipeline"]],
            [total / t.seconds for t in runs["direct"]],
        ),
        f"engine start (excluded above): pipeline actor {runs['pipeline'][-1].start_seconds:.1f} s, "
        f"direct {runs['direct'][-1].start_seconds:.1f} s, HF {runs['hf'][0].start_seconds:.1f} s",
        "where the pipeline's judging time went (median of rounds): "
        + time_split(runs["pipeline"], runs["direct"]),
        f"prefix cache share of prompt tokens: pipeline {runs['pipeline'][-1].cache_share:.1%}, "
        f"direct {runs['direct'][-1].cache_share:.1%}",
        f"max |label logprob| difference: pipeline vs direct {np.abs(lp['pipeline'] - lp['direct']).max():.2e}, "
        f"HF vs direct {np.abs(lp['hf'] - lp['direct'][:n_hf]).max():.2e}",
        f"p(A wins) vs direct: pipeline {agreement(pipe_pa, direct_pa)}; HF {agreement(hf_pa, direct_pa[:n_hf])}",
        f"judge.engine {dict(s.spec.engine)}; judge.batch_size {s.cfg.judge.batch_size}",
    ]
    pipe_rate = rate(runs["pipeline"], total)
    if runs["api"]:
        lines.append(
            f"API judge ({s.cfg.judge.endpoint.concurrency} requests in flight, token-id path, no reply cache): rounds "
            f"{rates(runs['api'], total)} cmp/s; {rate(runs['api'], total) / pipe_rate:.2f}x the in-process pipeline (median "
            f"rates); server start {runs['api'][-1].start_seconds:.1f} s (excluded); max |label logprob| vs direct "
            f"{np.abs(lp['api'] - lp['direct']).max():.2e}"
        )
    if runs["variant"]:
        v = s.variant
        assert v is not None
        variant_rate = rate(runs["variant"], total)
        ratios = [d.seconds / t.seconds for t, d in zip(runs["variant"], runs["direct"], strict=True)]
        lines.append(
            f"variant ({' '.join(v.overrides)}; {engine_where(v.spec)}): rounds {rates(runs['variant'], total)} cmp/s, "
            f"x direct per round {', '.join(f'{r:.2f}' for r in ratios)} (median {np.median(ratios):.2f}); "
            f"the pipeline {pipe_rate:.2f} against the variant's {variant_rate:.2f} cmp/s "
            f"({pipe_rate / variant_rate:.2f}x); engine start {runs['pipeline'][-1].start_seconds:.1f} s against "
            f"{runs['variant'][-1].start_seconds:.1f} s; in batches {np.median([t.split[IN_BATCHES] for t in runs['variant']]):.1f} s; "
            f"max |label logprob| difference {np.abs(lp['variant'] - lp['pipeline']).max():.2e}"
        )
    if runs["actors"]:
        lines.append(
            f"{args.actors} judge actors, each pinned to its own core(s): rounds {rates(runs['actors'], total)} cmp/s; "
            f"{rate(runs['actors'], total) / pipe_rate:.2f}x one actor on all {len(os.sched_getaffinity(0))} cores "
            "(median rates; from the first actor ready)"
        )
    if captured_output_path() is not None:
        lines.append(f"(engine and Ray output: {captured_output_path()} and {s.work / 'logs'})")
    return lines


def agreement(p: np.ndarray, reference: np.ndarray) -> str:
    diff = np.abs(p - reference)
    same = np.mean((p > 0.5) == (reference > 0.5))
    return f"mean |diff| {diff.mean():.2e} (max {diff.max():.2e}, same decision {same:.1%})"


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    given = sys.argv[1:] if argv is None else argv
    if not args.standin_only:
        setup = prepare(args, args.variant)
        measured = measure(args, setup)
        out = console()  # after prepare: the process output is captured from then on
        out.write("\n".join(report(args, setup, measured, given)) + "\n")
        out.flush()
    if args.standin:
        from benchmarks.standin_rows import standin_rows

        contexts = max(1, -(-args.standin_prompts // 240))  # SummEval: 240 ordered pairs per article
        setup = prepare(argparse.Namespace(**{**vars(args), "contexts": contexts}))
        out = console()
        out.write("\n".join(standin_rows(args, setup, given)) + "\n")
        out.flush()


def engine_where(spec: JudgeSpec) -> str:
    """Where the pipeline's engine ran: inside its Ray actor or in vLLM's own processes (judge.engine_process)."""
    return "engine inside" if engine_inside(spec, in_actor=True) else "engine own"


def p_a(label_logprobs: np.ndarray, n_a: int) -> np.ndarray:
    return p_a_wins(*side_logprobs(label_logprobs, n_a))


if __name__ == "__main__":
    main()
