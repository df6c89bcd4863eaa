"""``paths.run_dir=latest`` (pipeline.run.folder): a run continues the latest folder of the same configuration,
whatever differs in where and how it runs (paths, runtime, the judge's workers, engine processes, environment,
batch size), and never one that judged something else (another model, another template)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict

from pipeline.run.folder import latest_matching_run
from tests.conftest import compose

BASE = ["dataset.demo.n_contexts=3", "judge.max_model_len=2048"]


def write_run(root, name: str, overrides: list[str], age: int) -> None:
    """A run folder's config.json as a run writes it (pipeline.run.context), ``age`` seconds old."""
    folder = root / "runs" / "2026-11-27" / name
    folder.mkdir(parents=True)
    path = folder / "config.json"
    path.write_text(json.dumps(asdict(compose([*BASE, *overrides])), indent=2, default=str))
    os.utime(path, (path.stat().st_atime - age, path.stat().st_mtime - age))


def test_latest_continues_the_same_judging_wherever_it_runs_and_never_another_judging(tmp_path):
    write_run(tmp_path, "older", [], age=20)
    write_run(tmp_path, "other-model", ["judge.model=./elsewhere"], age=10)
    placed = [
        f"paths.output_root={tmp_path}",
        "judge.engine_process=own",
        "judge.num_actors=[1,4]",
        "judge.num_cpus_per_actor=2",
        "judge.batch_size=32",
        "judge.env.VLLM_CPU_KVCACHE_SPACE=1",
        "runtime.max_engine_restarts=5",
    ]
    assert latest_matching_run(compose([*BASE, *placed]), tmp_path).name == "older"
    # what is judged differs: no folder to continue
    assert (
        latest_matching_run(
            compose([*BASE, f"paths.output_root={tmp_path}", "judge.max_model_len=1024"]), tmp_path
        )
        is None
    )
    assert (
        latest_matching_run(
            compose([*BASE, f"paths.output_root={tmp_path}", "dataset.demo.n_contexts=4"]), tmp_path
        )
        is None
    )
