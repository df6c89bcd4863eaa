"""Generate-then-evaluate without an engine: task records and their refusals, outputs into candidates (empty and
cut-off outputs counted and handled), shared engines, and the config checks."""

from __future__ import annotations

import json
from dataclasses import replace

import polars as pl
import pyarrow as pa
import pytest

from pipeline.config.enums import OutputHandling
from pipeline.config.judging import GenerateConfig, GeneratorConfig
from pipeline.contracts.errors import ConfigError, InputError, ModelError
from pipeline.contracts.schemas import GENERATIONS
from pipeline.data.tasks import DEMO_TASK, candidates_from_generations, load_tasks, write_demo_tasks
from pipeline.judge.models import resolve_model
from tests.conftest import compose


def write(tmp_path, records) -> str:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_the_task_prompt_is_filled_from_each_record(tmp_path):
    cfg = GenerateConfig(task="Summarise for {audience}: {ticket}", id_field="key")
    path = write(
        tmp_path,
        [{"key": "a", "ticket": "T1", "audience": "ops"}, {"key": "b", "ticket": "T2", "audience": "dev"}],
    )
    tasks = load_tasks(cfg, path).tasks
    assert tasks.column("input_id").to_pylist() == ["a", "b"]
    assert tasks.column("task").to_pylist() == ["Summarise for ops: T1", "Summarise for dev: T2"]
    assert load_tasks(replace(cfg, max_inputs=1), path).tasks.num_rows == 1


def test_missing_fields_and_repeated_ids_are_refused_naming_the_record(tmp_path):
    cfg = GenerateConfig(task="{ticket} for {audience}", id_field="key")
    path = write(
        tmp_path,
        [
            {"key": "a", "ticket": "T1"},
            {"key": "b", "ticket": "", "audience": "x"},
            {"key": "a", "ticket": "T", "audience": "y"},
        ],
    )
    with pytest.raises(InputError) as err:
        load_tasks(cfg, path)
    message = str(err.value)
    assert "field 'audience'" in message and "tasks.jsonl line 1" in message
    assert "field 'ticket'" in message and "tasks.jsonl line 2" in message
    assert "repeats the id" in message


def test_the_demo_tasks_fill_the_demo_prompt(tmp_path):
    tasks = load_tasks(GenerateConfig(task=DEMO_TASK), write_demo_tasks(tmp_path)).tasks
    assert tasks.num_rows == 6 and all("Ticket: " in t for t in tasks.column("task").to_pylist())


def generations(rows) -> pa.Table:
    base = {"prompt_tokens": 10, "output_tokens": 5, "seconds": 0.1, "worker": "w"}
    return pa.Table.from_pylist([{**base, **r} for r in rows], schema=GENERATIONS)


def test_outputs_become_candidates_with_empty_and_cut_off_ones_counted():
    tasks = pa.table({"input_id": ["t1", "t2"], "task": ["do 1", "do 2"], "record": ["{}", "{}"]})
    cfg = GenerateConfig(
        task="x",
        models=[GeneratorConfig(name="m1"), GeneratorConfig(name="m2")],
        cut_off_output=OutputHandling.drop,
    )
    gen = generations(
        [
            {"input_id": "t2", "model": "m2", "output": "b", "finish_reason": "stop"},
            {"input_id": "t1", "model": "m2", "output": "  ", "finish_reason": "stop"},
            {"input_id": "t1", "model": "m1", "output": "a", "finish_reason": "stop"},
            {"input_id": "t2", "model": "m1", "output": "long...", "finish_reason": "length"},
        ]
    )
    cands, report = candidates_from_generations(gen, tasks, cfg)
    rows = pl.from_arrow(cands)
    assert rows["candidate_id"].to_list() == ["t1:m1", "t1:m2", "t2:m2"]
    assert rows["system"].to_list() == ["m1", "m2", "m2"]
    assert rows["context"].to_list() == ["do 1", "do 1", "do 2"]
    assert rows.filter(pl.col("candidate_id") == "t1:m2")["text"][0] == "(no output)"
    assert report.counts() == {
        "outputs_empty": 1,
        "outputs_cut_off": 1,
        "outputs_dropped": 1,
        "outputs_placeholder": 1,
    }
    kept, report = candidates_from_generations(gen, tasks, replace(cfg, cut_off_output=OutputHandling.keep))
    assert "long..." in kept.column("text").to_pylist() and report.counts()["outputs_dropped"] == 0


def test_generate_config_refusals():
    with pytest.raises(ConfigError) as err:
        compose(["workflow=generate"])
    message = str(err.value)
    assert "generate.task is empty" in message and "generate.models is empty" in message
    assert "criteria is empty" in message
    with pytest.raises(ConfigError, match="repeated names"):
        compose(["experiment=generate_demo", "generate.models.1.name=smollm2-greedy"])
    with pytest.raises(ConfigError, match="criteria \\['useful'\\] have no description"):
        compose(["experiment=generate_demo", "criteria.useful=' '"])
    with pytest.raises(ConfigError, match="workflow is not generate"):
        compose(["generate.task=x"])
    cfg = compose(["experiment=generate_demo"])
    assert [m.name for m in cfg.generate.models] == ["smollm2-greedy", "smollm2-sampled", "smollm2-terse"]


def test_an_unknown_model_is_refused_naming_its_key(tmp_path):
    with pytest.raises(ModelError, match=r"generate.models\[x\].model=gpt-9: not a known model alias"):
        resolve_model("gpt-9", tmp_path, "generate.models[x].model")
