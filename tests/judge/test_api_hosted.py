"""A hosted model behind an OpenAI-compatible API (a local stand-in on 127.0.0.1: no hosted API is reachable
here), with no tokenizer anywhere (no local checkpoint of that name, no ``/tokenize``, no token-id prompts):
the pipeline estimates token counts from words, checks the label words by a test request, judges by the chat
path, and generates through the API with each generator's own system prompt and sampling."""

from __future__ import annotations

import hashlib
import json
import threading

import polars as pl
import pytest

from pipeline.judge.tokenizers import WordPieces
from tests.judge.stand_in import LocalServer, read_json, send

# What the stand-in's first token may be, most likely first for a prompt whose hash is 0 (then rotated).
ALTERNATIVES = [" A", " B", "A", "B", "1", "2", " 1", " 2", "C", "Yes", "No", "3", "4", "5", "The", "I"]


def seeded(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


class Hosted(LocalServer):
    """Answers ``/v1/chat/completions`` as a hosted chat model would: the first token's ``top_logprobs``
    alternatives (a rotation of ALTERNATIVES decided by the conversation) when logprobs are asked for, else a
    text naming the system prompt, the temperature and the start of the user message. Everything else is 404
    (no token-id prompts, no ``/tokenize``). ``alternatives`` replaces the list (a model that never answers
    with the label words)."""

    def __init__(self, alternatives: list[str] | None = None):
        self.alternatives = alternatives or ALTERNATIVES
        # a request whose last message holds one of these is refused (400)
        self.refuse: set[str] = set()
        self.requests: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        super().__init__()

    def post(self, h) -> None:
        body = read_json(h)
        with self.lock:
            self.requests.append((h.path, body))
        last = body.get("messages", [{}])[-1].get("content", "")
        if h.path != "/v1/chat/completions":
            send(h, {"error": {"message": f"no route {h.path}"}}, 404)
        elif any(r in last for r in self.refuse):
            send(h, {"error": {"message": "content refused"}}, 400)
        else:
            send(h, self.answer(body))

    def answer(self, body: dict) -> dict:
        messages = body["messages"]
        h = seeded(json.dumps(messages))
        n_prompt = sum(len(m["content"].split()) for m in messages)
        if body.get("logprobs"):
            k = h % len(self.alternatives)
            order = self.alternatives[k:] + self.alternatives[:k]
            top = [{"token": t, "logprob": -0.2 - 0.5 * n} for n, t in enumerate(order)]
            top = top[: body["top_logprobs"]]
            content = [{"token": top[0]["token"], "logprob": top[0]["logprob"], "top_logprobs": top}]
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": top[0]["token"]},
                "logprobs": {"content": content},
                "finish_reason": "length",
            }
            completion = 1
        else:
            system = next((m["content"] for m in messages if m["role"] == "system"), "none")
            user = [m["content"] for m in messages if m["role"] == "user"][-1]
            text = f"[{system} | t={body['temperature']}] {user[:40]}"
            choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            completion = len(text.split())
        return {"choices": [choice], "usage": {"prompt_tokens": n_prompt, "completion_tokens": completion}}


@pytest.fixture
def hosted():
    servers = []

    def make(*args):
        servers.append(Hosted(*args))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def test_word_pieces_count_words_and_marks_and_give_back_short_pieces():
    wp = WordPieces()
    assert len(wp.encode(" A")) == 1 and len(wp.encode("A")) == 1 and wp.encode(" A") != wp.encode("A")
    assert [wp.decode([i]) for i in wp.encode("Summary A, then 10.")] == [
        "Summary",
        " A",
        ",",
        " then",
        " 10",
        ".",
    ]
    assert len(wp.encode("an extraordinarily long word")) == 4
    with pytest.raises(ValueError, match="longer than"):
        wp.decode(wp.encode("extraordinarily"))
    assert wp(["a b", "c"])["input_ids"] == [wp.encode("a b"), wp.encode("c")]


def hosted_overrides(server: Hosted, tmp_path, *extra: str) -> list[str]:
    return [
        "judge=api",
        "judge.model=gpt-hosted-test",  # no such checkpoint here: the model's name on the endpoint only
        f"judge.endpoint.base_url={server.url}",
        f"judge.endpoint.cache_path={tmp_path / 'replies.sqlite'}",
        "judge.max_model_len=8192",
        "runtime.executor=local",
        "tracking.enabled=false",
        f"paths.output_root={tmp_path}",
        *extra,
    ]


def generating(server: Hosted, tmp_path, models: str, *extra: str) -> list[str]:
    """:func:`hosted_overrides` for the generate demo: ``models`` generating three inputs each."""
    return hosted_overrides(
        server,
        tmp_path,
        "experiment=generate_demo",
        f"generate.models={models}",
        "generate.max_inputs=3",
        *extra,
    )


def test_a_hosted_judge_without_a_tokenizer_judges_by_the_chat_path_after_a_test_request(
    hosted, tmp_path, caplog
):
    from pipeline.run.context import run
    from tests.conftest import compose, run_table

    server = hosted()
    overrides = hosted_overrides(server, tmp_path, "dataset.demo.n_contexts=1", "dataset.demo.n_candidates=3")
    with caplog.at_level("INFO"):
        result = run(compose(overrides))
    # /tokenize asked (404: no server tokenizer) on the driver and in the judge; no token-id probe
    assert {p for p, _ in server.requests} == {"/tokenize", "/v1/chat/completions"}
    chats = [b for p, b in server.requests if p == "/v1/chat/completions"]
    # two test requests (the first comparison in both orderings), then the 12 prompts, two of them from the cache
    assert len(chats) == 2 + 12 - 2
    assert all(b["max_tokens"] == 1 and b["logprobs"] and b["top_logprobs"] == 20 for b in chats)
    assert chats[0]["messages"][-1] == {"role": "assistant", "content": "Summary"}  # the answer prefix
    assert chats[0]["continue_final_message"] is True  # the answer prefix, continued
    text = caplog.text
    assert "no tokenizer here" in text and "prompt lengths are estimated" in text
    assert "test request, comparative label words among the first token's alternatives" in text
    table = run_table(result, "judgments")
    assert table.height == 12 and table["p_a"].is_between(0, 1).all()
    stats = result.judge_stats
    assert stats.cached_replies == 2 and stats.requests == 10 and stats.api_paths == ("chat",)
    assert stats.missing_logprobs == 0 and "API (chat path)" in result.summary


def test_label_words_the_hosted_judge_never_answers_with_are_refused_at_start(hosted, tmp_path):
    from pipeline.prompts.labels import LabelError
    from pipeline.run.context import run
    from tests.conftest import compose

    server = hosted([" A", "A", "Yes", "No", "The"])  # never B
    overrides = hosted_overrides(server, tmp_path, "dataset.demo.n_contexts=1", "dataset.demo.n_candidates=3")
    with pytest.raises(LabelError, match=r"no B label word \(\[' A', 'A', ' B', 'B'\]\) is among"):
        run(compose(overrides))
    assert len([p for p, _ in server.requests if p == "/v1/chat/completions"]) == 2  # the test requests only
    assert not list(tmp_path.rglob("judgments.parquet"))


def test_generators_and_the_judge_behind_a_hosted_api(hosted, tmp_path):
    """Generate, then evaluate with every model behind the API: each generator's system prompt goes as its own
    message with its own sampling, the outputs become candidates, the judge compares them by the chat path and
    the reasons are asked as a conversation."""
    from pipeline.run.context import run
    from tests.conftest import compose, run_table

    server = hosted()
    api = f"{{base_url: '{server.url}', cache_path: '{tmp_path / 'gen.sqlite'}'}}"
    models = (
        f"[{{name: plain, model: gpt-a, endpoint: {api}}},"
        f"{{name: terse, model: gpt-a, system_prompt: 'Be terse.', endpoint: {api}}},"
        f"{{name: warm, model: gpt-b, temperature: 0.7, endpoint: {api}}}]"
    )
    overrides = generating(server, tmp_path, models, "reasons.n=2")
    result = run(compose(overrides))
    generations = [b for p, b in server.requests if p == "/v1/chat/completions" and not b.get("logprobs")]
    outputs = pl.read_parquet(result.run_dir / "generations").sort(["model", "input_id"])
    assert outputs.height == 9
    by_model = {m: o["output"].to_list() for (m,), o in outputs.group_by(["model"])}
    assert all(t.startswith("[none | t=0.0] Summarise") for t in by_model["plain"])
    assert all(t.startswith("[Be terse. | t=0.0]") for t in by_model["terse"])
    assert all(t.startswith("[none | t=0.7]") for t in by_model["warm"])
    tasks = [b for b in generations if b["messages"][-1]["content"].startswith("Summarise")]
    assert len(tasks) == 9 and {b["model"] for b in tasks} == {"gpt-a", "gpt-b"}
    assert all(b["max_tokens"] == 96 and "continue_final_message" not in b for b in tasks)
    assert sorted(b["temperature"] for b in tasks) == [0.0] * 6 + [0.7] * 3
    terse = [b for b in tasks if b["messages"][0] == {"role": "system", "content": "Be terse."}]
    assert len(terse) == 3 and all(b["messages"][1]["content"].startswith("Summarise") for b in terse)
    reasons = run_table(result, "reasons")
    assert reasons.height > 0 and reasons["reason"].str.starts_with("[none | t=0.0]").all()
    asked_why = [
        b for b in generations if len(b["messages"]) >= 3 and b["messages"][-2]["role"] == "assistant"
    ]
    assert asked_why  # the comparison, the judge's answer, and the question, as a conversation
    assert run_table(result, "judgments").height > 0


def test_generations_that_keep_failing_stop_the_run_and_a_rerun_generates_only_those(hosted, tmp_path):
    """A refused generation is not an empty output: it is kept out of the outputs, reported, and the rerun in
    the same folder asks for it alone; the generators' requests, cache hits and cost are in the metrics."""
    from pipeline.run.context import run
    from pipeline.stages.accounting import JudgeFailed
    from tests.conftest import compose

    server = hosted()
    server.refuse = {"VAT number"}  # the second ticket
    api = f"{{base_url: '{server.url}', cache: false, price_input: 1.0, price_output: 2.0}}"
    models = f"[{{name: a, model: gpt-a, endpoint: {api}}}, {{name: b, model: gpt-b, endpoint: {api}}}]"
    folder = tmp_path / "run"
    overrides = generating(
        server,
        tmp_path,
        models,
        "judge.endpoint.max_retries=1",
        f"paths.run_dir={folder}",
        "tracking.enabled=true",
    )
    with pytest.raises(
        JudgeFailed, match=r"2 prompt\(s\) could not be generated.*input 'ticket-1'.*content refused"
    ):
        run(compose(overrides))
    assert pl.read_parquet(folder / "generations").height == 4  # the four answered, none empty
    server.refuse = set()
    server.requests.clear()
    result = run(compose(overrides))
    asked = [b for p, b in server.requests if p == "/v1/chat/completions" and not b.get("logprobs")]
    generated = [b for b in asked if b["messages"][-1]["content"].startswith("Summarise")]
    assert len(generated) == 2 and all("VAT number" in b["messages"][-1]["content"] for b in generated)
    outputs = pl.read_parquet(folder / "generations")
    assert outputs.height == 6 and outputs["output"].str.starts_with("[none").all()
    metrics = result.metrics
    assert metrics["generate/api_requests"] == 2 and metrics["generate/api_cached_replies"] == 0
    billed = outputs.filter(pl.col("input_id") == "ticket-1")
    cost = (billed["prompt_tokens"].sum() * 1.0 + billed["output_tokens"].sum() * 2.0) / 1e6
    assert metrics["generate/api_cost"] == pytest.approx(cost)


def test_make_check_sends_nothing_to_a_hosted_judge_and_says_when_its_words_are_checked(
    hosted, tmp_path, capsys
):
    """The stand-in counts every request: the check of a judge with no tokenizer here sends none (its label words
    are checked by the run's own test requests), and still plans the run with its time."""
    from pipeline.run.check import main

    server = hosted()
    assert (
        main(hosted_overrides(server, tmp_path, "dataset.demo.n_contexts=1", "dataset.demo.n_candidates=3"))
        == 0
    )
    out = capsys.readouterr().out
    assert server.requests == []
    assert "nothing was started, sent or spent" in out and "prompts to judge: 12" in out
    assert "time (estimated, judging on this machine): about 2 s (1 s a request, 8 at once" in out
