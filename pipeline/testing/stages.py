"""The stage checks (:mod:`pipeline.testing`): a stage run on inputs the caller gives (the product's own tables,
say), then on the same inputs with every table's rows in another order."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from pipeline.stages.base import Stage
from pipeline.testing.battery import Check, fail, run_all


class Context:
    """A stage's context for the checks: a folder, the metrics and files it records, the executor if any."""

    def __init__(self, folder: Path, executor: Any = None):
        self.run_dir = self.planned_run_dir = folder
        self.metrics: dict[str, float] = {}
        self.files: list[Path] = []
        self.sends = True
        self.executor = executor

    def log_step(self, metrics: dict[str, float], step: int) -> None:
        pass


def _sorted(table: pa.Table) -> pa.Table:
    keys = [
        (name, "ascending")
        for name in table.column_names
        if not pa.types.is_nested(table.schema.field(name).type)
    ]
    return table.sort_by(keys) if keys else table


def stage_checks(stage: Stage, inputs: Mapping[str, Any], folder: Path, seed: int = 0) -> list[Check]:
    """The checks of a stage (module docstring), each ``check(stage)``; ``inputs``: every port it reads, by name;
    ``folder``: where it may write."""
    reads = {p.name: p for p in stage.reads}
    missing = sorted(set(reads) - set(inputs))
    if missing:
        raise ValueError(f"stage {stage.name} reads {missing}, which the inputs lack")

    def run(s: Stage, values: Mapping[str, Any]) -> Mapping[str, Any]:
        return s.run(Context(folder), **{name: values[name] for name in reads})

    def declared(s: Stage) -> None:
        out = run(s, inputs)
        if not isinstance(out, Mapping) or set(out) != {p.name for p in s.writes}:
            got = sorted(out) if isinstance(out, Mapping) else type(out).__name__
            fail(
                f"stage {s.name}", "declared", f"it returned {got}, and declares {[p.name for p in s.writes]}"
            )
        for port in s.writes:
            port.check(out[port.name], f"stage {s.name}")  # the port's schema, exactly

    def row_order(s: Stage) -> None:
        rng = np.random.default_rng(seed)

        def reorder(how: str) -> dict[str, Any]:
            out = {}
            for name, value in inputs.items():
                if isinstance(value, pa.Table):
                    rows = (
                        np.arange(value.num_rows)[::-1]
                        if how == "reversed"
                        else rng.permutation(value.num_rows)
                    )
                    value = value.take(pa.array(rows))
                out[name] = value
            return out

        a = run(s, inputs)
        where = f"stage {s.name}"
        for how in ("reversed", "shuffled"):
            b = run(s, reorder(how))
            for port in s.writes:
                if port.schema is None:
                    continue
                x, y = _sorted(port.check(a[port.name], where)), _sorted(port.check(b[port.name], where))
                if not x.equals(y):
                    fail(
                        where,
                        "row order (its input tables' rows in another order)",
                        f"{port.name} differs ({how})",
                    )

    return [("declared", declared), ("row_order", row_order)]


def check_stage(stage: Stage, inputs: Mapping[str, Any], folder: Path) -> None:
    """Every stage check on ``stage`` with ``inputs``; :class:`pipeline.testing.ConformanceError` naming each failed."""
    run_all(f"stage {stage.name}", stage_checks(stage, inputs, folder), stage)
