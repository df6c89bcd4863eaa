"""The judgement store in front of the workers, on the driver (pipeline.judge.stored.StoreFront): the workers'
answers kept row for row as they come back, failed ones and unseeded samples never; what is stored answered on the
driver with the same fields (source "store", this process as the worker); answers that are not row for row the
prompts sent are refused. No engine: the answers are built as a worker builds them (pipeline.judge.hosting.worker)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipeline.contracts.engine import Request, Result
from pipeline.contracts.frame import PromptFrame
from pipeline.contracts.schemas import PROMPTS
from pipeline.judge.hosting.worker import Task, responses
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.stored import DRIVER, StoreFront

GREEDY = Request(token_ids=(1, 2), max_tokens=1)
SAMPLED = Request(max_tokens=8, temperature=1.0, n=2)
TASK = Task(
    JudgeSpec(backend="vllm", model="m", model_path="/m", name="judge-m", max_model_len=512),
    {"t1": GREEDY, "free": SAMPLED},
    PromptFrame("", ""),
)


def prompts(rows: list[tuple[str, str]]) -> pa.Table:
    """PROMPTS rows (template, prompt text), one pair each."""
    return pa.Table.from_pylist(
        [
            {
                "context_id": "c",
                "mode": "comparative",
                "attribute": "coherence",
                "template_id": template,
                "cand_a": f"a{k}",
                "cand_b": f"b{k}",
                "prompt": text,
            }
            for k, (template, text) in enumerate(rows)
        ],
        schema=PROMPTS,
    )


def answered(batch: pa.Table, failed: set[int] = frozenset()) -> pa.Table:
    results = [
        Result.failed("HTTP 500", "api/chat", 3)
        if k in failed
        else Result([-0.1 * (k + 1), -2.0], [" A"], 10 + k, 4, 1, ["length"])
        for k in range(batch.num_rows)
    ]
    return responses(batch, "judge-m", results, [0.5] * batch.num_rows, "node:42")


def test_answers_are_kept_as_they_come_back_and_answered_on_the_driver_next_time(tmp_path):
    front = StoreFront(tmp_path / "store.sqlite", TASK)
    sent = prompts([("t1", "p0"), ("t1", "p1"), ("free", "p2"), ("t1", "p3")])
    done, todo = front.answer(sent)
    assert done is None and todo == sent  # an empty store answers nothing
    front.keep(sent, answered(sent, failed={3}))
    front.close()

    again = StoreFront(tmp_path / "store.sqlite", TASK)  # another stream, later (the file reopened)
    shuffled = prompts([("t1", "p3"), ("free", "p2"), ("t1", "p1"), ("t1", "p0"), ("t1", "new")])
    done, todo = again.answer(shuffled)
    assert todo.column("prompt").to_pylist() == ["p3", "p2", "new"]  # failed, unseeded sample, never asked
    rows = {r["prompt_tokens"]: r for r in done.to_pylist()}
    assert sorted(rows) == [10, 11]
    assert {(r["cand_a"], r["token_logprobs"][0]) for r in done.to_pylist()} == {("a2", -0.2), ("a3", -0.1)}
    assert all(
        r["source"] == "store" and r["worker"] == DRIVER and r["seconds"] == 0.0 for r in rows.values()
    )
    assert all(r["judge"] == "judge-m" and r["error"] is None for r in rows.values())
    # the same prompt text under another request is another judgement
    other = StoreFront(
        tmp_path / "store.sqlite", Task(TASK.judge, {"t1": Request(token_ids=(1, 3))}, TASK.frame)
    )
    assert other.answer(prompts([("t1", "p0")]))[0] is None


def test_answers_that_are_not_row_for_row_the_prompts_sent_are_refused(tmp_path):
    front = StoreFront(tmp_path / "store.sqlite", TASK)
    sent = prompts([("t1", "p0"), ("t1", "p1")])
    out = answered(sent)
    with pytest.raises(ValueError, match="not row for row"):
        front.keep(sent, out.take([1, 0]))
