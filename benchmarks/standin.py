"""A stand-in engine at a GPU's rates, for benchmarks only (it is no backend: no run can judge with it).

It has the real engine's interface (:class:`pipeline.contracts.engine.Engine`) and answers as an engine does (one
:class:`Result` per prompt: a log-probability for every token asked, deterministic per prompt, prompt tokens counted),
and an engine call takes the time a GPU's would: a fixed ``latency`` per call plus ``per_token`` seconds per prompt
token (four characters a token). :func:`settings` sets ``per_token`` so that it judges ``rate`` prompts per second at
the benchmark's batch size, so the pipeline's own costs (tasks, object transfers, the driver's store, the pool's
bookkeeping, batching and its tail) can be measured where a fast engine no longer hides them. The time is slept, not
computed: the stand-in leaves the CPU to the pipeline, as a GPU would.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from benchmarks.timing import TimedJudgeWorker
from pipeline.contracts.engine import Request, Result

CHARS_PER_TOKEN = 4


def tokens(prompt: str) -> int:
    return max(1, len(prompt) // CHARS_PER_TOKEN)


def settings(
    rate: float, prompts: Sequence[str], batch_size: int, latency: float = 0.005
) -> dict[str, float]:
    """``latency`` and ``per_token`` such that calls of ``batch_size`` of these prompts judge ``rate`` a second."""
    mean = sum(tokens(p) for p in prompts) / len(prompts)
    per_prompt = 1.0 / rate - latency / batch_size
    if per_prompt <= 0:
        raise ValueError(f"a latency of {latency} s per call of {batch_size} cannot reach {rate} prompts/s")
    return {"standin_latency": latency, "standin_per_token": per_prompt / mean}


class StandinEngine:
    """The engine (module docstring); ``spec.engine`` holds ``standin_latency`` and ``standin_per_token``."""

    inside = True
    dtype = "standin"
    start_seconds = 0.0

    def __init__(self, spec: Any):
        self.latency = float(spec.engine["standin_latency"])
        self.per_token = float(spec.engine["standin_per_token"])

    def answer(self, prompts: Sequence[str], frame: Any, request: Request) -> list[Result]:
        started = time.perf_counter()
        counts = [tokens(p) for p in prompts]
        out = [self._result(p, n, request) for p, n in zip(prompts, counts, strict=True)]
        remaining = started + self.latency + sum(counts) * self.per_token - time.perf_counter()
        if remaining > 0:
            time.sleep(remaining)
        return out

    @staticmethod
    def _result(prompt: str, n: int, request: Request) -> Result:
        digest = hashlib.blake2b(prompt.encode(), digest_size=32).digest()
        weights = [1 + digest[k % 32] for k in range(len(request.token_ids))]
        total = sum(weights)
        logprobs = [math.log(w / total) for w in weights]
        return Result(logprobs, [" A"], n, 0, 1, ["length"])

    def close(self) -> None:
        pass


def standin_spec(spec: Any, rate: float, prompts: Sequence[str], batch_size: int) -> Any:
    """The judge's spec with the stand-in's settings for ``rate`` (the engine ignores every other setting)."""
    return replace(spec, engine={**settings(rate, prompts, batch_size)})


class StandinWorker(TimedJudgeWorker):
    """The benchmark's judge worker with the stand-in as its engine."""

    @staticmethod
    def open(spec: Any) -> StandinEngine:
        return StandinEngine(spec)
