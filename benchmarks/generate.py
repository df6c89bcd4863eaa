"""Generation speed: the pipeline's generate step on Ray Data against vLLM ``generate`` called directly and against
Hugging Face ``generate`` one prompt at a time, on the same prompts (the demo tickets, repeated), greedy.

Prints output tokens per second of each and the ratios (pipeline / direct is the one that matters: target 0.9x);
engine start-up is excluded from every rate (the pipeline is timed from its actor's engine being ready to the last
row at the driver). Direct vLLM and the pipeline alternate for ``--rounds`` rounds, each alone on the machine (the
direct engine is closed before Ray starts); the medians are printed, with the pipeline's time split.

    make bench-generate                       # 48 inputs, 64 new tokens
    make bench-generate ARGS="--inputs 96 --max-tokens 128 --rounds 5"
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from benchmarks.timing import (
    TimedJudgeWorker,
    Timing,
    bench_config,
    header,
    round_lines,
    stream_timed,
    time_split,
)
from pipeline import PROJECT_ROOT
from pipeline.data.tasks import DEMO_TICKETS, load_tasks
from pipeline.judge.generators import Generator, generator_judge_config, generator_request
from pipeline.judge.hf_engine import HFEngine
from pipeline.judge.models import resolve_judge
from pipeline.judge.vllm.engine import VLLMEngine
from pipeline.prompts.generation import generation_prompts, generator_frame
from pipeline.runtime.logs import console, workspace
from pipeline.stages.generation import generation_step


def write_inputs(folder: Path, n: int) -> Path:
    path = folder / "tickets.jsonl"
    with path.open("w") as fh:
        for k in range(n):
            ticket = DEMO_TICKETS[k % len(DEMO_TICKETS)]
            fh.write(json.dumps({"id": f"t{k:04d}", "ticket": f"(ticket {k}) {ticket}"}) + "\n")
    return path


@dataclass
class Setup:
    cfg: Any
    spec: Any
    request: Any
    frames: dict
    prompts: pa.Table
    step: Any
    work: Path


def prepare(args: argparse.Namespace) -> Setup:
    """The generate_demo workflow's generator, its prompts (the demo tickets, repeated) and its Ray Data step."""
    work = workspace("bench-generate", args.verbose)
    inputs = write_inputs(work, args.inputs)
    cfg = bench_config(
        work,
        [
            "experiment=generate_demo",
            f"generate.inputs={inputs}",
            f"generate.models.0.max_tokens={args.max_tokens}",
        ],
    )
    gen_cfg = cfg.generate.models[0]
    spec = resolve_judge(generator_judge_config(gen_cfg, cfg.judge), PROJECT_ROOT / cfg.paths.cache_dir)
    request = generator_request(gen_cfg)
    generator = Generator(gen_cfg.name, spec, request, gen_cfg.system_prompt)
    tasks = load_tasks(cfg.generate, Path(cfg.generate.inputs)).tasks
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(spec.model_path)
    frames = {generator.name: generator_frame(tokenizer, spec.name, generator.system_prompt)}
    prompts = generation_prompts(frames, tasks)
    step = generation_step([generator], frames, cfg.generate.batch_size, worker=TimedJudgeWorker)
    return Setup(cfg, spec, request, frames, prompts, step, work)


@dataclass
class Measured:
    pipeline: list[Timing] = field(default_factory=list)
    direct: list[Timing] = field(default_factory=list)
    tokens: int = 0
    same_text: float = 0.0
    dtype: str = ""
    ids: list[list[int]] = field(
        default_factory=list
    )  # the prompts' token ids, as the direct engine encoded them


def measure(s: Setup, rounds: int) -> Measured:
    """Alternate direct vLLM (started, timed on one ``generate`` call, closed) and the pipeline (Ray started, timed
    from its actor's engine being ready to the last row, shut down), so that each runs alone on the machine and its
    drift hits both."""
    m = Measured()
    size = s.cfg.generate.batch_size
    blocks = [s.prompts.slice(k, size) for k in range(0, s.prompts.num_rows, size)]
    inputs = s.prompts.column("cand_a").to_pylist()
    for _ in range(rounds):
        engine = VLLMEngine(s.spec)
        ids = s.frames[next(iter(s.frames))].encode(engine.tokenizer, s.prompts.column("prompt").to_pylist())
        engine.llm.reset_prefix_cache()
        started = time.perf_counter()
        results = engine.run(ids, s.request)
        m.direct.append(Timing(time.perf_counter() - started, engine.start_seconds, 0.0))
        m.dtype, m.ids = str(engine.dtype), ids
        engine.close()
        gc.collect()
        out, timing = stream_timed(s.cfg.runtime, blocks, [s.step], s.work / "logs")
        m.pipeline.append(timing)
        texts = dict(
            zip(
                out.column("cand_a").to_pylist(), [t[0] for t in out.column("texts").to_pylist()], strict=True
            )
        )
        m.same_text = float(np.mean([texts[i] == r.texts[0] for i, r in zip(inputs, results, strict=True)]))
        m.tokens = int(np.asarray(out.column("generated_tokens")).sum())
        if m.tokens != sum(r.generated_tokens for r in results):
            raise RuntimeError("the pipeline and direct vLLM generated different numbers of tokens")
    return m


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--inputs", type=int, default=48)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--rounds", type=int, default=3, help="alternated rounds of direct vLLM and the pipeline"
    )
    parser.add_argument("--hf-prompts", type=int, default=8, help="prompts for the one-at-a-time baseline")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    s = prepare(args)
    m = measure(s, args.rounds)

    # Hugging Face, one prompt at a time
    hf = HFEngine(replace(s.spec, engine={"dtype": m.dtype}))
    n_hf = min(args.hf_prompts, len(m.ids))
    started = time.perf_counter()
    hf_results = hf.run(m.ids[:n_hf], s.request)
    hf_seconds = time.perf_counter() - started
    hf_tokens = sum(r.generated_tokens for r in hf_results)

    pipe_rates = [m.tokens / t.seconds for t in m.pipeline]
    direct_rates = [m.tokens / t.seconds for t in m.direct]
    n = s.prompts.num_rows
    rates = {
        "pipeline (Ray Data, 1 vLLM actor)": (n, m.tokens, float(np.median(pipe_rates))),
        "vLLM generate, direct": (n, m.tokens, float(np.median(direct_rates))),
        "HF generate, one at a time": (n_hf, hf_tokens, hf_tokens / hf_seconds),
    }
    top = [
        *header("generate benchmark", "generate", argv),
        f"# dtype {m.dtype} ({s.spec.dtype_reason}); {n} prompts (demo tickets), greedy, max_tokens {args.max_tokens}, "
        f"generate.batch_size {s.cfg.generate.batch_size}, {args.rounds} alternated rounds",
    ]
    footer = [
        *round_lines("tok/s", pipe_rates, direct_rates, digits=1),
        "where the pipeline's time went (median of rounds): " + time_split(m.pipeline, m.direct),
        f"same greedy text, pipeline vs direct: {m.same_text:.0%} of prompts",
        f"engine start (excluded): pipeline actor {np.median([t.start_seconds for t in m.pipeline]):.1f} s, direct "
        f"{np.median([t.start_seconds for t in m.direct]):.1f} s, HF {hf.start_seconds:.1f} s",
    ]
    out_console = console()
    out_console.write("\n".join([*top, "", *rate_lines(rates), "", *footer]) + "\n")
    out_console.flush()


def rate_lines(rates: dict[str, tuple[int, int, float]]) -> list[str]:
    """The table: prompts, output tokens, tokens per second, and the ratios to direct vLLM and to HF."""
    direct_rate = rates["vLLM generate, direct"][2]
    hf_rate = rates["HF generate, one at a time"][2]
    lines = [f"{'method':<36} {'prompts':>7} {'out tok':>8} {'tok/s':>8} {'x direct':>9} {'x HF':>7}"]
    for name, (n, tokens, rate) in rates.items():
        lines.append(
            f"{name:<36} {n:>7d} {tokens:>8d} {rate:>8.1f} {rate / direct_rate:>9.2f} {rate / hf_rate:>7.2f}"
        )
    return lines


if __name__ == "__main__":
    main()
