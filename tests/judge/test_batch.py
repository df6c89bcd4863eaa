"""Batch judging (judge.endpoint.batch) against a stand-in of OpenAI's Batch API (/files, /batches, their lists, file
contents; no hosted API is reachable here): the input file, the intent recorded before the upload, the batch named by
its marker, its polling and its output read with the reply checks; the lines a batch did not answer sent in further
batches; a batch that expires, fails or is cancelled never picked up again; a crash after the create and a create
answered after the timeout finding the batch that exists; malformed output lines counted, never a crash. Every case
ends with every request answered once, with what the server answered, and no input file submitted twice."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from pipeline.config.judging import EndpointConfig
from pipeline.judge.endpoint.batch import BatchJobs, BatchPending, BatchRecord, batch_states
from pipeline.judge.endpoint.batch_lines import Line, Tally, input_file, read_output
from pipeline.judge.endpoint.client import ApiClient
from pipeline.judge.endpoint.replies import check_of, completion_reader
from pipeline.judge.spec import ApiEndpoint
from tests.judge.faulty import BatchServer, logprob, prompt_key

BODIES = [
    {"model": "m", "prompt": [3, 4, k], "max_tokens": 1, "n": 1, "logprobs": 1, "logprob_token_ids": [7, 9]}
    for k in range(40)
]
CHECK = check_of(completion_reader(1, (7, 9)))


def client_of(server: BatchServer, tmp_path, **settings) -> ApiClient:
    defaults = {
        "max_retries": 3,
        "backoff": 0.01,
        "backoff_max": 0.02,
        "batch_poll": 0.01,
        "batch_poll_max": 0.02,
    }
    config = EndpointConfig(base_url=server.url, batch=True, **(defaults | settings))
    return ApiClient(ApiEndpoint(config, "m", str(tmp_path / "replies.sqlite")))


def judge(server: BatchServer, tmp_path, bodies=BODIES, **settings) -> list:
    client = client_of(server, tmp_path, **settings)
    try:
        return BatchJobs(client, tmp_path / "run" / "api_batches.jsonl").post(
            "/completions", bodies, [CHECK] * len(bodies)
        )
    finally:
        client.close()


def assert_answered_once(server: BatchServer, replies: list, bodies=BODIES) -> None:
    """Every request answered, with what the server answered for it, once; no input file submitted twice."""
    assert all(r.body is not None for r in replies), [r.error for r in replies if r.error]
    for body, reply in zip(bodies, replies, strict=True):
        key = prompt_key("/v1/completions", body)
        top = reply.body["choices"][0]["logprobs"]["top_logprobs"][0]
        assert top == {f"token_id:{t}": logprob(key, t) for t in (7, 9)}
        assert server.successes[key] == 1
    assert len(set(server.inputs)) == len(server.inputs)


def states(tmp_path) -> dict:
    return BatchRecord(tmp_path / "run" / "api_batches.jsonl").batches()


def test_a_batch_is_uploaded_polled_read_and_its_failed_lines_sent_in_a_second_batch(tmp_path):
    with BatchServer(polls=3, share=0.4, seed=2) as server:
        replies = judge(server, tmp_path)
        assert_answered_once(server, replies)
        assert all(r.batch for r in replies)
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
        # the record: each batch's intent, file, id and reading; the marker at the provider (metadata, file name)
        batches = list(states(tmp_path).values())
        assert [b["batch_id"] for b in batches] == ["batch-0", "batch-1"]
        assert [b["state"] for b in batches] == ["read", "read"] and batches[0]["requests"] == len(BODIES)
        assert batches[0]["answered"] + sum(batches[0]["failed"].values()) == len(BODIES)
        assert server.batches["batch-0"]["metadata"] == {"pipeline_marker": batches[0]["marker"]}
        assert server.filenames[batches[0]["file_id"]] == batches[0]["marker"] + ".jsonl"
        assert batch_states(tmp_path / "run" / "api_batches.jsonl") == {"completed": 2}
        # the answers in the reply cache: a second post asks nothing
        again = judge(server, tmp_path)
        assert all(r.cached for r in again) and len(server.created) == 2


def test_a_batch_not_done_in_time_stops_the_run_and_the_rerun_picks_it_up(tmp_path):
    with BatchServer(polls=1000, share=0.0) as server:
        with pytest.raises(BatchPending, match="the same command picks it up"):
            judge(server, tmp_path, batch_wait=0.1)
        assert server.created == ["batch-0"]
        assert batch_states(tmp_path / "run" / "api_batches.jsonl") == {"open": 1}
        server.polls = 2  # the batch is done by the time the run is started again
        replies = judge(server, tmp_path)
        assert_answered_once(server, replies)
        assert server.created == ["batch-0"]  # not submitted again


def test_a_failed_download_leaves_the_batch_unread_and_nothing_is_paid_twice(tmp_path):
    """Every output file fails its first downloads (a 404, a 500, a 502, a dropped connection) and is then served:
    a download that fails within the run's retries stops the run with the batch unread (never read as an empty
    output, which would put every request in a new, paid batch); the same command downloads it again and reads it.
    Answers are in the reply cache before the batch is recorded as read."""
    with BatchServer(polls=1, share=0.0, download_failures=1) as server:
        with pytest.raises(
            BatchPending, match="could not download the output file of batch batch-0.*not read"
        ):
            judge(server, tmp_path, max_retries=0)  # one ask: the output file's 404
        assert server.created == ["batch-0"]
        assert batch_states(tmp_path / "run" / "api_batches.jsonl") == {"open": 1}
        with pytest.raises(BatchPending, match="could not download the error file of batch batch-0"):
            judge(server, tmp_path, max_retries=0)  # the rerun: the output served, the error file's 404
        replies = judge(server, tmp_path, max_retries=0)  # the second rerun: both served
        assert_answered_once(server, replies)
        assert server.created == ["batch-0"]  # one batch, paid once, whatever the downloads did
        assert batch_states(tmp_path / "run" / "api_batches.jsonl") == {"completed": 1}
    with BatchServer(polls=1, share=0.0, download_failures=4) as server:
        replies = judge(server, tmp_path / "second")  # a 404, then a 500, a 502 and a drop retried: one run
        assert_answered_once(server, replies)
        assert (
            server.created == ["batch-0"] and server.downloads["file-0"] == 0
        )  # the input is never read back


def test_a_batch_the_provider_no_longer_knows_is_said_so_and_its_requests_asked_again(tmp_path):
    with BatchServer(polls=3, share=0.0) as server:
        server.forgotten.add("batch-0")  # created, then forgotten: its id answers 404
        replies = judge(server, tmp_path)
        assert_answered_once(server, replies)
        assert server.created == ["batch-0", "batch-1"]  # asked again once, not polled for a day
        assert batch_states(tmp_path / "run" / "api_batches.jsonl") == {"lost": 1, "completed": 1}


def test_a_run_in_another_folder_takes_the_identical_batch_that_is_running_instead_of_creating_one(tmp_path):
    with BatchServer(polls=10**9, share=0.0) as server:
        with pytest.raises(BatchPending):
            judge(server, tmp_path, batch_wait=0.1)
        assert server.created == ["batch-0"]
        server.polls = 1
        client = client_of(
            server, tmp_path / "elsewhere"
        )  # another run folder, another cache: nothing recorded
        try:
            replies = BatchJobs(client, tmp_path / "elsewhere" / "api_batches.jsonl").post(
                "/completions", BODIES, [CHECK] * len(BODIES)
            )
        finally:
            client.close()
        assert_answered_once(server, replies)
        assert server.created == ["batch-0"]  # found at the provider by its marker, not created again


def test_a_torn_last_line_of_the_record_does_not_swallow_the_next_entry(tmp_path):
    record = BatchRecord(tmp_path / "api_batches.jsonl")
    record.add({"marker": "m.0", "input": "m", "state": "intent", "requests": 3})
    with record.path.open("a") as f:
        f.write('{"marker": "m.0", "state": "uplo')  # a write cut short by a crash
    record.add({"marker": "m.0", "state": "uploaded", "file_id": "file-7"})
    assert record.batches()["m.0"]["file_id"] == "file-7" and record.batches()["m.0"]["state"] == "uploaded"


@pytest.mark.parametrize("end", ["expired", "failed", "cancelled"])
def test_a_batch_that_ends_unfinished_is_read_and_never_picked_up_again_its_rest_goes_in_a_new_batch(
    tmp_path, end
):
    with BatchServer(share=0.0, ends={0: end}, partial=0.4, seed=1) as server:
        replies = judge(server, tmp_path)
        assert_answered_once(server, replies)
        assert server.created == ["batch-0", "batch-1"]
        # what the dead batch did not answer is counted as its failure, and went in a new batch
        unanswered = [r for r in replies if r.failures]
        assert 0 < len(unanswered) < len(BODIES) and {k for r in unanswered for k in r.failures} == {
            "batch_failed"
        }
        assert batch_states(tmp_path / "run" / "api_batches.jsonl") == {"completed": 1, end: 1}
        # a rerun asks nothing (every answer cached) and picks up no batch
        assert all(r.cached for r in judge(server, tmp_path)) and len(server.created) == 2


def test_a_batch_that_answers_nothing_is_not_picked_up_by_the_rerun_its_input_goes_in_a_new_batch(tmp_path):
    """An expired batch that answered nothing: the same input file again, under the next marker (a new batch)."""
    with BatchServer(share=0.0, ends={0: "expired"}, partial=0.0) as server:
        replies = judge(server, tmp_path, batch_rounds=1)
        assert all(r.body is None and r.failures == ["batch_failed"] for r in replies)
        assert "expired" in replies[0].error and "after 1 batch(es)" in replies[0].error
        replies = judge(server, tmp_path)
        assert_answered_once(server, replies)
        assert server.created == ["batch-0", "batch-1"] and b'#1"' in server.inputs[1]
        markers = [b["marker"] for b in states(tmp_path).values()]
        assert markers[0].endswith(".0") and markers[1].endswith(".1") and markers[0][:-2] == markers[1][:-2]


def test_a_crash_after_the_create_is_found_at_the_provider_by_the_rerun_not_created_again(
    tmp_path, monkeypatch
):
    add = BatchRecord.add

    def crash_at_created(self, entry):
        if entry.get("state") == "created":
            raise KeyboardInterrupt("the driver dies after POST /batches, before the record is written")
        add(self, entry)

    with BatchServer(share=0.0) as server:
        monkeypatch.setattr(BatchRecord, "add", crash_at_created)
        with pytest.raises(KeyboardInterrupt):
            judge(server, tmp_path)
        monkeypatch.setattr(BatchRecord, "add", add)
        assert (
            server.created == ["batch-0"]
            and states(tmp_path)[next(iter(states(tmp_path)))]["state"] == "uploaded"
        )
        replies = judge(server, tmp_path)
        assert_answered_once(server, replies)
        assert (
            server.created == ["batch-0"] and len(server.files) == 3
        )  # one input, one output, one error file


@pytest.mark.parametrize("keep_metadata", [True, False])
def test_a_create_answered_after_the_timeout_is_found_not_created_twice(tmp_path, keep_metadata):
    with BatchServer(share=0.0, create_delay=1.0, keep_metadata=keep_metadata) as server:
        replies = judge(server, tmp_path, timeout=0.3)
        assert_answered_once(server, replies)
        assert server.created == ["batch-0"]
        assert server.idempotency_keys == [next(iter(states(tmp_path)))]  # the marker, sent with the create
        assert [r.failures for r in replies] == [[]] * len(BODIES)


def test_a_provider_that_drops_a_third_and_fails_a_sixth_of_every_batch_loses_nothing_in_one_run(tmp_path):
    bodies = [dict(BODIES[0], prompt=[5, 6, k]) for k in range(240)]
    with BatchServer(share=0.5, every=True, seed=4) as server:
        replies = judge(server, tmp_path, bodies)
        assert_answered_once(server, replies, bodies)
        assert 5 <= len(server.created) <= 20
        assert server.line_failures["missing"] > 2 * server.line_failures["http_500"] > 0


def test_lines_left_by_too_few_rounds_are_reported_and_asked_again_by_the_rerun(tmp_path):
    with BatchServer(share=0.5, every=True, seed=5) as server:
        replies = judge(server, tmp_path, batch_rounds=1)
        failed = [r for r in replies if r.body is None]
        assert failed and all(r.error and r.failures for r in failed)
        replies = judge(
            server, tmp_path
        )  # the rerun: a new batch of what is left, not the old batch read again
        assert_answered_once(server, replies)
        assert len(server.created) >= 2


def test_malformed_output_lines_are_counted_by_kind_and_never_stop_the_read(tmp_path):
    with BatchServer(share=0.0, malformed=True) as server:
        replies = judge(server, tmp_path)
        assert_answered_once(server, replies)
        counted = Counter(kind for r in replies for kind in r.failures)
        assert counted == Counter({"conflict": 1, "bad_line": 1})
        first = next(iter(states(tmp_path).values()))
        assert first["failed"] == {"conflict": 1, "bad_line": 1}
        # a line cut short in each file, and the lines built to break a reader (faulty.HOSTILE_LINES)
        assert first["stray_lines"] == {
            "no_request": 4,
            "not_json": 3,
            "too_deep": 1,
            "bad_number": 1,
            "bad_text": 1,
        }


def test_a_batch_recorded_by_an_earlier_version_is_picked_up_not_submitted_again(tmp_path):
    with BatchServer(polls=1000, share=0.0) as server:
        with pytest.raises(BatchPending):
            judge(server, tmp_path, batch_wait=0.05)
        record = tmp_path / "run" / "api_batches.jsonl"
        batch = next(iter(states(tmp_path).values()))
        # the record as the earlier version wrote it: one line, input digest -> batch id
        legacy = {
            "input": batch["marker"].split(".")[0],
            "batch_id": batch["batch_id"],
            "requests": len(BODIES),
        }
        record.write_text(json.dumps(legacy) + "\n")
        server.polls = 0
        assert_answered_once(server, judge(server, tmp_path))
        assert server.created == ["batch-0"]


def test_the_input_file_names_each_request_by_its_cache_key_and_the_output_is_read_by_custom_id(tmp_path):
    lines = [Line(f"id-{k}", body, check_of(completion_reader(1, (7,)))) for k, body in enumerate(BODIES[:3])]
    text = input_file("/completions", lines)
    rows = [json.loads(x) for x in text.splitlines()]
    assert [r["custom_id"] for r in rows] == ["id-0", "id-1", "id-2"]
    assert {r["url"] for r in rows} == {"/v1/completions"} and rows[0]["body"] == BODIES[0]
    good = {"choices": [{"index": 0, "text": " A", "logprobs": {"top_logprobs": [{"token_id:7": -0.5}]}}]}
    output = "\n".join(
        [
            json.dumps({"custom_id": "id-1", "response": {"status_code": 200, "body": good}, "error": None}),
            json.dumps({"custom_id": "id-1", "response": {"status_code": 200, "body": good}, "error": None}),
            json.dumps({"custom_id": "id-0", "response": {"status_code": 200, "body": {"choices": []}}}),
            "not json",
        ]
    )
    tally = Tally()
    out = read_output([output], lines, tally)
    assert out == {"id-1": good}  # the same answer twice is one answer
    assert (
        tally.failures == {"id-0": ["no_choices"], "id-2": ["no_line"]} and "no line" in tally.errors["id-2"]
    )
    assert tally.stray == {"not_json": 1}
    assert BatchRecord(None).batches() == {}


def _judge_in_a_process(url: str, cache: str, folder: str, barrier, out) -> None:
    config = EndpointConfig(base_url=url, batch=True, max_retries=3, backoff=0.01, backoff_max=0.02, batch_poll=0.01,
                       batch_poll_max=0.02)  # fmt: skip
    client = ApiClient(ApiEndpoint(config, "m", cache))
    barrier.wait()
    try:
        replies = BatchJobs(client, f"{folder}/api_batches.jsonl").post(
            "/completions", BODIES, [CHECK] * len(BODIES)
        )
        out.put(sum(r.body is not None for r in replies))
    finally:
        client.close()


def test_two_runs_at_once_sharing_a_cache_pay_for_one_batch(tmp_path):
    """The security review's case: two run folders sharing one reply cache, started together against the Batch API
    stand-in (an upload that takes half a second, so both have looked the batch up before either creates it): one
    batch is created and paid for, both runs have every answer."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    with BatchServer(polls=2, share=0.0, upload_delay=0.5) as server:
        barrier, out = context.Barrier(2), context.Queue()
        runs = [
            context.Process(target=_judge_in_a_process,
                            args=(server.url, str(tmp_path / "replies.sqlite"), str(tmp_path / f"run{k}"), barrier, out))
            for k in range(2)
        ]  # fmt: skip
        for process in runs:
            process.start()
        for process in runs:
            process.join(120)
        assert [process.exitcode for process in runs] == [0, 0]
        assert [out.get(timeout=5) for _ in runs] == [len(BODIES)] * 2
        assert server.created == ["batch-0"] and len(server.inputs) == 1
        assert sum(server.successes.values()) == len(BODIES)  # 40 requests paid for 40 prompts


def test_a_rerun_without_the_reply_cache_pays_for_nothing_again_after_a_crash_in_the_read(tmp_path):
    """judge.endpoint.cache=false: a batch's answers are kept in the run folder before it is recorded as read, so a crash
    between that and the judgments part (a rerun finds the batch read) asks nothing again."""
    with BatchServer(polls=1, share=0.0) as server:
        config = EndpointConfig(
            base_url=server.url, batch=True, cache=False, batch_poll=0.01, batch_poll_max=0.02
        )
        for _ in range(2):  # the run, then its rerun (the judgments part was never written)
            client = ApiClient(ApiEndpoint(config, "m", None))
            try:
                replies = BatchJobs(client, tmp_path / "run" / "api_batches.jsonl").post(
                    "/completions", BODIES, [CHECK] * len(BODIES)
                )
            finally:
                client.close()
            assert all(r.body is not None for r in replies)
        assert server.created == ["batch-0"] and sum(server.successes.values()) == len(BODIES)
        assert (tmp_path / "run" / "api_batch_replies.sqlite").exists()
