"""The judgement store on the real vLLM engine: a second run, in another folder, that adds one context to a
first run judges only the new context's prompts; the others come from the store, with the same answers; a third
run whose prompts are all stored starts no engine."""

from __future__ import annotations

import polars as pl
import pytest

from pipeline.config.derived import judgement_store_path
from pipeline.run.context import run
from pipeline.storage.events import read_events
from tests.conftest import compose

pytestmark = [pytest.mark.engine, pytest.mark.slow]

KEYS = ["context_id", "attribute", "template_id", "cand_a", "cand_b"]
N_CANDIDATES = 4
PER_CONTEXT = N_CANDIDATES * (N_CANDIDATES - 1) * 2  # both orderings, two attributes


def test_a_run_that_adds_a_context_judges_only_that_context(tmp_path):
    store = tmp_path / "judgements.sqlite"
    common = [
        f"dataset.demo.n_candidates={N_CANDIDATES}",
        "judge.max_model_len=2048",
        "runtime.executor=local",
        f"judge.store_path={store}",
        f"paths.output_root={tmp_path}",
    ]
    first = run(compose([*common, "dataset.demo.n_contexts=2", f"paths.run_dir={tmp_path / 'first'}"]))
    assert first.judge_stats.reused == 0 and first.judge_stats.judged_now == 2 * PER_CONTEXT
    # a third context and another scorer: only the new context is judged (the store's key holds no scoring setting)
    second = run(
        compose(
            [
                *common,
                "dataset.demo.n_contexts=3",
                "scoring.methods=[win_ratio]",
                f"paths.run_dir={tmp_path / 'second'}",
            ]
        )
    )
    stats = second.judge_stats
    assert stats.judged_now == 3 * PER_CONTEXT and stats.reused == 2 * PER_CONTEXT  # one context judged
    assert second.metrics["judge/reused_judgements"] == 2 * PER_CONTEXT
    log = (tmp_path / "second" / "run.log").read_text()
    assert (
        f"{2 * PER_CONTEXT} of the {3 * PER_CONTEXT} prompt(s) were answered from the judgement store" in log
    )
    assert f"{2 * PER_CONTEXT} of them from the judgement store" in second.summary
    a = pl.read_parquet(tmp_path / "first" / "tables" / "judgments.parquet")
    b = pl.read_parquet(tmp_path / "second" / "tables" / "judgments.parquet")
    joined = a.join(b, on=KEYS, suffix="_again")
    assert joined.height == a.height
    assert (
        joined["label_logprobs"].to_list() == joined["label_logprobs_again"].to_list()
    )  # the stored answers
    assert set(b.join(a, on=KEYS, how="anti")["context_id"]) == {"demo-2"}
    assert set(pl.read_parquet(tmp_path / "second" / "tables" / "scores.parquet")["method"]) == {"win_ratio"}
    # the first run again in a third folder: every prompt answered from the store on the driver, and no engine
    # started for it (no judge worker made: its engine would have recorded its start)
    third = run(compose([*common, "dataset.demo.n_contexts=2", f"paths.run_dir={tmp_path / 'third'}"]))
    assert third.judge_stats.reused == third.judge_stats.judged_now == 2 * PER_CONTEXT
    events = tmp_path / "third" / "logs" / "engine_events.jsonl"
    assert not [e for e in read_events(events) if e.get("event") == "engine_started"]
    assert [
        e
        for e in read_events(tmp_path / "first" / "logs" / "engine_events.jsonl")
        if e.get("event") == "engine_started"
    ]
    # judge.store=false: no store, so the engine judges everything (every other run test composes it so, and counts
    # each prompt judged by the engine once)
    off = compose([*common, "judge.store=false"])
    assert judgement_store_path(off.judge, tmp_path, tmp_path) is None
    assert judgement_store_path(compose(common).judge, tmp_path, tmp_path) == store
