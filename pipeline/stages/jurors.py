"""A jury of judges: every further judge of ``jury.judges`` judges the same prompts as the run's judge, by the same
stages, in two steps. Before anything runs (:class:`PrepareJurors`, in the prompts segment) each is resolved, its
prompts settled with its tokenizer and what it answers checked against the run (a recorded judge's file), so that a
juror that cannot judge stops the run before any judge has judged. Then (:class:`JudgeJurors`, after the run's
judge) each judges in a folder of its own inside the run folder (``jurors/<name>/``: its ``judge.json``, prompt plan
and judgments, resumed on its own identity: open its store, shard, judge). Their judgments join the run's, told
apart by ``judge``, for the scoring that follows (each judge scored on its own, and together as a jury with
``scoring.jury``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.contracts.errors import ConfigError
from pipeline.contracts.values import name_part
from pipeline.judge.spec import JudgeSpec
from pipeline.stages import ports
from pipeline.stages.base import (
    Port,
    Stage,
    StageContext,
    WorkflowError,
    check_wiring,
    run_stages,
    write_port,
)

log = logging.getLogger("pipeline")

# What a juror's stages are given from the run: the candidates (as the run's judge's prompts settled them) and
# what the input was.
GIVEN = (ports.CANDIDATES, ports.INPUT_REPORT, ports.DATASET)


@dataclass(frozen=True)
class Juror:
    """One further judge: its folder's name, the stages that prepare it before anything runs (they read what
    :data:`GIVEN` holds and resolve the judge: settle its prompts, check what it answers) and the stages that judge
    with it (they read what those wrote, and write ``judgments``)."""

    name: str
    prepare: tuple[Stage, ...]
    judge: tuple[Stage, ...] = ()

    def check(self) -> None:
        available = {p.name: p for p in GIVEN}
        check_wiring(self.prepare, available, f"juror {self.name}")
        if available.get("judge") != ports.JUDGE:
            raise WorkflowError(f"juror {self.name}: its preparing stages must resolve a judge")
        check_wiring(self.judge, available, f"juror {self.name}")
        if self.judge and available.get("judgments") != ports.JUDGMENTS:
            raise WorkflowError(f"juror {self.name}: its stages must resolve a judge and write its judgments")


@dataclass(frozen=True)
class Prepared:
    """A juror made ready before anything runs: the values its judging stages start from, the outputs of its
    preparing stages to write into its folder when it judges, and its metrics so far."""

    name: str
    values: dict[str, Any]
    outputs: tuple[tuple[Port, Any], ...]


class JurorContext:
    """A juror's view of the run (:class:`pipeline.stages.base.StageContext`): its folder inside the run folder,
    the run's executor, and metrics of its own (merged into the run's under ``juror/<name>/``)."""

    def __init__(self, parent: StageContext, name: str):
        self.parent = parent
        self.name = name
        self.metrics: dict[str, float] = {}
        self.files = parent.files
        self.sends = parent.sends

    @property
    def run_dir(self) -> Path:
        folder = self.parent.run_dir / "jurors" / name_part(self.name)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    @property
    def planned_run_dir(self) -> Path:
        return self.parent.planned_run_dir / "jurors" / name_part(self.name)

    @property
    def executor(self) -> Any:
        return self.parent.executor

    def log_step(self, metrics: dict[str, float], step: int) -> None:
        self.parent.log_step(self.prefixed(metrics), step)

    def persist(self, port: Port, value: Any) -> None:
        write_port(self.run_dir, port, value)

    def prefixed(self, metrics: dict[str, float]) -> dict[str, float]:
        return {f"juror/{self.name}/{k}": v for k, v in metrics.items()}


@dataclass(frozen=True)
class PrepareJurors(Stage):
    """Before anything runs, every further judge of the jury (``jury.judges``) is resolved, its prompts settled with
    its own tokenizer and templates, and what it answers checked against the run; two judges with one name are
    refused. Nothing is written yet: each juror's folder is made when it judges."""

    jurors: tuple[Juror, ...]

    name = "prepare_jurors"
    reads = (*GIVEN, ports.JUDGE)
    writes = (ports.JURY, ports.JUDGES)

    def __post_init__(self) -> None:
        for juror in self.jurors:
            juror.check()

    def run(self, ctx: StageContext, *, judge: JudgeSpec, **given: Any) -> dict[str, Any]:
        """``given``: what :data:`GIVEN` holds, passed on to every juror's stages."""
        ready, names = [], [judge.name]
        for juror in self.jurors:
            sub = JurorContext(ctx, juror.name)
            outputs: list[tuple[Port, Any]] = []
            values = run_stages(juror.prepare, sub, dict(given), lambda p, v, o=outputs: o.append((p, v)))
            names.append(values["judge"].name)
            ctx.metrics.update(sub.prefixed(sub.metrics))
            ready.append(Prepared(juror.name, values, tuple(outputs)))
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ConfigError(
                f"config jury.judges: the judges' names {names} repeat {repeated} (a judge is named by its name, "
                "else its model's or its file's): give each juror its own jury.judges[k].name"
            )
        return {"jury": tuple(ready), "judges": tuple(names)}


@dataclass(frozen=True)
class JudgeJurors(Stage):
    """Every further judge of the jury (``jury.judges``), made ready before anything ran (:class:`PrepareJurors`),
    judges the run's prompts in its own folder (``jurors/<name>/``, resumed on its own) by the stages the run's
    judge went through (open_store, shard_contexts, judge); its judgments join the run's judge's, and the prompts it
    left out the run's judge's."""

    jurors: tuple[Juror, ...]

    name = "judge_jurors"
    reads = (ports.JURY, ports.JUDGMENTS, ports.LEFT_OUT)
    writes = (ports.JUDGMENTS, ports.LEFT_OUT)

    def __post_init__(self) -> None:
        for juror in self.jurors:
            juror.check()

    def run(
        self, ctx: StageContext, *, jury: tuple[Prepared, ...], judgments: pa.Table, left_out: pa.Table
    ) -> dict[str, Any]:
        ready = {prepared.name: prepared for prepared in jury}
        parts, left = [judgments], [left_out]
        for juror in self.jurors:
            prepared = ready[juror.name]
            sub = JurorContext(ctx, juror.name)
            for port, value in prepared.outputs:
                sub.persist(port, value)
            log.info("juror %s: judging the run's prompts in %s", juror.name, sub.planned_run_dir)
            done = run_stages(juror.judge, sub, dict(prepared.values), sub.persist)
            parts.append(done["judgments"])
            left.append(done.get("left_out", left_out.slice(0, 0)))
            ctx.metrics.update(sub.prefixed(sub.metrics))
            log.info("juror %s: %d judgment(s)", juror.name, done["judgments"].num_rows)
        return {"judgments": pa.concat_tables(parts), "left_out": pa.concat_tables(left)}
