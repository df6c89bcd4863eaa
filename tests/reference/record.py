"""Record the reference runs (:mod:`tests.reference.cases`): ``python -m tests.reference.record [case ...]``.

Each case runs in this process (``runtime=inprocess``, no judgement store) while every engine call is captured (an
engine that records, in front of the real one):
the prompt texts, how they were read, the frame around them and the engine's answers go to
``tests/reference/<case>/answers.parquet``; every table the run computed (timing columns dropped) to
``tests/reference/<case>/tables/``. Record again only when a change of behaviour is meant, and say so.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import subprocess
import tempfile
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import ROOT, compose
from tests.reference.cases import CASES, COMMON, HERE, TABLES, table_frame


class Recording:
    """An engine that records every prompt it is asked, how, and its answer (the reference's answers)."""

    def __init__(self, engine, captured: list[dict]):
        self.engine, self.captured = engine, captured
        self.start_seconds, self.inside = engine.start_seconds, engine.inside

    @property
    def dtype(self) -> str:
        return self.engine.dtype

    def answer(self, prompts, frame, request):
        results = self.engine.answer(prompts, frame, request)
        for prompt, result in zip(prompts, results, strict=True):
            self.captured.append(
                {
                    "prompt": prompt,
                    "request": json.dumps(dataclasses.asdict(request), sort_keys=True),
                    "frame": json.dumps(dataclasses.asdict(frame), sort_keys=True),
                    **{k: getattr(result, k) for k in ("token_logprobs", "texts", "finish_reasons")},
                    **{k: getattr(result, k) for k in ("prompt_tokens", "cached_tokens", "generated_tokens")},
                }
            )
        return results

    def close(self) -> None:
        self.engine.close()


def record(case: str, work: Path, out: Path) -> dict:
    from pipeline.judge.hosting import worker
    from pipeline.run import run

    captured: list[dict] = []
    opened = worker.open_engine

    cfg = compose([*COMMON, *CASES[case], "runtime=inprocess", f"paths.output_root={work / case}"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(worker, "open_engine", lambda spec: Recording(opened(spec), captured))
        result = run(cfg, ROOT)
    out = out / case
    (out / "tables").mkdir(parents=True, exist_ok=True)
    answers = pl.DataFrame(captured).unique(["prompt", "request"], keep="first", maintain_order=True)
    answers.write_parquet(out / "answers.parquet", compression="zstd")
    written = []
    for name in TABLES:
        value = result.values.get(name)
        if value is not None and value.num_rows:
            table_frame(value).write_parquet(out / "tables" / f"{name}.parquet", compression="zstd")
            written.append(name)
    return {"answers": answers.height, "tables": written}


def main() -> None:
    from pipeline.judge.hardware import read_cpu

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("cases", nargs="*", default=list(CASES))
    parser.add_argument(
        "--out", type=Path, default=HERE, help="where to write (default: the reference itself)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="reference-"))
    path = args.out / "meta.json"
    meta = json.loads(path.read_text()) if path.exists() else {"cases": {}}
    cpu = read_cpu()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    for case in args.cases:
        done = record(case, work, args.out)
        meta["cases"][case] = {"overrides": [*COMMON, *CASES[case]], **done}
        print(f"{case}: {done['answers']} answers, tables {', '.join(done['tables'])}")
    meta.update(
        recorded=datetime.date.today().isoformat(),
        commit=commit.strip(),
        cpu=cpu.describe(),
        cpu_flags=sorted(cpu.speed_flags()),
    )
    path.write_text(json.dumps(meta, indent=2) + "\n")


if __name__ == "__main__":
    main()
