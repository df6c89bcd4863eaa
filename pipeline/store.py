"""The judgments on disk: Parquet parts written as results arrive, read back for resume and for the reduce.

Each part is written to a temporary name and renamed, so a crash never leaves a half-written part; a rerun
in the same folder skips every comparison already on disk (nothing judged twice, nothing lost but the rows
not yet flushed).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.pairs import done_key
from pipeline.schemas import JUDGMENTS, check_schema

log = logging.getLogger(__name__)


class JudgmentStore:
    def __init__(
        self, folder: Path, label_words: tuple[str, ...], flush_rows: int = 2048, flush_seconds: float = 30.0
    ):
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.schema = JUDGMENTS.with_metadata({"label_words": "\x1f".join(label_words)})
        self.flush_rows = flush_rows
        self.flush_seconds = flush_seconds
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self._last_flush = time.monotonic()
        self._next = len(self.parts())

    def parts(self) -> list[Path]:
        return sorted(self.folder.glob("part-*.parquet"))

    def done_keys(self) -> dict[str, list[str]]:
        """context id -> keys of the comparisons already judged (for the pair stage to skip)."""
        done: dict[str, list[str]] = {}
        parts = self.parts()
        if not parts:
            return done
        cols = ["context_id", "attribute", "template_id", "cand_a", "cand_b"]
        table = pq.read_table(parts, columns=cols)
        for cid, attribute, template_id, a, b in zip(
            *(table.column(c).to_pylist() for c in cols), strict=True
        ):
            done.setdefault(cid, []).append(done_key(attribute, template_id, a, b))
        return done

    def add(self, batch: pa.Table) -> None:
        self._buffer.append(check_schema(batch, JUDGMENTS, "judgments written to disk"))
        self._buffered += batch.num_rows
        if self._buffered >= self.flush_rows or time.monotonic() - self._last_flush >= self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        if not self._buffer:
            return
        table = pa.concat_tables(self._buffer).replace_schema_metadata(self.schema.metadata)
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
        return check_schema(pq.read_table(parts), JUDGMENTS, "judgments read from disk")

    def label_words(self) -> tuple[str, ...] | None:
        parts = self.parts()
        if not parts:
            return None
        meta = pq.read_schema(parts[0]).metadata or {}
        raw = meta.get(b"label_words")
        return tuple(raw.decode().split("\x1f")) if raw else None
