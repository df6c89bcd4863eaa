"""Reasoning, then the verdict: an engine in front of any engine that, for a request with
:class:`pipeline.contracts.engine.Reasoning`, makes two calls per prompt.

A whole prompt is ``head + message + tail + answer prefix`` (:class:`pipeline.contracts.frame.PromptFrame`).

1. The reasoning: ``head + message + tail + open`` with up to ``max_tokens`` greedy tokens, ending at a stop string
   or the budget (cut: counted in the result, the verdict still read).
2. The verdict: ``head + message + tail + open + reasoning + close + answer prefix``, read exactly as the request
   says without reasoning (the label words' first-token log-probabilities, an absolute read or a short
   generation). It extends the first call's text, so the engine's prefix cache serves it.

The result is the verdict's, with the reasoning text, its tokens and whether the budget cut it; prompt, cached
and generated tokens are the two calls' sums, so they go to the run's cost. A request without reasoning goes to
the engine as it is. Behind an API the same two calls go to the endpoint: on the chat path the second call's
``open + reasoning + close + answer prefix`` is the assistant message the endpoint continues.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pipeline.contracts.engine import Engine, Request, Result
from pipeline.contracts.frame import PromptFrame


def reasoning_prompt(frame: PromptFrame, prompt: str, open_text: str) -> tuple[str, str]:
    """(the text the reasoning continues, the answer prefix) of a whole prompt."""
    message, prefix = frame.split(prompt)
    return frame.wrap(message) + open_text, prefix


class ReasoningEngine:
    """``engine`` with reasoning before the verdict for requests that ask for it (module docstring)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    @property
    def start_seconds(self) -> float:
        return self.engine.start_seconds

    @property
    def inside(self) -> bool | None:
        return self.engine.inside

    @property
    def dtype(self) -> str:
        return self.engine.dtype

    def answer(self, prompts: Sequence[str], frame: PromptFrame, request: Request) -> list[Result]:
        r = request.reasoning
        if r is None:
            return self.engine.answer(prompts, frame, request)
        starts = [reasoning_prompt(frame, prompt, r.open) for prompt in prompts]
        think = Request(max_tokens=r.max_tokens, stop=r.stop)
        thoughts = self.engine.answer([text for text, _ in starts], frame, think)
        verdict_request = replace(request, reasoning=None)
        ok = [k for k, t in enumerate(thoughts) if t.error is None]
        verdict_prompts = [starts[k][0] + reasoning_text(thoughts[k]) + r.close + starts[k][1] for k in ok]
        verdicts = self.engine.answer(verdict_prompts, frame, verdict_request) if ok else []
        out: list[Result] = [
            Result.failed(t.error, t.source, t.requests, t.failures) if t.error is not None else t
            for t in thoughts
        ]
        for k, verdict in zip(ok, verdicts, strict=True):
            out[k] = combine(thoughts[k], verdict)
        return out

    def close(self) -> None:
        self.engine.close()


def reasoning_text(thought: Result) -> str:
    """The reasoning a call generated (empty if it generated nothing)."""
    return thought.texts[0] if thought.texts else ""


def combine(thought: Result, verdict: Result) -> Result:
    """The verdict with its reasoning: the verdict's reads and texts, both calls' tokens and requests."""
    if verdict.error is not None:
        return Result.failed(
            verdict.error,
            verdict.source,
            thought.requests + verdict.requests,
            thought.failures + verdict.failures,
        )
    return replace(
        verdict,
        prompt_tokens=thought.prompt_tokens + verdict.prompt_tokens,
        cached_tokens=thought.cached_tokens + verdict.cached_tokens,
        generated_tokens=thought.generated_tokens + verdict.generated_tokens,
        requests=thought.requests + verdict.requests,
        failures=thought.failures + verdict.failures,
        reasoning=reasoning_text(thought),
        reasoning_tokens=thought.generated_tokens,
        reasoning_cut=bool(thought.finish_reasons) and thought.finish_reasons[0] == "length",
    )
