"""The notebook's way in: ``assess(data, overrides)`` runs the pipeline on a DataFrame (polars or pandas, in any layout
:mod:`pipeline.data.tables` reads: one row per candidate, per pair, or per context with its candidates nested) and
returns the run's tables as Polars frames. The run is the one ``make run`` makes of the same data and overrides: its
folder, its MLflow run, its summary. The frame is kept, by its content's digest, as
``<output_root>/inputs/<digest>.parquet`` (the run's ``dataset.path``), so that the run folder names what it read."""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import PROJECT_ROOT
from pipeline.run.results import RunTables


@dataclass(frozen=True)
class Assessment(RunTables):
    """A run made by :func:`assess`: every table by name (``.scores``, ``.leaderboard``, ``.judge_card``...), its
    folder, config, summary and MLflow run."""

    summary: str = ""
    mlflow_run_id: str | None = None


def frame_of(data: Any) -> pl.DataFrame:
    """``data`` as a Polars frame: a Polars or pandas DataFrame, or rows (a list of dicts)."""
    if isinstance(data, pl.DataFrame):
        return data
    if type(data).__module__.startswith("pandas"):
        return pl.from_pandas(data)
    return pl.DataFrame(data)


def assess(data: Any, overrides: Sequence[str] = (), root: Path = PROJECT_ROOT) -> Assessment:
    """Judge ``data`` as ``make run ARGS="<overrides>"`` would judge it from a file (module docstring)."""
    from pipeline.config.derived import resolve_path
    from pipeline.config.hydra import compose
    from pipeline.data.load import default_meta_path
    from pipeline.run.context import run

    frame = frame_of(data)
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    digest = hashlib.sha256(buffer.getvalue()).hexdigest()[:16]
    given = compose(list(overrides))
    folder = resolve_path(given.paths.output_root, root) / "inputs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{digest}.parquet"
    if not path.exists():
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(buffer.getvalue())
        tmp.replace(path)
    # a preset's data set (dataset=judgebench) lends the frame its meta.json: attributes, nouns
    meta = given.dataset.meta_path or (
        str(default_meta_path(resolve_path(given.dataset.path, root))) if given.dataset.path else None
    )
    named = [] if given.dataset.path else ["dataset.name=frame"]
    cfg = compose(
        [
            *named,
            *overrides,
            f"dataset.path={path}",
            "dataset.splits=null",
            *([f"dataset.meta_path={meta}"] if meta else []),
        ]
    )
    result = run(cfg, root)
    tables = RunTables.open(result.run_dir)
    return Assessment(tables.run_dir, tables.config, result.summary, result.mlflow_run_id)
