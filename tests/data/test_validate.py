"""Input validation: every bad input named by context, candidate and field, before judging; handlings counted."""

from __future__ import annotations

import json

import pytest

from pipeline.contracts.errors import ConfigError, InputError
from pipeline.data.load import Record, read_meta
from pipeline.data.records import ValidationRules, validate_records
from pipeline.data.tables import read_records

RULES = ValidationRules(attributes=("coherence",))


def ctx(cid="c1", context="A passage.", cands=None):
    if cands is None:
        cands = [cand("x", "first text", 3.0), cand("y", "second text", 4.0)]
    return {"context_id": cid, "context": context, "candidates": cands}


def cand(cid, text, score=1.0, attribute="coherence"):
    return {"candidate_id": cid, "text": text, "scores": {attribute: score}}


def run(records, rules=RULES):
    return validate_records([Record(f"line {n}", r) for n, r in enumerate(records, 1)], rules)


def problems(records, rules=RULES):
    with pytest.raises(InputError) as info:
        run(records, rules)
    return [str(p) for p in info.value.problems], str(info.value)


def test_valid_input_becomes_tables():
    out = run([ctx("c1"), ctx("c2")])
    assert out.candidates.num_rows == 4
    assert out.candidates.column("candidate_index").to_pylist() == [0, 1, 0, 1]
    assert out.human_scores.column("human_score").to_pylist() == [3.0, 4.0, 3.0, 4.0]
    assert out.report.n_contexts == 2 and out.report.n_candidates == 4


def test_empty_text_is_named():
    listed, message = problems([ctx("c1", cands=[cand("x", "  "), cand("y", "ok"), cand("z", "fine")])])
    assert listed == [listed[0]]
    assert "context 'c1'" in message and "candidate 'x'" in message and "field 'text'" in message


def test_missing_text_is_named():
    bad = {"candidate_id": "x", "scores": {"coherence": 1}}
    listed, _ = problems([ctx("c1", cands=[bad, cand("y", "ok"), cand("z", "ok")])])
    assert "candidate 'x'" in listed[0] and "field 'text'" in listed[0]


def test_empty_text_placeholder_and_drop_are_counted():
    records = [ctx("c1", cands=[cand("x", "null"), cand("y", "ok"), cand("z", "fine")])]
    rules = ValidationRules(attributes=("coherence",), empty_text="placeholder", empty_markers=("null",))
    out = run(records, rules)
    assert out.report.empty_text_replaced == ["c1/x"]
    assert out.candidates.column("text").to_pylist()[0] == "(no text)"
    rules = ValidationRules(attributes=("coherence",), empty_text="drop", empty_markers=("null",))
    out = run(records, rules)
    assert out.report.empty_text_dropped == ["c1/x"]
    assert out.candidates.column("candidate_id").to_pylist() == ["y", "z"]


def test_duplicate_candidate_ids():
    listed, _ = problems([ctx("c1", cands=[cand("x", "a"), cand("x", "b"), cand("y", "c")])])
    assert any("candidate 'x'" in p and "duplicate" in p for p in listed)


def test_duplicate_context_ids():
    listed, _ = problems([ctx("c1"), ctx("c1")])
    assert any("context 'c1'" in p and "duplicate context id" in p for p in listed)


def test_context_with_fewer_than_two_candidates():
    listed, _ = problems([ctx("c1", cands=[cand("x", "only one")])])
    assert any("context 'c1'" in p and "at least 2" in p for p in listed)


def test_dropping_below_two_candidates_is_an_error():
    rules = ValidationRules(attributes=("coherence",), empty_text="drop")
    listed, _ = problems([ctx("c1", cands=[cand("x", ""), cand("y", "ok")])], rules)
    assert any("1 usable candidate" in p for p in listed)


def test_non_numeric_score_is_named():
    listed, _ = problems([ctx("c1", cands=[cand("x", "a", "high"), cand("y", "b", 2.0)])])
    assert listed == ["context 'c1', candidate 'x', field 'scores.coherence': not a finite number: 'high'"]


# an integer beyond a float (JSON allows it) is named as the others are, not an OverflowError
@pytest.mark.parametrize("value", [float("nan"), True, [1], 10**400])
def test_other_bad_scores(value):
    listed, _ = problems([ctx("c1", cands=[cand("x", "a", value), cand("y", "b", 2.0)])])
    assert "scores.coherence" in listed[0]


def test_missing_scores_required_vs_auto():
    records = [ctx("c1", cands=[cand("x", "a", 1.0, "fluency"), cand("y", "b", 2.0, "fluency")])]
    rules = ValidationRules(attributes=("coherence",), correlation="required")
    listed, _ = problems(records, rules)
    assert "scores.coherence" in listed[0] and "scoring.correlation=auto" in listed[0]
    out = run(records, ValidationRules(attributes=("coherence",), correlation="auto"))
    assert out.report.attributes_without_scores == ["coherence"]
    assert out.report.missing_scores == {"coherence": 2}
    assert out.human_scores.num_rows == 0


def test_correlation_off_ignores_scores():
    records = [ctx("c1", cands=[cand("x", "a", "bad"), cand("y", "b", "worse")])]
    out = run(records, ValidationRules(attributes=("coherence",), correlation="off"))
    assert out.human_scores.num_rows == 0


def test_empty_context_needs_permission():
    listed, _ = problems([ctx("c1", context="")])
    assert "field 'context'" in listed[0]
    out = run([ctx("c1", context="")], ValidationRules(attributes=("coherence",), allow_empty_context=True))
    assert out.candidates.num_rows == 2


def test_all_problems_listed_together():
    records = [
        ctx("c1", cands=[cand("x", "")]),
        ctx("c2", cands=[cand("y", "a", "bad"), cand("z", "b")]),
    ]
    listed, message = problems(records)
    assert len(listed) == 3
    assert message.startswith("3 problem(s) in the input")


def test_max_candidates_keeps_the_first():
    cands = [cand(f"c{n}", f"text {n}") for n in range(5)]
    out = run([ctx("c1", cands=cands)], ValidationRules(attributes=("coherence",), max_candidates=3))
    assert out.candidates.column("candidate_id").to_pylist() == ["c0", "c1", "c2"]


def test_jsonl_errors_point_at_the_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(ctx("c1")) + "\n{not json\n")
    with pytest.raises(InputError, match="d.jsonl line 2"):
        list(read_records(path))


def test_parquet_with_the_same_layout(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    records = [ctx("c1"), ctx("c2")]
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "d.parquet")
    out = validate_records(read_records(tmp_path / "d.parquet"), RULES)
    assert out.candidates.num_rows == 4
    assert out.human_scores.column("human_score").to_pylist() == [3.0, 4.0, 3.0, 4.0]


def test_limit_reads_only_the_first_contexts(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(ctx(f"c{n}")) + "\n" for n in range(5)))
    assert [r.data["context_id"] for r in read_records(path, limit=2)] == ["c0", "c1"]


def test_shared_datasets_validate(datasets):
    """The three shared sets pass validation with their configs' handling (WebNLG: placeholders, counted)."""
    out = validate_records(
        read_records(datasets / "summeval" / "summeval.jsonl"),
        ValidationRules(
            attributes=("coherence", "consistency", "fluency", "relevance"), correlation="required"
        ),
    )
    assert (out.report.n_contexts, out.report.n_candidates) == (100, 1600)
    out = validate_records(
        read_records(datasets / "topicalchat" / "topicalchat.jsonl"),
        ValidationRules(attributes=("understandability", "coherence"), correlation="required"),
    )
    assert (out.report.n_contexts, out.report.n_candidates) == (60, 360)
    with pytest.raises(InputError, match="field 'text'"):
        validate_records(
            read_records(datasets / "webnlg2017" / "webnlg2017.jsonl"),
            ValidationRules(attributes=("fluency",), empty_markers=("null",)),
        )
    out = validate_records(
        read_records(datasets / "webnlg2017" / "webnlg2017.jsonl"),
        ValidationRules(attributes=("fluency",), empty_text="placeholder", empty_markers=("null",)),
    )
    assert len(out.report.empty_text_replaced) == 193
    assert out.report.n_candidates == 2230


def test_a_byte_order_mark_and_crlf_line_ends_are_read(tmp_path):
    # what spreadsheet tools on Windows write: UTF-8 with a BOM, lines ending in \r\n
    path = tmp_path / "excel.jsonl"
    body = "\r\n".join(json.dumps(ctx(f"c{n}", context="Le café ☕")) for n in range(2)) + "\r\n"
    path.write_bytes(b"\xef\xbb\xbf" + body.encode("utf-8"))
    out = validate_records(read_records(path), RULES)
    assert out.candidates.column("context_id").to_pylist() == ["c0", "c0", "c1", "c1"]
    assert out.candidates.column("context").to_pylist()[0] == "Le café ☕"
    meta = tmp_path / "meta.json"
    meta.write_bytes(b"\xef\xbb\xbf" + json.dumps({"attributes": ["coherence"]}).encode())
    assert read_meta(meta).attributes == ("coherence",)


def test_a_bad_meta_file_is_named(tmp_path):
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"attributes": "coherence"}))
    with pytest.raises(InputError, match="field 'attributes': not a list of names"):
        read_meta(meta)
    meta.write_text("{oops")
    with pytest.raises(InputError, match="meta.json: is not valid JSON"):
        read_meta(meta)


def test_a_missing_dataset_path_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match="config dataset.path=.*does not exist"):
        list(read_records(tmp_path / "nope.jsonl"))
