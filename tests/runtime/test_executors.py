"""The local executor's kept-alive workers (MapStep.keep_alive): made once, reused by later streams with the same
step, released when the executor is closed; a step with other settings gets workers of its own."""

from __future__ import annotations

import pyarrow as pa

from pipeline.runtime import MapStep
from pipeline.runtime.local import LocalExecutor

MADE: list[Doubler] = []


class Doubler:
    def __init__(self, factor: int = 2):
        self.factor = factor
        self.closed = False
        MADE.append(self)

    def __call__(self, batch: pa.Table) -> pa.Table:
        return pa.table({"x": [v * self.factor for v in batch.column("x").to_pylist()]})

    def close(self) -> None:
        self.closed = True


def test_kept_workers_are_made_once_and_closed_with_the_executor():
    MADE.clear()
    executor = LocalExecutor()
    step = MapStep("double", Doubler, {"factor": 2}, batch_size=2, keep_alive=True)
    blocks = [pa.table({"x": [1, 2, 3]})]
    first = [b.column("x").to_pylist() for b in executor.stream(blocks, [step])]
    second = [b.column("x").to_pylist() for b in executor.stream(blocks, [step])]
    assert first == second == [[2, 4], [6]]
    assert len(MADE) == 1 and not MADE[0].closed  # the same worker, still open between streams
    other = MapStep("double", Doubler, {"factor": 3}, batch_size=2, keep_alive=True)
    assert [b.column("x").to_pylist() for b in executor.stream(blocks, [other])] == [[3, 6], [9]]
    assert len(MADE) == 2
    executor.close()
    assert all(w.closed for w in MADE)


def test_workers_not_kept_are_closed_after_their_stream():
    MADE.clear()
    executor = LocalExecutor()
    step = MapStep("double", Doubler, {"factor": 2})
    list(executor.stream([pa.table({"x": [1]})], [step]))
    list(executor.stream([pa.table({"x": [1]})], [step]))
    assert len(MADE) == 2 and all(w.closed for w in MADE)


class EvenFront:
    """Answers the even rows itself (x * 10), keeps what the workers answer."""

    def __init__(self) -> None:
        self.kept: list[tuple[list[int], list[int]]] = []

    def answer(self, batch: pa.Table) -> tuple[pa.Table | None, pa.Table]:
        xs = batch.column("x").to_pylist()
        even = [x * 10 for x in xs if x % 2 == 0]
        return (pa.table({"x": even}) if even else None), pa.table({"x": [x for x in xs if x % 2]})

    def keep(self, sent: pa.Table, out: pa.Table) -> None:
        self.kept.append((sent.column("x").to_pylist(), out.column("x").to_pylist()))


def test_a_front_answers_on_the_driver_and_the_workers_get_full_batches_of_the_rest():
    MADE.clear()
    front = EvenFront()
    step = MapStep("double", Doubler, {"factor": 2}, batch_size=2, front=front)
    out = list(LocalExecutor().stream([pa.table({"x": [1, 2, 3, 4, 5, 6, 7]})], [step]))
    values = sorted(v for b in out for v in b.column("x").to_pylist())
    assert values == sorted(
        [2, 6, 10, 14, 20, 40, 60]
    )  # odd ones doubled by the worker, even ones from the front
    assert front.kept == [([1, 3], [2, 6]), ([5, 7], [10, 14])]  # whole batches of the rest, kept row for row
    assert len(MADE) == 1 and MADE[0].closed


def test_a_stream_the_front_answers_whole_makes_no_worker():
    MADE.clear()
    step = MapStep("double", Doubler, {"factor": 2}, batch_size=2, front=EvenFront())
    out = list(LocalExecutor().stream([pa.table({"x": [2, 4, 6]})], [step]))
    assert [v for b in out for v in b.column("x").to_pylist()] == [20, 40, 60]
    assert MADE == []  # no engine started for prompts the store holds
