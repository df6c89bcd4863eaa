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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipeline.stages.base import Port, Stage, StageContext, WorkflowError, check_wiring, run_stages


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
        parts = [segment.name for segment in self.segments]
        if len(set(parts)) != len(parts):
            raise WorkflowError(f"workflow {self.name}: segment names repeat: {parts}")
        check_wiring(self.stages, {}, f"workflow {self.name}")

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
        return run_stages(self.stages, ctx, {}, persist, stop_after)

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
    from pipeline.contracts import card_schema as card
    from pipeline.contracts import jury_schema as jury
    from pipeline.contracts import schemas

    names = {
        id(v): f"{module.__name__.rsplit('.', 1)[-1]}.{k}"
        for module in (schemas, jury, card)
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
