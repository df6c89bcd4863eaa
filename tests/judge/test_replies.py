"""A reply is an answer only if it holds what was asked for: the checks of pipeline.judge.api.replies on each kind
of non-answer, and the client against a faulty stand-in server that fails half of its attempts in every way
(seeded, under concurrency): every prompt answered, once, with what the server answered for it; every failed
attempt counted by its kind; nothing that is not an answer in the reply cache."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from pipeline.config.judging import ApiConfig
from pipeline.judge.api.client import ApiClient, cache_key
from pipeline.judge.api.replies import chat_check, completion_check
from pipeline.judge.spec import ApiEndpoint
from tests.judge.faulty import FaultyServer, logprob, prompt_key

GOOD_COMPLETION = {
    "choices": [{"index": 0, "text": " A", "logprobs": {"top_logprobs": [{"token_id:7": -0.2}]}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}
GOOD_CHAT = {
    "choices": [
        {
            "index": 0,
            "message": {"content": " A"},
            "logprobs": {
                "content": [
                    {"token": " A", "logprob": -0.1, "top_logprobs": [{"token": " A", "logprob": -0.1}]}
                ]
            },
        }
    ]
}


@pytest.mark.parametrize(
    "body,kind",
    [
        ("not an object", "no_choices"),
        ({"id": "x"}, "no_choices"),
        ({"choices": []}, "no_choices"),
        ({"choices": [GOOD_COMPLETION["choices"][0]] * 2}, "wrong_samples"),
        ({"choices": [{"index": 0, "logprobs": {"top_logprobs": [{"token_id:7": -0.2}]}}]}, "no_text"),
        ({"choices": [{"index": 0, "text": " A"}]}, "no_logprobs"),
        ({"choices": [{"index": 0, "text": " A", "logprobs": {"top_logprobs": [{}]}}]}, "no_logprobs"),
        (
            {
                "choices": [
                    {"index": 0, "text": " A", "logprobs": {"top_logprobs": [{"token_id:7": math.nan}]}}
                ]
            },
            "not_finite",
        ),
        (
            {
                "choices": [
                    {"index": 0, "text": " A", "logprobs": {"top_logprobs": [{"token_id:7": -math.inf}]}}
                ]
            },
            "not_finite",
        ),
        ({**GOOD_COMPLETION, "usage": {"prompt_tokens": math.nan}}, "not_finite"),
    ],
)
def test_a_completion_that_is_not_an_answer_says_what_it_lacks(body, kind):
    assert completion_check(1, True)(GOOD_COMPLETION) is None
    assert completion_check(1, True)(body)[0] == kind


def test_a_chat_reply_needs_its_content_and_where_asked_its_first_tokens_logprobs():
    check = chat_check(1, True)
    assert check(GOOD_CHAT) is None
    no_content = {"choices": [{"index": 0, "message": {"role": "assistant"}}]}
    assert check(no_content)[0] == "no_text"
    no_logprobs = {"choices": [{"index": 0, "message": {"content": " A"}}]}
    assert check(no_logprobs)[0] == "no_logprobs" and chat_check(1, False)(no_logprobs) is None
    nan = {
        "choices": [
            dict(
                GOOD_CHAT["choices"][0],
                logprobs={
                    "content": [
                        {
                            "token": " A",
                            "logprob": math.nan,
                            "top_logprobs": [{"token": "A", "logprob": -1.0}],
                        }
                    ]
                },
            )
        ]
    }
    assert check(nan)[0] == "not_finite"
    assert chat_check(3, False)(GOOD_CHAT)[0] == "wrong_samples"


def test_the_client_against_a_server_that_fails_half_its_attempts_in_every_way(tmp_path):
    bodies = [
        {
            "model": "m",
            "prompt": [1, 2, k],
            "max_tokens": 1,
            "n": 1,
            "logprobs": 1,
            "logprob_token_ids": [7, 9],
        }
        for k in range(60)
    ]
    with FaultyServer(share=0.6, seed=3, slow=1.2) as server:
        settings = ApiConfig(
            base_url=server.url, concurrency=8, timeout=0.8, max_retries=8, backoff=0.01, backoff_max=0.02
        )
        client = ApiClient(ApiEndpoint(settings, "m", str(tmp_path / "cache.sqlite")))
        replies = client.post("/completions", bodies, check=completion_check(1, True))
        assert all(r.body is not None for r in replies), [r.error for r in replies if r.error]
        for body, reply in zip(bodies, replies, strict=True):
            key = prompt_key("/v1/completions", body)
            top = reply.body["choices"][0]["logprobs"]["top_logprobs"][0]
            assert top == {f"token_id:{t}": logprob(key, t) for t in (7, 9)}  # what it served for this prompt
            assert server.successes[key] == 1  # answered once
        counted = Counter(kind for r in replies for kind in r.failures)
        expected = server.expected_client_kinds()
        # every injected failure counted as its kind; a loaded machine may add timeouts of its own (retried too)
        assert counted["timeout"] >= expected["timeout"]
        assert {k: n for k, n in counted.items() if k != "timeout"} == {
            k: n for k, n in expected.items() if k != "timeout"
        }
        assert sum(counted.values()) > 20
        assert set(counted) == {"not_json", "no_choices", "no_logprobs", "not_finite", "wrong_samples", "http_5xx",
                                "timeout", "connection"}  # fmt: skip
        assert server.max_in_flight > 1
        # the cache holds the answers only: a second post asks nothing
        again = client.post("/completions", bodies, check=completion_check(1, True))
        assert all(r.cached for r in again) and sum(server.successes.values()) == len(bodies)
        client.close()


def test_a_prompt_whose_replies_are_never_answers_fails_with_the_last_reason_and_is_not_cached(tmp_path):
    with FaultyServer(share=1.0, seed=0, max_failures=100) as server:
        settings = ApiConfig(
            base_url=server.url, concurrency=2, timeout=0.5, max_retries=2, backoff=0.01, backoff_max=0.02
        )
        client = ApiClient(ApiEndpoint(settings, "m", str(tmp_path / "cache.sqlite")))
        body = {"model": "m", "prompt": [5], "max_tokens": 1, "n": 1, "logprobs": 1, "logprob_token_ids": [7]}
        [reply] = client.post("/completions", [body], check=completion_check(1, True))
        assert reply.body is None and reply.attempts == 3 and len(reply.failures) == 3 and reply.error
        assert client.cache.get(cache_key(client.base_url, "/completions", body)) is None
        client.close()
