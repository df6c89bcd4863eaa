"""Request bodies of an OpenAI-compatible endpoint: the token-id path (``/completions``, exact log-probabilities of
requested token ids) and the chat path (``/chat/completions``, the first token's top alternatives). Their replies are
read by :mod:`pipeline.judge.endpoint.replies`.
"""

from __future__ import annotations

from typing import Any


def completion_body(model: str, ids: list[int], request: Any) -> dict[str, Any]:
    """A ``/completions`` body for one prompt as token ids, read as ``read`` (a :class:`pipeline.contracts.engine.Request`)
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
