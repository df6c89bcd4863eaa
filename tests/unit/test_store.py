"""The judgment store: atomic parts, read back with the schema, done keys for resume."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipeline.schemas import JUDGMENTS, SchemaError
from pipeline.store import JudgmentStore


def judgments(n: int, offset: int = 0) -> pa.Table:
    return pa.table(
        {
            "context_id": ["c"] * n,
            "attribute": ["coherence"] * n,
            "template_id": ["c1"] * n,
            "cand_a": [f"a{k + offset}" for k in range(n)],
            "cand_b": ["b"] * n,
            "judge": ["j"] * n,
            "label_logprobs": [[-0.5, -3.0, -1.0, -4.0]] * n,
            "logprob_a": [-0.4] * n,
            "logprob_b": [-0.9] * n,
            "top_token": [" A"] * n,
            "prompt_tokens": [10] * n,
            "cached_tokens": [5] * n,
            "worker": ["host:1"] * n,
        },
        schema=JUDGMENTS,
    )


def test_parts_flush_and_read_back(tmp_path):
    store = JudgmentStore(tmp_path / "j", (" A", "A", " B", "B"), flush_rows=5)
    store.add(judgments(3))
    assert store.parts() == []  # buffered
    store.add(judgments(3, offset=3))
    assert len(store.parts()) == 1
    store.add(judgments(1, offset=6))
    store.flush()
    assert len(store.parts()) == 2
    table = store.read()
    assert table.num_rows == 7 and table.schema.equals(JUDGMENTS)
    assert store.label_words() == (" A", "A", " B", "B")
    assert sorted(store.done_keys()["c"]) == sorted(f"coherence\tc1\ta{k}\tb" for k in range(7))
    assert not list((tmp_path / "j").glob("*.tmp"))


def test_a_new_store_continues_numbering(tmp_path):
    first = JudgmentStore(tmp_path, ("A", "B"), flush_rows=1)
    first.add(judgments(2))
    second = JudgmentStore(tmp_path, ("A", "B"), flush_rows=1)
    second.add(judgments(2, offset=2))
    assert [p.name for p in second.parts()] == ["part-000000.parquet", "part-000001.parquet"]
    assert second.read().num_rows == 4


def test_bad_rows_are_refused(tmp_path):
    store = JudgmentStore(tmp_path, ("A", "B"))
    with pytest.raises(SchemaError, match="missing column"):
        store.add(judgments(2).drop(["logprob_a"]))
