"""A run whose judge is behind an endpoint that misbehaves as real ones do (a faulty stand-in server, seeded: half
of the attempts fail as replies that are not answers (or parse but do not answer what was asked), 5xx, 429, replies slower than the timeout and dropped
connections, under concurrency): the run ends with every prompt judged exactly once, every stored value what the
server answered for that prompt, and every failed attempt counted by its kind in the stats, the summary and MLflow.
No engine: the stand-in answers (the API tests against a real `vllm serve` are tests/run/test_api.py)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl
import pytest

from pipeline.run.context import run
from tests.conftest import compose, run_table
from tests.judge.faulty import FaultyServer

pytestmark = [pytest.mark.slow]

N_CONTEXTS, N_CANDIDATES = 2, 4
N_PROMPTS = N_CONTEXTS * N_CANDIDATES * (N_CANDIDATES - 1) * 2  # both orderings, two attributes
KEYS = ["context_id", "attribute", "cand_a", "cand_b"]


def standin_overrides(url: str, judge_model: str, tmp_path, *extra: str) -> list[str]:
    """The demo judged in-process through a stand-in endpoint; ``judge.model`` names the local checkpoint, whose
    tokenizer settles the prompts (the stand-in answers them)."""
    return [
        "judge=api",
        f"judge.model={judge_model}",
        f"judge.endpoint.base_url={url}",
        "judge.endpoint.model=stand-in",
        f"judge.endpoint.cache_path={tmp_path / 'replies.sqlite'}",
        "runtime=inprocess",
        f"dataset.demo.n_contexts={N_CONTEXTS}",
        f"dataset.demo.n_candidates={N_CANDIDATES}",
        "judge.max_model_len=2048",
        "tracking.plots=false",
        f"paths.output_root={tmp_path}",
        *extra,
    ]


@pytest.mark.parametrize("path", ["token_ids", "chat"])
def test_a_run_against_a_faulty_endpoint_judges_every_prompt_once_with_what_it_answered(
    path, tmp_path, judge_model
):
    with FaultyServer(
        share=0.5, seed=1, slow=10, models=("stand-in-2024-08-06", "stand-in-2024-11-20")
    ) as server:
        cfg = compose(
            standin_overrides(
                server.url,
                judge_model,
                tmp_path,
                f"judge.endpoint.path={path}",
                "judge.endpoint.timeout=0.8",
                "judge.endpoint.max_retries=8",
                "judge.endpoint.backoff=0.01",
                "judge.endpoint.backoff_max=0.02",
                "judge.endpoint.concurrency=8",
            )
        )
        result = run(cfg)
    table = run_table(result, "judgments")
    assert table.height == N_PROMPTS and table.select(KEYS).n_unique() == N_PROMPTS
    # every prompt answered by the server, and stored as it answered; an answer is asked again only after the
    # client gave up on it: a reply slower than the client's timeout on a loaded machine (the server wrote it to a
    # connection the client had closed), counted as one of the client's own timeouts (check_counted, below)
    counted = Counter(dict(result.judge_stats.failed_attempts))
    expected = server.expected_client_kinds()
    assert len(server.successes) == N_PROMPTS
    stored = sorted(tuple(np.round(v, 12)) for v in table["label_logprobs"].to_list())
    served = sorted(tuple(np.round(v, 12)) for v in server.served.values())
    assert stored == served
    # every failed attempt counted by its kind (a loaded machine may turn late replies into timeouts of its own)
    server.check_counted(counted)
    assert sum(expected.values()) > 10
    for kind, n in counted.items():
        assert result.metrics[f"judge/api_failed_attempts/{kind}"] == n
    assert "API attempts that failed and were retried or reported" in result.summary
    # the answers without usage are kept and counted, their tokens unknown
    assert result.metrics["judge/api_usage_unknown"] == len(server.no_usage) > 0
    assert f"{len(server.no_usage)} answer(s) whose reply gave no token counts" in result.summary
    # the provider switched snapshots mid-run: every answer's model recorded, the change said in words
    (judge, models), *others = result.judge_stats.models_by_judge().items()
    assert not others and dict(models) == dict(server.served_models) and len(server.served_models) == 2
    assert f"judge {judge} changed within the run: its replies name 2 models" in result.summary
    assert result.metrics["judge/api_served_models"] == 2
    # and on the judge's card, beside its other measures
    card = pl.from_arrow(result.values["judge_card"]).filter(pl.col("judge") == judge)
    assert card.height and set(card["n_served_models"]) == {2}
    for model, n in server.served_models.items():
        assert all(f"{model} ({n})" in text for text in card["served_models"])
    assert "changed within the run: its replies name 2 models" in result.summary.split("judge card", 1)[1]


def test_batch_judging_records_its_batches_in_the_run_folder_and_costs_the_batch_price(tmp_path, judge_model):
    """judge.endpoint.batch=true against a stand-in of the Batch API that misbehaves as the issue's probe did: the first
    batch expires with part of its lines answered, every batch drops a third of its lines and fails a sixth, every
    create is answered after the client's timeout, the first output holds malformed lines and lines built to break a
    reader, every output and error file fails its first four downloads (a 404, a 500, a 502, a dropped connection),
    and the second batch is forgotten by the provider once polled. Every prompt judged once, with what the server
    answered, in one run; no input submitted twice; every batch's state in the run folder and the summary; the cost
    at half price."""
    from tests.judge.faulty import BatchServer

    with BatchServer(polls=2, share=0.5, every=True, seed=5, ends={0: "expired"}, partial=0.7, create_delay=0.6,
                     malformed=True, download_failures=4) as server:  # fmt: skip
        server.forget_after["batch-1"] = 1  # found at the provider, polled once, then a 404
        cfg = compose(
            standin_overrides(
                server.url,
                judge_model,
                tmp_path,
                "judge.endpoint.path=token_ids",
                "judge.endpoint.batch=true",
                "judge.endpoint.batch_poll=0.01",
                "judge.endpoint.batch_poll_max=0.02",
                "judge.endpoint.timeout=0.3",
                "judge.endpoint.backoff=0.01",
                "judge.endpoint.price_input=1.0",
                "judge.endpoint.price_output=2.0",
                "judge.batch_size=1000",  # one engine call: its batch jobs one after the other
            )
        )
        result = run(cfg)
    table = run_table(result, "judgments")
    assert table.height == N_PROMPTS and set(server.successes.values()) == {1}
    assert sorted(tuple(v) for v in table["label_logprobs"].to_list()) == sorted(
        tuple(v) for v in server.served.values()
    )
    # no input submitted twice (the forgotten batch's requests asked again in a batch of their own marker)
    assert len(server.created) >= 4 and server.forgotten == {"batch-1"}
    assert len(set(server.inputs)) == len(server.inputs)
    states = dict(result.judge_stats.batches)
    assert states["expired"] == 1 and states["lost"] == 1 and "open" not in states
    assert states["completed"] == len(server.created) - 2
    assert result.metrics["judge/api_batches/expired"] == 1
    assert f"Batch jobs: {len(server.created)} (" in result.summary and "1 expired" in result.summary
    counted = dict(result.judge_stats.failed_attempts)
    assert counted["batch_failed"] > 0 and counted["no_line"] > 0 and counted["conflict"] == 1
    stats = result.judge_stats
    full = (stats.billed_prompt_tokens * 1.0 + stats.billed_completion_tokens * 2.0) / 1e6
    assert stats.billed_prompt_tokens > 0 and stats.money == pytest.approx(full * 0.5)
    assert "API (batch/token_ids path)" in result.summary


def test_a_run_that_stops_on_a_batch_not_done_ends_at_once_on_ray_and_the_rerun_finishes_it(
    tmp_path, judge_model
):
    """The CLI on a local Ray (the endpoint's step and the prompts on the driver, four per engine call):
    the first call's batch is not done within judge.endpoint.batch_wait and stops the run while Ray Data still streams the
    rest; the process ends with its error's exit code (before the fix it hung in Ray Data's iterator finaliser,
    connecting to the Ray it had shut down); the same command, once the batch is done, ends 0 with every prompt
    judged once, that batch picked up (not created again) and no input submitted twice."""
    import subprocess
    import sys

    from tests.conftest import ROOT
    from tests.judge.faulty import BatchServer

    with BatchServer(polls=10**9, share=0.0) as server:
        overrides = [
            o for o in standin_overrides(server.url, judge_model, tmp_path, "judge.endpoint.path=token_ids")
            if o != "runtime=inprocess"
        ] + ["judge.endpoint.batch=true", "judge.endpoint.batch_poll=0.05", "judge.endpoint.batch_poll_max=0.1",
             "judge.endpoint.batch_wait=3", "judge.batch_size=4", f"paths.run_dir={tmp_path / 'run'}"]  # fmt: skip
        command = [sys.executable, "-m", "pipeline.cli", *overrides]
        first = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            out, _ = first.communicate(timeout=600)  # a hang fails here, not at the CI's limit
        except subprocess.TimeoutExpired:
            first.kill()
            pytest.fail("the run stopped by a pending batch did not end")
        assert (
            first.returncode != 0 and "is in_progress after" in out and "the same command picks it up" in out
        )
        assert server.created == ["batch-0"]
        server.polls = 1  # the provider finishes the batch
        again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        assert server.created[0] == "batch-0" and "batch-0" not in server.created[1:]
        assert len(set(server.inputs)) == len(server.inputs)
    table = pl.read_parquet(tmp_path / "run" / "tables" / "judgments.parquet")
    assert table.height == N_PROMPTS and table.select(KEYS).n_unique() == N_PROMPTS
