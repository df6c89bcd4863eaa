"""What makes an endpoint's reply an answer: it parses, it has its choices (as many as samples were asked), text
where text was asked, the first token's log-probabilities where they were asked, and finite numbers.

A reply that is not an answer is a failed attempt of its own kind (:data:`KINDS`): retried like a 5xx, counted by
kind, never stored and never cached (:class:`pipeline.judge.api.client.ApiClient`). A check returns ``None`` for an
answer, else ``(kind, detail)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

Check = Callable[[Any], "tuple[str, str] | None"]

# The kinds of a failed attempt: the reply was not an answer, or the request got none.
KINDS = (
    "not_json",  # a 2xx body that does not parse
    "no_choices",  # no choices, or a choices field that is not a list of objects
    "wrong_samples",  # another number of choices than the samples asked
    "no_text",  # a choice without its text (completions) or message content (chat)
    "no_logprobs",  # the first token's log-probabilities missing where they were asked
    "not_finite",  # a log-probability or a token count that is not a finite number
    "http_4xx",  # a refusal (not retried) ...
    "http_5xx",  # ... and the server errors, rate limits (429) and timeouts (408) retried
    "timeout",  # no reply in judge.api.timeout seconds
    "connection",  # the connection failed or was dropped
    "no_line",  # a batch job's output has no line for the request (judge.api.batch)
)


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _choices(body: Any, n: int) -> tuple[list[dict[str, Any]], tuple[str, str] | None]:
    if not isinstance(body, dict):
        return [], ("no_choices", f"the body is a {type(body).__name__}, not an object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        return [], ("no_choices", "no choices in the reply")
    if len(choices) != n:
        return [], ("wrong_samples", f"{len(choices)} choice(s) for {n} sample(s) asked")
    usage = body.get("usage")
    if isinstance(usage, dict):
        for key in ("prompt_tokens", "completion_tokens"):
            if key in usage and usage[key] is not None and not _finite(usage[key]):
                return [], ("not_finite", f"usage.{key}={usage[key]!r}")
    return choices, None


def completion_check(n: int, logprobs: bool) -> Check:
    """A ``/completions`` reply (the token-id path) with ``n`` choices, each with its text, and with ``logprobs``
    the first token's ``top_logprobs`` (a non-empty object of finite numbers)."""

    def check(body: Any) -> tuple[str, str] | None:
        choices, problem = _choices(body, n)
        if problem:
            return problem
        if not all(isinstance(c.get("text"), str) for c in choices):
            return "no_text", "a choice without its text"
        if logprobs:
            first = (choices[0].get("logprobs") or {}).get("top_logprobs")
            if not isinstance(first, list) or not first or not isinstance(first[0], dict) or not first[0]:
                return "no_logprobs", "no top_logprobs for the first token"
            bad = [v for v in first[0].values() if not _finite(v)]
            if bad:
                return "not_finite", f"a first-token log-probability of {bad[0]!r}"
        return None

    return check


def chat_check(n: int, logprobs: bool) -> Check:
    """A ``/chat/completions`` reply with ``n`` choices, each with its message's content, and with ``logprobs`` the
    first token's ``top_logprobs`` (a list of ``{token, logprob}`` with finite log-probabilities)."""

    def check(body: Any) -> tuple[str, str] | None:
        choices, problem = _choices(body, n)
        if problem:
            return problem
        for choice in choices:
            message = choice.get("message")
            if not isinstance(message, dict) or not isinstance(message.get("content"), str):
                return "no_text", "a choice without its message's content"
        if logprobs:
            content = (choices[0].get("logprobs") or {}).get("content")
            if not isinstance(content, list) or not content or not isinstance(content[0], dict):
                return "no_logprobs", "no log-probabilities for the first token"
            alternatives = content[0].get("top_logprobs")
            if not isinstance(alternatives, list) or not alternatives:
                return "no_logprobs", "no top_logprobs for the first token"
            for alt in [*alternatives, content[0]]:
                if not isinstance(alt, dict) or "logprob" not in alt:
                    return "no_logprobs", "an alternative without its log-probability"
                if not _finite(alt["logprob"]):
                    return "not_finite", f"a first-token log-probability of {alt['logprob']!r}"
        return None

    return check
