"""What every stage is: a :class:`Stage` (typed settings, the :class:`Port` s it reads and writes, one entry point
``run``) and the :class:`StageContext` it runs in.

A :class:`Stage` is a frozen dataclass: its fields are its typed settings, ``reads`` and ``writes`` declare the
:class:`Port` s it consumes and produces (Arrow tables with the schemas of :mod:`pipeline.contracts.schemas`, or
settled objects), and ``run(ctx, **inputs)`` is its one entry point, called with one keyword argument per port it
reads. How stages are wired into a workflow and run is :mod:`pipeline.workflows.core`.
"""

from __future__ import annotations

import inspect
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import polars as pl
import pyarrow as pa

from pipeline.contracts.schemas import check_schema
from pipeline.runtime.logs import FILE_ONLY

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Port:
    """A named value passed between stages: an Arrow table (``schema``) or a settled object (``type``)."""

    name: str
    doc: str
    schema: pa.Schema | None = None
    type: type | tuple[type, ...] | None = None
    # Written to the run folder: ``tables/<file>.parquet`` for a table, ``<file>.json`` for an object.
    file: str | None = None
    # A table of an optional part (trust, reasons, the jury's scores): where the workflow leaves that part out, no
    # stage writes it and its readers get its empty table (written to the run folder all the same).
    optional: bool = False

    def __post_init__(self) -> None:
        if (self.schema is None) == (self.type is None):
            raise TypeError(f"port {self.name!r} needs exactly one of schema (a table) or type (an object)")
        if self.optional and self.schema is None:
            raise TypeError(f"port {self.name!r}: only a table can be optional (read as its empty table)")

    @property
    def kind(self) -> str:
        if self.schema is not None:
            return "table"
        names = self.type if isinstance(self.type, tuple) else (self.type,)
        return " | ".join(t.__name__ for t in names)  # type: ignore[union-attr]

    def check(self, value: Any, where: str) -> Any:
        """The value as it crosses a stage boundary: a table cast to its schema (exactly its columns)."""
        if self.schema is not None:
            if isinstance(value, pl.DataFrame):
                value = value.to_arrow()
            if not isinstance(value, pa.Table):
                raise TypeError(
                    f"{where}: {self.name} must be an Arrow table or a Polars frame, got {type(value)}"
                )
            return check_schema(value, self.schema, f"{where}: table {self.name!r}", extra="error")
        if not isinstance(value, self.type):  # type: ignore[arg-type]
            raise TypeError(f"{where}: {self.name} must be {self.kind}, got {type(value).__name__}")
        return value


class StageContext(Protocol):
    """What a stage may use besides its inputs (given by :class:`pipeline.run.context.RunContext`)."""

    @property
    def run_dir(self) -> Path:
        """The run folder (opened on first use: created, with run.log, config.json and the MLflow run)."""
        ...

    @property
    def planned_run_dir(self) -> Path:
        """Where the run folder is or will be, without opening it (to look at what an earlier run left there)."""
        ...

    @property
    def executor(self) -> Any:
        """Where streamed steps run (:mod:`pipeline.runtime`), made on first use."""
        ...

    def log_step(self, metrics: dict[str, float], step: int) -> None:
        """Log metrics at a step now (a series in MLflow: one point per adaptive round)."""
        ...

    # Run metrics (logged to MLflow at the end) and files written into the run folder (logged as artifacts).
    metrics: dict[str, float]
    files: list[Path]
    # Whether a stage may send a request or spend anything (False under `make check`, which sends nothing).
    sends: bool


class Stage:
    """One step of a workflow: typed settings (dataclass fields), declared ports, one entry point ``run``."""

    name: ClassVar[str]
    reads: ClassVar[tuple[Port, ...]] = ()
    writes: ClassVar[tuple[Port, ...]] = ()

    def run(self, ctx: StageContext, **inputs: Any) -> dict[str, Any]:
        raise NotImplementedError

    @classmethod
    def summary(cls) -> str:
        doc = inspect.getdoc(cls) or ""
        return doc.split("\n\n")[0].replace("\n", " ")


class WorkflowError(TypeError):
    """Stages that are not wired together as declared (a programming error)."""


def check_wiring(stages: Sequence[Stage], available: dict[str, Port], where: str) -> None:
    """Each stage reads what earlier stages wrote (or ``available`` holds, or an optional port no stage writes), takes
    exactly its declared ports (each by name, or some by name and the rest as ``**inputs`` it passes on), and writes no
    other port of a name already used; then its outputs are available. ``available`` is updated."""
    absent: set[str] = set()
    names = [stage.name for stage in stages]
    if len(set(names)) != len(names):
        raise WorkflowError(f"{where}: stage names repeat: {names}")
    for stage in stages:
        for port in stage.reads:
            if port.name not in available and port.optional:
                available[port.name] = port
                absent.add(port.name)
            elif port.name not in available:
                raise WorkflowError(
                    f"{where}: stage {stage.name} reads {port.name!r}, which no earlier stage writes"
                )
            if available[port.name] != port:
                raise WorkflowError(f"{where}: stage {stage.name} reads another {port.name!r}")
        params = inspect.signature(stage.run).parameters.values()
        named = sorted(p.name for p in params if p.kind == inspect.Parameter.KEYWORD_ONLY)
        declared = sorted(p.name for p in stage.reads)
        # a run taking **inputs (passing them on) takes every declared read its named ones do not
        passes_on = any(p.kind == inspect.Parameter.VAR_KEYWORD for p in params)
        takes = set(named) <= set(declared) if passes_on else named == declared
        if not takes:
            raise WorkflowError(
                f"{where}: stage {stage.name}.run takes {named} but declares reads {declared}"
            )
        for port in stage.writes:
            if port.name in absent:
                raise WorkflowError(
                    f"{where}: stage {stage.name} writes {port.name!r}, which an earlier stage read"
                )
            if port.name in available and available[port.name] != port:
                raise WorkflowError(f"{where}: stage {stage.name} writes another {port.name!r}")
            available[port.name] = port


def run_stages(
    stages: Sequence[Stage],
    ctx: StageContext,
    values: dict[str, Any],
    persist: Callable[[Port, Any], None] | None = None,
    stop_after: str | None = None,
) -> dict[str, Any]:
    """Run ``stages`` in order on ``values`` (updated with every output, checked against its declaration, a table
    against its schema exactly); ``persist(port, value)`` for each output that has a file; each stage timed in
    ``ctx.metrics``. ``stop_after`` ends after that stage."""
    total = len(stages)
    for n, stage in enumerate(stages, start=1):
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
        for port in stage.reads:
            if port.name not in values and port.optional:  # a part this workflow leaves out
                values[port.name] = port.schema.empty_table()  # type: ignore[union-attr]
                if port.file and persist is not None:
                    persist(port, values[port.name])
        out = stage.run(ctx, **{p.name: values[p.name] for p in stage.reads})
        where = f"stage {stage.name}"
        if not isinstance(out, Mapping) or set(out) != {p.name for p in stage.writes}:
            got = sorted(out) if isinstance(out, Mapping) else type(out).__name__
            raise WorkflowError(f"{where} returned {got}, declared {sorted(p.name for p in stage.writes)}")
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


def port_json(value: Any) -> str:
    """A settled object as its file holds it: its ``describe()``, its fields, or itself."""
    if hasattr(value, "describe"):
        data = value.describe()
    elif is_dataclass(value) and not isinstance(value, type):
        data = asdict(value)
    else:
        data = value
    return json.dumps(data, indent=2, default=str)


def write_port(folder: Path, port: Port, value: Any) -> Path:
    """Write an output that has a file into ``folder``: a table to ``tables/<file>.parquet``, an object to
    ``<file>.json``; return the path."""
    import pyarrow.parquet as pq

    if port.schema is not None:
        path = folder / "tables" / f"{port.file}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(value, path)
    else:
        path = folder / f"{port.file}.json"
        path.write_text(port_json(value) + "\n")
    return path
