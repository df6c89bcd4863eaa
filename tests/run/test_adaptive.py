"""Adaptive rounds end to end with the real CPU judge on a multi-node Ray cluster on this machine
(tests/run/nodes.py): a pool built from the shared SummEval data (dataset.pool, the summeval_pool preset), ranked in
rounds; the node of its judge worker lost whole in round 0 (the kept worker of the rounds replaced on the other
node, the batch judged again), the whole run killed in the middle of round 1 and resumed by the same command in the
same folder, with every prompt judged once; the rounds' curve in MLflow as a step series."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import polars as pl
import pytest

from pipeline.config.enums import Debias, Orderings
from pipeline.methods.scorers.contradiction import contradicted
from pipeline.scoring.reduce import reduce_judgments
from tests.conftest import in_a_batch, started_engines, stored_replies, worker_pid

pytestmark = [pytest.mark.ray, pytest.mark.engine, pytest.mark.slow, pytest.mark.cluster]

KEYS = ["context_id", "attribute", "template_id", "cand_a", "cand_b"]


def test_node_loss_in_round_0_and_a_killed_driver_in_round_1_judge_every_prompt_once(
    tmp_path, root, datasets, nodes
):
    nodes.add(cpus=2)
    nodes.add(cpus=2)
    folder = tmp_path / "run"
    store = tmp_path / "judgements.sqlite"
    n_items = 16  # the summaries of one SummEval article
    command = [
        sys.executable,
        "-m",
        "pipeline.cli",
        f"runtime.address={nodes.address}",
        "judge.env.VLLM_CPU_KVCACHE_SPACE=1",
        "experiment=summeval_pool",
        f"dataset.path={datasets / 'summeval' / 'summeval.jsonl'}",
        "dataset.max_contexts=1",
        "adaptive.first_round=0.5",  # 8 pairs a round: a matching, then 25% of what is judged (at least 8)
        "adaptive.later_round=0.5",
        "adaptive.budget.calls_per_item=4",  # 64 calls: 32 pairs in 4 rounds of 16 prompts
        "adaptive.stop.criterion=null",
        "judge.batch_size=4",
        "judge.max_model_len=2048",
        f"judge.store_path={store}",
        f"paths.output_root={tmp_path}",
        f"paths.run_dir={folder}",
    ]

    def judged() -> int:
        return stored_replies(store)

    driver = subprocess.Popen(
        command, cwd=root, env=nodes.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 600
    # the judge worker's node lost inside round 0 (after its first batch is stored): the pool starts the rounds' kept
    # worker again on the other node, with a new engine, and gives it the unfinished batches
    while judged() < 4:
        assert driver.poll() is None, "the run ended before its engine was killed"
        assert time.monotonic() < deadline, "the run judged nothing"
        time.sleep(0.2)
    [started] = started_engines(folder / "logs" / "engine_events.jsonl")
    killed = worker_pid(started)
    events = folder / "logs" / "engine_events.jsonl"
    while not in_a_batch(events, started["worker"]):
        assert driver.poll() is None and time.monotonic() < deadline, "the worker started no batch in round 0"
        time.sleep(0.01)
    nodes.kill_node_of(killed)
    assert not (folder / "rounds" / "round-00001.parquet").exists()  # still in round 0
    # killed inside round 1: its pairs chosen (on disk) and some, not all, of its 16 prompts judged
    while not ((folder / "rounds" / "round-00001.parquet").exists() and judged() >= 16 + 4):
        assert driver.poll() is None, "the run ended before it was killed"
        assert time.monotonic() < deadline, "the run did not reach round 1"
        time.sleep(0.3)
    driver.kill()
    driver.wait()
    stored = judged()
    assert 20 <= stored < 32  # inside round 1
    first = (folder / "run.log").read_text()  # round 0's judge stage reported the lost worker
    assert "1 judge worker(s) were lost during the run with a batch unfinished (" in first
    assert f":{killed})" in first
    assert "prompt(s) of the unfinished batches went to new workers" in first
    assert "1 node(s) were lost during the run with judge workers on them" in first

    again = subprocess.run(command, cwd=root, env=nodes.env, capture_output=True, text=True, timeout=1200)
    assert again.returncode == 0, again.stderr[-4000:]
    log = (folder / "run.log").read_text()
    assert "continuing adaptive rounds in" in log
    # one judge worker (one engine start) per run, kept for all its rounds, and the one that replaced the worker
    # whose engine was killed: the killed run's two and the resumed one's
    assert len(list((folder / "logs").glob("judge-*.log"))) == 3

    rounds = pl.read_parquet(folder / "tables" / "rounds.parquet").sort("round")
    assert rounds.get_column("round").to_list() == [0, 1, 2, 3, 4]
    assert rounds.get_column("pairs").to_list() == [0, 8, 16, 24, 32]
    assert rounds.get_column("calls").to_list() == [0, 16, 32, 48, 64]
    assert rounds.get_column("stopped").to_list()[-1] == "call budget spent"
    assert rounds.filter(pl.col("round") > 0).get_column("spearman").is_not_null().all()
    assert (rounds.get_column("items") == n_items).all()

    table = pl.read_parquet(folder / "tables" / "judgments.parquet")
    assert table.height == 64 and table.select(KEYS).n_unique() == 64
    # the last fit's count of pairs whose orderings contradict each other is the rule's on the judged rows
    pairs = reduce_judgments(table, Debias.average, Orderings.both).comparisons
    expected = contradicted(pairs.get_column("p_ij").to_numpy(), pairs.get_column("p_ji").to_numpy())
    assert pairs.height == 32 and rounds.get_column("contradicted").to_list()[-1] == int(expected.sum())
    assert rounds.get_column("contradicted").null_count() == 0
    chosen = pl.read_parquet(folder / "tables" / "round_pairs.parquet")
    assert chosen.height == 64 and chosen.get_column("round").unique().sort().to_list() == [0, 1, 2, 3]
    # every judged row has its round, and every pair is there in both orderings
    joined = table.join(chosen, on=["context_id", "attribute", "cand_a", "cand_b"], how="left")
    assert joined.get_column("round").null_count() == 0
    flipped = chosen.select("round", pl.col("cand_b").alias("cand_a"), pl.col("cand_a").alias("cand_b"))
    assert chosen.join(flipped, on=["cand_a", "cand_b"], how="anti").height == 0
    # each prompt judged by an engine once, across the killed run and the resumed one: the store holds one answer
    # per distinct prompt (two pooled summaries with the same text make the same prompt, judged once)
    texts = dict(
        pl.read_parquet(folder / "tables" / "candidates.parquet").select("candidate_id", "text").iter_rows()
    )
    prompts = {(texts[a], texts[b]) for a, b in table.select("cand_a", "cand_b").iter_rows()}
    assert len(prompts) > 60 and judged() == len(prompts)

    # the final scores are the comparative methods on the adaptive comparisons, correlated with humans
    scores = pl.read_parquet(folder / "tables" / "scores.parquet")
    assert scores.filter(pl.col("method") == "poe_gaussian").height == n_items
    # the preset's first method, the rounds' model, with a standard error for every item
    logit_scores = scores.filter(pl.col("method") == "poe_logit")
    assert logit_scores.height == n_items and logit_scores.get_column("stderr").null_count() == 0

    # the report: the criterion over rounds, and the ranking by the rounds' model with per-item intervals
    summary = (folder / "summary.txt").read_text()
    assert f"adaptive rounds, pool ({n_items} items): stopping criterion none (the budget only)" in summary
    assert "call budget spent" in summary and "ranking by poe_logit with 95% intervals" in summary
    ranking = pl.read_csv(folder / "ranking.csv")
    assert ranking.height == n_items and ranking.get_column("lower").null_count() == 0
    assert pl.read_csv(folder / "rounds.csv").get_column("calls").to_list() == [0, 16, 32, 48, 64]
    assert (folder / "plots" / "rounds.png").exists() and (folder / "plots" / "ranking.png").exists()

    # the curve: one point per round in the resumed run's MLflow run (earlier rounds logged again)
    import mlflow

    tracking = json.loads((folder / "tracking.json").read_text())
    client = mlflow.MlflowClient(tracking["tracking_uri"])
    history = client.get_metric_history(tracking["run_id"], "adaptive/calls")
    assert sorted((m.step, m.value) for m in history) == [(r, 16.0 * r) for r in range(5)]
    assert [m.step for m in client.get_metric_history(tracking["run_id"], "adaptive/spearman")] != []
    # the scoring stage left out (and counted) the same contradicting pairs as the rounds' last fit
    metrics = client.get_run(tracking["run_id"]).data.metrics
    assert metrics["scoring/poe_logit_contradicted"] == float(expected.sum())
