"""The Anthropic backend (``judge.backend=anthropic``, :mod:`pipeline.judge.anthropic`) against a stand-in of the
Messages API and its Message Batches (:mod:`tests.judge.anthropic_server`: real HTTP on 127.0.0.1; the hosted API
cannot be reached here). The demo is judged in-process through it: every verdict sampled as its own requests and read
from what the server said, reasoning sent back in the assistant's turn, failed attempts retried, batches at the batch
price, a lost create found rather than paid twice, and a rerun that asks only what is missing."""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.contracts.errors import ConfigError
from pipeline.judge.anthropic.messages import read_message
from pipeline.judge.endpoint.replies import KINDS, Refused
from pipeline.run.context import run
from pipeline.stages.accounting import JudgeFailed
from tests.conftest import compose, run_table
from tests.judge.anthropic_server import KEY, AnthropicServer

SAMPLES = 4


@pytest.fixture
def anthropic_key(monkeypatch):
    monkeypatch.setenv("STAND_IN_ANTHROPIC_KEY", KEY)


def anthropic_overrides(url: str, judge_model: str, tmp_path, *extra: str) -> list[str]:
    """The demo judged through the stand-in; ``judge.model`` names the local checkpoint, whose tokenizer settles the
    prompts (the stand-in answers them)."""
    return [
        "judge=anthropic",
        f"judge.model={judge_model}",
        f"judge.endpoint.base_url={url}",
        "judge.endpoint.model=claude-stand-in",
        "judge.endpoint.api_key_env=STAND_IN_ANTHROPIC_KEY",
        f"judge.endpoint.cache_path={tmp_path / 'replies.sqlite'}",
        f"judge.endpoint.samples={SAMPLES}",
        "judge.endpoint.backoff=0.01",
        "judge.endpoint.backoff_max=0.05",
        "judge.endpoint.price_input=3.0",
        "judge.endpoint.price_output=15.0",
        "judge.max_model_len=2048",
        "runtime=inprocess",
        "dataset.demo.n_contexts=2",
        "dataset.demo.n_candidates=3",
        "tracking.plots=false",
        f"paths.output_root={tmp_path}",
        *extra,
    ]


def expected_p_a(server: AnthropicServer) -> list[float]:
    """Every verdict's P(A wins) from what the stand-in said to its samples: (c(A) + 1/2) / (c(A) + c(B) + 1)."""
    out = []
    for record in server.served.values():
        said = [t.strip() for t in record["texts"].values()]
        if len(said) == SAMPLES:
            out.append((said.count("A") + 0.5) / (said.count("A") + said.count("B") + 1))
    return sorted(out)


def test_anthropic_checks_refuse_what_the_messages_api_cannot_do():
    """The backend's declarations and its own checks: no log-probabilities (only the sampled path), no token ids,
    temperatures in [0, 1]; the rest is the endpoint's."""
    for override, said in (
        ("judge.endpoint.path=auto", "gives no log-probabilities; set judge.endpoint.path=sampled"),
        ("judge.endpoint.path=token_ids", "takes no token ids"),
        ("judge.endpoint.sample_temperature=1.5", "must be in [0, 1] for Anthropic"),
        ("judge.endpoint.base_url=api.anthropic.com", "base_url must be the endpoint's URL"),
    ):
        with pytest.raises(ConfigError, match=said.replace("[", r"\[").replace("]", r"\]")):
            compose(["judge=anthropic", override])
    assert compose(["judge=anthropic"]).judge.backend == "anthropic"


def test_anthropic_reader_takes_a_message_and_refuses_what_is_not_one():
    body = {"type": "message", "content": [{"type": "text", "text": " A"}, {"type": "text", "text": "!"}],
            "stop_reason": "max_tokens",
            "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 4,
                      "cache_creation_input_tokens": 1}}  # fmt: skip
    answer = read_message(body)
    assert answer.texts == [" A!"] and answer.reasons == ["length"] and answer.logprobs == []
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens, answer.usage.cached_tokens) == (
        15,
        2,
        4,
    )
    assert not read_message({"content": [], "usage": {"output_tokens": 1}}).usage.known
    for broken, kind in (
        ([], "no_choices"),
        ({"content": "A"}, "no_text"),
        ({"content": [{"type": "text"}]}, "no_text"),
        ({"content": [], "stop_reason": 3}, "bad_finish"),
        ({"content": [], "usage": [1]}, "bad_usage"),
        ({"content": [], "usage": {"input_tokens": -1}}, "bad_usage"),
        ({"content": [], "usage": {"output_tokens": True}}, "bad_usage"),
    ):
        with pytest.raises(Refused) as refused:
            read_message(broken)
        assert refused.value.kind == kind and kind in KINDS


@pytest.mark.slow
def test_anthropic_run_samples_every_verdict_reads_what_was_said_and_reasons_by_chat(
    tmp_path, judge_model, anthropic_key
):
    with AnthropicServer(share=0.3, seed=3) as server:
        result = run(compose(anthropic_overrides(server.url, judge_model, tmp_path)))
        assert server.refused == []
        judgments = run_table(result, "judgments")
        # every verdict asked as SAMPLES requests of its own, and read from what they said
        assert judgments.height == len(expected_p_a(server)) > 0
        assert sorted(judgments["p_a"].to_list()) == pytest.approx(expected_p_a(server), abs=1e-12)
        judge = json.loads((result.run_dir / "judge.json").read_text())
        # the judge's name says its verdicts are sampled, in every row
        assert judge["name"].endswith(":sampled") and set(judgments["judge"]) == {judge["name"]}
        assert sum(server.injected.values()) > 0 and result.judge_stats.failed_attempts
        assert judge["backend"] == "anthropic"
        # reasoning by chat: the verdict continues an assistant turn that holds the reasoning the server gave
        server.served.clear()
        reasoned = run(
            compose(
                anthropic_overrides(
                    server.url, judge_model, tmp_path / "reasoning", "judge.reasoning.enabled=true",
                    "judge.reasoning.max_tokens=64", "dataset.demo.n_contexts=1",
                )
            )
        )  # fmt: skip
        assert server.refused == []
    reasons = {t for r in server.served.values() for t in r["texts"].values() if t.startswith("Reason ")}
    verdicts = [r for r in server.served.values() if r["messages"][-1]["role"] == "assistant"]
    assert (
        reasons
        and verdicts
        and all(any(x in v["messages"][-1]["content"] for x in reasons) for v in verdicts)
    )
    table = run_table(reasoned, "judgments")
    assert table["reasoning"].str.starts_with("Reason ").all()


@pytest.mark.slow
def test_anthropic_message_batches_answer_every_request_once_at_the_batch_price(
    tmp_path, judge_model, anthropic_key
):
    """judge.endpoint.batch=true: the first create is lost on its way back (the batch is found, not made twice); every
    batch's results fail their first two downloads (a 404, a 500: asked again, never read as empty); the first
    batch errors, expires and leaves out a share of its lines (a second batch asks them), refuses one (not asked
    again in the run: the run stops naming it, every answer stored) and holds a stray line; the same command then asks
    only the refused request, in a batch of its own; the cost at the batch price."""
    batch = ("judge.endpoint.batch=true", "judge.endpoint.batch_poll=0.01", "judge.endpoint.batch_poll_max=0.02",
             "judge.batch_size=1000", "paths.run_dir=latest")  # fmt: skip
    with AnthropicServer(line_share=0.4, seed=4, lost_create=True, results_failures=2) as server:
        overrides = anthropic_overrides(server.url, judge_model, tmp_path, *batch)
        with pytest.raises(JudgeFailed, match="invalid_request_error"):
            run(compose(overrides))
        assert server.refused == []
        assert server.creates == len(server.batches) == 2  # the lost create's batch found, not created again
        outcomes = server.line_outcomes
        assert (
            outcomes["refused"] == 1 and outcomes["errored"] + outcomes["expired"] + outcomes["missing"] > 0
        )
        first = set(server.batches)
        result = run(compose(overrides))
        assert server.refused == []
    # the rerun asked the refused request alone, in a new batch; nothing else again
    assert len(server.batches) == 3 and len(server.batches["msgbatch_0002"]["_requests"]) == 1
    assert all(n > 2 for n in server.downloads.values())  # every batch's results read after its failures
    assert first == {"msgbatch_0000", "msgbatch_0001"}
    judgments = run_table(result, "judgments")
    asked = {r["custom_id"] for b in server.batches.values() for r in b["_requests"]}
    assert judgments.height == len(asked) // SAMPLES  # every sample once (a second batch's id says its round)
    assert sorted(judgments["p_a"].to_list()) == pytest.approx(expected_p_a(server), abs=1e-12)
    states = dict(result.judge_stats.batches)
    assert states == {"ended": 3} and "Batch jobs: 3 (" in result.summary
    record = [json.loads(x) for x in (result.run_dir / "api_batches.jsonl").read_text().splitlines()]
    assert [r["status"] for r in record if r.get("state") == "read"] == ["ended"] * 3
    stats = result.judge_stats
    full = (stats.billed_prompt_tokens * 3.0 + stats.billed_completion_tokens * 15.0) / 1e6
    assert stats.billed_prompt_tokens > 0 and stats.money == pytest.approx(full * 0.5)
    assert "API (batch/sampled path)" in result.summary


def test_a_generator_on_the_anthropic_backend_generates_through_it(tmp_path, judge_model, anthropic_key):
    """Anthropic's declared generation is used (generate.models[k].backend=anthropic, read from the backend
    registry, not from the config's shape): its outputs are what the stand-in said, beside a generator on the
    judge's own in-process backend that is only planned here (the run stops after generating, no engine needed
    for the API generator)."""
    from pipeline.config.backends import generator_backend
    from pipeline.judge.generators import generator_judge_config

    with AnthropicServer() as server:
        api = (f"{{base_url: '{server.url}', model: claude-stand-in, api_key_env: STAND_IN_ANTHROPIC_KEY, "
               f"cache_path: '{tmp_path / 'gen.sqlite'}'}}")  # fmt: skip
        overrides = [
            "experiment=generate_demo",
            f"+generate.models=[{{name: claude-a, model: claude-stand-in, backend: anthropic, max_tokens: 16, "
            f"endpoint: {api}}}, {{name: claude-b, model: claude-stand-in, backend: anthropic, max_tokens: 16, "
            f"system_prompt: 'Be terse.', endpoint: {api}}}]",
            "generate.max_inputs=2",
            "runtime=inprocess",
            f"paths.output_root={tmp_path}",
            f"judge.model={judge_model}",
        ]
        cfg = compose(overrides)
        [a, b] = cfg.generate.models
        assert generator_backend(a, cfg.judge).name == "anthropic"
        assert generator_judge_config(a, cfg.judge).backend == "anthropic"
        result = run(cfg, stop_after="generate")
    generations = pl.from_arrow(result.values["generations"])
    assert generations.height == 2 * 2 and set(generations["model"]) == {"claude-a", "claude-b"}
    said = {t for r in server.served.values() for t in r["texts"].values()}
    assert set(generations["output"]) <= said and server.refused == []
