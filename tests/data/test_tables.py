"""Data as users have it (pipeline.data.tables): the same SummEval, JudgeBench and LLMBar as the shared nested JSONL,
exported as flat tables (one row per candidate, one row per pair) in CSV, TSV, Parquet, JSONL and a Hugging Face
``save_to_disk`` folder, read through the product's own loader into the same candidates and people's scores; rows
shuffled, the same; every refusal naming the row, the column and the layout expected; no person's score or vote
dropped silently."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.config.enums import Correlation
from pipeline.contracts.errors import ConfigError, InputError
from pipeline.data.source import load_input
from tests.conftest import DATASETS, ROOT, compose

SUMMEVAL = DATASETS / "summeval" / "summeval.jsonl"
ATTRS = ["coherence", "fluency"]


def load(path, *overrides, attributes=ATTRS):
    cfg = compose(["dataset.name=mine", f"dataset.path={path}", f"dataset.attributes=[{','.join(attributes)}]",
                   *overrides])  # fmt: skip
    return load_input(cfg.dataset, Correlation.auto, ROOT, ROOT / ".cache")


def nested(path, n):
    return [json.loads(line) for line in path.read_text().splitlines()[:n]]


def per_candidate(records, with_ids: bool) -> pl.DataFrame:
    """One row per candidate, as a user's export names things (prompt, model, response, a column per score)."""
    rows = [
        {**({"prompt_id": r["context_id"]} if with_ids else {}), "prompt": r["context"], "model": c["system"],
         "response": c["text"], **{a: c["scores"][a] for a in ATTRS}}
        for r in records for c in r["candidates"]
    ]  # fmt: skip
    return pl.DataFrame(rows)


def by_content(loaded) -> dict:
    """(context text, model) -> (text, people's scores): what the tables say, whatever the ids."""
    cands = pl.from_arrow(loaded.candidates)
    scores = pl.from_arrow(loaded.human_scores)
    out = {}
    for row in cands.iter_rows(named=True):
        mine = scores.filter(
            (pl.col("context_id") == row["context_id"]) & (pl.col("candidate_id") == row["candidate_id"])
        )
        out[(row["context"], row["system"])] = (
            row["text"],
            dict(mine.select("attribute", "human_score").iter_rows()),
        )
    return out


@pytest.fixture(scope="module")
def summeval():
    records = nested(SUMMEVAL, 5)
    return records, by_content(load(SUMMEVAL, "dataset.max_contexts=5"))


@pytest.mark.parametrize("kind", ["csv", "tsv", "parquet", "jsonl", "hf", "hf-dict"])
def test_a_per_candidate_export_reads_as_the_nested_file_does(tmp_path, summeval, kind):
    records, truth = summeval
    frame = per_candidate(records, with_ids=kind in ("parquet", "hf"))
    path = tmp_path / f"export.{kind}"
    if kind == "csv":
        frame.write_csv(path)
    elif kind == "tsv":
        frame.write_csv(path, separator="\t")
    elif kind == "parquet":
        frame.write_parquet(path)
    elif kind == "jsonl":
        frame.write_ndjson(path)
    else:
        import datasets

        data = datasets.Dataset.from_polars(frame)
        path = tmp_path / "hf"
        (datasets.DatasetDict({"test": data}) if kind == "hf-dict" else data).save_to_disk(str(path))
    loaded = load(path)
    assert by_content(loaded) == truth
    assert loaded.report.n_contexts == 5 and loaded.report.n_candidates == len(truth)
    if kind in ("parquet", "hf"):  # an id column: the contexts keep their ids
        assert set(pl.from_arrow(loaded.candidates)["context_id"]) == {r["context_id"] for r in records}


def test_shuffled_rows_read_as_the_same_tables(tmp_path, summeval):
    records, _ = summeval
    frame = per_candidate(records, with_ids=False)
    frame.write_csv(tmp_path / "a.csv")
    frame.sample(fraction=1.0, shuffle=True, seed=3).write_csv(tmp_path / "b.csv")
    a, b = load(tmp_path / "a.csv"), load(tmp_path / "b.csv")
    key = ["context_id", "candidate_id"]
    assert (
        pl.from_arrow(a.candidates)
        .drop("candidate_index")
        .sort(key)
        .equals(pl.from_arrow(b.candidates).drop("candidate_index").sort(key))
    )
    assert (
        pl.from_arrow(a.human_scores)
        .sort([*key, "attribute"])
        .equals(pl.from_arrow(b.human_scores).sort([*key, "attribute"]))
    )


def pairwise(records, names: dict, winner) -> pl.DataFrame:
    """The nested pairs as one row per pair (the benchmarks' own upstream layouts)."""
    rows = []
    for r in records:
        a, b = r["candidates"]
        rows.append({names["id"]: r["context_id"], names["context"]: r["context"], names["a"]: a["text"],
                     names["b"]: b["text"], names["winner"]: winner(a["scores"]["correct"], b["scores"]["correct"]),
                     **({"category": r["category"]} if "category" in r else {})})  # fmt: skip
    return pl.DataFrame(rows)


@pytest.mark.parametrize(
    "file,names,winner",
    [
        ("judgebench/judgebench-gpt.jsonl",
         {"id": "pair_id", "context": "question", "a": "response_A", "b": "response_B", "winner": "label"},
         lambda a, b: "A>B" if a > b else "B>A"),
        ("llmbar/llmbar-natural.jsonl",
         {"id": "id", "context": "input", "a": "output_1", "b": "output_2", "winner": "label"},
         lambda a, b: 1 if a > b else 2),
    ],
)  # fmt: skip
def test_a_judge_benchmark_in_its_pairwise_form_reads_as_the_shared_file(tmp_path, file, names, winner):
    """Its people's labels (which response is right) arrive as the same scores, so every measure read from them (the
    meta-evaluation, the card, trust) is the same."""
    records = nested(DATASETS / file, 40)
    path = tmp_path / "pairs.parquet"
    pairwise(records, names, winner).write_parquet(path)
    extra = [] if names["id"] == "pair_id" else [f"dataset.columns.context_id={names['id']}"]
    mine = load(path, *extra, attributes=["correct"])
    shared = load(DATASETS / file, "dataset.max_contexts=40", attributes=["correct"])

    def content(loaded):
        scores = pl.from_arrow(loaded.human_scores).select("context_id", "candidate_id", "human_score")
        cands = pl.from_arrow(loaded.candidates).select(
            "context_id", "candidate_id", "context", "text", "category"
        )
        return sorted(cands.join(scores, on=["context_id", "candidate_id"]).drop("candidate_id").iter_rows())

    assert content(mine) == content(shared)
    if names["id"] == "pair_id":  # JudgeBench's ids: <pair_id>:A and :B, as its recorded verdicts name them
        assert set(pl.from_arrow(mine.candidates)["candidate_id"]) == set(
            pl.from_arrow(shared.candidates)["candidate_id"]
        )


def test_several_votes_for_a_pair_are_each_counted_whichever_side_they_name_first(tmp_path):
    rows = [
        {"question_id": "q1", "prompt": "Say hi.", "model_a": "m1", "model_b": "m2", "response_a": "hi",
         "response_b": "hello", "winner": "model_a"},
        {"question_id": "q1", "prompt": "Say hi.", "model_a": "m2", "model_b": "m1", "response_a": "hello",
         "response_b": "hi", "winner": "model_b"},
        {"question_id": "q1", "prompt": "Say hi.", "model_a": "m1", "model_b": "m2", "response_a": "hi",
         "response_b": "hello", "winner": "tie (bothbad)"},
        {"question_id": "q1", "prompt": "Say hi.", "model_a": "m1", "model_b": "m3", "response_a": "hi",
         "response_b": "hey", "winner": None},
    ]  # fmt: skip
    pl.DataFrame(rows).write_csv(tmp_path / "votes.csv")
    loaded = load(tmp_path / "votes.csv", "+dataset.adjectives.preference=helpful", attributes=["preference"])
    cands = pl.from_arrow(loaded.candidates)
    assert cands["context_id"].n_unique() == 2 and set(cands["system"]) == {"m1", "m2", "m3"}
    scores = pl.from_arrow(loaded.human_scores).join(cands.select("context_id", "candidate_id", "system"),
                                                     on=["context_id", "candidate_id"])  # fmt: skip
    assert dict(scores.select("system", "human_score").iter_rows()) == pytest.approx(
        {"m1": 2.5 / 3, "m2": 0.5 / 3}
    )


@pytest.mark.parametrize(
    "rows,overrides,error,fragments",
    [
        ([{"prompt": "p", "model": "m", "answer_text": "t"}], [], InputError,
         ["export.csv", "field 'text': no column for the text", "dataset.columns.text=<column>", "one row per candidate"]),
        ([{"prompt": "p", "model": "m", "response": "t", "score": 4}], [], ConfigError,
         ["column 'score' looks like people's judgements", "+dataset.columns.scores.coherence=score"]),
        ([{"prompt": "p", "model": "m", "response": "t"}], ["dataset.columns.text=reply"], ConfigError,
         ["dataset.columns.text='reply': export.csv has no such column"]),
        ([{"prompt": "p", "model_a": "a", "model_b": "b", "response_a": "x", "response_b": "y", "winner": "A wins"}],
         [], InputError, ["export.csv row 2", "field 'winner'", "'A wins' is not a vote"]),
        ([{"prompt": "p", "model": "m", "response": "t", "coherence": "good"},
          {"prompt": "p", "model": "n", "response": "u", "coherence": 3}], [], InputError,
         ["field 'scores.coherence': not a finite number: 'good'"]),
    ],
)  # fmt: skip
def test_a_table_that_cannot_be_read_as_written_is_refused_naming_where_and_what_is_expected(
    tmp_path, rows, overrides, error, fragments
):
    pl.DataFrame(rows).write_csv(tmp_path / "export.csv")
    with pytest.raises(error) as info:
        load(tmp_path / "export.csv", *overrides, attributes=["coherence"])
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_a_score_written_beside_scores_in_a_nested_file_is_refused_not_dropped(tmp_path):
    record = {"context_id": "c1", "context": "p", "candidates": [
        {"candidate_id": "a", "text": "x", "score": 5}, {"candidate_id": "b", "text": "y", "score": 3}]}  # fmt: skip
    (tmp_path / "data.jsonl").write_text(json.dumps(record) + "\n")
    with pytest.raises(
        InputError, match=r"field 'score': people's scores are read from \"scores\", not 'score'"
    ):
        load(tmp_path / "data.jsonl", attributes=["quality"])


def test_a_conversation_with_a_reference_answer_is_the_context_the_judge_reads(tmp_path):
    """MT-Bench's second turn: the conversation so far as the context (each turn after its role), the reference answer
    after it (reference-guided grading), the candidates the next assistant turns (or whole conversations)."""
    turns = [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "4."},
             {"role": "user", "content": "And times 3?"}]  # fmt: skip
    rows = [
        {"question_id": 81, "messages": turns, "reference": "12", "model": "m1", "response": "12."},
        {"question_id": 81, "messages": turns, "reference": "12", "model": "m2", "response": "Thirteen."},
    ]  # fmt: skip
    pl.DataFrame(rows).write_parquet(tmp_path / "mt.parquet")
    loaded = load(tmp_path / "mt.parquet", "dataset.context_noun=conversation", "dataset.candidate_noun=reply",
                  attributes=["quality"])  # fmt: skip
    cands = pl.from_arrow(loaded.candidates)
    assert (
        cands["context"].to_list()
        == ["User: What is 2 + 2?\n\nAssistant: 4.\n\nUser: And times 3?\n\nReference answer:\n12"] * 2
    )
    assert cands["text"].to_list() == ["12.", "Thirteen."]
    whole = {"context_id": "q", "context": turns[:1], "candidates": [  # whole conversations compared
        {"candidate_id": "a", "text": turns[1:]}, {"candidate_id": "b", "text": "4"}]}  # fmt: skip
    (tmp_path / "whole.jsonl").write_text(json.dumps(whole) + "\n")
    texts = pl.from_arrow(load(tmp_path / "whole.jsonl", attributes=["quality"]).candidates)["text"].to_list()
    assert texts == ["Assistant: 4.\n\nUser: And times 3?", "4"]
    bad = [{**rows[0], "messages": [*turns, {"role": "robot", "content": "?"}]}, rows[1]]
    (tmp_path / "bad.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bad))
    with pytest.raises(
        InputError, match=r"field 'context\[3\]': not a turn \{role: system\|user\|assistant\|tool"
    ):
        load(tmp_path / "bad.jsonl", attributes=["quality"])


def test_a_rubric_and_a_checklist_are_shown_after_the_context_and_a_malformed_one_is_refused(tmp_path):
    record = {"context_id": "q", "context": "Write a haiku about rain.", "candidates": [
        {"candidate_id": "a", "text": "Rain on the tin roof"}, {"candidate_id": "b", "text": "Sun."}],
        "rubric": {"1": "Not a haiku.", "5": "Three lines, 5-7-5, about rain."},
        "checklist": ["Is it three lines?", "Is it about rain?"]}  # fmt: skip
    (tmp_path / "d.jsonl").write_text(json.dumps(record) + "\n")
    candidates = pl.from_arrow(load(tmp_path / "d.jsonl", attributes=["quality"]).candidates)
    assert candidates["context"][0] == (
        "Write a haiku about rain.\n\nScore rubric:\nScore 1: Not a haiku.\nScore 5: Three lines, 5-7-5, about rain."
        "\n\nChecklist:\n1. Is it three lines?\n2. Is it about rain?"
    )
    # the items themselves go with every candidate of the context, for mode checklist to ask one by one
    assert candidates["checklist"].to_list() == [["Is it three lines?", "Is it about rain?"]] * 2
    # a table's cell holds one item per line
    pl.DataFrame([{"prompt": record["context"], "response": c["text"], "checklist": "Is it three lines?\n\n"
                   "Is it about rain?\n"} for c in record["candidates"]]).write_csv(tmp_path / "d.csv")  # fmt: skip
    from_csv = pl.from_arrow(load(tmp_path / "d.csv", attributes=["quality"]).candidates)
    assert from_csv["checklist"].to_list() == candidates["checklist"].to_list()
    (tmp_path / "bad.jsonl").write_text(json.dumps({**record, "checklist": ["ok", 3]}) + "\n")
    with pytest.raises(
        InputError, match=r"context 'q', field 'checklist': not a list of items \(texts\).*: \['ok', 3\]"
    ):
        load(tmp_path / "bad.jsonl", attributes=["quality"])


def test_a_model_with_several_answers_in_a_context_has_each_read_not_refused(tmp_path):
    rows = [
        {"prompt": "Say hi.", "model": "m1", "response": r, "quality": q}
        for r, q in (("hi", 3), ("hello", 4))
    ]
    rows.append({"prompt": "Say hi.", "model": "m2", "response": "hey", "quality": 2})
    pl.DataFrame(rows).write_csv(tmp_path / "samples.csv")
    cands = pl.from_arrow(load(tmp_path / "samples.csv", attributes=["quality"]).candidates)
    assert cands.height == 3 and cands["candidate_id"].n_unique() == 3
    assert sorted(cands["system"]) == ["m1", "m1", "m2"] and "m2" in cands["candidate_id"].to_list()
