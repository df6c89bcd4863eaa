"""The judgement store keys an answer by the judge's identity, the read and the exact prompt; failed answers are
not kept; a batch is looked up and kept in one go."""

from __future__ import annotations

from pipeline.contracts.engine import Request, Result
from pipeline.storage.judgements import JudgementStore

READ = Request(token_ids=(1, 2), max_tokens=1)
ANSWER = Result([-0.1, -0.2], ["A"], 5, 2, 1, ["length"])
FAILED = Result([], [], 0, 0, 0, [], error="HTTP 500", source="api/failed")


def test_answers_are_found_by_judge_read_and_exact_prompt_only(tmp_path):
    store = JudgementStore(tmp_path / "s.sqlite", {"model": "a"})
    store.put(["p1", "p2"], READ, [ANSWER, FAILED])
    found = store.get(["p1", "p2", "p1 "], READ)
    assert found[0] is not None and found[0].token_logprobs == [-0.1, -0.2] and found[0].source == "store"
    assert found[0].prompt_tokens == 5 and found[0].cached_tokens == 2
    assert found[1] is None and found[2] is None  # a failed answer is not kept; another prompt text misses
    assert store.get(["p1"], Request(token_ids=(1, 3), max_tokens=1)) == [None]  # other label words
    other = JudgementStore(tmp_path / "s.sqlite", {"model": "b"})  # another judge, the same file
    assert other.get(["p1"], READ) == [None]
    again = JudgementStore(tmp_path / "s.sqlite", {"model": "a"})  # another process, later
    assert again.get(["p1"], READ)[0].texts == ["A"]
    assert store.get([f"q{k}" for k in range(1200)], READ) == [None] * 1200  # more keys than one query holds
