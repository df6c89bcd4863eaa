"""The recorded judge backend (pipeline.judge.recorded): its files read as written (this project's verdict layout,
JudgeBench's released layouts as they are), every problem of a file refused at once naming the file, the line and
the field, its answers as the label words' log-probabilities the rest of the product reads, and its check against a
run's prompts (exact: lacking prompts and foreign ids refused; partial: left out)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from pipeline.config.judging import JudgeConfig
from pipeline.contracts.keys import COMPARE, PROMPT_KEY
from pipeline.judge.recorded import judge_name, resolve
from pipeline.judge.recorded.answers import RecordedAnswers, RecordedError, answer_logprobs
from pipeline.judge.recorded.layout import Verdict, VerdictFileError, read_verdicts
from pipeline.methods.verdicts.win_probability import label_mass, p_a_wins, side_logprobs, tie_logprob
from pipeline.prompts.labels import Labels
from tests.conftest import DATASETS, candidates_table

LABELS = Labels(words=(" A", "A", " B", "B"), token_ids=(1, 2, 3, 4), n_a=2)
TIE_LABELS = Labels(words=(" A", " B", " C"), token_ids=(1, 2, 3), n_a=1, n_tie=1)
JUDGEBENCH = DATASETS / "judgebench" / "recorded"


def write(path: Path, lines: list) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def read_p(verdict: Verdict, labels: Labels = LABELS) -> tuple[float, float, float]:
    """(p(A wins), p(tie), label mass) as the product reads the answer."""
    lp = np.array([answer_logprobs(verdict, labels)[0]])
    a, b = side_logprobs(lp, labels.n_a, labels.n_tie)
    t = tie_logprob(lp, labels.n_tie) if labels.n_tie else None
    share_tie = float(np.exp(t[0]) / label_mass(a, b, t)[0]) if t is not None else 0.0
    return float(p_a_wins(a, b, t)[0]), share_tie, float(label_mass(a, b, t)[0])


# --- the layouts ------------------------------------------------------------------------------------------------


def test_the_verdict_layout_reads_a_verdict_a_probability_and_scores(tmp_path):
    path = write(
        tmp_path / "v.jsonl",
        [
            {"context_id": "q", "first": "a", "second": "b", "verdict": "first", "judge": "mine"},
            {"context_id": "q", "first": "b", "second": "a", "p_first": 0.2, "reason": "shorter"},
            {"context_id": 7, "first": "x", "second": "y", "scores": [2.5, -1], "attribute": "correct"},
            {"context_id": 7, "first": "y", "second": "x", "verdict": None, "template": "c2"},
        ],
    )
    verdicts = read_verdicts(path)
    assert verdicts.layout == "verdicts" and verdicts.judge == "mine" and verdicts.lines == 4
    answers = verdicts.answers
    assert answers[("q", "a", "b", None, None)].verdict == "first"
    assert answers[("q", "b", "a", None, None)].p_first == 0.2
    assert answers[("7", "x", "y", "correct", None)].scores == (2.5, -1.0)
    assert answers[("7", "y", "x", None, "c2")].kind == "verdict"
    assert verdicts.unread == {"reason": 1} and verdicts.kinds() == {
        "verdict": 2,
        "probability": 1,
        "scores": 1,
    }


def test_judgebench_released_files_read_as_they_are():
    verdicts = read_verdicts(JUDGEBENCH / "gpt" / "reward_model:Skywork_Skywork-Reward-Gemma-2-27B.jsonl")
    assert verdicts.layout == "judgebench" and len(verdicts.answers) == 700
    pair = "e302b0a0-28d5-5a3c-b1af-fedcf5543e72"
    # order AB shows response A first; BA shows B first, its scores in the order shown
    assert verdicts.answers[(pair, f"{pair}:A", f"{pair}:B", None, None)].scores == (19.875, 19.5)
    assert verdicts.answers[(pair, f"{pair}:B", f"{pair}:A", None, None)].scores == (19.5, 19.875)
    haiku = read_verdicts(JUDGEBENCH / "claude" / "arena_hard:claude-3-haiku-20240307.jsonl")
    kinds = [v.verdict for v in haiku.answers.values()]
    assert len(kinds) == 540 and kinds.count(None) == 13 and kinds.count("tie") == 192


def test_the_authors_layout_one_pair_a_line_reads_the_same_answers(tmp_path):
    """JudgeBench's repository writes one line per pair (its judgments in the orders AB, BA), naming the judge's
    model; the released recorded/ files split them: both read to the same answers."""
    lines = [json.loads(line) for line in (JUDGEBENCH / "gpt" / "arena_hard:o1-mini-2024-09-12.jsonl").open()]
    by_pair: dict[str, dict] = {}
    for line in lines:
        judgment = {"decision": line["decision"], "judgment": {"judge_model": "o1-mini-2024-09-12"}}
        by_pair.setdefault(line["pair_id"], {"pair_id": line["pair_id"], "judgments": [None, None]})
        by_pair[line["pair_id"]]["judgments"][0 if line["order"] == "AB" else 1] = judgment
    path = write(
        tmp_path / "dataset=judgebench,judge_name=arena_hard,judge_model=o1-mini.jsonl",
        list(by_pair.values()),
    )
    native = read_verdicts(path)
    split = read_verdicts(JUDGEBENCH / "gpt" / "arena_hard:o1-mini-2024-09-12.jsonl")
    assert native.layout == "judgebench_pairs" and native.judge == "o1-mini-2024-09-12"
    assert {k: v.verdict for k, v in native.answers.items()} == {
        k: v.verdict for k, v in split.answers.items()
    }


def test_a_judgment_that_failed_in_the_authors_layout_is_no_verdict(tmp_path):
    path = write(tmp_path / "p.jsonl", [{"pair_id": "p", "judgments": [None, {"decision": "A>B"}]}])
    answers = read_verdicts(path).answers
    assert answers[("p", "p:A", "p:B", None, None)].verdict is None
    assert answers[("p", "p:B", "p:A", None, None)].verdict == "first"


@pytest.mark.parametrize(
    "file,given,name",
    [
        ("arena_hard:o1-mini-2024-09-12.jsonl", None, "o1-mini-2024-09-12"),
        ("reward_model:Skywork_Skywork-Reward-Gemma-2-27B.jsonl", None, "Skywork-Reward-Gemma-2-27B"),
        ("dataset=judgebench,judge_name=arena_hard,judge_model=meta-llama_Meta-Llama-3.1-8B.jsonl", None,
         "Meta-Llama-3.1-8B"),
        ("my_verdicts.jsonl", None, "my_verdicts"),
        ("anything.jsonl", "Ray2333/GRM-Gemma-2B", "GRM-Gemma-2B"),
    ],
)  # fmt: skip
def test_the_judges_name_comes_from_the_file(file, given, name):
    assert judge_name(Path(file), given) == name


# --- a file that cannot be read as written ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "lines,fragments",
    [
        (["{not json"], ["line 1: is not valid JSON"]),
        ([{"question": "q"}], ["line 1: is neither the verdict layout"]),
        ([{"context_id": "q", "first": "a", "second": "b", "verdict": "A"}],
         ["line 1, field 'verdict': 'A' is not a verdict: one of ['first', 'second', 'tie'] or null"]),
        ([{"context_id": "q", "first": "a", "second": "b", "p_first": 1.5}],
         ["line 1, field 'p_first': 1.5 is not a probability"]),
        ([{"context_id": "q", "first": "a", "second": "b", "scores": [1.0, "NaN"]}],
         ["line 1, field 'scores': [1.0, 'NaN'] is not two finite numbers"]),
        (['{"context_id": "q", "first": "a", "second": "b", "scores": [1.0, NaN]}'],
         ["line 1, field 'scores': [1.0, nan] is not two finite numbers"]),
        ([{"context_id": "q", "first": "a", "second": "b", "scores": [1, 10**400]}],
         ["line 1: is not valid JSON within the limits (bad_number: an integer of 401 digits"]),
        ([{"context_id": "q", "first": "a", "second": "b"}], ["line 1: gives none of"]),
        ([{"context_id": "q", "first": "a", "second": "b", "verdict": "first", "p_first": 0.3}],
         ["line 1: gives ['verdict', 'p_first']"]),
        ([{"context_id": "q", "second": "b", "verdict": "first"}], ["line 1, field 'first': missing or not an id"]),
        ([{"context_id": "q", "first": "a", "second": "a", "verdict": "first"}],
         ["line 1, field 'second': is the candidate shown first too"]),
        ([{"context_id": "q", "first": "a", "second": "b", "verdict": "first"},
          {"context_id": "q", "first": "a", "second": "b", "verdict": "second"}],
         ["line 2: a second answer for context 'q' with 'a' shown first and 'b' second", "line 1 answers it"]),
        ([{"context_id": "q", "first": "a", "second": "b", "verdict": "first", "attribute": "x"},
          {"context_id": "q", "first": "a", "second": "b", "verdict": "first"}],
         ["line 2: a second answer", "(every attribute, every template); line 1 answers it already"]),
        ([{"context_id": "q", "first": "a", "second": "b", "verdict": "first", "judge": "one"},
          {"context_id": "q", "first": "b", "second": "a", "verdict": "first", "judge": "two"}],
         ["line 2, field 'judge': names judge 'two', but line 1 names 'one'"]),
        ([{"pair_id": "p", "order": "AC", "decision": "A>B"}], ["line 1, field 'order': 'AC' is not an order"]),
        ([{"pair_id": "p", "order": "AB", "decision": "A>C"}], ["line 1, field 'decision': 'A>C' is not a decision"]),
        ([{"pair_id": "p", "order": "AB", "decision": "A>B", "scores": [1.0, 2.0]}],
         ["line 1, field 'decision': 'A>B' prefers the first shown, but the scores [1.0, 2.0] prefer the second"]),
        ([{"context_id": "q", "first": "a", "second": "b", "verdict": "first"},
          {"pair_id": "p", "order": "AB", "decision": "A>B"}], ["line 2: is not in the file's layout (verdicts"]),
        ([], ["holds no verdicts"]),
    ],
)  # fmt: skip
def test_every_problem_of_a_file_names_the_file_the_line_and_the_field(tmp_path, lines, fragments):
    path = write(tmp_path / "bad.jsonl", lines)
    with pytest.raises(VerdictFileError) as info:
        read_verdicts(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message


CRAFTED = {
    "a 5,000-digit integer": (b'{"context_id": "q", "first": "a", "second": "b", "p_first": ' + b"1" * 5000 + b"}",
                              "(bad_number: an integer of 5000 digits"),
    "a byte that is not UTF-8": (b'{"context_id": "q\xff", "first": "a", "second": "b", "verdict": "first"}',
                                 "line 1: is not UTF-8 text (byte 0xff at 17)"),
    "a lone surrogate": (b'{"context_id": "q", "first": "a", "second": "b", "verdict": "first", "judge": "\\ud800"}',
                         "(bad_text: a string holding a lone surrogate"),
    "a judge named /": (b'{"context_id": "q", "first": "a", "second": "b", "verdict": "first", "judge": "/"}',
                        "line 1, field 'judge': not a judge's name: '/'"),
    "a 20 MB id": (b'{"context_id": "' + b"x" * 20_000_000 + b'", "first": "a", "second": "b", "verdict": "first"}',
                   "line 1: is longer than"),
    "a 100 kB id": (b'{"context_id": "' + b"x" * 100_000 + b'", "first": "a", "second": "b", "verdict": "first"}',
                    "line 1, field 'context_id': missing or not an id: 'xxxx"),
    "a deep nest": (b'{"context_id": "q", "first": "a", "second": "b", "verdict": ' + b"[" * 5000 + b"]" * 5000 + b"}",
                    "line 1: is not valid JSON within the limits"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_crafted_line_is_refused_by_kind_with_a_short_message(tmp_path, case):
    """Lines built to break a reader (the security review's): each refused naming the line and what it is, in a
    message that does not repeat the value back, never another exception."""
    raw, fragment = CRAFTED[case]
    path = tmp_path / "crafted.jsonl"
    path.write_bytes(
        raw + b"\n" + json.dumps({"context_id": "q", "first": "b", "second": "a", "verdict": "tie"}).encode()
    )
    with pytest.raises(VerdictFileError) as info:
        read_verdicts(path)
    assert fragment in str(info.value) and len(str(info.value)) < 2_000, str(info.value)[:500]


def test_a_file_of_bad_lines_is_read_in_memory_bounded_by_what_it_holds(tmp_path):
    """4 MB of bad lines: every problem counted, a few kept (not one string per line)."""
    import tracemalloc

    line = json.dumps({"context_id": "q" * 200, "first": "a", "second": "b", "verdict": "maybe"}) + "\n"
    path = tmp_path / "bad.jsonl"
    path.write_text(line * (4_000_000 // len(line)))
    tracemalloc.start()
    with pytest.raises(VerdictFileError, match=rf"{4_000_000 // len(line)} problem\(s\)") as info:
        read_verdicts(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4_000_000 and str(info.value).count("\n  - ") == 20


def test_every_problem_is_listed_at_once(tmp_path):
    lines = [{"context_id": "q", "first": "a", "second": "b", "verdict": v} for v in ("x", "y", "z")]
    with pytest.raises(VerdictFileError, match=r"3 problem\(s\)") as info:
        read_verdicts(write(tmp_path / "bad.jsonl", lines))
    assert all(f"line {n}" in str(info.value) for n in (1, 2, 3))


# --- the answers as label probabilities --------------------------------------------------------------------------


def test_a_verdict_is_one_sampled_verdict():
    # p(w) = (c(w) + 1/2) / (n + |W| / 2) with n = 1 and W = {A, B}: the chosen side 3/4
    p, tie, mass = read_p(Verdict(1, verdict="first"))
    assert math.isclose(p, 0.75) and tie == 0 and math.isclose(mass, 1.0)
    assert math.isclose(read_p(Verdict(1, verdict="second"))[0], 0.25)
    # a tie without a tie label, or no verdict: no label said, each side 1/4 of the mass
    for verdict in ("tie", None):
        p, _, mass = read_p(Verdict(1, verdict=verdict))
        assert math.isclose(p, 0.5) and math.isclose(mass, 0.5)
    # with a tie label the tie is said: 3/5 on it, p(A wins) one half
    p, tie, mass = read_p(Verdict(1, verdict="tie"), TIE_LABELS)
    assert math.isclose(p, 0.5) and math.isclose(tie, 0.6) and math.isclose(mass, 1.0)


@pytest.mark.parametrize("p_first", [0.0, 1e-9, 0.3, 0.5, 0.99, 1.0])
def test_a_probability_is_read_back_as_itself(p_first):
    p, tie, _ = read_p(Verdict(1, p_first=p_first))
    assert math.isclose(p, p_first, abs_tol=1e-12) and tie < 1e-12
    assert all(np.isfinite(answer_logprobs(Verdict(1, p_first=p_first), TIE_LABELS)[0]))


@pytest.mark.parametrize("scores", [(19.875, 19.5), (-2.07, -1.43), (1000.0, -1000.0), (3.0, 3.0)])
def test_a_reward_models_scores_are_a_bradley_terry_probability(scores):
    s1, s2 = scores
    p, _, _ = read_p(Verdict(1, scores=scores))
    assert math.isclose(p, 1 / (1 + math.exp(-(s1 - s2))), abs_tol=1e-12)
    assert all(np.isfinite(answer_logprobs(Verdict(1, scores=scores), LABELS)[0]))


# --- the check against the run -----------------------------------------------------------------------------------


def prompts_of(candidates: pa.Table, attribute: str = "quality", template: str = "c1") -> pa.Table:
    """Every ordered pair of every context, as PROMPT_KEY rows."""
    rows = []
    groups: dict[str, list[str]] = {}
    for c, k in zip(*(candidates.column(x).to_pylist() for x in ("context_id", "candidate_id")), strict=True):
        groups.setdefault(c, []).append(k)
    for c, ids in groups.items():
        rows += [(c, COMPARE, attribute, template, a, b) for a in ids for b in ids if a != b]
    return pa.table({k: [r[n] for r in rows] for n, k in enumerate(PROMPT_KEY)})


def answers_for(tmp_path: Path, lines: list, match: str = "exact") -> RecordedAnswers:
    path = write(tmp_path / "judge.jsonl", lines)
    spec = resolve(JudgeConfig(backend="recorded", model=str(path), engine={"match": match}), tmp_path)
    return RecordedAnswers(spec, LABELS)


def every_line(candidates: pa.Table) -> list[dict]:
    return [
        {"context_id": r["context_id"], "first": r["cand_a"], "second": r["cand_b"], "p_first": 0.6}
        for r in prompts_of(candidates).to_pylist()
    ]


def test_a_file_that_answers_every_prompt_leaves_nothing_out(tmp_path):
    candidates = candidates_table({"c1": 3, "c2": 2})
    coverage = answers_for(tmp_path, every_line(candidates)).check(prompts_of(candidates), candidates)
    assert coverage.left_out.num_rows == 0 and coverage.notes == ()


def test_a_file_lacking_prompts_is_refused_with_how_many_and_the_first_ones(tmp_path):
    candidates = candidates_table({"c1": 3, "c2": 2})
    lines = every_line(candidates)[:-3]
    with pytest.raises(RecordedError) as info:
        answers_for(tmp_path, lines).check(prompts_of(candidates), candidates)
    message = str(info.value)
    assert "has no answer for 3 of the run's 8 prompt(s)" in message and "judge.jsonl" in message
    assert "context 'c2': 'c2:0' shown first, 'c2:1' second" in message
    assert "judge.engine.match=partial" in message


def test_ids_the_data_does_not_hold_are_refused_naming_the_line(tmp_path):
    candidates = candidates_table({"c1": 2})
    lines = every_line(candidates) + [
        {"context_id": "c1", "first": "c1:0", "second": "c1:9", "verdict": "first"},
        {"context_id": "elsewhere", "first": "x", "second": "y", "verdict": "first"},
    ]
    with pytest.raises(VerdictFileError) as info:
        answers_for(tmp_path, lines).check(prompts_of(candidates), candidates)
    message = str(info.value)
    assert "line 3: 'c1:9' is not a candidate of context 'c1'" in message
    assert "line 4: context 'elsewhere' is not in the run's data" in message


def test_partial_leaves_the_lacking_prompts_out_and_does_not_read_other_contexts(tmp_path):
    candidates = candidates_table({"c1": 3, "c2": 2})
    lines = every_line(candidates)[:-1] + [
        {"context_id": "other", "first": "x", "second": "y", "verdict": "first"}
    ]
    coverage = answers_for(tmp_path, lines, match="partial").check(prompts_of(candidates), candidates)
    assert coverage.left_out.to_pylist() == [
        {"context_id": "c2", "mode": COMPARE, "attribute": "quality", "template_id": "c1", "cand_a": "c2:1",
         "cand_b": "c2:0"}
    ]  # fmt: skip
    assert coverage.counts["answers_for_other_contexts"] == 1
    assert any("contexts the run's data does not hold" in note for note in coverage.notes)
    # a candidate that is not one of a context's the data holds is refused even so
    wrong = every_line(candidates) + [
        {"context_id": "c1", "first": "c1:0", "second": "zz", "verdict": "first"}
    ]
    with pytest.raises(VerdictFileError, match="'zz' is not a candidate of context 'c1'"):
        answers_for(tmp_path, wrong, match="partial").check(prompts_of(candidates), candidates)


def test_a_file_changed_after_the_run_started_is_refused(tmp_path):
    candidates = candidates_table({"c1": 2})
    path = write(tmp_path / "judge.jsonl", every_line(candidates))
    spec = resolve(JudgeConfig(backend="recorded", model=str(path)), tmp_path)
    write(path, every_line(candidates)[:1])
    with pytest.raises(RecordedError, match="changed since the run started"):
        RecordedAnswers(spec, LABELS)
