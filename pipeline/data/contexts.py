"""The one grouping of the CANDIDATES table by context, used by every stage that works per context.

A context's candidates are in the order of their content keys (:mod:`pipeline.contracts.keys`; the input's order
breaks ties between equal texts), and the context carries its own content key: what is drawn at random per context
(a partial design's pairs, the adaptive rounds) is the same whatever the ids are called and however the input's
rows are ordered.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from pipeline.contracts.keys import content_key, context_key


@dataclass(frozen=True)
class Context:
    context_id: str
    text: str
    # In the order of their content keys (ties: the input's order).
    candidate_ids: tuple[str, ...]
    texts: tuple[str, ...]
    # Its checklist's items (none: empty).
    checklist: tuple[str, ...] = ()

    @property
    def size(self) -> int:
        return len(self.candidate_ids)

    @property
    def key(self) -> int:
        """The context's content key (its text and its candidates' texts): what seeds its randomness."""
        return context_key(self.text, self.texts)


def group_by_context(candidates: pa.Table) -> list[Context]:
    """The contexts of a CANDIDATES table in input order, each with its candidates in content-key order, and its
    checklist (none from a run folder's candidates written before the column existed, as the review reads them)."""
    columns = ("context_id", "context", "candidate_id", "candidate_index", "text")
    checklists = (
        candidates.column("checklist").to_pylist()
        if "checklist" in candidates.column_names
        else [None] * candidates.num_rows
    )
    grouped: dict[str, tuple[str, tuple[str, ...], list[tuple[int, int, str, str]]]] = {}
    for cid, context, cand, index, text, checklist in zip(
        *(candidates.column(c).to_pylist() for c in columns), checklists, strict=True
    ):
        entry = grouped.setdefault(cid, (context, tuple(checklist or ()), []))
        entry[2].append((content_key(text), index, cand, text))
    out = []
    for cid, (context, checklist, members) in grouped.items():
        members.sort()
        out.append(
            Context(cid, context, tuple(m[2] for m in members), tuple(m[3] for m in members), checklist)
        )
    return out
