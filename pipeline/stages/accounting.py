"""What a streamed stage reports besides its outputs: what an API endpoint was asked and billed, prompts that
could not be answered, engines that died and workers that were lost.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from pipeline.config.judging import EndpointConfig, GenerateConfig
from pipeline.contracts.errors import UserError
from pipeline.judge.hosting.watchdog import Interruptions, interruptions
from pipeline.runtime.logs import FILE_ONLY
from pipeline.stages.base import StageContext
from pipeline.storage.events import read_events

log = logging.getLogger("pipeline")


def column_total(table: pa.Table, column: str) -> int:
    return int(pc.sum(table.column(column)).as_py() or 0)


@dataclass
class ApiUsage:
    """What the endpoint was asked and billed for, from the RESPONSES of ``judge.backend=api``."""

    requests: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # requested tokens (label words...) read, and those not among the returned alternatives (floored)
    logprobs_read: int = 0
    missing: int = 0
    # answers whose reply gave no token counts (billed tokens unknown)
    usage_unknown: int = 0

    # the paths the requests took (api/token_ids, api/chat)
    paths: set[str] = dataclasses.field(default_factory=set)
    # failed attempts by kind (replies that were not answers, HTTP errors, timeouts, lost connections)
    failures: dict[str, int] = dataclasses.field(default_factory=dict)
    # the billed tokens answered as lines of batch jobs (judge.endpoint.batch), priced at the batch discount
    batch_prompt_tokens: int = 0
    batch_completion_tokens: int = 0
    # the answers per judge and model their replies say served them (a provider that switches snapshots mid-run)
    models: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)

    def add(self, batch: pa.Table) -> None:
        source = batch.column("source")
        billed = batch.filter(pc.starts_with(source, "api/"))
        self.paths |= {s for s in pc.unique(billed.column("source")).to_pylist() if s != "api/failed"}
        from_api = batch.filter(pc.not_equal(source, "engine"))
        self.logprobs_read += int(
            pc.sum(pc.list_value_length(from_api.column("token_logprobs"))).as_py() or 0
        )
        self.missing += column_total(batch, "missing_logprobs")
        self.usage_unknown += column_total(billed, "usage_unknown")
        self.requests += column_total(batch, "requests")
        self.cached += pc.sum(pc.equal(source, "cache")).as_py() or 0
        self.prompt_tokens += column_total(billed, "prompt_tokens")
        self.completion_tokens += column_total(billed, "generated_tokens")
        batched = batch.filter(pc.starts_with(source, "api/batch/"))
        self.batch_prompt_tokens += column_total(batched, "prompt_tokens")
        self.batch_completion_tokens += column_total(batched, "generated_tokens")
        for kinds in batch.column("failed_attempts").to_pylist():
            for kind in kinds or ():
                self.failures[kind] = self.failures.get(kind, 0) + 1
        if "served_model" in batch.column_names:  # the models the replies say served them (cached ones too)
            served = from_api.filter(pc.is_valid(from_api.column("served_model")))
            for key in zip(
                served.column("judge").to_pylist(), served.column("served_model").to_pylist(), strict=True
            ):
                self.models[key] = self.models.get(key, 0) + 1

    def money(self, api: EndpointConfig | None) -> float | None:
        """The price of the billed tokens at the endpoint's prices (per million), those of batch jobs at its
        ``batch_discount`` times the price; None without an endpoint or its prices."""
        if api is None or (api.price_input is None and api.price_output is None):
            return None
        pin, pout, batch_discount = api.price_input or 0.0, api.price_output or 0.0, api.batch_discount
        direct = (self.prompt_tokens - self.batch_prompt_tokens) * pin + (
            self.completion_tokens - self.batch_completion_tokens
        ) * pout
        batched = (self.batch_prompt_tokens * pin + self.batch_completion_tokens * pout) * batch_discount
        return (direct + batched) / 1e6


class JudgeFailed(UserError):
    """Prompts the judge could not answer (an endpoint that kept failing); the rest is stored."""


def raise_failed(failed: pa.Table, run_dir: Path, what: str = "judged") -> None:
    """Stop the run after the judge (or generate) stage when prompts could not be answered (API requests that
    kept failing): everything answered is stored; the error names the failures, and a rerun in the folder
    answers only them. For a generation, ``cand_a`` is the input and ``template_id`` the generator."""
    rows = failed.select(
        ["context_id", "mode", "attribute", "template_id", "cand_a", "cand_b", "error"]
    ).to_pylist()
    for row in rows:
        log.error(
            f"not {what}: " + "context %r, %s %r vs %r (%s, %s): %s",
            row["context_id"],
            row["mode"],
            row["cand_a"],
            row["cand_b"],
            row["attribute"],
            row["template_id"],
            row["error"],
            extra=FILE_ONLY,
        )
    first = rows[0]
    where = (
        f"input {first['cand_a']!r}, generator {first['template_id']!r}"
        if what == "generated"
        else f"context {first['context_id']!r}, candidate {first['cand_a']!r} ({first['attribute']}, "
        f"{first['template_id']})"
    )
    verb = "generate" if what == "generated" else "judge"
    raise JudgeFailed(
        f"{len(rows)} prompt(s) could not be {what} after retries, e.g. {where}: {first['error']}. "
        f"Every prompt answered is stored in {run_dir} (all of them listed in run.log); rerun the same command "
        f"with paths.run_dir={run_dir} to {verb} only the missing ones"
    )


def report_generator_usage(
    usage: dict[str, ApiUsage], cfg: GenerateConfig, metrics: dict[str, float]
) -> None:
    """Log and record what the generators behind APIs cost: requests (retries included), replies from the
    cache, billed tokens and, with prices, money (``generate/api_*``)."""
    if not usage:
        return
    prices = {m.name: m.endpoint for m in cfg.models if m.name in usage}  # None: no prices given
    total = ApiUsage()
    money: float | None = None
    for name, u in usage.items():
        total.requests += u.requests
        total.cached += u.cached
        total.prompt_tokens += u.prompt_tokens
        total.completion_tokens += u.completion_tokens
        total.usage_unknown += u.usage_unknown
        for kind, n in u.failures.items():
            total.failures[kind] = total.failures.get(kind, 0) + n
        api = prices.get(name)
        cost = u.money(api)
        if cost is not None:
            money = (money or 0.0) + cost
    metrics["generate/api_requests"] = float(total.requests)
    metrics["generate/api_cached_replies"] = float(total.cached)
    metrics["generate/api_prompt_tokens"] = float(total.prompt_tokens)
    metrics["generate/api_completion_tokens"] = float(total.completion_tokens)
    metrics["generate/api_usage_unknown"] = float(total.usage_unknown)
    metrics["generate/api_failed_attempts"] = float(sum(total.failures.values()))
    for kind, n in total.failures.items():
        metrics[f"generate/api_failed_attempts/{kind}"] = float(n)
    if money is not None:
        metrics["generate/api_cost"] = money
    log.info(
        "generators behind APIs: %d request(s) sent (retries included), %d output(s) from the reply cache, "
        "%d prompt + %d completion tokens billed%s",
        total.requests,
        total.cached,
        total.prompt_tokens,
        total.completion_tokens,
        f", cost {money:.4f}" if money is not None else "",
    )


# The run folder's record of the engines' starts and deaths and the judge workers' batches
# (pipeline.judge.hosting.watchdog), under logs/.
ENGINE_EVENTS = "engine_events.jsonl"


class JudgeStageError(RuntimeError):
    """The judge workers could not go on (an engine that cannot start, a worker lost more often than
    ``runtime.max_engine_restarts`` allows); what was judged is on disk."""


def error_cause(exc: BaseException) -> str:
    """An error's type and its cause in one line: the last line of its message (Ray's errors carry the remote
    traceback, whose last line is the cause, below a line naming the task)."""
    text = str(exc).strip() or type(exc).__name__
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # Ray's wrappers start with a line naming the task; the cause is the last line of the remote traceback
    cause = lines[-1] if len(lines) > 1 else lines[0]
    return f"{type(exc).__name__}: {cause}"[:600]


def judge_failure_hint(exc: BaseException, lost: Interruptions, max_restarts: int) -> str:
    """What a user can do about a judge stage that stopped."""
    text = str(exc)
    if lost.engine_deaths or lost.lost_workers:
        return (
            f"The judge workers died {len(lost.engine_deaths) + len(lost.lost_workers)} time(s) "
            f"(runtime.max_engine_restarts={max_restarts} per worker); see logs/engine_events.jsonl and the "
            "workers' logs in logs/."
        )
    if "__init__" in text or "ActorDiedError" in type(exc).__name__ or "creation task" in text:
        return (
            "A judge worker could not start its engine (the model does not load or does not fit); it is not "
            "retried. See the workers' logs in logs/."
        )
    return "See the workers' logs in logs/."


def report_interruptions(ctx: StageContext, events: Path, seen: int, stage: str = "judge") -> Interruptions:
    """Log and record (MLflow metrics under ``stage/``) the engine deaths, lost workers and nodes, drained workers
    and redone prompts of this stage's events (those after the first ``seen``)."""
    lost = interruptions(read_events(events)[seen:])
    told = (
        (
            "engine_deaths",
            f"%d {stage} engine(s) died during the run (%s)",
            [f"{e['worker']} with {e['in_flight']} in flight" for e in lost.engine_deaths],
        ),
        (
            "lost_workers",
            f"%d {stage} worker(s) were lost during the run with a batch unfinished (%s)",
            lost.lost_workers,
        ),
        (
            "lost_nodes",
            f"%d node(s) were lost during the run with {stage} workers on them (%s): their workers were "
            "replaced where there was room",
            [node[:12] for node in lost.lost_nodes],
        ),
        (
            "drained_workers",
            f"%d {stage} worker(s) were released from drained nodes after finishing their batches (%s)",
            lost.drained_workers,
        ),
    )
    for metric, message, names in told:
        if names:
            log.warning(message, len(names), ", ".join(names))
        ctx.metrics[f"{stage}/{metric}"] = float(len(names))
    if lost.redone:
        log.warning(
            "the %d prompt(s) of the unfinished batches went to new workers; nothing already stored was asked "
            "again",
            lost.redone,
        )
    ctx.metrics[f"{stage}/redone_prompts"] = float(lost.redone)
    return lost
