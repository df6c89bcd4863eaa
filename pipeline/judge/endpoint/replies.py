"""What makes an endpoint's reply an answer, and what it says: one reader per request kind.

A reply is an answer only if it answers what was asked: it parses; it has as many choices as samples were asked,
indexed ``0..n-1`` once each; each choice has its text (completions) or its message's content (chat) and a finish
reason that is a string or absent; where log-probabilities were asked, the first token's alternatives are in the
form the request asked for (``token_id:N`` keys on the token-id path, every requested id among them; ``{token,
logprob}`` objects on the chat path) and every log-probability is a finite number at most 0; and ``usage``, where
it is given, holds token counts that are non-negative integers (a count that is absent or null is *unknown*: the
answer is kept, and counted as one whose usage is unknown).

A reader (:func:`completion_reader`, :func:`chat_reader`) turns a body into an :class:`Answer` (the values exactly as
the body says them) or raises :class:`Refused` with its kind (:data:`KINDS`) and what is wrong; it never raises
anything else, whatever the body (``tests/judge/test_replies_fuzz.py``). A reply that is refused is a failed attempt:
retried like a 5xx, counted by kind, never stored and never cached; a cached reply is read again by its reader when
it is served, so a reply cached by an older version that is not an answer is asked again
(:class:`pipeline.judge.endpoint.client.ApiClient`, :mod:`pipeline.judge.endpoint.batch`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# The kinds of a failed attempt: the reply was not an answer, or the request got none.
KINDS = (
    "not_json",  # a 2xx body that does not parse
    "no_choices",  # no choices, or a choices field that is not a list of objects
    "wrong_samples",  # another number of choices than the samples asked
    "bad_index",  # choices' indices that are not 0..n-1 once each
    "no_text",  # a choice without its text (completions) or message content (chat)
    "bad_finish",  # a finish reason that is not a string
    "no_logprobs",  # the first token's log-probabilities missing where they were asked
    "bad_token",  # alternatives not in the form asked (token_id:N keys, {token, logprob}), or a requested id absent
    "not_finite",  # a log-probability that is not a finite number (NaN, infinity, a string)
    "bad_logprob",  # a log-probability above 0
    "bad_usage",  # a token count that is not a non-negative integer (below 2**31)
    "too_large",  # a body larger than pipeline.judge.endpoint.parse.MAX_BYTES
    "too_deep",  # a body nested deeper than pipeline.judge.endpoint.parse.MAX_DEPTH
    "bad_number",  # an integer of more digits than pipeline.judge.endpoint.parse.MAX_DIGITS, or a float overflow
    "bad_text",  # a string that cannot be encoded (a lone UTF-16 surrogate)
    "unreadable",  # a body a reader could not take apart for a reason of no other kind (named in the detail)
    "http_4xx",  # a refusal (not retried) ...
    "http_5xx",  # ... and the server errors, rate limits (429) and timeouts (408) retried
    "timeout",  # no reply in judge.endpoint.timeout seconds
    "connection",  # the connection failed or was dropped
    "no_line",  # a batch job's output has no line for the request (judge.endpoint.batch)
    "bad_line",  # a batch output line whose fields have the wrong types
    "conflict",  # a batch output with two different answers for one request
    "batch_failed",  # the request's batch ended failed, expired or cancelled (its lines go into a new batch)
)

TOKEN_PREFIX = "token_id:"
# The most digits a token id may have (vocabularies hold fewer than 10**9 tokens).
TOKEN_DIGITS = 12
# The largest token count a column of the run's tables holds (int32).
MAX_COUNT = 2**31 - 1


class Refused(ValueError):
    """A reply that is not an answer: its ``kind`` (:data:`KINDS`) and what is wrong."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


@dataclass(frozen=True)
class Usage:
    """The token counts a reply gives (None: not given, unknown)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None

    @property
    def known(self) -> bool:
        return self.prompt_tokens is not None and self.completion_tokens is not None


@dataclass(frozen=True)
class Answer:
    """What a reply says: the requested tokens' first-token log-probabilities (in the request's order), each sample's
    text and finish reason (by index), the requested tokens not among the alternatives (floored, chat path), usage."""

    logprobs: list[float]
    texts: list[str]
    reasons: list[str]
    missing: int
    usage: Usage


Reader = Callable[[Any], Answer]
Check = Callable[[Any], "tuple[str, str] | None"]


def served_model(body: Any) -> str | None:
    """The model a reply says served it (its ``model`` field, at most 200 characters), or None."""
    model = body.get("model") if isinstance(body, dict) else None
    return model[:200] if isinstance(model, str) and model else None


def check_of(reader: Reader) -> Check:
    """The client's check of a reader: None for an answer, else ``(kind, detail)``."""

    def check(body: Any) -> tuple[str, str] | None:
        try:
            reader(body)
        except Refused as refused:
            return refused.kind, refused.detail
        except (ValueError, TypeError, OverflowError, RecursionError, AttributeError, KeyError) as exc:
            return (
                "unreadable",
                f"{type(exc).__name__}: {str(exc)[:120]}",
            )  # a reader's own gap: never a crash
        return None

    return check


def _logprob(value: Any) -> float:
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 2**53:
        raise Refused(
            "not_finite", f"a first-token log-probability of {str(value)[:40]}... (an integer too large)"
        )
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise Refused("not_finite", f"a first-token log-probability of {value!r}")
    if value > 0:
        raise Refused("bad_logprob", f"a first-token log-probability of {value!r}, above 0")
    return float(value)


def token_count(value: Any, name: str) -> int | None:
    """A reply's token count: None when absent, else a non-negative integer below 2**31 (:class:`Refused` otherwise)."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNT:
        raise Refused("bad_usage", f"{name}={value!r} is not a token count")
    return value


def usage_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """A reply's ``usage`` object (None: the reply gives none), whichever API's fields it holds."""
    usage = body.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise Refused("bad_usage", f"usage is a {type(usage).__name__}, not an object")
    return usage


def read_usage(body: dict[str, Any]) -> Usage:
    """An OpenAI-style reply's token counts (prompt, completion, cached prompt tokens)."""
    usage = usage_of(body)
    if usage is None:
        return Usage()
    details = usage.get("prompt_tokens_details")
    if details is not None and not isinstance(details, dict):
        raise Refused("bad_usage", f"usage.prompt_tokens_details is a {type(details).__name__}")
    read = Usage(
        token_count(usage.get("prompt_tokens"), "usage.prompt_tokens"),
        token_count(usage.get("completion_tokens"), "usage.completion_tokens"),
        token_count((details or {}).get("cached_tokens"), "usage.prompt_tokens_details.cached_tokens"),
    )
    if (
        read.cached_tokens is not None
        and read.prompt_tokens is not None
        and read.cached_tokens > read.prompt_tokens
    ):
        raise Refused("bad_usage", f"{read.cached_tokens} cached of {read.prompt_tokens} prompt tokens")
    return read


def read_choices(body: Any, n: int) -> list[dict[str, Any]]:
    """The ``n`` choices in index order (a choice without an index is at its place in the list)."""
    if not isinstance(body, dict):
        raise Refused("no_choices", f"the body is a {type(body).__name__}, not an object")
    if body.get("error"):  # a 200 that carries an error: the server failed, whatever else the body holds
        raise Refused("http_5xx", f"a 2xx carrying an error: {str(body['error'])[:120]}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        raise Refused("no_choices", "no choices in the reply")
    if len(choices) != n:
        raise Refused("wrong_samples", f"{len(choices)} choice(s) for {n} sample(s) asked")
    indices = [c.get("index", k) for k, c in enumerate(choices)]
    if any(not isinstance(i, int) or isinstance(i, bool) for i in indices) or sorted(indices) != list(
        range(n)
    ):
        raise Refused("bad_index", f"choice indices {indices!r} for {n} sample(s)")
    order = sorted(range(n), key=lambda k: indices[k])
    for choice in choices:
        reason = choice.get("finish_reason")
        if reason is not None and not isinstance(reason, str):
            raise Refused("bad_finish", f"a finish reason of {reason!r}")
    return [choices[k] for k in order]


def _reasons(choices: list[dict[str, Any]]) -> list[str]:
    return [c.get("finish_reason") or "stop" for c in choices]


def completion_reader(n: int, token_ids: Sequence[int]) -> Reader:
    """A ``/completions`` reply (the token-id path): ``n`` choices with their text, and with ``token_ids`` the first
    token's ``top_logprobs`` keyed ``token_id:N``, every requested id among them (vLLM's ``logprob_token_ids``)."""
    wanted = list(token_ids)

    def read(body: Any) -> Answer:
        choices = read_choices(body, n)
        texts = [c.get("text") for c in choices]
        if not all(isinstance(t, str) for t in texts):
            raise Refused("no_text", "a choice without its text")
        logprobs: list[float] = []
        if wanted:
            holder = choices[0].get("logprobs")
            first = holder.get("top_logprobs") if isinstance(holder, dict) else None
            if not isinstance(first, list) or not first or not isinstance(first[0], dict) or not first[0]:
                raise Refused("no_logprobs", "no top_logprobs for the first token")
            top: dict[int, float] = {}
            for key, value in first[0].items():
                digits = key.removeprefix(TOKEN_PREFIX) if key.startswith(TOKEN_PREFIX) else ""
                if not (digits.isascii() and digits.isdigit()) or len(digits) > TOKEN_DIGITS:
                    raise Refused("bad_token", f"an alternative keyed {key[:40]!r}, not token_id:N")
                if int(digits) in top:  # token_id:0007 beside token_id:7
                    raise Refused("bad_token", f"the token id {int(digits)} keyed twice ({key[:40]!r})")
                top[int(digits)] = _logprob(value)
            absent = [t for t in wanted if t not in top]
            if absent:
                raise Refused("bad_token", f"requested token id(s) {absent[:5]} not among the alternatives")
            logprobs = [top[t] for t in wanted]
        return Answer(logprobs, [str(t) for t in texts], _reasons(choices), 0, read_usage(body))

    return read


def chat_alternatives(choice: dict[str, Any]) -> dict[str, float]:
    """A chat choice's first generated token's alternatives (its ``top_logprobs`` and the token itself), text ->
    log-probability; one text with two different log-probabilities is refused."""
    holder = choice.get("logprobs")
    content = holder.get("content") if isinstance(holder, dict) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        raise Refused("no_logprobs", "no log-probabilities for the first token")
    alternatives = content[0].get("top_logprobs")
    if not isinstance(alternatives, list) or not alternatives:
        raise Refused("no_logprobs", "no top_logprobs for the first token")
    top: dict[str, float] = {}
    for alt in [*alternatives, content[0]]:
        if not isinstance(alt, dict) or "logprob" not in alt:
            raise Refused("no_logprobs", "an alternative without its log-probability")
        token = alt.get("token")
        if not isinstance(token, str):
            raise Refused("bad_token", f"an alternative whose token is {token!r}")
        value = _logprob(alt["logprob"])
        if top.setdefault(token, value) != value:
            raise Refused("bad_token", f"the token {token[:40]!r} given two log-probabilities")
    return top


def chat_reader(n: int, words: Sequence[str], logprobs: bool | None = None, top: int | None = None) -> Reader:
    """A ``/chat/completions`` reply with ``n`` choices, each with its message's content, and where log-probabilities
    were asked (``logprobs``, by default: when there are ``words``) the first token's ``top_logprobs``; each word's
    log-probability is its alternative's, or, if it is not among them, the smallest returned (a floor, counted as
    missing). ``top``: the alternatives asked for; more than that (and the token itself) is not the answer asked,
    and would move the floor."""
    asked = bool(words) if logprobs is None else logprobs

    def read(body: Any) -> Answer:
        choices = read_choices(body, n)
        texts = []
        for choice in choices:
            message = choice.get("message")
            if not isinstance(message, dict) or not isinstance(message.get("content"), str):
                raise Refused("no_text", "a choice without its message's content")
            texts.append(message["content"])
        values: list[float] = []
        missing = 0
        if asked:
            given = chat_alternatives(choices[0])
            if top is not None and len(given) > top + 1:
                raise Refused("bad_token", f"{len(given)} first-token alternatives for the {top} asked")
            floor = min(given.values())
            for word in words:
                values.append(given.get(word, floor))
                missing += word not in given
        return Answer(values, texts, _reasons(choices), missing, read_usage(body))

    return read
