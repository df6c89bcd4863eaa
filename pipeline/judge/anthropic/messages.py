"""The Messages API's wire format: the client's headers, a request body, and the reader of a reply.

A reply is an answer only if it is a message whose ``content`` is a list of blocks (the text blocks' texts joined are
the answer), whose ``stop_reason`` is a string or absent, and whose ``usage`` counts, where given, are token counts
(:mod:`pipeline.judge.endpoint.replies`: a reply that is not an answer is a failed attempt of its kind, retried, never
cached). Prompt tokens are the input tokens with the cache's reads and writes; cached tokens are the cache's reads.
"""

from __future__ import annotations

from typing import Any

from pipeline.contracts.engine import Request
from pipeline.judge.endpoint.client import ApiClient
from pipeline.judge.endpoint.replies import Answer, Reader, Refused, Usage, token_count, usage_of

# The API version every request names (``anthropic-version``).
VERSION = "2023-06-01"
PATH = "/messages"


class AnthropicClient(ApiClient):
    """An :class:`ApiClient` (concurrency, retries, reply cache) that speaks the Messages API's headers: the key as
    ``x-api-key`` (read from the environment variable ``judge.endpoint.api_key_env`` names) and the API version."""

    def _headers(self, json: bool = True) -> dict[str, str]:
        headers = super()._headers(json)
        key = headers.pop("Authorization", None)
        if key is not None:
            headers["x-api-key"] = key.removeprefix("Bearer ")
        headers["anthropic-version"] = VERSION
        return headers


def conversation_parts(messages: list[dict[str, str]]) -> tuple[str | None, list[dict[str, str]]]:
    """A conversation as the Messages API takes it: the system prompt apart, the user and assistant turns."""
    system = "\n\n".join(m["content"] for m in messages if m.get("role") == "system") or None
    return system, [
        {"role": m["role"], "content": m["content"]} for m in messages if m.get("role") != "system"
    ]


def prompt_turns(message: str, prefix: str, prefill: bool) -> list[dict[str, str]]:
    """The user's message, and the answer prefix as the assistant's turn the model continues (without the whitespace
    it ends with, which the API refuses there)."""
    turns = [{"role": "user", "content": message}]
    if prefill and prefix.rstrip():
        turns.append({"role": "assistant", "content": prefix.rstrip()})
    return turns


def message_body(
    model: str, system: str | None, turns: list[dict[str, str]], request: Request, sample: int | None = None
) -> dict[str, Any]:
    """A ``/messages`` body for one sample of ``request`` (the API has no ``n``: ``sample`` numbers the samples of one
    prompt, as an opaque ``metadata.user_id``, so that each is a request and a cached reply of its own)."""
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "messages": turns,
        "temperature": request.temperature,
    }
    if system:
        body["system"] = system
    if request.top_p < 1:
        body["top_p"] = request.top_p
    if request.stop:
        body["stop_sequences"] = list(request.stop)
    if sample is not None:
        body["metadata"] = {"user_id": f"sample-{sample}"}
    return body


def read_usage(body: dict[str, Any]) -> Usage:
    """A message's token counts: the prompt is the input tokens with those read from and written to the cache."""
    usage = usage_of(body)
    if usage is None:
        return Usage()
    given = token_count(usage.get("input_tokens"), "usage.input_tokens")
    read = token_count(usage.get("cache_read_input_tokens"), "usage.cache_read_input_tokens")
    written = token_count(usage.get("cache_creation_input_tokens"), "usage.cache_creation_input_tokens")
    prompt = None if given is None else given + (read or 0) + (written or 0)
    return Usage(prompt, token_count(usage.get("output_tokens"), "usage.output_tokens"), read)


def read_message(body: Any) -> Answer:
    """A message reply as an :class:`Answer` of one sample (no log-probabilities), or :class:`Refused`."""
    if not isinstance(body, dict):
        raise Refused("no_choices", f"the reply is a {type(body).__name__}, not a message")
    content = body.get("content")
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise Refused("no_text", f"the message's content is {str(content)[:80]!r}, not a list of blocks")
    texts = [b.get("text") for b in content if b.get("type") == "text"]
    if not all(isinstance(t, str) for t in texts):
        raise Refused("no_text", "a text block without its text")
    reason = body.get("stop_reason")
    if reason is not None and not isinstance(reason, str):
        raise Refused("bad_finish", f"stop_reason={reason!r}")
    finish = "length" if reason == "max_tokens" else "stop"
    return Answer([], ["".join(str(t) for t in texts)], [finish], 0, read_usage(body))


READER: Reader = read_message
