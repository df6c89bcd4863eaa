"""Reasoning, then the verdict, and juries: what they cost through the pipeline.

1. ``judge.reasoning`` on SummEval prompts (both orderings): the pipeline (Ray Data, one vLLM actor, the judge
   worker's reasoning engine) against the same two calls per prompt made directly with vLLM in this process
   (:class:`pipeline.judge.reasoning.ReasoningEngine` on an in-process engine), alternated round by round, each
   alone on the machine; prompts per second from the engine being ready, engine start excluded. Target 0.9x.
2. A jury of two prompt templates (``experiment=jury_templates``'s) judged in one pipeline run, against its two
   jurors judged in runs of their own: the jury should cost the sum of its jurors, at most 5% on top. The jury's
   scoring (:func:`pipeline.scoring.jury_table.jury_tables`) is timed beside it.
3. A jury of two judges (``experiment=jury_judges``: two engines) in one run against each judge in a run of its
   own: the judge stages' seconds, engine starts included; the same target.

    python -m benchmarks.reasoning [--contexts 1] [--candidates 6] [--budget 64] [--rounds 3] [overrides ...]
"""

from __future__ import annotations

import argparse
import gc
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

from benchmarks.judge import Setup, prepare, run_pipeline
from benchmarks.timing import Timing, header, in_order, round_lines
from pipeline.config.hydra import compose
from pipeline.judge.reasoning import ReasoningEngine
from pipeline.judge.vllm.engine import VLLMEngine
from pipeline.run.context import run
from pipeline.runtime.logs import console
from pipeline.scoring.jury_table import jury_tables
from pipeline.scoring.responses import judgments_from_responses


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--contexts", type=int, default=1)
    parser.add_argument(
        "--candidates", type=int, default=6, help="candidates per context (both orderings of all pairs)"
    )
    parser.add_argument("--budget", type=int, default=64, help="judge.reasoning.max_tokens")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--attribute", default="coherence")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for the run (judge, engine settings)")
    args = parser.parse_args(argv)
    args.given = list(args.overrides)
    return args


def direct_reasoning(s: Setup) -> tuple[Timing, list]:
    """The two calls per prompt made directly: reasoning on every prompt at once, then every verdict at once."""
    engine = ReasoningEngine(VLLMEngine(s.spec))
    try:
        engine.engine.llm.reset_prefix_cache()  # type: ignore[attr-defined]
        request = s.plan.requests()[s.plan.templates[0].id]
        started = time.perf_counter()
        results = engine.answer(s.pairs.column("prompt").to_pylist(), s.plan.frame, request)
        return Timing(time.perf_counter() - started, engine.start_seconds, 0.0), results
    finally:
        engine.close()
        gc.collect()


def reasoning_rounds(s: Setup, rounds: int) -> list[str]:
    pipe, direct = [], []
    pipe_table, direct_results = None, []
    for _ in range(rounds):
        t, direct_results = direct_reasoning(s)
        direct.append(t)
        t, pipe_table = run_pipeline(s.cfg, s.shards, s.plan, s.spec, s.work / "logs")
        pipe.append(t)
    assert pipe_table is not None
    n = s.pairs.num_rows
    pipe_rates = [n / t.seconds for t in pipe]
    direct_rates = [n / t.seconds for t in direct]
    ratios = [p / d for p, d in zip(pipe_rates, direct_rates, strict=True)]
    # the direct answers come in the prompts' order
    texts = in_order(pipe_table, s.pairs, "reasoning")
    same_text = np.mean([d.reasoning == t for d, t in zip(direct_results, texts, strict=True)])
    direct_lp = np.array([d.token_logprobs for d in direct_results])
    diff = float(np.max(np.abs(direct_lp - in_order(pipe_table, s.pairs))))
    tokens = np.asarray(pipe_table.column("reasoning_tokens"))
    cut = np.asarray(pipe_table.column("reasoning_cut"))
    return [
        f"{'method':<44} {'prompts':>7} {'prompts/s':>10} {'x direct':>9}",
        f"{'pipeline, reasoning then verdict':<44} {n:>7d} {np.median(pipe_rates):>10.2f} {np.median(ratios):>9.2f}",
        f"{'vLLM direct, the same two calls':<44} {n:>7d} {np.median(direct_rates):>10.2f} {1.0:>9.2f}",
        "",
        *round_lines("prompts/s", pipe_rates, direct_rates),
        f"reasoning tokens per prompt: mean {tokens.mean():.1f}, cut at the budget {cut.mean():.0%}; "
        f"the same reasoning text as direct: {same_text:.0%}; max |label logprob| difference {diff:.2e}",
    ]


def jury_cost(args: argparse.Namespace) -> list[str]:
    """Two templates judged in one run against each judged alone (reasoning off: the jury's own cost)."""
    jury_args = replace_args(args, ["experiment=jury_templates", "scoring.jury=true"])
    s = prepare(jury_args)
    seconds = {}
    tables = {}
    for template in s.plan.templates:
        one = replace(s.plan, templates=(template,))
        t, tables[template.id] = run_pipeline(s.cfg, s.shards, one, s.spec, s.work / "logs")
        seconds[template.id] = t.seconds
    t, both = run_pipeline(s.cfg, s.shards, s.plan, s.spec, s.work / "logs")
    apart = sum(seconds.values())
    judgments = pl.from_arrow(judgments_from_responses(both, s.plan.labels))
    started = time.perf_counter()
    jury_tables(judgments)
    fit = time.perf_counter() - started
    return [
        f"jury of {len(seconds)} templates in one run: {t.seconds:.1f} s judging; its jurors apart: "
        + " + ".join(f"{v:.1f}" for v in seconds.values())
        + f" = {apart:.1f} s; jury / sum {t.seconds / apart:.3f} ({100 * (t.seconds / apart - 1):+.1f}%, target <= +5%); "
        f"the jury's scoring {fit * 1000:.0f} ms on {judgments.height} judgments",
    ]


def judges_cost(args: argparse.Namespace, work: Path) -> list[str]:
    """A jury of two judges (``experiment=jury_judges``: the run's judge on template c1, a second judge in an engine
    of its own on c2) in one run, against each judge in a run of its own: the judge stages' seconds, engine starts
    included (each judge starts its engine once either way); no judgement store, reasoning off."""
    common = [
        "experiment=jury_judges",
        f"dataset.max_contexts={args.contexts}",
        f"dataset.max_candidates={args.candidates}",
        f"dataset.attributes=[{args.attribute}]",
        "judge.store=false",
        "scoring.jury=false",
        "tracking.enabled=false",
        *args.given,
    ]
    second = ["jury.judges=[]", "judge.templates=[c2]", "judge.name=second-judge"]
    runs = {
        "the jury": common,
        "its judge alone": [*common, "jury.judges=[]"],
        "its second judge alone": [*common, *second],
    }
    seconds = {}
    for name, overrides in runs.items():
        result = run(compose([*overrides, f"paths.output_root={work / name.replace(' ', '-')}"]))
        m = result.metrics
        seconds[name] = m["stage/judge/seconds"] + m.get("stage/judge_jurors/seconds", 0.0)
    jury, apart = seconds["the jury"], seconds["its judge alone"] + seconds["its second judge alone"]
    return [
        f"jury of two judges (two engines) in one run: {jury:.1f} s in its judge stages, engine starts included; "
        f"each judge in a run of its own: {seconds['its judge alone']:.1f} + {seconds['its second judge alone']:.1f}"
        f" = {apart:.1f} s; jury / sum {jury / apart:.3f} ({100 * (jury / apart - 1):+.1f}%, target <= +5%)",
    ]


def replace_args(args: argparse.Namespace, extra: list[str]) -> argparse.Namespace:
    out = argparse.Namespace(**vars(args))
    out.overrides = [f"dataset.max_candidates={args.candidates}", *extra, *args.given]
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    s = prepare(
        replace_args(args, ["judge.reasoning.enabled=true", f"judge.reasoning.max_tokens={args.budget}"])
    )
    lines = reasoning_rounds(s, args.rounds)
    dtype = s.spec.dtype
    lines += ["", *jury_cost(args), *judges_cost(args, s.work)]
    top = [
        *header("reasoning benchmark", "reasoning", argv),
        f"# dtype {dtype} ({s.spec.dtype_reason}); {s.pairs.num_rows} prompts ({args.contexts} SummEval context(s), {args.candidates} candidates, both "
        f"orderings), reasoning budget {args.budget} tokens, {args.rounds} alternated rounds",
    ]
    out = console()
    out.write("\n".join([*top, "", *lines]) + "\n")
    out.flush()


if __name__ == "__main__":
    main()
