"""A reply is an answer only if it holds what was asked for: the checks of pipeline.judge.endpoint.replies on each kind
of non-answer, and the client against a faulty stand-in server that fails half of its attempts in every way
(seeded, under concurrency): every prompt answered, once, with what the server answered for it; every failed
attempt counted by its kind; nothing that is not an answer in the reply cache."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from pipeline.config.judging import EndpointConfig
from pipeline.judge.endpoint.client import ApiClient, cache_key
from pipeline.judge.endpoint.replies import chat_reader, check_of, completion_reader
from pipeline.judge.spec import ApiEndpoint
from tests.judge.faulty import FaultyServer, logprob, prompt_key

GOOD_COMPLETION = {
    "choices": [{"index": 0, "text": " A", "logprobs": {"top_logprobs": [{"token_id:7": -0.2}]}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1},
}


def with_top(top: dict) -> dict:
    return {"choices": [dict(GOOD_COMPLETION["choices"][0], logprobs={"top_logprobs": [top]})]}


def completion_check(n, logprobs):
    return check_of(completion_reader(n, (7,) if logprobs else ()))


def chat_check(n, logprobs):
    return check_of(chat_reader(n, (" A",) if logprobs else (), logprobs=logprobs))


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
        ({**GOOD_COMPLETION, "usage": {"prompt_tokens": math.nan}}, "bad_usage"),
        # the replies that parse but do not answer: alternatives keyed by text, or by an id that is no number
        (with_top({" A": -0.1}), "bad_token"),
        (with_top({"token_id:abc": -0.1}), "bad_token"),
        (with_top({"token_id:8": -0.1}), "bad_token"),  # the requested id 7 is not there
        (with_top({"token_id:7": 5.0}), "bad_logprob"),
        (with_top({"token_id:7": 800}), "bad_logprob"),
        (with_top({"token_id:7": "-0.1"}), "not_finite"),
        ({**GOOD_COMPLETION, "usage": []}, "bad_usage"),
        ({**GOOD_COMPLETION, "usage": {"prompt_tokens": -5}}, "bad_usage"),
        ({**GOOD_COMPLETION, "usage": {"prompt_tokens": 2.7}}, "bad_usage"),
        ({**GOOD_COMPLETION, "usage": {"prompt_tokens": 3e9}}, "bad_usage"),
        ({**GOOD_COMPLETION, "usage": {"prompt_tokens": 3_000_000_000}}, "bad_usage"),
        ({**GOOD_COMPLETION, "usage": {"prompt_tokens": True}}, "bad_usage"),
        ({**GOOD_COMPLETION, "usage": {"prompt_tokens_details": {"cached_tokens": "x"}}}, "bad_usage"),
        (
            {**GOOD_COMPLETION, "usage": {"prompt_tokens": 3, "prompt_tokens_details": {"cached_tokens": 4}}},
            "bad_usage",
        ),  # fmt: skip
        ({**GOOD_COMPLETION, "usage": {"prompt_tokens_details": [1]}}, "bad_usage"),
        ({"choices": [dict(GOOD_COMPLETION["choices"][0], index=None)]}, "bad_index"),
        ({"choices": [dict(GOOD_COMPLETION["choices"][0], index="0")]}, "bad_index"),
        ({"choices": [dict(GOOD_COMPLETION["choices"][0], index=1)]}, "bad_index"),
        ({"choices": [dict(GOOD_COMPLETION["choices"][0], finish_reason=3)]}, "bad_finish"),
        # built to break a reader: a log-probability of 310 digits, an id of 4,400, an id given twice, an error
        (with_top({"token_id:7": -(10**310)}), "not_finite"),
        (with_top({"token_id:" + "1" * 4400: -0.1, "token_id:7": -0.2}), "bad_token"),
        (with_top({"token_id:0007": -0.5, "token_id:7": -0.2}), "bad_token"),
        ({**GOOD_COMPLETION, "error": {"message": "overloaded"}}, "http_5xx"),
        ({"choices": [], "error": {"message": "overloaded"}}, "http_5xx"),
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
    # 5,000 alternatives for the 20 asked: not the answer asked (it would move the floor of the missing words)
    many = [{"token": f"t{k}", "logprob": -1.0 - k / 10_000} for k in range(5000)]
    flooded = {"choices": [dict(GOOD_CHAT["choices"][0], logprobs={"content": [
        {"token": " A", "logprob": -0.1, "top_logprobs": [{"token": " A", "logprob": -0.1}, *many]}]})]}  # fmt: skip
    top20 = check_of(chat_reader(1, (" A", " B"), top=20))
    assert top20(flooded)[0] == "bad_token" and top20(GOOD_CHAT) is None
    assert check_of(chat_reader(1, (" A",)))(flooded) is None  # without a number asked, nothing to compare


def test_what_an_answer_says_is_read_as_it_says_it_whatever_the_order_of_its_choices_and_its_usage():
    # n=2 with the indices the other way round: each sample is the one its index says, the first token's read from
    # the choice of index 0
    first, second = (
        dict(GOOD_COMPLETION["choices"][0], text=" B"),
        dict(GOOD_COMPLETION["choices"][0], index=1),
    )
    first["index"], first["logprobs"] = 0, {"top_logprobs": [{"token_id:7": -0.7}]}
    answer = completion_reader(2, (7,))({"choices": [second, first]})
    assert answer.texts == [" B", " A"] and answer.logprobs == [-0.7]
    # usage: absent or null counts are unknown (the answer is kept, counted), present ones read as they are
    assert not completion_reader(1, (7,))({**GOOD_COMPLETION, "usage": None}).usage.known
    unknown = completion_reader(1, (7,))(
        {**GOOD_COMPLETION, "usage": {"prompt_tokens": None, "completion_tokens": 1}}
    )
    assert unknown.usage.prompt_tokens is None and not unknown.usage.known
    known = completion_reader(1, (7,))(GOOD_COMPLETION).usage
    assert known.known and (known.prompt_tokens, known.completion_tokens, known.cached_tokens) == (3, 1, None)
    # the chat path: an alternative without its token, or one token given two log-probabilities, is not an answer
    chat = chat_reader(1, (" A", " B"))
    assert chat(GOOD_CHAT).logprobs == [-0.1, -0.1] and chat(GOOD_CHAT).missing == 1  # " B" floored
    tokenless = json.loads(json.dumps(GOOD_CHAT))
    del tokenless["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["token"]
    assert check_of(chat)(tokenless)[0] == "bad_token"
    twice = json.loads(json.dumps(GOOD_CHAT))
    twice["choices"][0]["logprobs"]["content"][0]["top_logprobs"].append({"token": " A", "logprob": -2.0})
    assert check_of(chat)(twice)[0] == "bad_token"
    # the sampled path: indices that are null or strings
    sampled = chat_reader(2, ())
    samples = [{"index": 0, "message": {"content": "A"}}, {"index": 1, "message": {"content": "B"}}]
    assert sampled({"choices": samples}).texts == ["A", "B"]
    for index in (None, "1"):
        assert check_of(sampled)({"choices": [samples[0], dict(samples[1], index=index)]})[0] == "bad_index"


def test_a_cached_reply_that_is_not_an_answer_is_asked_again(tmp_path):
    body = {
        "model": "m",
        "prompt": [5, 6],
        "max_tokens": 1,
        "n": 1,
        "logprobs": 1,
        "logprob_token_ids": [7, 9],
    }
    reader = completion_reader(1, (7, 9))
    with FaultyServer(share=0.0) as server:
        settings = EndpointConfig(base_url=server.url, max_retries=1, backoff=0.01, backoff_max=0.02)
        client = ApiClient(ApiEndpoint(settings, "m", str(tmp_path / "cache.sqlite")))
        key = cache_key(client.base_url, "/completions", body)
        # what an older version kept: alternatives keyed by text
        client.cache.put(
            key, {"choices": [{"index": 0, "text": " A", "logprobs": {"top_logprobs": [{" A": -0.1}]}}]}
        )
        [reply] = client.post("/completions", [body], check=check_of(reader))
        assert not reply.cached and sum(server.successes.values()) == 1
        assert reader(reply.body).logprobs == reader(client.cache.get(key)).logprobs
        client.close()


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
    with FaultyServer(share=0.6, seed=3, slow=10) as server:
        settings = EndpointConfig(
            base_url=server.url, concurrency=8, timeout=0.8, max_retries=8, backoff=0.01, backoff_max=0.02
        )
        client = ApiClient(ApiEndpoint(settings, "m", str(tmp_path / "cache.sqlite")))
        replies = client.post("/completions", bodies, check=completion_check(1, True))
        assert all(r.body is not None for r in replies), [r.error for r in replies if r.error]
        for body, reply in zip(bodies, replies, strict=True):
            key = prompt_key("/v1/completions", body)
            top = reply.body["choices"][0]["logprobs"]["top_logprobs"][0]
            assert top == {f"token_id:{t}": logprob(key, t) for t in (7, 9)}  # what it served for this prompt
            assert server.successes[key] >= 1  # asked again only after a timeout (counted below)
        counted = Counter(kind for r in replies for kind in r.failures)
        # every injected failure counted as its kind; a loaded machine may turn late replies into timeouts of its
        # own (retried too)
        server.check_counted(counted)
        assert sum(counted.values()) > 20
        assert set(server.expected_client_kinds()) == {"not_json", "no_choices", "no_logprobs", "not_finite", "wrong_samples", "http_5xx",
                                "timeout", "connection", "bad_token", "bad_logprob", "bad_usage", "bad_index",
                                "too_deep", "bad_number", "bad_text", "too_large"}  # fmt: skip
        assert server.max_in_flight > 1
        # the cache holds the answers only: a second post asks nothing
        answered = sum(server.successes.values())
        again = client.post("/completions", bodies, check=completion_check(1, True))
        assert all(r.cached for r in again) and sum(server.successes.values()) == answered
        client.close()


def test_a_prompt_whose_replies_are_never_answers_fails_with_the_last_reason_and_is_not_cached(tmp_path):
    with FaultyServer(share=1.0, seed=0, max_failures=100) as server:
        settings = EndpointConfig(
            base_url=server.url, concurrency=2, timeout=0.5, max_retries=2, backoff=0.01, backoff_max=0.02
        )
        client = ApiClient(ApiEndpoint(settings, "m", str(tmp_path / "cache.sqlite")))
        body = {"model": "m", "prompt": [5], "max_tokens": 1, "n": 1, "logprobs": 1, "logprob_token_ids": [7]}
        [reply] = client.post("/completions", [body], check=completion_check(1, True))
        assert reply.body is None and reply.attempts == 3 and len(reply.failures) == 3 and reply.error
        assert client.cache.get(cache_key(client.base_url, "/completions", body)) is None
        client.close()
