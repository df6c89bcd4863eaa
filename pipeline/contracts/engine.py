"""What an engine is asked and what it answers: the one contract between prompts, judges and scores."""

from __future__ import annotations

from dataclasses import dataclass

# vLLM returns at most this many requested token log-probabilities per prompt (MAX_LOGPROB_TOKEN_IDS).
MAX_READ_TOKENS = 128


@dataclass(frozen=True)
class Read:
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


@dataclass(frozen=True)
class EngineResult:
    # First-token log-probability of each requested token, in the Read's order.
    token_logprobs: list[float]
    # The generated text of each sample (the first token alone for a one-token read).
    texts: list[str]
    prompt_tokens: int
    cached_tokens: int
    generated_tokens: int
    # Why each sample ended: "stop" (end of text or a stop string) or "length" (cut off at max_tokens).
    finish_reasons: list[str]
    # Why there is no answer (an API request that kept failing; the other fields are empty).
    error: str | None = None
    # Who answered: "engine" (in-process), "api/token_ids" or "api/chat" (a request to the endpoint by that
    # path), "cache" (the API reply cache); and the HTTP requests it took (retries included; 0 from the cache).
    source: str = "engine"
    requests: int = 0
    # Requested tokens not among an API's returned alternatives (given a floor; see pipeline.judge.api).
    missing: int = 0
