"""A cluster that loses and gains nodes (tests/run/nodes.py: a head with no CPU slot that runs the driver, worker
nodes of their own raylets on this machine): the run, started as a user starts it (the CLI joined to the cluster),
loses a worker node with its open batch (generating, then judging), has a node drained under it, and takes up a node
that joins; every time it ends 0 with every prompt judged once, and the summary and MLflow say what happened."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import polars as pl
import pytest

from pipeline.storage.events import read_events
from tests.conftest import ROOT, in_a_batch, open_batches
from tests.run.nodes import Nodes

pytestmark = [pytest.mark.ray, pytest.mark.engine, pytest.mark.slow, pytest.mark.cluster]

KEYS = ["context_id", "attribute", "template_id", "cand_a", "cand_b"]


def n_prompts(n_contexts: int, n_candidates: int) -> int:
    return n_contexts * n_candidates * (n_candidates - 1) * 2  # both orderings, two attributes


def start_run(nodes: Nodes, folder: Path, n_contexts: int | None, *extra: str) -> subprocess.Popen:
    """The CLI joined to the cluster (the demo's ``n_contexts`` contexts of 5 candidates, or what ``extra`` says)."""
    demo = (
        [] if n_contexts is None else [f"dataset.demo.n_contexts={n_contexts}", "dataset.demo.n_candidates=5"]
    )
    command = [
        sys.executable,
        "-m",
        "pipeline.cli",
        f"runtime.address={nodes.address}",
        *demo,
        "judge.batch_size=8",
        "judge.max_model_len=2048",
        "judge.env.VLLM_CPU_KVCACHE_SPACE=1",
        f"judge.store_path={folder / 'judgements.sqlite'}",
        f"paths.output_root={folder}",
        f"paths.run_dir={folder / 'run'}",
        *extra,
    ]
    return subprocess.Popen(
        command, cwd=ROOT, env=nodes.env, stdout=open(folder / "console.log", "w"), stderr=subprocess.STDOUT
    )


def events(folder: Path) -> list[dict]:
    return read_events(folder / "run" / "logs" / "engine_events.jsonl")


def started(folder: Path) -> list[dict]:
    """The judge workers the driver's pool saw start (worker host:pid, node)."""
    return [e for e in events(folder) if e.get("event") == "worker_started"]


def wait_for(condition, what: str, driver: subprocess.Popen, folder: Path, seconds: float = 400) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert driver.poll() is None, f"the run ended before {what}: {console(folder)[-3000:]}"
        assert time.monotonic() < deadline, (
            f"gave up waiting for {what}: {console(folder)[-3000:]}\nthe run's last events:\n"
            + "\n".join(str(e)[:300] for e in events(folder)[-20:])
        )
        time.sleep(0.05)


def pid_of(started_event: dict) -> int:
    return int(started_event["worker"].rsplit(":", 1)[1])


def console(folder: Path) -> str:
    return (folder / "console.log").read_text(errors="replace")


def finished(driver: subprocess.Popen, folder: Path, prompts: int) -> pl.DataFrame:
    """The run ended 0 with every prompt judged exactly once in its table: its judgments."""
    assert driver.wait(timeout=900) == 0, console(folder)[-4000:]
    table = pl.read_parquet(folder / "run" / "tables" / "judgments.parquet")
    assert table.height == prompts and table.select(KEYS).n_unique() == prompts
    return table


def metrics(folder: Path) -> dict[str, float]:
    import json

    tracking = json.loads((folder / "run" / "tracking.json").read_text())
    return mlflow.MlflowClient(tracking["tracking_uri"]).get_run(tracking["run_id"]).data.metrics


def test_node_added_mid_run_gets_a_worker_and_a_drain_loses_nothing(nodes, tmp_path):
    """judge.num_actors=[1, 3] of two CPUs each on one worker node of three (room for one worker, never for
    two): a node that joins while the run judges gets a worker of its own, which judges part of the
    prompts (on a first node with room for a second worker, that worker could judge them all while the new node
    registers, and the joined one would find nothing left). Then a preemption notice
    (``ray drain-node``) for the first node: its worker gets no new batch, finishes those it holds and is released,
    and the node goes as the notice said; nothing is judged again, and the run ends 0 with every prompt once.
    The first worker is paused inside a batch while the node joins and the notice comes (a node's registration
    takes from seconds to a minute on a loaded machine; the run must not end before it)."""
    first = nodes.add(cpus=3)
    prompts = n_prompts(4, 5)  # 20 batches of 8: the first worker holds two when the node joins
    driver = start_run(nodes, tmp_path, 4, "judge.num_actors=[1,3]", "judge.num_cpus_per_actor=2")
    wait_for(lambda: len(started(tmp_path)) == 1, "the first worker", driver, tmp_path)
    [old] = started(tmp_path)
    log = tmp_path / "run" / "logs" / "engine_events.jsonl"
    wait_for(lambda: in_a_batch(log, old["worker"]), "a batch on the first node", driver, tmp_path)
    assert len(started(tmp_path)) == 1  # room for one of two CPUs on three
    with nodes.paused(pid_of(old)):
        nodes.add(cpus=2)
        wait_for(
            lambda: len({e["node"] for e in started(tmp_path)}) == 2,
            "a worker on the new node",
            driver,
            tmp_path,
        )
        nodes.drain(old["node"])
        wait_for(lambda: "its node is being drained" in console(tmp_path), "the drain seen", driver, tmp_path)
    assert nodes.node_of(pid_of(old)) is first

    # every worker on the first node (one: it has no room for a second) is released
    def there() -> set[str]:
        return {e["worker"] for e in started(tmp_path) if e["node"] == old["node"]}

    def drained() -> set[str]:
        return {e["worker"] for e in events(tmp_path) if e.get("event") == "worker_drained"}

    wait_for(lambda: drained() >= there(), "the drained node's workers released", driver, tmp_path)
    nodes.kill(first)  # the preemption itself

    table = finished(driver, tmp_path, prompts)
    assert drained() == there()
    assert not [e for e in events(tmp_path) if e.get("event") == "worker_lost"]
    joined = {e["worker"] for e in started(tmp_path) if e["node"] != old["node"]}
    by_worker = dict(table.group_by("worker").len().iter_rows())
    assert by_worker.get(old["worker"], 0) > 0  # what it judged before and during the drain is kept
    assert sum(by_worker.get(w, 0) for w in joined) > 0, by_worker  # the joined node's workers judged too
    got = metrics(tmp_path)
    assert (
        got["judge/drained_workers"] == len(there())
        and got["judge/redone_prompts"] == 0
        and got["judge/lost_nodes"] == 0
    )
    summary = (tmp_path / "run" / "summary.txt").read_text()
    assert f"{len(there())} worker(s) released from drained nodes" in summary


def test_a_node_lost_mid_generation_and_another_mid_judging_cost_their_open_batches_not_the_run(
    nodes, tmp_path
):
    """Generate, then evaluate (the generate_demo preset) with two workers on three worker nodes. The node of one is
    lost whole (its raylet, object store and every process) while it generates a batch: the outputs it held are
    generated again by another worker. The judge stage runs on the workers the generation kept (and one the pool
    starts where there is room); the node of a worker judging a batch is lost too: the run goes on with another,
    that batch judged again, and nothing that had reached the driver judged twice (the driver's count would not
    match). The run ends 0 with every output and every prompt once, and the summary, the log and MLflow say for each
    stage that a node was lost and how many prompts were redone."""
    for _ in range(3):
        nodes.add(cpus=2)
    inputs, models, judge_batch = 6, 3, 8
    driver = start_run(
        nodes,
        tmp_path,
        None,
        "experiment=generate_demo",
        f"generate.max_inputs={inputs}",
        "generate.batch_size=2",
        *[f"generate.models.{k}.max_tokens=24" for k in range(models)],
        "reasons.n=0",
        "judge.num_actors=2",
    )
    wait_for(lambda: len(started(tmp_path)) == 1, "a generating worker", driver, tmp_path)
    [victim] = started(tmp_path)
    assert victim["step"] == "generate"
    # the first worker paused until the second is up (two engines starting on two loaded cores may be 30 s apart,
    # longer than the first alone takes to generate every output)
    with nodes.paused(pid_of(victim)):
        wait_for(lambda: len(started(tmp_path)) == 2, "two generating workers", driver, tmp_path)
    assert len({e["node"] for e in started(tmp_path)}) == 2  # the pool spreads its workers over the nodes
    log = tmp_path / "run" / "logs" / "engine_events.jsonl"
    wait_for(lambda: in_a_batch(log, victim["worker"]), "a batch on the victim", driver, tmp_path)
    nodes.kill_node_of(pid_of(victim))

    # a judge worker inside a batch of judgments (the outputs' batches hold 2 rows)
    def judges_in_a_batch() -> list[str]:
        return [e["worker"] for e in open_batches(log) if e["rows"] == judge_batch]

    wait_for(judges_in_a_batch, "a batch of judgments", driver, tmp_path)
    judging = judges_in_a_batch()[0]
    nodes.kill_node_of(int(judging.rsplit(":", 1)[1]))

    assert driver.wait(timeout=900) == 0, console(tmp_path)[-4000:]
    generations = pl.read_parquet(tmp_path / "run" / "tables" / "generations.parquet")
    assert generations.height == inputs * models
    assert generations.select("input_id", "model").n_unique() == inputs * models
    table = pl.read_parquet(tmp_path / "run" / "tables" / "judgments.parquet")
    assert table.height == table.select(KEYS).n_unique() > 0
    ratings = pl.read_parquet(tmp_path / "run" / "tables" / "ratings.parquet")
    assert ratings.height == ratings.select("candidate_id", "attribute", "mode").n_unique() > 0
    prompts = table.height + ratings.height  # the comparisons and the absolute reads, judged in one stream
    lost = [e for e in events(tmp_path) if e.get("event") == "worker_lost"]
    assert [(e["worker"], e["cause"], e["step"]) for e in lost] == [
        (victim["worker"], "node", "generate"),
        (judging, "node", "judge"),
    ]
    assert [e["rows"] for e in lost] == [2, judge_batch]  # the batch each was working on
    assert len({e["node"] for e in events(tmp_path) if e.get("event") == "node_lost"}) == 2
    # what the judge victim delivered before its node went was judged by no one else, and no survivor judged
    # anything twice: the survivors' finished batches of judgments (of 8 rows but the last 6 of 54; the outputs' of
    # 2) and the victim's rows in the table are every prompt once
    survivors = sum(
        e["rows"]
        for e in events(tmp_path)
        if e.get("event") == "batch_done" and e["worker"] != judging and e["rows"] > 2
    )
    delivered = sum(t.filter(pl.col("worker") == judging).height for t in (table, ratings))
    assert survivors + delivered == prompts
    got = metrics(tmp_path)
    assert got["generate/lost_nodes"] == 1 and got["generate/redone_prompts"] == 2
    assert got["judge/lost_nodes"] == 1 and got["judge/redone_prompts"] == judge_batch
    assert got["judge/engine_deaths"] == 0
    summary = (tmp_path / "run" / "summary.txt").read_text()
    assert re.search(
        rf"interrupted: 1 node\(s\) lost, 1 worker\(s\) lost, {judge_batch} prompt\(s\) judged again", summary
    )
    run_log = (tmp_path / "run" / "run.log").read_text()
    for stage in ("generate", "judge"):
        assert f"1 node(s) were lost during the run with {stage} workers on them" in run_log
