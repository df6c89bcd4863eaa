"""Batch judging (judge.api.batch) against a stand-in of OpenAI's Batch API (/files, /batches, file contents; no
hosted API is reachable here): the input file, the upload, the batch, its polling and its output read with the reply
checks; the lines that failed sent once more as a batch of their own; the batch recorded in the run folder and
picked up by a rerun instead of submitted again; answers in the reply cache."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from pipeline.config.judging import ApiConfig
from pipeline.judge.api.batch import BatchJobs, BatchPending, BatchRecord, Line, input_file, read_output
from pipeline.judge.api.client import ApiClient
from pipeline.judge.api.replies import completion_check
from pipeline.judge.spec import ApiEndpoint
from tests.judge.faulty import BatchServer, logprob, prompt_key

BODIES = [
    {"model": "m", "prompt": [3, 4, k], "max_tokens": 1, "n": 1, "logprobs": 1, "logprob_token_ids": [7, 9]}
    for k in range(40)
]


def client_of(server: BatchServer, tmp_path, **settings) -> ApiClient:
    config = ApiConfig(base_url=server.url, max_retries=3, backoff=0.01, backoff_max=0.02, batch=True,
                       batch_poll=0.01, batch_poll_max=0.02, **settings)  # fmt: skip
    return ApiClient(ApiEndpoint(config, "m", str(tmp_path / "replies.sqlite")))


def test_a_batch_is_uploaded_polled_read_and_its_failed_lines_sent_once_more(tmp_path):
    with BatchServer(polls=3, share=0.4, seed=2) as server:
        client = client_of(server, tmp_path)
        jobs = BatchJobs(client, tmp_path / "run" / "api_batches.jsonl")
        replies = jobs.post("/completions", BODIES, [completion_check(1, True)] * len(BODIES))
        assert all(r.body is not None and r.batch for r in replies), [r.error for r in replies if r.error]
        for body, reply in zip(BODIES, replies, strict=True):
            key = prompt_key("/v1/completions", body)
            top = reply.body["choices"][0]["logprobs"]["top_logprobs"][0]
            assert top == {f"token_id:{t}": logprob(key, t) for t in (7, 9)}
            assert server.successes[key] == 1
        # the first batch's failed lines (a 500, a body without logprobs, a line left out) went in a second batch
        assert server.created == ["batch-0", "batch-1"] and sum(server.line_failures.values()) > 3
        counted = Counter(kind for r in replies for kind in r.failures)
        assert counted == Counter(
            {
                "http_5xx": server.line_failures["http_500"],
                "no_logprobs": server.line_failures["no_logprobs"],
                "no_line": server.line_failures["missing"],
            }  # fmt: skip
        )
        # the record: both batches in the run folder; the answers in the reply cache (a second post asks nothing)
        record = [json.loads(x) for x in (tmp_path / "run" / "api_batches.jsonl").read_text().splitlines()]
        assert [r["batch_id"] for r in record] == ["batch-0", "batch-1"] and record[0]["requests"] == len(
            BODIES
        )
        again = jobs.post("/completions", BODIES, [completion_check(1, True)] * len(BODIES))
        assert all(r.cached for r in again) and len(server.created) == 2
        client.close()


def test_a_batch_not_done_in_time_stops_the_run_and_the_rerun_picks_it_up(tmp_path):
    record = tmp_path / "api_batches.jsonl"
    with BatchServer(polls=1000, share=0.0) as server:
        client = client_of(server, tmp_path, batch_wait=0.1)
        with pytest.raises(BatchPending, match="the same command picks it up"):
            BatchJobs(client, record).post("/completions", BODIES, [completion_check(1, True)] * len(BODIES))
        assert server.created == ["batch-0"]
        server.polls = 2  # the batch is done by the time the run is started again
        rerun = client_of(server, tmp_path)
        replies = BatchJobs(rerun, record).post(
            "/completions", BODIES, [completion_check(1, True)] * len(BODIES)
        )
        assert all(r.body is not None for r in replies) and server.created == [
            "batch-0"
        ]  # not submitted again
        client.close()
        rerun.close()


def test_the_input_file_names_each_request_by_its_cache_key_and_the_output_is_read_by_custom_id(tmp_path):
    lines = [Line(f"id-{k}", body, completion_check(1, True)) for k, body in enumerate(BODIES[:3])]
    text = input_file("/completions", lines)
    rows = [json.loads(x) for x in text.splitlines()]
    assert [r["custom_id"] for r in rows] == ["id-0", "id-1", "id-2"]
    assert {r["url"] for r in rows} == {"/v1/completions"} and rows[0]["body"] == BODIES[0]
    good = {"choices": [{"index": 0, "text": " A", "logprobs": {"top_logprobs": [{"token_id:7": -0.5}]}}]}
    output = "\n".join(
        [
            json.dumps({"custom_id": "id-1", "response": {"status_code": 200, "body": good}, "error": None}),
            json.dumps({"custom_id": "id-0", "response": {"status_code": 200, "body": {"choices": []}}}),
            "not json",
        ]
    )
    failures: dict = {}
    errors: dict = {}
    out = read_output([output], lines, failures, errors)
    assert out == {"id-1": good}
    assert failures == {"id-0": ["no_choices"], "id-2": ["no_line"]} and "no line" in errors["id-2"]
    assert BatchRecord(None).find("x") is None
