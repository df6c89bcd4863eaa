"""Generate, then evaluate: task records -> one prompt per record -> an output per generator model -> candidates.

The task prompt's ``{field}`` placeholders are filled from each record; a record missing a field is refused
before anything runs, naming the field and the record. Generators that share a model and engine settings share
one engine, each answering with its own sampling (:class:`pipeline.absolute.Read`) and system prompt. Outputs
become candidates in the standard layout (``context`` = the task prompt, ``system`` = the generator's name), so
the comparative stages judge them as any data set; outputs that are empty or cut off at max_tokens are handled as
``generate.empty_output`` / ``generate.cut_off_output`` say, and counted.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline.absolute import Read
from pipeline.config import Backend, GenerateConfig, GeneratorConfig, JudgeConfig, OutputHandling
from pipeline.data.errors import InputError, Problem
from pipeline.data.load import read_records
from pipeline.errors import ConfigError
from pipeline.judge.spec import JudgeSpec
from pipeline.schemas import CANDIDATES, GENERATIONS, TASKS, check_schema

GENERATE = "generate"

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
    tmp = path.with_suffix(".tmp")
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
    for n, record in enumerate(read_records(path, cfg.max_inputs)):
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


@dataclass(frozen=True)
class Generator:
    """A generator as settled on the driver: its engine (shared with generators of the same model and engine
    settings), its sampling and its system prompt."""

    name: str
    spec: JudgeSpec
    read: Read
    system_prompt: str | None


def generator_read(cfg: GeneratorConfig) -> Read:
    sampled = cfg.temperature > 0
    return Read(
        max_tokens=cfg.max_tokens,
        n=1,
        temperature=cfg.temperature,
        seed=cfg.seed if sampled else None,
        top_p=cfg.top_p,
        stop=tuple(cfg.stop),
    )


def generator_judge_config(cfg: GeneratorConfig, judge: JudgeConfig) -> JudgeConfig:
    """The engine of a generator as a judge config: its model with the judge's engine settings under its own,
    or its endpoint (``api``). A generator without one runs in-process, with the judge's backend (vllm when the
    judge itself is behind an API: the judge's endpoint serves the judge's model, not the generator's)."""
    if cfg.api is not None:
        return JudgeConfig(
            backend=Backend.api,
            model=cfg.model,
            name=cfg.model,
            max_model_len=judge.max_model_len,
            env={**judge.env, **cfg.env},
            batch_size=judge.batch_size,
            num_actors=judge.num_actors,
            num_cpus_per_actor=judge.num_cpus_per_actor,
            num_gpus_per_actor=0.0,
            api=cfg.api,
        )
    return JudgeConfig(
        backend=Backend.vllm if judge.backend == Backend.api else judge.backend,
        model=cfg.model,
        name=cfg.model,
        max_model_len=judge.max_model_len,
        engine={**judge.engine, **cfg.engine},
        env={**judge.env, **cfg.env},
        engine_process=judge.engine_process,
        batch_size=judge.batch_size,
        num_actors=judge.num_actors,
        num_cpus_per_actor=judge.num_cpus_per_actor,
        num_gpus_per_actor=judge.num_gpus_per_actor,
    )


def engine_groups(generators: Sequence[Generator]) -> list[list[Generator]]:
    """Generators that share an engine (same model and engine settings), in config order of their first member."""
    groups: dict[str, list[Generator]] = {}
    for g in generators:
        key = json.dumps(
            {"path": g.spec.model_path, **g.spec.identity(), "name": "", "api": dict(g.spec.api)},
            sort_keys=True,
            default=str,
        )
        groups.setdefault(key, []).append(g)
    return list(groups.values())


@dataclass
class OutputReport:
    """What happened to generated outputs on their way to candidates (counted, reported)."""

    empty: list[str] = field(default_factory=list)
    cut_off: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    placeholders: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "outputs_empty": len(self.empty),
            "outputs_cut_off": len(self.cut_off),
            "outputs_dropped": len(self.dropped),
            "outputs_placeholder": len(self.placeholders),
        }


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
            report.placeholders.append(key)
            text = cfg.placeholder
        index = per_input.get(r["input_id"], 0)
        per_input[r["input_id"]] = index + 1
        rows["context_id"].append(r["input_id"])
        rows["context"].append(task_of[r["input_id"]])
        rows["candidate_id"].append(key)
        rows["candidate_index"].append(index)
        rows["system"].append(r["model"])
        rows["text"].append(text)
    return check_schema(pa.table(rows), CANDIDATES, "generated candidates"), report


def generation_rows(responses: pa.Table) -> pa.Table:
    """GENERATIONS rows from the engine's responses to generation prompts."""
    texts = responses.column("texts").to_pylist()
    reasons = responses.column("finish_reasons").to_pylist()
    out = pa.table(
        {
            "input_id": responses.column("cand_a"),
            "model": responses.column("template_id"),
            "output": pa.array([t[0] if t else "" for t in texts], pa.string()),
            "finish_reason": pa.array([r[0] if r else None for r in reasons], pa.string()),
            "prompt_tokens": responses.column("prompt_tokens"),
            "output_tokens": responses.column("generated_tokens"),
            "seconds": responses.column("seconds"),
            "worker": responses.column("worker"),
        }
    )
    return check_schema(out, GENERATIONS, "generations")


def generator_identity(g: Generator) -> dict[str, Any]:
    """What decides a generator's outputs (its part of the generations' identity)."""
    from dataclasses import asdict

    return {
        "name": g.name,
        "model": g.spec.identity(),
        "system_prompt": g.system_prompt,
        "read": asdict(g.read),
    }


def describe_generators(generators: Sequence[Generator]) -> list[dict[str, Any]]:
    return [
        {
            "name": g.name,
            "model": g.spec.model,
            "dtype": g.spec.dtype,
            "system_prompt": g.system_prompt,
            "temperature": g.read.temperature,
            "top_p": g.read.top_p,
            "max_tokens": g.read.max_tokens,
            "seed": g.read.seed,
            "stop": list(g.read.stop),
        }
        for g in generators
    ]


def generator_frame(tokenizer: Any, g: Generator) -> Any:
    """The text around a generator's task prompts: its model's chat template with its system prompt, or plain
    text (the system prompt as the first paragraph, the task, a blank line)."""
    from pipeline.prompts import PromptFrame, chat_frame, plain_frame, uses_chat_template

    if uses_chat_template(tokenizer, "auto", g.spec.name):
        return chat_frame(tokenizer, g.system_prompt, g.spec.name)
    return PromptFrame(plain_frame(g.system_prompt).head, "\n\n", system=g.system_prompt or None)


def generation_prompts(
    group: Sequence[Generator], tasks: pa.Table, tokenizer: Any, done: Mapping[str, set[str]] | None = None
) -> pa.Table:
    """PROMPTS for the generators of one engine: each task prompt in the model's chat template with the
    generator's system prompt (plain text without one), skipping the inputs in ``done[generator]``."""
    from pipeline.schemas import PROMPTS

    rows: dict[str, list] = {name: [] for name in PROMPTS.names}
    inputs = tasks.column("input_id").to_pylist()
    texts = tasks.column("task").to_pylist()
    for g in group:
        frame = generator_frame(tokenizer, g)
        skip = (done or {}).get(g.name, set())
        for input_id, text in zip(inputs, texts, strict=True):
            if input_id in skip:
                continue
            prompt = frame.wrap(text)
            for name, value in zip(
                PROMPTS.names, (input_id, GENERATE, "", g.name, input_id, "", prompt), strict=True
            ):
                rows[name].append(value)
    return pa.table(rows, schema=PROMPTS)


def generation_step(
    group: Sequence[Generator],
    tokenizer: Any,
    batch_size: int,
    judge: JudgeConfig,
    worker: type | None = None,
) -> Any:
    """The streamed step of one engine: an actor pool of the judge worker answering every generator's prompts
    with its own sampling and frame (the judge's actor resources)."""
    from pipeline.judge.worker import JudgeWorker
    from pipeline.runtime import MapStep

    spec = group[0].spec
    frames = {g.name: generator_frame(tokenizer, g) for g in group}
    return MapStep(
        "generate",
        worker or JudgeWorker,
        {
            "spec": spec,
            "reads": {g.name: g.read for g in group},
            "frame": frames[group[0].name],
            "frames": frames,
        },
        batch_size=batch_size,
        exact_batches=True,
        workers=judge.num_actors,
        num_cpus=judge.num_cpus_per_actor,
        num_gpus=judge.num_gpus_per_actor,
    )
