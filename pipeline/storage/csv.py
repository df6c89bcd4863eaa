"""Every CSV the project writes, and its reading back: each text cell that a spreadsheet would read as a formula
(it starts with ``= + - @``, a tab or a carriage return) is written after an apostrophe (OWASP's neutralisation of CSV
injection), ids and names as much as free text, so that opening a run's CSVs runs nothing. A cell that starts with an
apostrophe gets one more, so that reading back (:func:`read_csv`) removes exactly one and gives every value as it was.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "'")


def neutralised(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with every text cell that starts like a formula (or with an apostrophe) after an apostrophe."""
    texts = [name for name, dtype in frame.schema.items() if dtype == pl.String]
    return frame.with_columns(
        pl.when(pl.any_horizontal([pl.col(c).str.starts_with(p) for p in FORMULA_START]))
        .then(pl.lit("'") + pl.col(c))
        .otherwise(pl.col(c))
        .alias(c)
        for c in texts
    )


def write_csv(frame: pl.DataFrame, path: Path) -> Path:
    """``frame`` neutralised, written whole or not at all (a temporary file renamed over ``path``)."""
    tmp = path.with_name(path.name + ".tmp")
    neutralised(frame).write_csv(tmp)
    tmp.replace(path)
    return path


def read_csv(path: Path, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """A CSV written by :func:`write_csv`, every column as text with its neutralising apostrophe removed, then the
    columns of ``schema`` cast to their types (a value that is not one is null); ids stay text (``007`` is not 7)."""
    if not path.stat().st_size:  # written from no rows and no columns
        return pl.DataFrame()
    frame = pl.read_csv(path, infer_schema=False)
    return frame.with_columns(
        pl.when(pl.col(c).str.starts_with("'")).then(pl.col(c).str.slice(1)).otherwise(pl.col(c)).alias(c)
        for c in frame.columns
    ).with_columns(pl.col(c).cast(t, strict=False) for c, t in schema.items() if c in frame.columns)
