"""The judgment store: atomic parts, read back with the schema, judged keys for resume, the judging identity."""

from __future__ import annotations

import pytest

from pipeline.contracts.errors import ConfigError
from pipeline.contracts.schemas import JUDGMENTS, SchemaError
from pipeline.storage.parts import JudgmentParts
from tests.conftest import judgments_table

LABELS = (" A", "A", " B", "B")
IDENTITY = {"pairs": {"seed": 0}, "judge": {"model": "m", "engine": {"dtype": "float32", "seed": 0}}}


def judgments(n: int, offset: int = 0):
    table = judgments_table(n=n + offset + 1)
    return table.slice(offset, n)


def test_parts_flush_and_read_back(tmp_path):
    store = JudgmentParts(tmp_path / "j", IDENTITY, LABELS, flush_rows=5)
    store.add(judgments(3))
    assert store.parts() == []  # buffered
    store.add(judgments(3, offset=3))
    assert len(store.parts()) == 1
    store.add(judgments(1, offset=6))
    store.flush()
    assert len(store.parts()) == 2
    table = store.read()
    assert table.num_rows == 7 and table.schema.equals(JUDGMENTS)
    assert store.stored_label_words() == LABELS
    judged = store.judged()
    assert judged.column_names == ["context_id", "mode", "attribute", "template_id", "cand_a", "cand_b"]
    assert set(judged.column("mode").to_pylist()) == {"compare"}
    assert judged.num_rows == 7
    assert not list((tmp_path / "j").glob("*.tmp"))


def test_a_new_store_continues_numbering(tmp_path):
    first = JudgmentParts(tmp_path, IDENTITY, LABELS, flush_rows=1)
    first.add(judgments(2))
    second = JudgmentParts(tmp_path, IDENTITY, LABELS, flush_rows=1)
    second.check_identity()
    second.add(judgments(2, offset=2))
    assert [p.name for p in second.parts()] == ["part-000000.parquet", "part-000001.parquet"]
    assert second.read().num_rows == 4


def test_another_engine_dtype_is_refused(tmp_path):
    JudgmentParts(tmp_path, IDENTITY, LABELS, flush_rows=1).add(judgments(2))
    other = {**IDENTITY, "judge": {"model": "m", "engine": {"dtype": "bfloat16", "seed": 0}}}
    with pytest.raises(ConfigError, match=r"judge\.engine\.dtype \(\"float32\" -> \"bfloat16\"\)"):
        JudgmentParts(tmp_path, other, LABELS).check_identity()
    # an empty folder takes any identity
    JudgmentParts(tmp_path / "empty", other, LABELS).check_identity()


def test_bad_rows_are_refused(tmp_path):
    store = JudgmentParts(tmp_path, IDENTITY, LABELS)
    with pytest.raises(SchemaError, match="missing column"):
        store.add(judgments(2).drop(["logprob_a"]))
