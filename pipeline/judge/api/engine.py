"""The engine of a judge behind an OpenAI-compatible API: the token-id path or the chat path."""

from __future__ import annotations

import logging
import time
from typing import Any

from pipeline.contracts.frame import split_prompt
from pipeline.judge.api.bodies import chat_body, completion_body, messages_body, parse_chat, parse_completion
from pipeline.judge.api.client import Reply, api_client

log = logging.getLogger(__name__)


class ApiEngine:
    """The judge worker's engine for ``judge.backend=api``: ``run_text`` answers a batch of whole prompts
    through the endpoint (``judge.api``), as the in-process engines answer token ids.

    - token-id path: the exact token ids the pipeline builds in-process (the tokenizer loads from
      ``judge.model``, which names the served checkpoint) go to ``/completions``, and the exact
      log-probability of every requested token comes back (vLLM's server reads what the in-process engine
      reads);
    - chat path: the message and the answer prefix (continued as an assistant message) go to
      ``/chat/completions``, and the requested tokens are read, as text, among the first token's
      ``top_logprobs`` alternatives; a token not among them gets a floor and is counted (``missing``).

    ``auto`` probes the server once, at start, with one token-id request.
    """

    def __init__(self, spec: Any):
        from pipeline.judge.tokenizers import is_local, load_tokenizer

        started = time.perf_counter()
        self.spec = spec
        api = dict(spec.api)
        self.model = api.pop("model")
        self.top_logprobs = int(api.pop("top_logprobs", 20))
        self.prefill = bool(api.pop("prefill", True))
        path = str(api.pop("path", "token_ids"))
        self.client = api_client(spec)
        self.tokenizer = load_tokenizer(spec)
        if path == "auto":
            # token ids only with the checkpoint's own tokenizer and chat template on this machine
            path = self.probe() if is_local(self.tokenizer) else "chat"
        self.path = path
        log.info("API judge %s at %s: %s path", self.model, self.client.settings.base_url, self.path)
        self.start_seconds = time.perf_counter() - started

    def probe(self) -> str:
        """``token_ids`` if the server answers a token-id prompt with the exact log-probability of a requested
        token (vLLM's extension), else ``chat``."""
        from pipeline.contracts.engine import Read

        ids = list(self.tokenizer("Hello")["input_ids"]) or [0]
        token = ids[-1]
        body = completion_body(self.model, ids, Read(token_ids=(token,), seed=0))
        [reply] = self.client.post("/completions", [body], use_cache=False)
        if reply.body is not None:
            try:
                _, _, _, missing = parse_completion(reply.body, [token])
                if not missing:
                    return "token_ids"
            except (KeyError, TypeError, ValueError, IndexError):
                pass
        log.info(
            "the server does not take token-id prompts (%s): the chat path",
            reply.error or "no token logprobs",
        )
        return "chat"

    def run_text(self, prompts: list[str], frame: Any, read: Any) -> list[Any]:
        """Answer whole prompt texts by this engine's path: token ids (exact) or chat messages. Conversations
        (:func:`pipeline.prompts.conversation_prompt`, e.g. the judge's reasons) go to the chat endpoint as they
        are, whatever the path."""
        from pipeline.contracts.frame import parse_conversation

        conversations = [parse_conversation(p) for p in prompts]
        if self.path == "token_ids" and not any(conversations):
            from pipeline.contracts.frame import encode_prompts

            return self.run(encode_prompts(self.tokenizer, prompts, frame), read)

        bodies = []
        for prompt, conversation in zip(prompts, conversations, strict=True):
            if conversation is not None:
                bodies.append(messages_body(self.model, conversation, read, self.top_logprobs))
                continue
            message, prefix = split_prompt(prompt, frame)
            bodies.append(
                chat_body(self.model, message, prefix, read, frame.system, self.top_logprobs, self.prefill)
            )
        replies = self.client.post("/chat/completions", bodies)
        words = [self.tokenizer.decode([t]) for t in read.token_ids]
        self._warn_failed(replies)
        results = []
        for reply in replies:
            if reply.error:
                results.append(self._failed(reply))
                continue
            logprobs, texts, reasons, missing = parse_chat(reply.body, words)
            results.append(self._result(reply, logprobs, texts, reasons, missing, 0, "chat"))
        return results

    def _warn_failed(self, replies: list[Reply]) -> None:
        failed = [r for r in replies if r.error]
        if failed:
            log.warning(
                "%d of %d request(s) to %s failed after retries (first: %s)",
                len(failed),
                len(replies),
                self.client.settings.base_url,
                failed[0].error,
            )

    @staticmethod
    def _failed(reply: Reply) -> Any:
        from pipeline.contracts.engine import EngineResult

        return EngineResult(
            [], [], 0, 0, 0, [], error=reply.error, source="api/failed", requests=reply.attempts
        )

    def _result(self, reply: Reply, logprobs, texts, reasons, missing: int, n_prompt: int, path: str) -> Any:
        from pipeline.contracts.engine import EngineResult

        usage = reply.body.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return EngineResult(
            token_logprobs=logprobs,
            texts=texts,
            prompt_tokens=int(usage.get("prompt_tokens", n_prompt)),
            cached_tokens=int(details.get("cached_tokens") or 0),
            generated_tokens=int(usage.get("completion_tokens", 0)),
            finish_reasons=reasons,
            source="cache" if reply.cached else f"api/{path}",
            requests=reply.attempts,
            missing=missing,
        )

    @property
    def dtype(self) -> str:
        return "api"

    def run(self, token_ids: list[list[int]], read: Any) -> list[Any]:
        """Answer prompts given as token ids (the token-id path)."""
        replies = self.client.post(
            "/completions", [completion_body(self.model, ids, read) for ids in token_ids]
        )
        self._warn_failed(replies)
        results = []
        for ids, reply in zip(token_ids, replies, strict=True):
            if reply.error:
                results.append(self._failed(reply))
                continue
            logprobs, texts, reasons, missing = parse_completion(reply.body, read.token_ids)
            results.append(self._result(reply, logprobs, texts, reasons, missing, len(ids), "token_ids"))
        return results

    def close(self) -> None:
        self.client.close()
