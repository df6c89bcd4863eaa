"""What an engine is asked and what it answers: the one contract between prompts, judges and scores.

A prompt reaches an engine as its whole text (the frame around the message and the answer prefix:
:mod:`pipeline.contracts.frame`) with a :class:`Request`, settled once on the driver, that says what to read and
what to generate. The engine gives one :class:`Result` per prompt. Every engine implements :class:`Engine`: vLLM in
the worker's process, Hugging Face transformers, an OpenAI-compatible endpoint, and the judgement store in front of
any of them (:mod:`pipeline.judge`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from pipeline.contracts.frame import PromptFrame

# vLLM returns at most this many requested token log-probabilities per prompt (MAX_LOGPROB_TOKEN_IDS).
MAX_READ_TOKENS = 128


@dataclass(frozen=True)
class Reasoning:
    """Reason first (``judge.reasoning``): up to ``max_tokens`` tokens generated greedily after the prompt's
    message and ``open`` (a thinking model's ``<think>``; empty for an instruct model told to think step by step),
    ending at a ``stop`` string or the budget; then ``close`` and the answer prefix are appended, and the request
    is read on that whole text (:mod:`pipeline.judge.reasoning`)."""

    max_tokens: int
    open: str = ""
    close: str = "\n\n"
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Request:
    """What the engine does with one prompt: the tokens whose first-token log-probabilities it returns, and how
    many tokens it generates (greedy with ``n == 1``, else ``n`` samples at ``temperature`` with ``seed``)."""

    token_ids: tuple[int, ...] = ()
    max_tokens: int = 1
    n: int = 1
    temperature: float = 0.0
    seed: int | None = None
    # Generation only (generate-then-evaluate): nucleus sampling and stop strings.
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    # Reason before the answer is read (judge.reasoning); None: read at the answer prefix directly.
    reasoning: Reasoning | None = None

    @property
    def reproducible(self) -> bool:
        """Whether the same prompt always gets the same answer: greedy, or sampled with a seed."""
        return self.temperature == 0 or self.seed is not None


@dataclass(frozen=True)
class Result:
    """An engine's answer to one prompt."""

    # First-token log-probability of each requested token, in the Request's order.
    token_logprobs: list[float]
    # The generated text of each sample (the first token alone for a one-token request).
    texts: list[str]
    prompt_tokens: int
    cached_tokens: int
    generated_tokens: int
    # Why each sample ended: "stop" (end of text or a stop string) or "length" (cut off at max_tokens).
    finish_reasons: list[str]
    # Why there is no answer (an API request that kept failing; the other fields are empty).
    error: str | None = None
    # Who answered: "engine" (in-process), "api/token_ids" or "api/chat" (a request to the endpoint by that
    # path), "cache" (the API reply cache), "store" (the judgement store); and the HTTP requests it took (retries
    # included; 0 from a cache or the store).
    source: str = "engine"
    requests: int = 0
    # Requested tokens not among an API's returned alternatives (given a floor; see pipeline.judge.endpoint).
    missing: int = 0
    # With Request.reasoning: the reasoning generated before the answer, its tokens, and whether the budget cut it
    # (the answer is still read after the answer prefix). None / 0 / None without reasoning.
    reasoning: str | None = None
    reasoning_tokens: int = 0
    reasoning_cut: bool | None = None
    # Behind an API: the kind of every attempt that failed before the answer (or without one): a reply that was not
    # an answer, an HTTP error, a timeout, a lost connection (pipeline.judge.endpoint.replies.KINDS).
    failures: tuple[str, ...] = ()
    # Behind an API: the reply gave no token counts (or not all of them); the missing ones are 0 (the prompt's length
    # on the token-id path), and the run counts the answers whose usage is unknown.
    usage_unknown: bool = False
    # Behind an API: the model the reply says served it (its "model" field; None where it names none), so that a
    # provider that switches snapshots within a run is seen (judge drift).
    served_model: str | None = None

    @classmethod
    def failed(cls, error: str, source: str, requests: int, failures: Sequence[str] = ()) -> Result:
        """No answer: ``error`` says why (the prompt is not stored, and a rerun asks it again)."""
        return cls(
            [], [], 0, 0, 0, [], error=error, source=source, requests=requests, failures=tuple(failures)
        )


# The fields of a Result that are the answer (what a store keeps); where it came from and errors are not.
ANSWER_FIELDS = (
    "token_logprobs",
    "texts",
    "prompt_tokens",
    "cached_tokens",
    "generated_tokens",
    "finish_reasons",
    "reasoning",
    "reasoning_tokens",
    "reasoning_cut",
)


class Engine(Protocol):
    """An engine: answers prompts of one request at a time, in order."""

    @property
    def start_seconds(self) -> float:
        """Seconds its start took (0 for an engine that starts nothing)."""
        ...

    @property
    def inside(self) -> bool | None:
        """Where the engine computes: True inside this process; False in processes of its own, which the judge
        worker watches (its ``processes()`` names them); None elsewhere (behind an endpoint)."""
        ...

    @property
    def dtype(self) -> str:
        """What it computes in (``"api"`` behind an endpoint)."""
        ...

    def answer(self, prompts: Sequence[str], frame: PromptFrame, request: Request) -> list[Result]:
        """One result per prompt (whole prompt texts around ``frame``), as ``request`` says."""
        ...

    def close(self) -> None:
        """Release the engine (its processes and memory)."""
        ...


@dataclass(frozen=True)
class Coverage:
    """What a judge that answers by key found when checked against the run's prompts before anything runs: the
    prompts it leaves out (PROMPT_KEY rows; the run leaves out both orderings of their pairs, counts and reports
    them), and what of its own the run does not use, in words (``notes``) and counts."""

    left_out: pa.Table
    notes: tuple[str, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)


class KeyedAnswers(Protocol):
    """A judge that answers each prompt by its key (its context, mode, attribute, template and the candidates in slots
    A and B), from what it holds (recorded verdicts), never reading the prompt's text: its backend registers it as
    ``answers`` (:class:`pipeline.config.backends.BackendEntry`). The driver checks it against the run before anything
    runs (:meth:`check`), then it answers every row of the judge stage's stream as its front
    (:class:`pipeline.runtime.Front`): no engine starts."""

    def check(self, prompts: pa.Table, candidates: pa.Table) -> Coverage:
        """The run's ``prompts`` (PROMPT_KEY rows) it leaves out and what it does not use; a UserError where it
        cannot answer the run as its settings require."""
        ...

    def answer(self, batch: pa.Table) -> tuple[pa.Table | None, pa.Table]:
        """(RESPONSES rows answering ``batch``'s PROMPTS rows, the rows left for workers: none)."""
        ...

    def keep(self, sent: pa.Table, out: pa.Table) -> None: ...

    def close(self) -> None: ...
