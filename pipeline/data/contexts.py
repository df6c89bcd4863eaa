"""The one grouping of the CANDIDATES table by context, used by every stage that works per context."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class Context:
    context_id: str
    text: str
    # In candidate_index order (the input's order).
    candidate_ids: tuple[str, ...]
    texts: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.candidate_ids)


def group_by_context(candidates: pa.Table) -> list[Context]:
    """The contexts of a CANDIDATES table in input order, each with its candidates in ``candidate_index`` order."""
    columns = ("context_id", "context", "candidate_id", "candidate_index", "text")
    grouped: dict[str, tuple[str, list[tuple[int, str, str]]]] = {}
    for cid, context, cand, index, text in zip(
        *(candidates.column(c).to_pylist() for c in columns), strict=True
    ):
        grouped.setdefault(cid, (context, []))[1].append((index, cand, text))
    out = []
    for cid, (context, members) in grouped.items():
        members.sort()
        out.append(Context(cid, context, tuple(m[1] for m in members), tuple(m[2] for m in members)))
    return out
