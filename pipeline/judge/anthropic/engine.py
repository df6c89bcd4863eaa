"""The engine of a judge behind Anthropic's Messages API: sampled verdicts, generation and reasoning by chat, each
prompt's samples as requests of their own, by request or as Message Batches (:mod:`pipeline.judge.anthropic`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pipeline.contracts.engine import Request, Result
from pipeline.contracts.frame import PromptFrame, parse_conversation
from pipeline.judge.anthropic.batches import MessageBatches
from pipeline.judge.anthropic.messages import (
    PATH,
    READER,
    AnthropicClient,
    conversation_parts,
    message_body,
    prompt_turns,
)
from pipeline.judge.endpoint.client import Reply
from pipeline.judge.endpoint.engine import EndpointEngine
from pipeline.judge.endpoint.replies import check_of, served_model
from pipeline.judge.endpoint.sampled import sampled_logprobs, sampled_request

log = logging.getLogger(__name__)


class AnthropicEngine(EndpointEngine):
    """The judge worker's engine for ``judge.backend=anthropic``: answers a batch of whole prompts as the other engines
    do. A request with words to read (a verdict, an absolute score) is sampled ``judge.endpoint.samples`` times and its
    words counted; a request without (reasons, reasoning, a generation) gets its ``n`` samples as texts."""

    api_name = "Anthropic's Messages API"
    client_class = AnthropicClient
    batches_class = MessageBatches

    def started(self) -> None:
        log.info("Anthropic judge %s at %s (sampled verdicts)", self.model, self.client.base_url)

    def answer(self, prompts: Sequence[str], frame: PromptFrame, request: Request) -> list[Result]:
        sampled = bool(request.token_ids)
        sent = sampled_request(request, self.settings) if sampled else request
        words = [self.tokenizer.decode([t]) for t in request.token_ids]
        bodies, owner, prefixes = [], [], []
        for k, prompt in enumerate(prompts):
            conversation = parse_conversation(prompt)
            if conversation is not None:
                system, turns = conversation_parts(conversation)
                prefix = ""
            else:
                message, prefix = frame.split(prompt)
                system, turns = frame.system, prompt_turns(message, prefix, self.settings.prefill)
            prefixes.append(prefix)
            for s in range(sent.n):
                bodies.append(message_body(self.model, system, turns, sent, s if sent.n > 1 else None))
                owner.append(k)
        replies = self.post(PATH, bodies, [check_of(READER)] * len(bodies))
        path = "sampled" if sampled else "messages"
        mine: list[list[Reply]] = [[] for _ in prompts]
        for k, reply in zip(owner, replies, strict=True):
            mine[k].append(reply)
        return [
            self._result(r, prefix, words if sampled else None, path)
            for r, prefix in zip(mine, prefixes, strict=True)
        ]

    @staticmethod
    def _result(replies: list[Reply], prefix: str, words: list[str] | None, path: str) -> Result:
        """One prompt's result from its samples' replies: failed if any failed; billed as every sample was (each is a
        request: its prompt tokens count once per sample)."""
        attempts = sum(r.attempts for r in replies)
        kinds = tuple(k for r in replies for k in r.failures)
        broken = next((r for r in replies if r.body is None), None)
        if broken is not None:
            return Result.failed(str(broken.error), "api/failed", attempts, kinds)
        answers = [READER(r.body) for r in replies]
        texts = [a.texts[0] for a in answers]
        logprobs = sampled_logprobs(texts, words, prefix)[0] if words is not None else []
        cached = all(r.cached for r in replies)
        batch = any(r.batch for r in replies)
        return Result(
            token_logprobs=logprobs,
            texts=texts,
            prompt_tokens=sum(a.usage.prompt_tokens or 0 for a in answers),
            cached_tokens=sum(a.usage.cached_tokens or 0 for a in answers),
            generated_tokens=sum(a.usage.completion_tokens or 0 for a in answers),
            finish_reasons=[a.reasons[0] for a in answers],
            source="cache" if cached else f"api/{'batch/' if batch else ''}{path}",
            requests=attempts,
            failures=kinds,
            usage_unknown=not all(a.usage.known for a in answers),
            served_model=served_model(replies[0].body),
        )
