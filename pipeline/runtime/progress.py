"""Progress of the judge stage: comparisons done / total, rate and ETA, logged at most every few seconds."""

from __future__ import annotations

import logging
import time

log = logging.getLogger("pipeline.judge")


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
