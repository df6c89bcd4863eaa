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


def test_a_run_folder_is_only_a_runs_or_a_new_or_empty_one(tmp_path):
    """paths.run_dir pointed at a model's checkpoint (its own config.json) or any folder of other files is refused,
    its files untouched; a run's folder, a new, an empty one, and one a run began (lock, tables) are taken."""
    import pytest

    from pipeline.contracts.errors import UserError
    from pipeline.run.context import RunContext
    from pipeline.run.folder import check_run_dir

    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    (checkpoint / "model.safetensors").write_bytes(b"\0" * 8)
    for folder in (checkpoint, tmp_path / "checkpoint" / "model.safetensors"):
        with pytest.raises(
            UserError, match="paths.run_dir=.* (holds files that are not a run's|is not a folder)"
        ):
            RunContext(compose([*BASE, f"paths.run_dir={folder}"]), tmp_path)
    assert (checkpoint / "config.json").read_text() == '{"architectures": ["LlamaForCausalLM"]}'
    write_run(tmp_path, "mine", [], age=0)
    begun = tmp_path / "begun"
    (begun / "tables").mkdir(parents=True)
    (begun / ".run.lock").write_text("1\n")
    for folder in (tmp_path / "runs" / "2026-11-27" / "mine", tmp_path / "new", begun, tmp_path / "empty"):
        (tmp_path / "empty").mkdir(exist_ok=True)
        assert check_run_dir(folder) == folder


def test_listing_names_a_torn_folder_and_lists_every_other_run(tmp_path):
    """One run folder whose config.json is empty or torn (a run killed while writing it) and one whose tables are
    torn: `make runs` still lists every run, naming those; `latest` and a folder's name never pick the torn one."""
    import pytest

    from pipeline.contracts.errors import UserError
    from pipeline.run.runs import find_run, runs, table

    write_run(tmp_path, "good", [], age=30)
    (tmp_path / "runs" / "2026-11-27" / "good" / "summary.txt").write_text("done\n")
    for name, text in (("empty", ""), ("torn", '{"workflow": "compar')):
        folder = tmp_path / "runs" / "2026-11-27" / name
        folder.mkdir()
        (folder / "config.json").write_text(text)
    write_run(tmp_path, "torn-table", [], age=10)
    tables = tmp_path / "runs" / "2026-11-27" / "torn-table" / "tables"
    tables.mkdir()
    (tables / "correlations.parquet").write_bytes(b"PAR1 torn")
    found = {r.folder.name: r for r in runs(tmp_path)}
    assert found["empty"].status == found["torn"].status == "unreadable"
    assert found["good"].status == "finished" and found["torn-table"].method == "(a table is unreadable)"
    listed = table(list(found.values()))
    assert any(line.split()[:2] == ["2026-11-27/torn", "unreadable"] for line in listed.splitlines())
    assert find_run(None, tmp_path).name == "good"
    with pytest.raises(UserError, match="no run folder, folder name or MLflow run id 'torn'"):
        find_run("torn", tmp_path)
