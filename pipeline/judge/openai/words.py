"""Checking, by a test request, that a judge without a tokenizer here answers with the words it is read by."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.contracts.engine import Request
from pipeline.contracts.frame import PromptFrame
from pipeline.judge.endpoint.client import ApiClient
from pipeline.judge.endpoint.replies import chat_alternatives, chat_reader, check_of, read_choices
from pipeline.judge.openai.bodies import chat_body
from pipeline.judge.spec import JudgeSpec


@dataclass(frozen=True)
class WordCheck:
    """What a test request showed of the words a prompt's answer is read from."""

    what: str
    words: tuple[str, ...]
    # Each word's best log-probability among the first token's alternatives over the test prompts (None: absent).
    seen: tuple[float | None, ...]
    # The alternatives of the first test prompt, most likely first.
    alternatives: tuple[str, ...]

    @property
    def missing(self) -> list[str]:
        return [w for w, lp in zip(self.words, self.seen, strict=True) if lp is None]


def check_words(
    spec: JudgeSpec,
    frame: PromptFrame,
    prompts: Sequence[str],
    words: Sequence[str],
    request: Request,
    what: str,
) -> WordCheck:
    """Send ``prompts`` (whole prompt texts, answered as ``request`` says) to the chat endpoint and look for
    ``words`` among the first token's alternatives: a word that is there is one token the judge answers with.
    The replies go to the reply cache, so the run's own identical requests cost nothing more."""
    if spec.endpoint is None:
        raise ValueError(f"judge {spec.name}: a test request needs the endpoint (judge.endpoint)")
    endpoint = spec.endpoint
    client = ApiClient(endpoint)
    bodies = []
    for prompt in prompts:
        message, prefix = frame.split(prompt)
        bodies.append(
            chat_body(
                endpoint.model,
                message,
                prefix,
                request,
                frame.system,
                endpoint.settings.top_logprobs,
                endpoint.settings.prefill,
            )
        )
    try:
        replies = client.post(
            "/chat/completions",
            bodies,
            check=check_of(chat_reader(request.n, (), logprobs=True, top=endpoint.settings.top_logprobs)),
        )
    finally:
        client.close()
    failed = [r.error for r in replies if r.error]
    if len(failed) == len(replies):
        from pipeline.contracts.errors import UserError

        raise UserError(f"judge {spec.name}: the test request to {client.base_url} failed: {failed[0]}")
    best: list[float | None] = [None] * len(words)
    alternatives: tuple[str, ...] = ()
    for reply in replies:
        if reply.body is None:
            continue
        top = chat_alternatives(read_choices(reply.body, request.n)[0])
        if not alternatives:
            alternatives = tuple(sorted(top, key=lambda t: top[t], reverse=True))
        for k, word in enumerate(words):
            seen = best[k]
            if word in top and (seen is None or top[word] > seen):
                best[k] = top[word]
    return WordCheck(what, tuple(words), tuple(best), alternatives)
