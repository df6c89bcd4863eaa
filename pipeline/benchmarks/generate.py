"""Generation speed: the pipeline's generate step on Ray Data against vLLM ``generate`` called directly and against
Hugging Face ``generate`` one prompt at a time, on the same prompts (the demo tickets, repeated), greedy.

Prints output tokens per second of each and the ratios (pipeline / direct is the one that matters: target 0.9x);
engine start-up is excluded from every rate (the pipeline is timed from its actor's engine being ready).

    make bench-generate                       # 48 inputs, 64 new tokens
    make bench-generate ARGS="--inputs 96 --max-tokens 128"
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipeline import PROJECT_ROOT
from pipeline.benchmarks.judge import TimedJudgeWorker
from pipeline.config.hydra import compose
from pipeline.data.tasks import DEMO_TICKETS, load_tasks
from pipeline.judge.generators import Generator, generator_judge_config, generator_request
from pipeline.judge.hardware import read_cpu
from pipeline.judge.hf_engine import HFEngine
from pipeline.judge.models import resolve_judge
from pipeline.judge.vllm_engine import VLLMEngine
from pipeline.prompts.generation import generation_prompts, generator_frame
from pipeline.runtime.logs import capture_process_output, console, setup_logging
from pipeline.stages.generation import generation_step


def write_inputs(folder: Path, n: int) -> Path:
    path = folder / "tickets.jsonl"
    with path.open("w") as fh:
        for k in range(n):
            ticket = DEMO_TICKETS[k % len(DEMO_TICKETS)]
            fh.write(json.dumps({"id": f"t{k:04d}", "ticket": f"(ticket {k}) {ticket}"}) + "\n")
    return path


def run_pipeline(step, prompts: pa.Table, cfg, work: Path) -> tuple[pa.Table, float]:
    """1. The pipeline's generation step on Ray Data, timed from the actor's engine being ready to the last row."""
    import ray

    from pipeline.runtime.ray_data import RayDataExecutor

    size = cfg.generate.batch_size
    blocks = [prompts.slice(k, size) for k in range(0, prompts.num_rows, size)]
    try:
        out = pa.concat_tables(list(RayDataExecutor(cfg.runtime, work / "logs").stream(blocks, [step])))
        done_at = time.time()
    finally:
        ray.shutdown()
    return out, done_at - min(out.column("ready_at").to_pylist())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--inputs", type=int, default=48)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--hf-prompts", type=int, default=8, help="prompts for the one-at-a-time baseline")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-generate-"))
    if not args.verbose:
        capture_process_output(work / "output.log")
    setup_logging("INFO", args.verbose)
    cfg = compose(
        [
            "experiment=generate_demo",
            f"generate.inputs={write_inputs(work, args.inputs)}",
            f"generate.models.0.max_tokens={args.max_tokens}",
            f"paths.output_root={work}",
            "tracking.enabled=false",
        ]
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
    step = generation_step([generator], frames, cfg.generate.batch_size, cfg.judge, worker=TimedJudgeWorker)
    out, pipe_seconds = run_pipeline(step, prompts, cfg, work)
    pipe_tokens = int(np.asarray(out.column("generated_tokens")).sum())
    pipe_texts = dict(
        zip(out.column("cand_a").to_pylist(), [t[0] for t in out.column("texts").to_pylist()], strict=True)
    )

    # 2. vLLM generate, direct
    engine = VLLMEngine(spec)
    ids = frames[generator.name].encode(engine.tokenizer, prompts.column("prompt").to_pylist())
    engine.llm.reset_prefix_cache()
    started = time.perf_counter()
    results = engine.run(ids, request)
    direct_seconds = time.perf_counter() - started
    direct_tokens = sum(r.generated_tokens for r in results)
    inputs = prompts.column("cand_a").to_pylist()
    same = np.mean([pipe_texts[i] == r.texts[0] for i, r in zip(inputs, results, strict=True)])
    dtype, start_direct = engine.dtype, engine.start_seconds
    engine.close()

    # 3. Hugging Face, one prompt at a time
    hf = HFEngine(replace(spec, engine={"dtype": dtype}))
    n_hf = min(args.hf_prompts, len(ids))
    started = time.perf_counter()
    hf_results = hf.run(ids[:n_hf], request)
    hf_seconds = time.perf_counter() - started
    hf_tokens = sum(r.generated_tokens for r in hf_results)

    rates = {
        "pipeline (Ray Data, 1 vLLM actor)": (prompts.num_rows, pipe_tokens, pipe_tokens / pipe_seconds),
        "vLLM generate, direct": (prompts.num_rows, direct_tokens, direct_tokens / direct_seconds),
        "HF generate, one at a time": (n_hf, hf_tokens, hf_tokens / hf_seconds),
    }
    header = [
        f"# generate benchmark  {datetime.datetime.now().isoformat(timespec='seconds')}",
        f"# cpu: {read_cpu().describe()}",
        f"# {platform.node()}; python {platform.python_version()}; dtype {dtype} ({spec.dtype_reason})",
        f"# {prompts.num_rows} prompts (demo tickets), greedy, max_tokens {args.max_tokens}, "
        f"generate.batch_size {cfg.generate.batch_size}",
    ]
    footer = [
        f"same greedy text, pipeline vs direct: {same:.0%} of prompts",
        f"engine start (excluded): pipeline actor {out.column('engine_start_s')[0].as_py():.1f} s, direct "
        f"{start_direct:.1f} s, HF {hf.start_seconds:.1f} s",
    ]
    out_console = console()
    out_console.write("\n".join([*header, "", *rate_lines(rates), "", *footer]) + "\n")
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
