"""What every stage is: a :class:`Stage` (typed settings, the :class:`Port` s it reads and writes, one entry point
``run``) and the :class:`StageContext` it runs in.

A :class:`Stage` is a frozen dataclass: its fields are its typed settings, ``reads`` and ``writes`` declare the
:class:`Port` s it consumes and produces (Arrow tables with the schemas of :mod:`pipeline.contracts.schemas`, or
settled objects), and ``run(ctx, **inputs)`` is its one entry point, called with one keyword argument per port it
reads. How stages are wired into a workflow and run is :mod:`pipeline.workflows.core`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import polars as pl
import pyarrow as pa

from pipeline.contracts.schemas import check_schema


@dataclass(frozen=True)
class Port:
    """A named value passed between stages: an Arrow table (``schema``) or a settled object (``type``)."""

    name: str
    doc: str
    schema: pa.Schema | None = None
    type: type | tuple[type, ...] | None = None
    # Written to the run folder: ``tables/<file>.parquet`` for a table, ``<file>.json`` for an object.
    file: str | None = None

    def __post_init__(self) -> None:
        if (self.schema is None) == (self.type is None):
            raise TypeError(f"port {self.name!r} needs exactly one of schema (a table) or type (an object)")

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
    """What a stage may use besides its inputs (given by :class:`pipeline.run.RunContext`)."""

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
