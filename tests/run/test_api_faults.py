"""A run whose judge is behind an endpoint that misbehaves as real ones do (a faulty stand-in server, seeded: half
of the attempts fail as replies that are not answers, 5xx, 429, replies slower than the timeout and dropped
connections, under concurrency): the run ends with every prompt judged exactly once, every stored value what the
server answered for that prompt, and every failed attempt counted by its kind in the stats, the summary and MLflow.
No engine: the stand-in answers (the API tests against a real `vllm serve` are tests/run/test_api.py)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import polars as pl
import pytest

from pipeline.run.context import run
from tests.conftest import compose
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
        f"judge.api.base_url={url}",
        "judge.api.model=stand-in",
        f"judge.api.cache_path={tmp_path / 'replies.sqlite'}",
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
    with FaultyServer(share=0.5, seed=1, slow=1.2) as server:
        cfg = compose(
            standin_overrides(
                server.url,
                judge_model,
                tmp_path,
                f"judge.api.path={path}",
                "judge.api.timeout=0.8",
                "judge.api.max_retries=8",
                "judge.api.backoff=0.01",
                "judge.api.backoff_max=0.02",
                "judge.api.concurrency=8",
            )
        )
        result = run(cfg)
    table = pl.read_parquet(result.run_dir / "tables" / "judgments.parquet")
    assert table.height == N_PROMPTS and table.select(KEYS).n_unique() == N_PROMPTS
    # every prompt answered once by the server, and stored as it answered
    assert len(server.successes) == N_PROMPTS and set(server.successes.values()) == {1}
    stored = sorted(tuple(np.round(v, 12)) for v in table["label_logprobs"].to_list())
    served = sorted(tuple(np.round(v, 12)) for v in server.served.values())
    assert stored == served
    # every failed attempt counted by its kind (a loaded machine may add timeouts of its own)
    counted = Counter(dict(result.judge_stats.failed_attempts))
    expected = server.expected_client_kinds()
    assert counted["timeout"] >= expected["timeout"]
    assert {k: n for k, n in counted.items() if k != "timeout"} == {
        k: n for k, n in expected.items() if k != "timeout"
    }
    assert sum(expected.values()) > 10
    for kind, n in counted.items():
        assert result.metrics[f"judge/api_failed_attempts/{kind}"] == n
    assert "API attempts that failed and were retried or reported" in result.summary


def test_batch_judging_records_its_batches_in_the_run_folder_and_costs_the_batch_price(tmp_path, judge_model):
    """judge.api.batch=true against a stand-in of the Batch API: every prompt judged once through batch jobs, the
    failed lines of the first sent once more, the batches recorded in the run folder, the cost at half price."""
    from tests.judge.faulty import BatchServer

    with BatchServer(polls=2, share=0.3, seed=5) as server:
        cfg = compose(
            standin_overrides(
                server.url,
                judge_model,
                tmp_path,
                "judge.api.path=token_ids",
                "judge.api.batch=true",
                "judge.api.batch_poll=0.01",
                "judge.api.batch_poll_max=0.02",
                "judge.api.price_input=1.0",
                "judge.api.price_output=2.0",
                "judge.batch_size=1000",  # one engine call: one batch job (and one for its failed lines)
            )
        )
        result = run(cfg)
    table = pl.read_parquet(result.run_dir / "tables" / "judgments.parquet")
    assert table.height == N_PROMPTS and set(server.successes.values()) == {1}
    assert sorted(tuple(v) for v in table["label_logprobs"].to_list()) == sorted(
        tuple(v) for v in server.served.values()
    )
    assert server.created == ["batch-0", "batch-1"]
    recorded = (result.run_dir / "api_batches.jsonl").read_text().splitlines()
    assert len(recorded) == 2 and "batch-0" in recorded[0]
    stats = result.judge_stats
    full = (stats.billed_prompt_tokens * 1.0 + stats.billed_completion_tokens * 2.0) / 1e6
    assert stats.billed_prompt_tokens > 0 and stats.money == pytest.approx(full * 0.5)
    assert "API (batch/token_ids path)" in result.summary
