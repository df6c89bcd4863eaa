"""One pool (a single context with no shared text) spread over two real vLLM actors on a local Ray."""

from __future__ import annotations

import json

import pytest

from pipeline.run.context import run
from tests.conftest import compose, run_table

pytestmark = [pytest.mark.ray, pytest.mark.engine, pytest.mark.slow]

QUESTIONS = [
    ("What is 2 + 2?", 1.0),
    ("Name the capital of France.", 1.5),
    ("What is 17 times 23?", 2.5),
    ("Solve for x: 3x + 7 = 22.", 2.0),
    ("What is the derivative of x^3 sin(x)?", 3.5),
    ("Prove that there are infinitely many primes.", 4.0),
    ("Integrate e^(-x^2) over the real line.", 4.5),
    ("What colour is the sky on a clear day?", 1.0),
    ("Factor x^2 - 5x + 6.", 2.5),
    ("State and prove the Cauchy-Schwarz inequality.", 5.0),
    ("How many legs does a spider have?", 1.0),
    ("Convert 3/8 to a decimal.", 1.5),
    ("Find the eigenvalues of [[2, 1], [1, 2]].", 3.5),
    ("What is the sum of the first 100 positive integers?", 2.0),
    ("Show that the square root of 2 is irrational.", 3.5),
    ("Compute the limit of sin(x)/x as x goes to 0.", 3.0),
]


def test_a_pool_spreads_over_two_actors(tmp_path, monkeypatch, ray_cluster):
    from pipeline.storage.parts import JudgmentParts

    # the driver's view of the stream: rows must arrive one engine batch at a time, not at the end of a task
    arrived: list[int] = []
    add = JudgmentParts.add

    def record(self, batch):
        arrived.append(batch.num_rows)
        add(self, batch)

    monkeypatch.setattr(JudgmentParts, "add", record)

    data = tmp_path / "pool.jsonl"
    record = {
        "context_id": "pool",
        "context": "",
        "candidates": [
            {"candidate_id": f"q{n}", "text": text, "scores": {"difficulty": score}}
            for n, (text, score) in enumerate(QUESTIONS)
        ],
    }
    data.write_text(json.dumps(record) + "\n")
    cfg = compose(
        [
            "experiment=pool",
            f"dataset.path={data}",
            "dataset.attributes=[difficulty]",
            "judge.num_actors=2",
            "judge.num_cpus_per_actor=0.5",
            # divides the 240 prompts (no remainder block to bundle); 24 batches, so that a worker whose engine is
            # ready 10-20 s after the other's on a loaded machine still finds prompts to judge
            "judge.batch_size=10",
            "judge.max_model_len=512",
            "judge.env.VLLM_CPU_KVCACHE_SPACE=1",
            f"paths.output_root={tmp_path / 'out'}",
            "tracking.plots=false",
        ]
    )
    result = run(cfg)
    j = run_table(result, "judgments")
    assert j.height == 16 * 15
    assert j.select("cand_a", "cand_b").unique().height == 240
    # the single context's prompts were judged by both actors
    assert j["worker"].n_unique() == 2
    assert sum(arrived) == 240 and max(arrived) <= 10 and len(arrived) >= 24
    corr = run_table(result, "correlations")
    assert corr["n_contexts"].to_list() == [1] * corr.height
    # the pool template holds no context text: every prompt is two questions and the question
    assert j["prompt_tokens"].max() < 200


class WhereAnswered:
    """A stateful step that says which process answered each row."""

    def __call__(self, batch):
        import os

        import pyarrow as pa

        return batch.append_column("pid", pa.array([os.getpid()] * batch.num_rows))


def add_one(batch):
    import os

    import pyarrow as pa

    return pa.table(
        {"x": [v + 1 for v in batch.column("x").to_pylist()], "task_pid": [os.getpid()] * batch.num_rows}
    )


def double(batch):
    import os

    import pyarrow as pa

    doubled = pa.array([2 * v for v in batch.column("x").to_pylist()])
    return batch.set_column(0, "x", doubled).append_column(
        "made_pid", pa.array([os.getpid()] * batch.num_rows)
    )


def test_a_step_on_the_driver_runs_in_the_drivers_process_after_rays_tasks(ray_cluster, tmp_path):
    """MapStep.on_driver: a class (an endpoint's client, whose reply cache only the driver may open) has its one
    instance in the driver's process and no worker pool starts; a function (making prompts) runs there too, on
    what the chain's Ray tasks yield. A task after a step on the driver is refused."""
    import os

    import pyarrow as pa

    from pipeline.config.run import RuntimeConfig
    from pipeline.runtime import MapStep
    from pipeline.runtime.ray_data import RayDataExecutor

    executor = RayDataExecutor(RuntimeConfig(), tmp_path)
    steps = [
        MapStep("add", add_one, num_cpus=0.25),
        MapStep("double", double, on_driver=True),
        MapStep("where", WhereAnswered, batch_size=2, exact_batches=True, on_driver=True),
    ]
    blocks = [pa.table({"x": [1, 2, 3]}), pa.table({"x": [4]})]
    try:
        out = pa.concat_tables(executor.stream(blocks, steps))
        with pytest.raises(ValueError, match="steps on the driver follow its tasks"):
            list(executor.stream(blocks, [steps[1], steps[0], steps[2]]))
    finally:
        executor.close()
    assert sorted(out.column("x").to_pylist()) == [4, 6, 8, 10]
    assert set(out.column("pid").to_pylist()) == set(out.column("made_pid").to_pylist()) == {os.getpid()}
    assert os.getpid() not in set(out.column("task_pid").to_pylist())  # the task ran on a Ray worker
    assert executor.kept == {}  # no pool


def streamed(step, rows: int, folder):
    """Rows ``x`` = 0..rows-1 through ``step`` on the pool (a local Ray), the executor closed however it ends: every
    row comes back once."""
    import pyarrow as pa

    from pipeline.config.run import RuntimeConfig
    from pipeline.runtime.ray_data import RayDataExecutor

    executor = RayDataExecutor(RuntimeConfig(), folder)
    try:
        out = pa.concat_tables(executor.stream([pa.table({"x": list(range(rows))})], [step]))
    finally:
        executor.close()
    assert sorted(out.column("x").to_pylist()) == list(range(rows))
    return out


class Stalls:
    """A stateful step whose batch holding ``x == 7`` takes 4 s, the others 50 ms (a worker that stops answering
    for a while: a paused machine, an engine that hangs)."""

    def __call__(self, batch):
        import time

        time.sleep(4.0 if 7 in batch.column("x").to_pylist() else 0.05)
        return batch


def test_a_worker_whose_batch_runs_far_longer_than_batches_take_is_said_once_and_waited_for(
    ray_cluster, tmp_path, monkeypatch, caplog
):
    """A worker's batch past ten times the pool's median batch (here at least 0.5 s, not 120 s) is said in the log
    and as a worker_slow event, once for that batch; the pool waits for it and every row comes back once."""
    import logging

    from pipeline.runtime import MapStep
    from pipeline.runtime.pool import ActorPool
    from pipeline.runtime.slots import Pace
    from pipeline.storage.events import read_events

    monkeypatch.setattr(Pace, "SLOW_AFTER", 0.5)
    monkeypatch.setattr(Pace, "FIRST_AFTER", 0.5)
    monkeypatch.setattr(ActorPool, "TEND_EVERY", 0.1)
    events = tmp_path / "engine_events.jsonl"
    step = MapStep(
        "stalls", Stalls, batch_size=2, exact_batches=True, num_cpus=0.5, events=str(events), workers=1
    )
    with caplog.at_level(logging.WARNING, logger="pipeline.runtime.pool"):
        streamed(step, 12, tmp_path)
    slow = [e for e in read_events(events) if e.get("event") == "worker_slow"]
    started = [e for e in read_events(events) if e.get("event") == "worker_started"]
    assert len(slow) == 1 and slow[0]["worker"] == started[0]["worker"] and slow[0]["seconds"] > 0.5
    said = [r.getMessage() for r in caplog.records if "a slow or stuck worker" in r.getMessage()]
    assert len(said) == 1 and f"stalls worker {started[0]['worker']} has run one batch for" in said[0]


class LoadsSlowly:
    """A stateful step whose worker takes 2 s to start (an engine loading), then answers at once."""

    def __init__(self):
        import time

        time.sleep(2.0)

    def __call__(self, batch):
        return batch


def test_a_worker_still_starting_is_said_not_warned_of(ray_cluster, tmp_path, monkeypatch, caplog):
    """While the pool's only worker is starting (an engine loading: a minute for a compiled one), the pool says so
    in the log every ``SAY_EVERY`` seconds at INFO, with the worker counted as starting; a warning is for a pool
    with no worker running and none starting (waiting for room, said with the cluster's numbers)."""
    import logging

    from pipeline.runtime import MapStep
    from pipeline.runtime.pool import ActorPool

    monkeypatch.setattr(ActorPool, "TEND_EVERY", 0.1)
    monkeypatch.setattr(ActorPool, "SAY_EVERY", 0.5)
    step = MapStep(
        "loads", LoadsSlowly, batch_size=2, num_cpus=0.5, events=str(tmp_path / "e.jsonl"), workers=1
    )
    with caplog.at_level(logging.INFO, logger="pipeline.runtime.pool"):
        streamed(step, 6, tmp_path)
    said = [r for r in caplog.records if "no loads worker running" in r.getMessage()]
    assert said and all(r.levelno == logging.INFO for r in said), [
        (r.levelname, r.getMessage()) for r in said
    ]
    assert "(1 starting: an engine loading)" in said[0].getMessage() and "CPU(s)" in said[0].getMessage()


class Slow:
    """A stateful step whose one batch takes 3 s (an engine judging the run's last batch)."""

    def __call__(self, batch):
        import time

        time.sleep(3.0)
        return batch


def test_the_driver_waits_on_the_last_batch_without_polling(ray_cluster, tmp_path, monkeypatch):
    """Once the upstream has ended, the driver waits for its workers' batches to end (a second at most, for the
    tending), not 20 times a second: on a CPU the driver shares the engine's cores. The 3 s batch is waited on a
    few times, against 60 at the quick look's 50 ms."""
    import pyarrow as pa
    import ray

    from pipeline.config.run import RuntimeConfig
    from pipeline.runtime import MapStep
    from pipeline.runtime.ray_data import RayDataExecutor

    waits: list[float | None] = []
    wait = ray.wait

    def counted(*args, **kwargs):
        waits.append(kwargs.get("timeout"))
        return wait(*args, **kwargs)

    monkeypatch.setattr(ray, "wait", counted)
    step = MapStep("slow", Slow, batch_size=4, exact_batches=True, num_cpus=0.5, workers=1)
    executor = RayDataExecutor(RuntimeConfig(), tmp_path)
    try:
        out = pa.concat_tables(executor.stream([pa.table({"x": list(range(4))})], [step]))
    finally:
        executor.close()
    assert sorted(out.column("x").to_pylist()) == [0, 1, 2, 3]
    # only the quick looks are counted: the number of 1 s waits follows how long the worker takes to start
    quick = [t for t in waits if t is not None and t < 1.0]
    assert len(quick) <= 3, waits
