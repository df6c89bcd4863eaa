"""The inputs of generate-then-evaluate: task records filled into the task prompt (every missing field refused
before anything runs), and generated outputs turned into candidates (empty and cut-off outputs handled as
configured and counted).
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from dataclasses import fields as dataclass_fields
from pathlib import Path

import polars as pl
import pyarrow as pa

from pipeline.config.enums import OutputHandling
from pipeline.config.judging import GenerateConfig
from pipeline.contracts.errors import ConfigError, InputError, Problem
from pipeline.contracts.schemas import CANDIDATES, TASKS, check_schema
from pipeline.data.load import read_rows

# The demo tasks: support tickets to summarise for an engineer (written by the project, no download).
DEMO_TICKETS = (
    "My laptop will not connect to the office Wi-Fi since Monday's update. I restarted it twice and forgot the "
    "network, but it still says 'cannot join'. Other devices connect fine.",
    "The invoice PDF from last month shows the wrong VAT number. Our accountant needs a corrected copy before "
    "Friday. I already checked the billing address in the portal and it is right.",
    "Printing from the accounting app fails with 'spooler error 0x7'. Printing from the browser works. I "
    "reinstalled the printer driver this morning.",
    "I was charged twice for the annual plan on 3 March. The bank shows two identical payments. Please refund "
    "one; I have not tried anything else yet.",
    "The mobile app logs me out every few minutes on Android 14. Clearing the cache and reinstalling did not "
    "help. It works on my tablet.",
    "Our shared calendar stopped syncing with the meeting room screens. New bookings do not appear; old ones "
    "do. We rebooted the screens and re-added the room account.",
)


DEMO_TASK = "Summarise this support ticket for an engineer in one sentence.\n\nTicket: {ticket}"


@dataclass(frozen=True)
class TaskInputs:
    tasks: pa.Table  # TASKS
    fields: tuple[str, ...]


def task_fields(task: str) -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(task) if name]
    except ValueError as exc:
        raise ConfigError(f"config generate.task: {exc}") from exc


def write_demo_tasks(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tasks-tickets.jsonl"
    # a name of this process's own: runs started at once (parallel tests, a sweep) write the same file
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for n, ticket in enumerate(DEMO_TICKETS):
            fh.write(json.dumps({"id": f"ticket-{n}", "ticket": ticket}) + "\n")
    tmp.replace(path)
    return path


def load_tasks(cfg: GenerateConfig, path: Path) -> TaskInputs:
    """TASKS: one row per record, its id and the rendered task prompt; every missing field is refused at once."""
    fields = task_fields(cfg.task)
    problems: list[Problem] = []
    rows: dict[str, list] = {"input_id": [], "task": [], "record": []}
    seen: dict[str, str] = {}
    for n, record in enumerate(read_rows(path, cfg.max_inputs)):
        data = record.data
        if not isinstance(data, Mapping):
            problems.append(Problem(record.location, "-", "record", "is not an object with named fields"))
            continue
        raw_id = data.get(cfg.id_field, n)
        input_id = str(raw_id)
        missing = [
            f for f in fields if data.get(f) is None or (isinstance(data.get(f), str) and not data[f].strip())
        ]
        for f in missing:
            problems.append(
                Problem(
                    input_id,
                    "-",
                    f,
                    f"the task prompt uses {{{f}}} but record {record.location} has no {f!r}",
                )
            )
        if input_id in seen:
            problems.append(
                Problem(
                    input_id, "-", cfg.id_field, f"repeats the id of {seen[input_id]} ({record.location})"
                )
            )
        seen[input_id] = record.location
        if missing:
            continue
        rows["input_id"].append(input_id)
        rows["task"].append(cfg.task.format(**{f: data[f] for f in fields}))
        rows["record"].append(json.dumps(data, default=str, ensure_ascii=False))
    if problems:
        raise InputError(problems)
    if not rows["input_id"]:
        raise ConfigError(f"config generate.inputs={path}: no task records")
    return TaskInputs(pa.table(rows, schema=TASKS), tuple(fields))


@dataclass
class OutputReport:
    """What happened to generated outputs on their way to candidates (counted, reported)."""

    empty: list[str] = field(default_factory=list)
    cut_off: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    # given generate.placeholder in place of their text
    placeholder: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """The run's metrics (``outputs_<field>``): how many outputs each field holds."""
        return {f"outputs_{f.name}": len(getattr(self, f.name)) for f in dataclass_fields(self)}


def candidates_from_generations(
    generations: pa.Table, tasks: pa.Table, cfg: GenerateConfig
) -> tuple[pa.Table, OutputReport]:
    """CANDIDATES from the outputs: context = the task prompt, candidate ``<input>:<model>``, system = the model;
    empty and cut-off outputs handled as configured (counted)."""
    report = OutputReport()
    task_of = dict(zip(tasks.column("input_id").to_pylist(), tasks.column("task").to_pylist(), strict=True))
    order = {m.name: k for k, m in enumerate(cfg.models)}
    frame = pl.from_arrow(generations).with_columns(
        model_order=pl.col("model").replace_strict(order, default=len(order))
    )
    inputs = tasks.column("input_id").to_pylist()
    frame = frame.with_columns(
        input_order=pl.col("input_id").replace_strict({x: k for k, x in enumerate(inputs)})
    )
    rows: dict[str, list] = {name: [] for name in CANDIDATES.names}
    per_input: dict[str, int] = {}
    for r in frame.sort(["input_order", "model_order"]).iter_rows(named=True):
        key = f"{r['input_id']}:{r['model']}"
        text = r["output"]
        handling = None
        if not text.strip():
            report.empty.append(key)
            handling = cfg.empty_output
        elif r["finish_reason"] == "length":
            report.cut_off.append(key)
            handling = cfg.cut_off_output
        if handling == OutputHandling.drop:
            report.dropped.append(key)
            continue
        if handling == OutputHandling.placeholder:
            report.placeholder.append(key)
            text = cfg.placeholder
        index = per_input.get(r["input_id"], 0)
        per_input[r["input_id"]] = index + 1
        rows["context_id"].append(r["input_id"])
        rows["context"].append(task_of[r["input_id"]])
        rows["candidate_id"].append(key)
        rows["candidate_index"].append(index)
        rows["system"].append(r["model"])
        rows["text"].append(text)
        rows["category"].append(None)
        rows["checklist"].append(None)
    return check_schema(pa.table(rows), CANDIDATES, "generated candidates"), report
