"""Open a finished run's folder: its config and every table it wrote, as Polars frames (for notebooks and scripts)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl


@dataclass(frozen=True)
class RunTables:
    """A finished run: its folder, its config, and each table of ``tables/`` by name as an attribute
    (``run.scores``, ``run.judge_card``, ``run.accepted``...): an empty frame for a table the run did not write (an
    absolute-only run's comparisons, an older run's newer tables); :meth:`names` lists those it wrote."""

    run_dir: Path
    config: dict

    @classmethod
    def open(cls, run_dir: Path) -> RunTables:
        """The run in ``run_dir``."""
        return cls(Path(run_dir), json.loads((Path(run_dir) / "config.json").read_text()))

    def names(self) -> list[str]:
        return sorted(p.stem for p in (self.run_dir / "tables").glob("*.parquet"))

    def __getattr__(self, name: str) -> pl.DataFrame:
        if name.startswith("_"):
            raise AttributeError(name)
        path = self.run_dir / "tables" / f"{name}.parquet"
        return pl.read_parquet(path) if path.exists() else pl.DataFrame()


def load_run(run_dir: Path) -> RunTables:
    return RunTables.open(run_dir)
