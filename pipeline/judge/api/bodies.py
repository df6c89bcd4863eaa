"""Request bodies and replies of an OpenAI-compatible endpoint: the token-id path (``/completions``, exact
log-probabilities of requested token ids) and the chat path (``/chat/completions``, the first token's top
alternatives).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

TOKEN_PREFIX = "token_id:"


def completion_body(model: str, ids: list[int], request: Any) -> dict[str, Any]:
    """A ``/completions`` body for one prompt as token ids, read as ``read`` (a :class:`pipeline.absolute.Read`)
    says: vLLM's server takes the ids as the prompt and returns the exact first-token log-probability of each
    requested token (``logprob_token_ids``), keyed by id (``return_tokens_as_token_ids``)."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": list(ids),
        "max_tokens": request.max_tokens,
        "n": request.n,
        "temperature": request.temperature,
        "seed": request.seed,
        "top_p": request.top_p,
    }
    if request.stop:
        body["stop"] = list(request.stop)
    if request.token_ids:
        body |= {
            "logprobs": 1,
            "logprob_token_ids": list(request.token_ids),
            "return_tokens_as_token_ids": True,
        }
    return body


def parse_completion(
    body: dict[str, Any], token_ids: Sequence[int]
) -> tuple[list[float], list[str], list[str], int]:
    """(log-probabilities of ``token_ids`` at the first generated token, texts, finish reasons, tokens of the
    requested ids missing from the reply)."""
    choices = sorted(body["choices"], key=lambda c: c.get("index", 0))
    logprobs: list[float] = []
    missing = 0
    if token_ids:
        first = (choices[0].get("logprobs") or {}).get("top_logprobs") or [{}]
        top = {
            int(k.removeprefix(TOKEN_PREFIX)): float(v)
            for k, v in first[0].items()
            if k.startswith(TOKEN_PREFIX)
        }
        floor = min(top.values()) if top else float("-inf")
        for t in token_ids:
            if t in top:
                logprobs.append(top[t])
            else:  # not among the returned alternatives: at most the smallest returned (a counted floor)
                logprobs.append(floor)
                missing += 1
    texts = [str(c.get("text", "")) for c in choices]
    reasons = [str(c.get("finish_reason") or "stop") for c in choices]
    return logprobs, texts, reasons, missing


def chat_body(
    model: str,
    message: str,
    prefix: str,
    request: Any,
    system_prompt: str | None,
    top_logprobs: int,
    prefill: bool,
) -> dict[str, Any]:
    """A ``/chat/completions`` body: the system prompt and the message, the answer prefix as a final assistant
    message the model continues (``prefill``), and the first token's ``top_logprobs`` alternatives."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.append({"role": "user", "content": message})
    if prefix and prefill:
        messages.append({"role": "assistant", "content": prefix})
    return messages_body(model, messages, request, top_logprobs, continued=bool(prefix and prefill))


def messages_body(
    model: str, messages: list[dict[str, str]], request: Any, top_logprobs: int, continued: bool = False
) -> dict[str, Any]:
    """A ``/chat/completions`` body for a conversation (``continued``: the model continues its last message)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": request.max_tokens,
        "n": request.n,
        "temperature": request.temperature,
        "seed": request.seed,
        "top_p": request.top_p,
    }
    if continued:
        body |= {"continue_final_message": True, "add_generation_prompt": False}
    if request.stop:
        body["stop"] = list(request.stop)
    if request.token_ids:
        body |= {"logprobs": True, "top_logprobs": top_logprobs}
    return body


def first_token_alternatives(body: dict[str, Any]) -> dict[str, float]:
    """The first generated token's alternatives of a chat reply (its ``top_logprobs`` and the token itself),
    text -> log-probability."""
    choices = sorted(body["choices"], key=lambda c: c.get("index", 0))
    first = ((choices[0].get("logprobs") or {}).get("content") or [{}])[0]
    top: dict[str, float] = {}
    for alt in [*(first.get("top_logprobs") or []), first]:
        if "token" in alt and "logprob" in alt:
            top.setdefault(str(alt["token"]), float(alt["logprob"]))
    return top


def parse_chat(body: dict[str, Any], words: Sequence[str]) -> tuple[list[float], list[str], list[str], int]:
    """(log-probabilities of ``words`` among the first token's alternatives, texts, finish reasons, words
    missing from the alternatives: given the smallest returned log-probability, a floor)."""
    choices = sorted(body["choices"], key=lambda c: c.get("index", 0))
    logprobs: list[float] = []
    missing = 0
    if words:
        top = first_token_alternatives(body)
        floor = min(top.values()) if top else float("-inf")
        for word in words:
            if word in top:
                logprobs.append(top[word])
            else:
                logprobs.append(floor)
                missing += 1
    texts = [str((c.get("message") or {}).get("content") or "") for c in choices]
    reasons = [str(c.get("finish_reason") or "stop") for c in choices]
    return logprobs, texts, reasons, missing
