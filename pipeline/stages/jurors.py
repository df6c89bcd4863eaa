"""A jury of judges: every further judge of ``jury.judges`` judges the same prompts as the run's judge, by the same
stages (resolve the judge, settle its prompts with its tokenizer, open its store, shard, judge), each in a folder
of its own inside the run folder (``jurors/<name>/``: its ``judge.json``, prompt plan and judgments, resumed on its
own identity). Their judgments join the run's, told apart by ``judge``, for the scoring that follows (each judge
scored on its own, and together as a jury with ``scoring.jury``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.contracts.errors import ConfigError
from pipeline.data.records import InputReport
from pipeline.data.source import DatasetInfo
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
    """One further judge: its folder's name, the stage that resolves it, and the stages that judge with it (they
    read what :data:`GIVEN` and the resolved ``judge`` hold, and write ``judgments``)."""

    name: str
    resolve: Stage
    stages: tuple[Stage, ...]

    def check(self) -> None:
        available = {p.name: p for p in GIVEN}
        check_wiring((self.resolve, *self.stages), available, f"juror {self.name}")
        if available.get("judgments") != ports.JUDGMENTS or available.get("judge") != ports.JUDGE:
            raise WorkflowError(f"juror {self.name}: its stages must resolve a judge and write its judgments")


class JurorContext:
    """A juror's view of the run (:class:`pipeline.stages.base.StageContext`): its folder inside the run folder,
    the run's executor, and metrics of its own (merged into the run's under ``juror/<name>/``)."""

    def __init__(self, parent: StageContext, name: str):
        self.parent = parent
        self.name = name
        self.metrics: dict[str, float] = {}
        self.files = parent.files

    @property
    def run_dir(self) -> Path:
        folder = self.parent.run_dir / "jurors" / self.name
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    @property
    def planned_run_dir(self) -> Path:
        return self.parent.planned_run_dir / "jurors" / self.name

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
class JudgeJurors(Stage):
    """Every further judge of the jury (``jury.judges``) judges the run's prompts in its own folder
    (``jurors/<name>/``, resumed on its own) by the stages the run's judge went through (resolve_judge,
    prepare_prompts, open_store, shard_contexts, judge); its judgments join the run's judge's."""

    jurors: tuple[Juror, ...]

    name = "judge_jurors"
    reads = (*GIVEN, ports.JUDGE, ports.JUDGMENTS)
    writes = (ports.JUDGMENTS,)

    def __post_init__(self) -> None:
        for juror in self.jurors:
            juror.check()

    def run(
        self,
        ctx: StageContext,
        *,
        candidates: pa.Table,
        input_report: InputReport,
        dataset: DatasetInfo,
        judge: JudgeSpec,
        judgments: pa.Table,
    ) -> dict[str, Any]:
        given = {"candidates": candidates, "input_report": input_report, "dataset": dataset}
        # every juror resolved first (quick: no engine), so that two judges with one name stop the run before any
        # of them judges
        settled = []
        names = [judge.name]
        for juror in self.jurors:
            sub = JurorContext(ctx, juror.name)
            values = run_stages((juror.resolve,), sub, dict(given), sub.persist)
            names.append(values["judge"].name)
            settled.append((juror, sub, values))
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ConfigError(
                f"config jury.judges: the judges' names {names} repeat {repeated} (a judge is named by its name, "
                "else its model's): give each juror its own jury.judges[k].name"
            )
        parts = [judgments]
        for juror, sub, values in settled:
            log.info("juror %s: judging the run's prompts in %s", juror.name, sub.planned_run_dir)
            done = run_stages(juror.stages, sub, values, sub.persist)
            parts.append(done["judgments"])
            ctx.metrics.update(sub.prefixed(sub.metrics))
            log.info("juror %s: %d judgment(s)", juror.name, done["judgments"].num_rows)
        return {"judgments": pa.concat_tables(parts)}
