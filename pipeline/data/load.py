"""Read a data set's rows: JSONL, CSV, TSV, Parquet, or a Hugging Face ``datasets`` folder (``save_to_disk``: its
Arrow shards, read here, nothing downloaded), one file or a folder of split files.

A context record is ``{"context_id", "context", "candidates": [{"candidate_id", "system", "text", "scores": {...}}]}``
(the layout of ``../shared/datasets``, one context per row); a flat table (one row per candidate, or one row per pair)
is made into such records by :mod:`pipeline.data.tables`. Records keep their location (file and line/row) so
validation errors can point at them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.contracts.errors import ConfigError, InputError, Problem


@dataclass(frozen=True)
class Record:
    """One input record as read (``data``: its fields) and where (``location``: the file and its line or row, as
    every problem with it is reported)."""

    location: str
    data: Any


@dataclass(frozen=True)
class DatasetMeta:
    """A data folder's ``meta.json``: the attributes its human scores rate and the nouns its texts are called by."""

    attributes: tuple[str, ...] = ()
    context_noun: str | None = None
    candidate_noun: str | None = None


def split_of(file: Path) -> str:
    """A data file's split: its name after the first ``-`` (``judgebench-gpt.jsonl``: ``gpt``;
    ``llmbar-adversarial-neighbor.jsonl``: ``adversarial-neighbor``), its whole name without one."""
    stem = file.stem
    return stem.split("-", 1)[1] if "-" in stem else stem


# The files read as data (a Hugging Face ``save_to_disk`` folder's Arrow shards are read as its folder).
SUFFIXES = (".jsonl", ".json", ".csv", ".tsv", ".parquet")
KINDS = "a .jsonl, .csv, .tsv or .parquet file, a folder of them, or a Hugging Face datasets folder (save_to_disk)"


def existing(path: Path) -> Path:
    """``path``, or a :class:`ConfigError` naming ``dataset.path`` where nothing is there."""
    if not path.exists():
        raise ConfigError(f"config dataset.path={path} does not exist: give {KINDS}")
    return path


def data_files(path: Path, splits: Sequence[str] | None = None) -> list[Path]:
    """The data files at ``path``: one file, the data files of a folder, or a Hugging Face folder's splits (a
    ``DatasetDict``'s split folders, or one ``Dataset``: the folder itself): every one, or those of ``splits`` (a
    split names a file's split, or begins several: ``adversarial`` reads every ``adversarial-*`` split), in the order
    of the folder's names."""
    existing(path)
    if path.is_dir():
        if (path / "dataset_dict.json").exists():  # a DatasetDict: one folder per split, named by it
            files = sorted(p for p in path.iterdir() if (p / "state.json").exists())
        elif (path / "state.json").exists():
            files = [path]
        else:
            files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES)
        if not files:
            raise ConfigError(f"config dataset.path={path}: the folder holds no data; give {KINDS}")
        return files if splits is None else chosen_splits(path, files, splits)
    if path.suffix not in SUFFIXES:
        raise ConfigError(f"config dataset.path={path}: expected {KINDS}")
    if splits is not None:
        raise ConfigError(
            f"config dataset.splits={list(splits)} chooses among the files of a folder, and dataset.path={path} is "
            "one file: point dataset.path at the folder, or remove dataset.splits"
        )
    return [path]


def chosen_splits(folder: Path, files: list[Path], splits: Sequence[str]) -> list[Path]:
    """The files of ``folder`` whose split is one of ``splits`` or begins with one (``<split>-``)."""
    if not splits:
        raise ConfigError(f"config dataset.splits is empty: name one or more of {_split_names(files)}")
    unknown = [
        s for s in splits if not any(split_of(f) == s or split_of(f).startswith(f"{s}-") for f in files)
    ]
    if unknown:
        raise ConfigError(
            f"config dataset.splits: no split {unknown} in {folder} (its splits: {_split_names(files)}; a name "
            "that begins several, e.g. the part before their '-', reads them all)"
        )
    return [f for f in files if any(split_of(f) == s or split_of(f).startswith(f"{s}-") for s in splits)]


def _split_names(files: list[Path]) -> str:
    return ", ".join(split_of(f) for f in files)


def read_rows(path: Path, limit: int | None = None, splits: Sequence[str] | None = None) -> Iterator[Record]:
    """Yield the rows at ``path`` (of ``splits``, for a folder) in file order, at most ``limit``, each as a record of
    its fields."""
    count = 0
    for file in data_files(path, splits):
        for record in file_rows(file):
            if limit is not None and count >= limit:
                return
            count += 1
            yield record


def file_rows(file: Path) -> Iterator[Record]:
    """The rows of one data file (or Hugging Face split folder)."""
    if file.is_dir():
        return _read_arrow(file)
    if file.suffix in (".csv", ".tsv"):
        return _read_csv(file)
    return _read_parquet(file) if file.suffix == ".parquet" else _read_jsonl(file)


def _read_csv(file: Path) -> Iterator[Record]:
    import polars as pl

    try:
        frame = pl.read_csv(file, separator="\t" if file.suffix == ".tsv" else ",", infer_schema_length=10_000,
                            encoding="utf8-lossy")  # fmt: skip
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError) as exc:
        raise InputError(
            [Problem(None, None, None, f"is not a readable table ({str(exc)[:200]})", location=file.name)]
        ) from None
    for row, data in enumerate(frame.iter_rows(named=True), start=2):  # row 1 is the header
        yield Record(f"{file.name} row {row}", data)


def _read_arrow(folder: Path) -> Iterator[Record]:
    """A Hugging Face ``save_to_disk`` folder: its Arrow stream shards, in the order its state.json lists them."""
    import pyarrow as pa

    state = json.loads((folder / "state.json").read_text())
    shards = [folder / f["filename"] for f in state.get("_data_files", [])] or sorted(folder.glob("*.arrow"))
    row = 0
    for shard in shards:
        with pa.memory_map(str(shard)) as source:
            for batch in pa.ipc.open_stream(source):
                for data in batch.to_pylist():
                    row += 1
                    yield Record(f"{folder.name} row {row}", data)


def _read_jsonl(file: Path) -> Iterator[Record]:
    # utf-8-sig: a byte-order mark at the start (what spreadsheet tools on Windows write) is not data;
    # universal newlines read CRLF line ends as plain line ends.
    with file.open(encoding="utf-8-sig") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except (json.JSONDecodeError, RecursionError) as exc:
                msg = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
                raise InputError(
                    [
                        Problem(
                            None,
                            None,
                            None,
                            f"is not valid JSON ({msg})",
                            location=f"{file.name} line {lineno}",
                        )
                    ]
                ) from exc
            yield Record(f"{file.name} line {lineno}", data)


def _read_parquet(file: Path) -> Iterator[Record]:
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(file)
    row = 0
    for batch in pf.iter_batches(batch_size=1024):
        for data in batch.to_pylist():
            row += 1
            yield Record(f"{file.name} row {row}", data)


def read_meta(path: Path | None) -> DatasetMeta:
    """Read meta.json (attributes, nouns) if it exists; an absent file gives empty metadata."""
    if path is None or not path.exists():
        return DatasetMeta()
    try:
        meta = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise InputError(
            [Problem(None, None, None, f"is not valid JSON ({exc.msg})", location=str(path))]
        ) from exc
    if not isinstance(meta, dict):
        raise InputError([Problem(None, None, None, "is not a JSON object", location=str(path))])
    attributes = meta.get("attributes", [])
    if not isinstance(attributes, list) or not all(isinstance(a, str) and a for a in attributes):
        raise InputError(
            [Problem(None, None, "attributes", f"not a list of names: {attributes!r}", location=str(path))]
        )
    nouns = {}
    for key in ("context_noun", "candidate_noun"):
        value = meta.get(key)
        if value is not None and not (isinstance(value, str) and value.strip()):
            raise InputError([Problem(None, None, key, f"not a word: {value!r}", location=str(path))])
        nouns[key] = value
    return DatasetMeta(attributes=tuple(attributes), **nouns)


def default_meta_path(path: Path) -> Path:
    return (path if path.is_dir() else path.parent) / "meta.json"
