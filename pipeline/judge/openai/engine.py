"""The engine of a judge behind an OpenAI-compatible API: the token-id path or the chat path."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from pipeline.config.enums import ApiPath
from pipeline.contracts.engine import Request, Result
from pipeline.contracts.frame import PromptFrame, parse_conversation
from pipeline.judge.endpoint.client import Reply
from pipeline.judge.endpoint.engine import EndpointEngine
from pipeline.judge.endpoint.replies import (
    Answer,
    Refused,
    chat_reader,
    check_of,
    completion_reader,
    served_model,
)
from pipeline.judge.endpoint.sampled import sampled_logprobs, sampled_request
from pipeline.judge.openai.bodies import chat_body, completion_body, messages_body
from pipeline.judge.tokenizers import is_local

log = logging.getLogger(__name__)


class ApiEngine(EndpointEngine):
    """The judge worker's engine for ``judge.backend=api``: answers a batch of whole prompts through the
    endpoint (``judge.endpoint``), as the in-process engines answer them.

    - token-id path: the exact token ids the pipeline builds in-process (the tokenizer loads from
      ``judge.model``, which names the served checkpoint) go to ``/completions``, and the exact
      log-probability of every requested token comes back (vLLM's server reads what the in-process engine
      reads);
    - chat path: the message and the answer prefix (continued as an assistant message) go to
      ``/chat/completions``, and the requested tokens are read, as text, among the first token's
      ``top_logprobs`` alternatives; a token not among them gets a floor and is counted (``missing``).

    ``auto`` probes the server once, at start, with one token-id request.
    """

    api_name = "an API engine"

    def started(self) -> None:
        self.top_logprobs = self.settings.top_logprobs
        self.prefill = self.settings.prefill
        path = self.endpoint.path
        if path == ApiPath.auto:
            # token ids only with the checkpoint's own tokenizer and chat template on this machine
            path = self.probe() if is_local(self.tokenizer) else ApiPath.chat
        self.path = path
        log.info("API judge %s at %s: %s path", self.model, self.client.base_url, self.path)

    def probe(self) -> ApiPath:
        """``token_ids`` if the server answers a token-id prompt with the exact log-probability of a requested
        token (vLLM's extension), else ``chat``."""
        ids = list(self.tokenizer("Hello")["input_ids"]) or [0]
        token = ids[-1]
        body = completion_body(self.model, ids, Request(token_ids=(token,), seed=0))
        [reply] = self.client.post("/completions", [body], use_cache=False)
        why = reply.error
        if reply.body is not None:
            try:
                completion_reader(1, [token])(reply.body)
                return ApiPath.token_ids
            except Refused as refused:
                why = str(refused)
        log.info("the server does not take token-id prompts (%s): the chat path", why)
        return ApiPath.chat

    def answer(self, prompts: Sequence[str], frame: PromptFrame, request: Request) -> list[Result]:
        """Answer whole prompt texts by this engine's path: token ids (exact) or chat messages. Conversations
        (:func:`pipeline.contracts.frame.conversation_prompt`, e.g. the judge's reasons) go to the chat endpoint
        as they are, whatever the path."""
        conversations = [parse_conversation(p) for p in prompts]
        if self.path == ApiPath.token_ids and not any(conversations):
            return self.run(frame.encode(self.tokenizer, list(prompts)), request)
        # a verdict read by sampling (judge.endpoint.path=sampled): the request sent is n samples, no logprobs
        sampled = self.path == ApiPath.sampled and bool(request.token_ids)
        sent = sampled_request(request, self.settings) if sampled else request
        words = [self.tokenizer.decode([t]) for t in request.token_ids]
        bodies, prefixes, readers = [], [], []
        for prompt, conversation in zip(prompts, conversations, strict=True):
            if conversation is not None:
                bodies.append(messages_body(self.model, conversation, request, self.top_logprobs))
                prefixes.append("")
                readers.append(chat_reader(request.n, words, top=self.top_logprobs))
                continue
            message, prefix = frame.split(prompt)
            prefixes.append(prefix)
            bodies.append(
                chat_body(self.model, message, prefix, sent, frame.system, self.top_logprobs, self.prefill)
            )
            readers.append(chat_reader(sent.n, [] if sampled else words, top=self.top_logprobs))
        replies = self.post("/chat/completions", bodies, [check_of(r) for r in readers])
        results = []
        for reply, prefix, reader in zip(replies, prefixes, readers, strict=True):
            if reply.body is None:
                results.append(Result.failed(str(reply.error), "api/failed", reply.attempts, reply.failures))
                continue
            answer = reader(reply.body)
            if sampled:  # nothing floored: samples that say no word lower the label mass instead
                answer = replace(answer, logprobs=sampled_logprobs(answer.texts, words, prefix)[0], missing=0)
            results.append(self._result(reply, answer, 0, str(self.path)))
        return results

    def run(self, token_ids: list[list[int]], request: Request) -> list[Result]:
        """Answer prompts given as token ids (the token-id path)."""
        reader = completion_reader(request.n, request.token_ids)
        bodies = [completion_body(self.model, ids, request) for ids in token_ids]
        replies = self.post("/completions", bodies, [check_of(reader)] * len(token_ids))
        results = []
        for ids, reply in zip(token_ids, replies, strict=True):
            if reply.body is None:
                results.append(Result.failed(str(reply.error), "api/failed", reply.attempts, reply.failures))
                continue
            results.append(self._result(reply, reader(reply.body), len(ids), "token_ids"))
        return results

    @staticmethod
    def _result(reply: Reply, answer: Answer, n_prompt: int, path: str) -> Result:
        """The result of an answer; a token count the reply does not give is 0 (the prompt's own length on the
        token-id path) and the result says its usage is unknown."""
        usage = answer.usage
        prompt = usage.prompt_tokens if usage.prompt_tokens is not None else n_prompt
        return Result(
            token_logprobs=answer.logprobs,
            texts=answer.texts,
            prompt_tokens=prompt,
            cached_tokens=usage.cached_tokens or 0,
            generated_tokens=usage.completion_tokens or 0,
            finish_reasons=answer.reasons,
            source="cache" if reply.cached else f"api/{'batch/' if reply.batch else ''}{path}",
            requests=reply.attempts,
            missing=answer.missing,
            failures=tuple(reply.failures),
            usage_unknown=not usage.known,
            served_model=served_model(reply.body),
        )
