"""The API judge's client against a local stand-in server (real HTTP on 127.0.0.1; no hosted API is reachable
here): retries with backoff on 429/5xx and lost connections, Retry-After honoured, refusals not retried, a
request that keeps failing reported with its error, bounded concurrency, the persistent cache, and the key
sent only as a header. Parsing of vLLM's token-id log-probabilities, with missing ids as a counted floor."""

from __future__ import annotations

import json
import random
import threading
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from pipeline.config.judging import EndpointConfig
from pipeline.contracts.engine import Request
from pipeline.judge.endpoint.client import ApiClient, backoff_delay, retry_after
from pipeline.judge.endpoint.replies import Refused, chat_reader, completion_reader
from pipeline.judge.openai.bodies import chat_body, completion_body
from pipeline.judge.spec import ApiEndpoint
from tests.judge.stand_in import LocalServer, read_json, send

KEY = "sk-test-0123456789abcdef-do-not-leak"


def ok_body(body: dict) -> dict:
    return {
        "choices": [
            {
                "index": 0,
                "text": " A",
                "finish_reason": "length",
                "logprobs": {"top_logprobs": [{"token_id:330": -0.1}]},
            }
        ],
        "usage": {"prompt_tokens": len(body.get("prompt", [])), "completion_tokens": 1},
        "echo": body,
    }


class StandIn(LocalServer):
    """A scripted OpenAI-compatible stand-in: ``script`` is a list of (status, headers) answered in turn for
    every request (then 200); it records each request's time, body and headers and the most in flight."""

    def __init__(self, script=(), delay: float = 0.0, port: int = 0):
        self.script = list(script)
        self.delay = delay
        self.requests: list[tuple[float, dict, dict]] = []
        self.in_flight = self.max_in_flight = 0
        self.lock = threading.Lock()
        super().__init__(port)

    def post(self, h) -> None:
        body = read_json(h)
        with self.lock:
            self.requests.append((time.monotonic(), body, dict(h.headers)))
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            status, headers = self.script.pop(0) if self.script else (200, {})
        time.sleep(self.delay)
        # answered: no longer in flight before the reply goes out (decremented after it, a client that sends its next
        # request on the reply could be counted beside this one, and the bound read one too many under load)
        with self.lock:
            self.in_flight -= 1
        send(
            h,
            ok_body(body) if status == 200 else {"error": {"message": f"scripted {status}"}},
            status,
            headers,
        )


@pytest.fixture
def stand_in():
    servers = []

    def make(*args, **kwargs):
        servers.append(StandIn(*args, **kwargs))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def settings(url: str, cache_path: str | None = None, **kw) -> ApiEndpoint:
    """An endpoint at ``url`` with quick retries (the reply cache only where ``cache_path`` is given)."""
    config = EndpointConfig(**{"base_url": url, "backoff": 0.01, "backoff_max": 0.05, "concurrency": 4, **kw})
    return ApiEndpoint(config, model="judge", cache_path=cache_path)


def test_retry_after_in_seconds_or_as_a_date():
    assert retry_after("3") == 3.0 and retry_after("0.5") == 0.5
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < retry_after(later) <= 30
    assert retry_after(None) is None and retry_after("soon") is None


def test_backoff_grows_exponentially_with_jitter_capped_and_yields_to_retry_after():
    s = EndpointConfig(base_url="http://x", backoff=0.5, backoff_max=8.0)
    rng = random.Random(0)
    for attempt in range(8):
        d = backoff_delay(attempt, s, rng, None)
        cap = min(8.0, 0.5 * 2**attempt)
        assert 0.5 * cap <= d < cap
    assert backoff_delay(0, s, rng, 20.0) == 20.0  # the server asked for longer
    assert backoff_delay(5, s, rng, 0.0) >= 4.0  # asking for less does not shorten the backoff


def test_429_with_retry_after_then_500_then_success(stand_in):
    server = stand_in([(429, {"Retry-After": "0.3"}), (500, {})])
    client = ApiClient(settings(server.url))
    [reply] = client.post("/completions", [{"model": "m", "prompt": [1, 2]}])
    assert reply.error is None and reply.attempts == 3 and reply.body["echo"]["prompt"] == [1, 2]
    assert client.stats.retries == 2 and client.stats.by_status == {"429": 1, "500": 1, "200": 1}
    (t429, _, _), (t500, _, _), _ = server.requests
    assert t500 - t429 >= 0.3  # Retry-After honoured (a lower bound, not a timing measurement)


def test_a_refusal_is_not_retried_and_its_message_is_kept(stand_in):
    server = stand_in([(400, {})])
    client = ApiClient(settings(server.url))
    [reply] = client.post("/completions", [{"model": "m"}])
    assert reply.body is None and reply.error == "HTTP 400: scripted 400" and reply.attempts == 1
    assert len(server.requests) == 1 and client.stats.failed == 1


def test_a_request_that_keeps_failing_is_reported_and_the_others_are_answered(stand_in):
    server = stand_in([(503, {})] * 3)
    client = ApiClient(settings(server.url, max_retries=2, concurrency=1))
    replies = client.post("/completions", [{"model": "m", "prompt": [k]} for k in range(3)])
    assert replies[0].error == "HTTP 503: scripted 503" and replies[0].attempts == 3
    assert [r.error for r in replies[1:]] == [None, None]
    assert [r.body["echo"]["prompt"] for r in replies[1:]] == [[1], [2]]


def test_a_server_that_goes_away_and_comes_back_costs_retries_not_the_run(stand_in):
    probe = stand_in()
    port = probe.port
    probe.close()  # nothing listens on the port now
    client = ApiClient(settings(f"http://127.0.0.1:{port}/v1", backoff=0.2, backoff_max=0.4, max_retries=20))
    started = threading.Timer(0.8, lambda: stand_in(port=port))
    started.start()
    [reply] = client.post("/completions", [{"model": "m", "prompt": [7]}])
    started.join()
    assert reply.error is None and reply.body["echo"]["prompt"] == [7]
    assert client.stats.by_status.get("transport", 0) >= 1 and client.stats.retries >= 1


def test_concurrency_is_bounded_and_used(stand_in):
    server = stand_in(delay=0.05)
    client = ApiClient(settings(server.url, concurrency=3))
    replies = client.post("/completions", [{"model": "m", "prompt": [k]} for k in range(12)])
    assert [r.body["echo"]["prompt"] for r in replies] == [[k] for k in range(12)]  # in order
    assert 1 < server.max_in_flight <= 3


def test_the_cache_answers_a_repeated_request_without_sending_it(stand_in, tmp_path):
    server = stand_in()
    path = tmp_path / "replies.sqlite"
    bodies = [{"model": "m", "prompt": [k], "temperature": 0} for k in range(4)]
    first = ApiClient(settings(server.url, cache_path=str(path))).post("/completions", bodies)
    again = ApiClient(settings(server.url, cache_path=str(path)))  # another run, the same file
    replies = again.post("/completions", [*bodies, {**bodies[0], "temperature": 1}])
    assert len(server.requests) == 5  # 4, then only the request with another sampling setting
    assert [r.cached for r in replies] == [True] * 4 + [False] and again.stats.cached == 4
    assert [r.body for r in replies[:4]] == [r.body for r in first]


def test_the_key_is_sent_as_a_header_only(stand_in, tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("CA_TEST_KEY", KEY)
    server = stand_in([(401, {})])
    path = tmp_path / "replies.sqlite"
    client = ApiClient(settings(server.url, api_key_env="CA_TEST_KEY", cache_path=str(path), concurrency=1))
    with caplog.at_level("DEBUG"):
        refused, answered = client.post(
            "/completions", [{"model": "m", "prompt": [1]}, {"model": "m", "prompt": [2]}]
        )
    assert all(h["Authorization"] == f"Bearer {KEY}" for _, _, h in server.requests)
    assert KEY not in refused.error and KEY not in caplog.text
    assert KEY.encode() not in path.read_bytes() and answered.error is None
    assert KEY not in repr(client.settings)
    monkeypatch.delenv("CA_TEST_KEY")
    with pytest.raises(RuntimeError, match="'CA_TEST_KEY', but that environment variable is empty"):
        ApiClient(settings(server.url, api_key_env="CA_TEST_KEY")).post(
            "/completions", [{"model": "m", "prompt": [3]}]
        )


def test_completion_bodies_and_token_id_logprobs():
    read = Request(token_ids=(330, 49, 389, 50), max_tokens=1, n=1, temperature=0.0, seed=0)
    body = completion_body("smol", [1, 2, 3], read)
    assert body["prompt"] == [1, 2, 3] and body["logprob_token_ids"] == [330, 49, 389, 50]
    assert body["max_tokens"] == 1 and body["temperature"] == 0.0 and body["return_tokens_as_token_ids"]
    reply = {
        "choices": [
            {
                "index": 0,
                "text": " A",
                "finish_reason": "length",
                "logprobs": {
                    "top_logprobs": [{"token_id:330": -0.2, "token_id:49": -3.0, "token_id:389": -1.5}]
                },
            }
        ]
    }
    # the token-id path asked for every id: a reply without one of them (50) is not an answer
    with pytest.raises(Refused, match="bad_token"):
        completion_reader(1, read.token_ids)(reply)
    reply["choices"][0]["logprobs"]["top_logprobs"][0]["token_id:50"] = -4.0
    answer = completion_reader(1, read.token_ids)(reply)
    assert answer.logprobs == [-0.2, -3.0, -1.5, -4.0] and answer.missing == 0
    assert answer.texts == [" A"] and answer.reasons == ["length"] and not answer.usage.known
    generated = Request(token_ids=(), max_tokens=8, n=1, temperature=0.0, seed=0)
    assert "logprob_token_ids" not in completion_body("smol", [1], generated)


# --- the whole pipeline against the stand-in (in-process executor: no Ray, no engine) --------------------------


class FakeJudge(StandIn):
    """Answers /completions as a judge would: the requested token ids with made-up log-probabilities derived
    from the prompt, so every prompt has its own answer; ``refuse`` prompts (by their token ids) get a 400."""

    def __init__(self, refuse: set[tuple[int, ...]] = frozenset()):
        self.refuse = set(refuse)
        super().__init__()

    def post(self, h) -> None:
        body = read_json(h)
        with self.lock:
            self.requests.append((time.monotonic(), body, dict(h.headers)))
        if tuple(body["prompt"]) in self.refuse:
            return send(h, {"error": {"message": "prompt refused"}}, 400)
        seed = sum(body["prompt"]) % 97
        top = {
            f"token_id:{t}": -0.1 - ((seed + 13 * k) % 40) / 10
            for k, t in enumerate(body["logprob_token_ids"])
        }
        choice = {"index": 0, "text": " A", "finish_reason": "length", "logprobs": {"top_logprobs": [top]}}
        send(
            h, {"choices": [choice], "usage": {"prompt_tokens": len(body["prompt"]), "completion_tokens": 1}}
        )


def test_prompts_that_keep_failing_stop_the_run_and_a_rerun_judges_only_those(tmp_path, judge_model):
    from pipeline.run.context import run
    from pipeline.stages.accounting import JudgeFailed
    from tests.conftest import compose, run_table

    fake = FakeJudge()
    overrides = [
        "judge=api",
        f"judge.endpoint.base_url={fake.url}",
        "judge.endpoint.path=token_ids",
        f"judge.endpoint.cache_path={tmp_path / 'replies.sqlite'}",
        "judge.endpoint.max_retries=1",
        "judge.endpoint.backoff=0.01",
        "judge.max_model_len=2048",
        "runtime.executor=local",
        "dataset.demo.n_contexts=1",
        "dataset.demo.n_candidates=3",
        "tracking.enabled=false",
        f"paths.output_root={tmp_path}",
    ]
    try:
        first = run(compose(overrides))  # a healthy endpoint: 12 prompts, 12 requests
        n = 12
        assert first.judge_stats.requests == n and first.judge_stats.billed_completion_tokens == n
        bodies = [b for _, b, _ in fake.requests]
        fake.refuse = {tuple(bodies[0]["prompt"]), tuple(bodies[5]["prompt"])}
        fake.requests.clear()
        folder = tmp_path / "again"
        cfg = [*overrides, "judge.endpoint.cache=false", f"paths.run_dir={folder}"]
        with pytest.raises(
            JudgeFailed, match=r"2 prompt\(s\) could not be judged after retries.*HTTP 400: prompt refused"
        ):
            run(compose(cfg))
        assert len(fake.requests) == n  # 10 answered, 2 refused once each (a 400 is not retried)
        fake.refuse = set()
        fake.requests.clear()
        rerun = run(compose(cfg))  # the same folder: only the two missing prompts
        assert len(fake.requests) == 2 and rerun.judge_stats.judged_now == 2
        assert run_table(rerun, "judgments").height == n
    finally:
        fake.close()


def test_the_key_is_read_on_the_driver_and_never_described(tmp_path, monkeypatch, judge_model):
    import pickle

    from pipeline.contracts.errors import ConfigError
    from pipeline.judge.models import resolve_judge
    from tests.conftest import compose

    overrides = [
        "judge=api",
        "judge.endpoint.base_url=http://127.0.0.1:9/v1",
        "judge.endpoint.api_key_env=CA_TEST_KEY",
    ]
    monkeypatch.delenv("CA_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="'CA_TEST_KEY', but that environment variable is empty"):
        resolve_judge(compose(overrides).judge, judge_model_cache(judge_model))
    monkeypatch.setenv("CA_TEST_KEY", KEY)
    spec = resolve_judge(compose(overrides).judge, judge_model_cache(judge_model))
    assert (
        spec.endpoint.secret.value == KEY and pickle.loads(pickle.dumps(spec)).endpoint.secret.value == KEY
    )  # reaches actors
    for text in (
        json.dumps(spec.describe(), default=str),
        json.dumps(spec.identity()),
        repr(spec),
        str(spec.endpoint.secret),
    ):
        assert KEY not in text
    assert (
        spec.endpoint.settings.api_key_env == "CA_TEST_KEY"
        and spec.identity()["api_model"] == "smollm2-135m-instruct"
    )


def judge_model_cache(judge_model: str):
    """The cache folder the converted judge lives in (``<cache>/models/<name>``)."""
    from pathlib import Path

    return Path(judge_model).parent.parent


def test_prompts_split_into_message_and_prefix_and_chat_bodies_prefill_the_answer():
    from pipeline.contracts.frame import PromptFrame

    frame = PromptFrame(head="<s>user\n", tail="</s>\n<s>assistant\n")
    message, prefix = frame.split("<s>user\nWhich summary? A or B</s>\n<s>assistant\nSummary")
    assert (message, prefix) == ("Which summary? A or B", "Summary")
    read = Request(token_ids=(330, 389), max_tokens=1, n=1, temperature=0.0, seed=0)
    body = chat_body("m", message, prefix, read, "Be fair.", 20, prefill=True)
    assert body["messages"] == [
        {"role": "system", "content": "Be fair."},
        {"role": "user", "content": "Which summary? A or B"},
        {"role": "assistant", "content": "Summary"},
    ]
    assert body["continue_final_message"] and not body["add_generation_prompt"]
    assert body["logprobs"] and body["top_logprobs"] == 20 and body["max_tokens"] == 1
    plain = chat_body("m", message, prefix, read, None, 5, prefill=False)
    assert plain["messages"] == [{"role": "user", "content": "Which summary? A or B"}]
    assert "continue_final_message" not in plain and plain["top_logprobs"] == 5


def test_chat_replies_give_the_words_among_the_alternatives_and_floor_the_rest():
    reply = {
        "choices": [
            {
                "index": 0,
                "message": {"content": " A"},
                "finish_reason": "length",
                "logprobs": {
                    "content": [
                        {
                            "token": " A",
                            "logprob": -0.3,
                            "top_logprobs": [
                                {"token": " A", "logprob": -0.3},
                                {"token": " B", "logprob": -1.6},
                                {"token": "\n", "logprob": -4.0},
                            ],
                        }
                    ]
                },
            }
        ]
    }
    answer = chat_reader(1, [" A", "A", " B", "B"])(reply)
    assert answer.logprobs == [-0.3, -4.0, -1.6, -4.0] and answer.missing == 2
    assert answer.texts == [" A"] and answer.reasons == ["length"]


def test_the_path_is_probed_once_token_ids_where_the_server_takes_them(tmp_path, judge_model):
    from pipeline.judge.models import resolve_judge
    from pipeline.judge.openai.engine import ApiEngine
    from tests.conftest import compose

    fake = FakeJudge()
    refusing = StandIn([(400, {})])  # refuses the token-id probe (as a hosted chat API would)
    try:
        for server, path in ((fake, "token_ids"), (refusing, "chat")):
            cfg = compose(
                ["judge=api", f"judge.endpoint.base_url={server.url}", "judge.endpoint.cache=false"]
            ).judge
            spec = resolve_judge(cfg, judge_model_cache(judge_model))
            engine = ApiEngine(spec)
            assert engine.path == path
            assert server.requests[-1][1]["logprob_token_ids"]  # the probe asked for an exact token
            engine.close()
    finally:
        fake.close()
        refusing.close()
