"""Workflows composed of named segments of stages (:mod:`pipeline.stages.base`), and the runner that executes them.

A :class:`Segment` is a name and a list of stages that belong together (``input``, ``prompts``, ``judge``,
``score``, ``report``); a :class:`Workflow` is a name and its segments, checked when it is built: every port a
stage reads is written by an earlier stage, and ``run``'s parameters are exactly the ports declared.

The runner (:meth:`Workflow.run`) calls the stages in order, checks every output against its declaration (a
table against its schema, exactly), writes the outputs that have a file to the run folder, and times each stage.
The run folder, its log and the MLflow run are opened by :class:`pipeline.run.context.RunContext` when a stage
first needs them, so a run that fails its input checks leaves nothing behind.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipeline.runtime.logs import FILE_ONLY
from pipeline.stages.base import Port, Stage, StageContext

log = logging.getLogger(__name__)


class WorkflowError(TypeError):
    """A workflow whose stages are not wired together as declared (a programming error)."""


@dataclass(frozen=True)
class Segment:
    """A named part of a workflow: the stages that do one thing together (read the input, settle the prompts,
    judge, score, report). Workflows share segments instead of splicing each other's stage lists."""

    name: str
    stages: tuple[Stage, ...]


@dataclass(frozen=True)
class Workflow:
    name: str
    segments: tuple[Segment, ...]

    def __post_init__(self) -> None:
        available: dict[str, Port] = {}
        names = [stage.name for stage in self.stages]
        if len(set(names)) != len(names):
            raise WorkflowError(f"workflow {self.name}: stage names repeat: {names}")
        parts = [segment.name for segment in self.segments]
        if len(set(parts)) != len(parts):
            raise WorkflowError(f"workflow {self.name}: segment names repeat: {parts}")
        for stage in self.stages:
            self._check(stage, available)

    def _check(self, stage: Stage, available: dict[str, Port]) -> None:
        """``stage`` reads what earlier stages wrote, takes exactly its declared ports, writes no other port of a
        name already used; then its outputs are available."""
        for port in stage.reads:
            if port.name not in available:
                raise WorkflowError(
                    f"workflow {self.name}: stage {stage.name} reads {port.name!r}, which no earlier stage writes"
                )
            if available[port.name] != port:
                raise WorkflowError(f"workflow {self.name}: stage {stage.name} reads another {port.name!r}")
        params = [
            p.name
            for p in inspect.signature(stage.run).parameters.values()
            if p.kind == inspect.Parameter.KEYWORD_ONLY
        ]
        declared = [p.name for p in stage.reads]
        if sorted(params) != sorted(declared):
            raise WorkflowError(
                f"workflow {self.name}: stage {stage.name}.run takes {sorted(params)} but declares reads "
                f"{sorted(declared)}"
            )
        for port in stage.writes:
            if port.name in available and available[port.name] != port:
                raise WorkflowError(f"workflow {self.name}: stage {stage.name} writes another {port.name!r}")
            available[port.name] = port

    @property
    def stages(self) -> tuple[Stage, ...]:
        """Every stage, segment after segment."""
        return tuple(stage for segment in self.segments for stage in segment.stages)

    def stage(self, name: str) -> Stage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise KeyError(f"workflow {self.name} has no stage {name!r}; stages: {[s.name for s in self.stages]}")

    def segment(self, name: str) -> Segment:
        for segment in self.segments:
            if segment.name == name:
                return segment
        raise KeyError(
            f"workflow {self.name} has no segment {name!r}; segments: {[s.name for s in self.segments]}"
        )

    def run(
        self,
        ctx: StageContext,
        persist: Callable[[Port, Any], None] | None = None,
        stop_after: str | None = None,
    ) -> dict[str, Any]:
        """Run the stages in order; return every port's value. ``persist(port, value)`` is called for each
        output that has a file; ``stop_after`` ends the run after that stage (benchmarks, notebooks)."""
        if stop_after is not None:
            self.stage(stop_after)
        values: dict[str, Any] = {}
        total = len(self.stages)
        for n, stage in enumerate(self.stages, start=1):
            log.info(
                "stage %d/%d %s: reads %s; writes %s",
                n,
                total,
                stage.name,
                ", ".join(p.name for p in stage.reads) or "-",
                ", ".join(p.name for p in stage.writes),
                extra=FILE_ONLY,
            )
            started = time.monotonic()
            out = stage.run(ctx, **{p.name: values[p.name] for p in stage.reads})
            where = f"stage {stage.name}"
            if not isinstance(out, Mapping) or set(out) != {p.name for p in stage.writes}:
                got = sorted(out) if isinstance(out, Mapping) else type(out).__name__
                raise WorkflowError(
                    f"{where} returned {got}, declared {sorted(p.name for p in stage.writes)}"
                )
            for port in stage.writes:
                values[port.name] = port.check(out[port.name], where)
                if port.file and persist is not None:
                    persist(port, values[port.name])
            seconds = time.monotonic() - started
            ctx.metrics[f"stage/{stage.name}/seconds"] = seconds
            log.info("stage %s done in %.1f s", stage.name, seconds, extra=FILE_ONLY)
            if stage.name == stop_after:
                break
        return values

    def describe(self) -> str:
        """The stages as a Markdown table: the segment of each, what it does, what it reads and writes."""
        lines = [
            f"Workflow `{self.name}` ({' → '.join(s.name for s in self.segments)}):",
            "",
            "| # | segment | stage | what it does | reads | writes |",
            "|---|---|---|---|---|---|",
        ]
        n = 0
        for segment in self.segments:
            for stage in segment.stages:
                n += 1
                reads = ", ".join(f"`{p.name}`" for p in stage.reads) or "-"
                writes = ", ".join(f"`{p.name}`" for p in stage.writes)
                lines.append(
                    f"| {n} | {segment.name} | `{stage.name}` | {stage.summary()} | {reads} | {writes} |"
                )
        return "\n".join(lines)

    def ports(self) -> list[Port]:
        """Every port of the workflow, in the order they are first written."""
        seen: dict[str, Port] = {}
        for stage in self.stages:
            for port in stage.writes:
                seen.setdefault(port.name, port)
        return list(seen.values())

    def describe_ports(self) -> str:
        """The ports as a Markdown table (:func:`describe_ports`)."""
        return describe_ports(self.ports())


def describe_ports(ports: list[Port]) -> str:
    """Ports as a Markdown table: what each holds, its schema or type, its file in the run folder."""
    from pipeline.contracts import jury, schemas

    names = {
        id(v): f"{module.__name__.rsplit('.', 1)[-1]}.{k}"
        for module in (schemas, jury)
        for k, v in vars(module).items()
        if isinstance(v, pa.Schema)
    }
    lines = ["| port | holds | schema / type | in the run folder |", "|---|---|---|---|"]
    for port in ports:
        if port.schema is not None:
            kind = f"`{names.get(id(port.schema), '?')}`: " + ", ".join(port.schema.names)
        else:
            kind = f"`{port.kind}`"
        if port.file is None:
            where = "-"
        elif port.schema is not None:
            where = f"`tables/{port.file}.parquet`"
        else:
            where = f"`{port.file}.json`"
        lines.append(f"| `{port.name}` | {port.doc} | {kind} | {where} |")
    return "\n".join(lines)
