"""Progress of the judge stage: comparisons done / total, rate and ETA, logged at most every few seconds."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

log = logging.getLogger("pipeline.judge")


@dataclass(frozen=True)
class JudgeStats:
    """What the judge stage did and what it cost."""

    prompts: int  # judgments in the run folder (this run and earlier ones)
    judged_now: int
    seconds: float  # the judge stage's wall time, engine start-up included
    rate: float  # prompts per second after the first batch (start-up excluded); NaN if too few batches
    rate_with_startup: float
    prompt_tokens: int
    cached_tokens: int
    # judge.backend=api: HTTP requests sent (retries included), prompts answered from the reply cache, the
    # tokens the endpoint billed (cached replies excluded) and their price (None without judge.api prices)
    requests: int = 0
    cached_replies: int = 0
    billed_prompt_tokens: int = 0
    billed_completion_tokens: int = 0
    money: float | None = None
    # requested tokens read from API replies, and those not among the returned alternatives (floored)
    logprobs_read: int = 0
    missing_logprobs: int = 0
    # the paths the API requests took: token_ids (exact label log-probabilities) and/or chat (top alternatives)
    api_paths: tuple[str, ...] = ()
    # prompts of this run answered from the judgement store (the same prompt judged before: by an earlier run, or
    # for other candidates with the same texts; pipeline.judge.memo)
    reused: int = 0

    @property
    def missing_share(self) -> float:
        return self.missing_logprobs / self.logprobs_read if self.logprobs_read else 0.0

    @property
    def cache_share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def metrics(self) -> dict[str, float]:
        return {
            "judge/comparisons": float(self.prompts),
            "judge/judged_this_run": float(self.judged_now),
            "judge/reused_judgements": float(self.reused),
            "judge/comparisons_per_s": self.rate,
            "judge/comparisons_per_s_with_startup": self.rate_with_startup,
            "judge/seconds": self.seconds,
            "judge/prompt_tokens": float(self.prompt_tokens),
            "judge/prefix_cache_share": self.cache_share,
            "judge/api_requests": float(self.requests),
            "judge/api_cached_replies": float(self.cached_replies),
            "judge/api_billed_prompt_tokens": float(self.billed_prompt_tokens),
            "judge/api_billed_completion_tokens": float(self.billed_completion_tokens),
            "judge/api_missing_logprob_share": self.missing_share,
            **({"judge/api_cost": self.money} if self.money is not None else {}),
        }


def format_seconds(seconds: float) -> str:
    if seconds != seconds or seconds == float("inf"):
        return "?"
    seconds = int(round(seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m{s:02d}s" if h else f"{m}m{s:02d}s" if m else f"{s}s"


class Progress:
    """Counts judged prompts. The rate is measured from the first finished batch (engine start-up excluded);
    ``first_batch_at`` and ``started`` let callers report both."""

    def __init__(
        self,
        total: int,
        every_seconds: float = 10.0,
        clock=time.monotonic,
        verb: str = "judged",
        noun: str = "prompts",
    ):
        self.verb, self.noun = verb, noun
        self.total = total
        self.done = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.every = every_seconds
        self.clock = clock
        self.started = clock()
        self.first_batch_at: float | None = None
        self.first_batch_rows = 0
        self._last_log = -float("inf")

    def rate(self) -> float:
        """Comparisons per second since the first batch arrived (excluding that batch)."""
        if self.first_batch_at is None:
            return float("nan")
        elapsed = self.clock() - self.first_batch_at
        after_first = self.done - self.first_batch_rows
        return after_first / elapsed if elapsed > 0 and after_first > 0 else float("nan")

    def overall_rate(self) -> float:
        elapsed = self.clock() - self.started
        return self.done / elapsed if elapsed > 0 else float("nan")

    def update(self, rows: int, prompt_tokens: int = 0, cached_tokens: int = 0) -> None:
        self.done += rows
        self.prompt_tokens += prompt_tokens
        self.cached_tokens += cached_tokens
        now = self.clock()
        if self.first_batch_at is None:
            self.first_batch_at = now
            self.first_batch_rows = rows
        if now - self._last_log >= self.every or self.done >= self.total:
            self._last_log = now
            log.info("%s", self.line())

    def line(self) -> str:
        rate, how = self.rate(), ""
        if rate != rate:  # one batch so far: the only rate there is includes the engine's start-up
            rate, how = self.overall_rate(), " with engine start-up"
        eta = (self.total - self.done) / rate if rate and rate == rate and rate > 0 else float("nan")
        share = self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0
        pct = 100.0 * self.done / self.total if self.total else 100.0
        return (
            f"{self.verb} {self.done}/{self.total} {self.noun} ({pct:.1f}%), {rate:.2f}/s{how}, "
            f"ETA {format_seconds(eta)}, prefix cache {share:.0%} of prompt tokens"
        )
