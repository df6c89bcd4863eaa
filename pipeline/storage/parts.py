"""The judgments and ratings on disk: Parquet parts written as results arrive, read back for resume and the reduce.

Each part is written to a temporary name and renamed, so a crash never leaves a half-written part; a rerun
in the same folder skips every comparison already on disk (nothing judged twice, nothing lost but the rows
not yet flushed). Every part carries the judging identity it was made with (the dataset, pair and prompt
settings and the judge with its engine and dtype): a folder is only resumed with the same identity.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.config.derived import flatten
from pipeline.contracts.errors import ConfigError
from pipeline.contracts.keys import COMPARE, JUDGMENT_KEY
from pipeline.contracts.schemas import JUDGED_KEYS, JUDGMENTS, RATINGS, REASONING_FIELDS, check_schema

IDENTITY_KEY = b"judging_identity"
LABELS_KEY = b"label_words"


def identity_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """``key (old -> new)`` for every setting that differs between two identities."""
    flat_old = {k: json.dumps(v, sort_keys=True, default=str) for k, v in flatten(old).items()}
    flat_new = {k: json.dumps(v, sort_keys=True, default=str) for k, v in flatten(new).items()}
    keys = sorted(flat_old.keys() | flat_new.keys())
    return [
        f"{k} ({flat_old.get(k, 'unset')} -> {flat_new.get(k, 'unset')})"
        for k in keys
        if flat_old.get(k) != flat_new.get(k)
    ]


class NonFiniteError(ValueError):
    """A value that is not a finite number reached a store (nothing upstream may write a NaN judgment or rating)."""


def check_finite(table: pa.Table, columns: tuple[str, ...], key: tuple[str, ...], what: str) -> None:
    """Refuse a row whose float ``columns`` (or lists of floats) hold a NaN or an infinity (nulls are allowed),
    naming its prompt by ``key`` and the field."""
    import numpy as np
    import pyarrow.compute as pc

    for column in columns:
        values = table.column(column)
        if pa.types.is_list(values.type):
            flat = pc.list_flatten(values)
            rows = np.asarray(pc.list_parent_indices(values))
        else:
            flat, rows = values, np.arange(table.num_rows)
        data = np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(data) & np.asarray(pc.is_valid(flat)))
        if bad.size:
            row = table.slice(int(rows[bad[0]]), 1).to_pylist()[0]
            named = ", ".join(f"{k} {row[k]!r}" for k in key)
            raise NonFiniteError(
                f"{what}: {column} holds {data[bad[0]]!r}, not a finite number, for {named}; the prompt is not "
                "stored (a rerun judges it again)"
            )


class PartStore:
    """Parquet parts of one table (``schema``) in ``folder``, each carrying the judging identity it was made with.
    Rows whose ``finite`` columns hold a NaN or an infinity are refused (:func:`check_finite`)."""

    # What the parts hold, for messages.
    what = "judgments"
    # The float columns that must be finite, and the columns that name a row's prompt.
    finite: tuple[str, ...] = ()
    key: tuple[str, ...] = ()

    def __init__(
        self,
        folder: Path,
        identity: dict[str, Any],
        schema: pa.Schema,
        metadata: dict[bytes, bytes] | None = None,
        flush_rows: int = 2048,
        flush_seconds: float = 30.0,
    ):
        self.folder = folder
        self.schema = schema
        self.identity = json.loads(json.dumps(identity, sort_keys=True, default=str))
        self.metadata = {IDENTITY_KEY: json.dumps(self.identity, sort_keys=True).encode(), **(metadata or {})}
        self.flush_rows = flush_rows
        self.flush_seconds = flush_seconds
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self._last_flush = time.monotonic()
        self._next = len(self.parts())

    def parts(self) -> list[Path]:
        return sorted(self.folder.glob("part-*.parquet")) if self.folder.exists() else []

    def check_identity(self) -> None:
        """Refuse a folder whose parts were made with another judging identity (ConfigError naming what differs)."""
        parts = self.parts()
        if not parts:
            return
        meta = pq.read_schema(parts[0]).metadata or {}
        if IDENTITY_KEY not in meta:
            raise ConfigError(
                f"{self.folder} holds {self.what} without a judging identity (written by an older version); "
                "use a new paths.run_dir"
            )
        old = json.loads(meta[IDENTITY_KEY])
        differ = identity_differences(old, self.identity)
        if differ:
            raise ConfigError(
                f"paths.run_dir: {self.folder.parent} holds {self.what} made with a different judging "
                "configuration: "
                + "; ".join(differ[:8])
                + (f"; and {len(differ) - 8} more" if len(differ) > 8 else "")
                + ". Use a new paths.run_dir, or the same settings to resume"
            )

    def add(self, batch: pa.Table) -> None:
        if not batch.num_rows:
            return
        checked = check_schema(batch, self.schema, f"{self.what} written to disk")
        check_finite(checked, self.finite, self.key, f"{self.what} written to {self.folder}")
        self._buffer.append(checked)
        self._buffered += batch.num_rows
        if self._buffered >= self.flush_rows or time.monotonic() - self._last_flush >= self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        if not self._buffer:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        table = pa.concat_tables(self._buffer).replace_schema_metadata(self.metadata)
        path = self.folder / f"part-{self._next:06d}.parquet"
        tmp = path.with_suffix(".tmp")
        pq.write_table(table, tmp)
        tmp.replace(path)
        self._next += 1
        self._buffer, self._buffered = [], 0
        self._last_flush = time.monotonic()

    def read(self) -> pa.Table:
        parts = self.parts()
        if not parts:
            return self.schema.empty_table()
        tables = [with_reasoning_columns(pq.read_table(part)) for part in parts]
        return check_schema(
            pa.concat_tables(tables, promote_options="permissive"), self.schema, f"{self.what} read from disk"
        )


def with_reasoning_columns(table: pa.Table) -> pa.Table:
    """A part written before the reasoning columns existed, with them null (no reasoning was asked then)."""
    for f in REASONING_FIELDS:
        if f.name not in table.column_names:
            table = table.append_column(f, pa.nulls(table.num_rows, f.type))
    return table


class JudgmentParts(PartStore):
    """The comparisons: JUDGMENTS parts in ``<run>/judgments``, with the label words in their metadata."""

    what = "judgments"
    finite = ("label_logprobs", "logprob_a", "logprob_b", "p_a", "p_tie", "label_mass")
    key = JUDGMENT_KEY

    def __init__(self, folder: Path, identity: dict[str, Any], label_words: tuple[str, ...], **kwargs: Any):
        self.label_words = tuple(label_words)
        metadata = {LABELS_KEY: "\x1f".join(self.label_words).encode()}
        super().__init__(folder, identity, JUDGMENTS, metadata, **kwargs)

    def judged(self) -> pa.Table:
        """JUDGED_KEYS of the comparisons already on disk (what a resumed run skips)."""
        parts = self.parts()
        if not parts:
            return JUDGED_KEYS.empty_table()
        keys = pq.read_table(parts, columns=["context_id", "attribute", "template_id", "cand_a", "cand_b"])
        keys = keys.append_column("mode", pa.array([COMPARE] * keys.num_rows, pa.string()))
        return check_schema(keys, JUDGED_KEYS, "judged comparisons on disk")

    def stored_label_words(self) -> tuple[str, ...] | None:
        parts = self.parts()
        if not parts:
            return None
        raw = (pq.read_schema(parts[0]).metadata or {}).get(LABELS_KEY)
        return tuple(raw.decode().split("\x1f")) if raw else None


class RatingParts(PartStore):
    """The absolute ratings: RATINGS parts in ``<run>/ratings``."""

    what = "ratings"
    finite = ("score", "token_logprobs", "label_mass")
    key = ("context_id", "candidate_id", "attribute", "template_id", "mode", "judge")

    def __init__(self, folder: Path, identity: dict[str, Any], **kwargs: Any):
        super().__init__(folder, identity, RATINGS, **kwargs)

    def judged(self) -> pa.Table:
        """JUDGED_KEYS of the ratings on disk (an absolute prompt: its candidate in cand_a, cand_b empty)."""
        parts = self.parts()
        if not parts:
            return JUDGED_KEYS.empty_table()
        keys = pq.read_table(
            parts, columns=["context_id", "mode", "attribute", "template_id", "candidate_id"]
        )
        keys = keys.rename_columns(["context_id", "mode", "attribute", "template_id", "cand_a"])
        keys = keys.append_column("cand_b", pa.array([""] * keys.num_rows, pa.string()))
        return check_schema(keys, JUDGED_KEYS, "judged ratings on disk")
