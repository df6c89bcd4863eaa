"""The stages of the comparative workflow: typed settings, declared ports, one ``run`` each.

Each stage is thin: it unpacks its inputs, calls the pure functions that do the work (:mod:`pipeline.data`,
:mod:`pipeline.prompts`, :mod:`pipeline.pairs`, :mod:`pipeline.reduce`, :mod:`pipeline.score`,
:mod:`pipeline.report`, :mod:`pipeline.methods`), logs what a user should know, and returns its outputs.
Streamed work (pairs into the judge) goes through ``ctx.executor``; no stage imports Ray.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from pipeline import plots, ports
from pipeline.absolute import (
    COMPARE,
    rating_failures,
    rating_scores,
    ratings_from_responses,
)
from pipeline.config import (
    AbsoluteConfig,
    Correlation,
    DatasetConfig,
    Debias,
    GenerateConfig,
    JudgeConfig,
    Orderings,
    PairsConfig,
    PromptConfig,
)
from pipeline.data.contexts import group_by_context
from pipeline.data.source import DatasetInfo, load_input
from pipeline.data.validate import InputReport
from pipeline.errors import ConfigError, UserError
from pipeline.judge.labels import judgments_from_responses, resolve_labels
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.watchdog import Interruptions, interruptions, read_events
from pipeline.judge.worker import JudgeWorker
from pipeline.logs import FILE_ONLY
from pipeline.methods import poe_logit
from pipeline.models import resolve_judge
from pipeline.pairs import build_contexts, generate_prompts, k_adjustments, split_shards
from pipeline.preflight import check_prompt_lengths
from pipeline.progress import JudgeStats, Progress, format_seconds
from pipeline.prompts import PromptPlan, plan_prompts
from pipeline.reduce import reduce_judgments
from pipeline.report import (
    absolute_text,
    assessment_table,
    correlation_table,
    cost_table,
    mlflow_metrics,
    summary_text,
)
from pipeline.runtime import MapStep
from pipeline.schemas import CORRELATIONS, JUDGED_KEYS, RATING_FAILURES
from pipeline.score import combine_scores, rank_and_join, score_comparisons
from pipeline.store import JudgmentStore, RatingStore
from pipeline.workflow import Stage, StageContext

log = logging.getLogger("pipeline")


@dataclass(frozen=True)
class LoadInput(Stage):
    """Read the contexts and candidates (JSONL, Parquet or the demo set) and check every record."""

    dataset: DatasetConfig
    correlation: Correlation
    root: Path
    cache_dir: Path

    name = "load_input"
    writes = (ports.CANDIDATES, ports.HUMAN_SCORES, ports.INPUT_REPORT, ports.DATASET)

    def run(self, ctx: StageContext) -> dict[str, Any]:
        loaded = load_input(self.dataset, self.correlation, self.root, self.cache_dir)
        return {
            "candidates": loaded.candidates,
            "human_scores": loaded.human_scores,
            "input_report": loaded.report,
            "dataset": loaded.info,
        }


@dataclass(frozen=True)
class ResolveJudge(Stage):
    """Find the judge model (converting the default one once) and settle its engine settings and dtype."""

    judge: JudgeConfig
    cache_dir: Path

    name = "resolve_judge"
    writes = (ports.JUDGE,)

    def run(self, ctx: StageContext) -> dict[str, Any]:
        spec = resolve_judge(self.judge, self.cache_dir)
        log.info("judge %s on %s, %s: %s", spec.name, spec.backend, spec.dtype, spec.dtype_reason)
        log.info(
            "judge model %s, engine %s",
            spec.model_path or "(no checkpoint here)",
            dict(spec.engine),
            extra=FILE_ONLY,
        )
        return {"judge": spec}


def check_words_by_request(judge: JudgeSpec, plan: PromptPlan, candidates: pa.Table) -> None:
    """Without the judge's tokenizer, check the words answers are read from by test requests: the first
    comparison in both orderings (and the first prompt of each absolute template that reads words), sent to
    the endpoint's chat path; a word among the first token's alternatives is a single token the judge uses.
    Words not seen are warned about (they will be floored and counted); a side with none seen is refused."""
    from pipeline.judge.api import check_words
    from pipeline.judge.labels import LabelError

    frame = pl.from_arrow(candidates.select(["context_id", "context", "text"]))
    first = frame.filter(pl.col("context_id") == frame["context_id"][0]).head(2)
    context, texts = first["context"][0], first["text"].to_list()
    attribute = plan.attributes[0]
    checks = []
    comparative = None
    if plan.templates and len(texts) == 2:
        template = plan.templates[0]
        prompts = [plan.prompt(template, attribute, context, a, b) for a, b in (texts, texts[::-1])]
        read = plan.reads()[template.id]
        comparative = check_words(
            judge, plan.frame, prompts, plan.labels.words, read, "comparative label words"
        )
        checks.append(comparative)
    for t in plan.absolute:
        if t.read.token_ids:
            asked = next(a for a in plan.attributes if t.asks(a))
            prompt = plan.rate_prompt(t, asked, context, texts[0])
            checks.append(
                check_words(judge, plan.frame, [prompt], t.words, t.read, f"absolute template {t.id!r} words")
            )
    for check in checks:
        seen = ", ".join(
            f"{w!r} " + (f"{lp:.2f}" if lp is not None else "absent")
            for w, lp in zip(check.words, check.seen, strict=True)
        )
        log.info("test request, %s among the first token's alternatives: %s", check.what, seen)
        if check.missing:
            log.warning(
                "%s %s: not among the judge's first-token alternatives in the test request (alternatives: %s); "
                "where they stay absent they get a floor, counted in the summary",
                check.what,
                check.missing,
                list(check.alternatives),
            )
    if comparative is not None:
        labels, seen = plan.labels, comparative.seen
        sides = {"A": seen[: labels.n_a], "B": seen[labels.n_a : len(seen) - labels.n_tie]}
        blind = [side for side, values in sides.items() if all(v is None for v in values)]
        if blind:
            raise LabelError(
                f"judge {judge.name}: no {' or '.join(blind)} label word ({list(labels.words)}) is among the first "
                f"token's alternatives of a test comparison (they were {list(comparative.alternatives)}): the judge "
                "does not answer with them; change prompt.label_words_a / label_words_b"
            )


@dataclass(frozen=True)
class PreparePrompts(Stage):
    """Settle the prompt once with the judge's tokenizer (chat template, label tokens, answer prefixes) and
    make every prompt fit the judge's context (truncate the context text, counted, or refuse)."""

    prompt: PromptConfig
    absolute: AbsoluteConfig
    # False: absolute prompts only (workflow=absolute).
    comparative: bool = True
    # The options of each criterion (absolute mode options).
    criteria_options: dict[str, list[Any]] = dataclasses.field(default_factory=dict)

    name = "prepare_prompts"
    reads = (ports.CANDIDATES, ports.INPUT_REPORT, ports.DATASET, ports.JUDGE)
    writes = (ports.CANDIDATES, ports.INPUT_REPORT, ports.PROMPT_PLAN)

    def run(
        self,
        ctx: StageContext,
        *,
        candidates: pa.Table,
        input_report: InputReport,
        dataset: DatasetInfo,
        judge: JudgeSpec,
    ) -> dict[str, Any]:
        from pipeline.absolute import resolve_absolute
        from pipeline.judge.tokenizers import is_exact, load_tokenizer

        tokenizer = load_tokenizer(judge)
        if not is_exact(tokenizer) and judge.api.get("path") == "token_ids":
            raise ConfigError(
                f"config judge.api.path=token_ids needs the tokenizer of {judge.model}, and there is none here "
                "(no local checkpoint, no /tokenize on the server): use judge.api.path=chat or auto"
            )
        labels = resolve_labels(
            tokenizer,
            self.prompt.label_words_a,
            self.prompt.label_words_b,
            judge.name,
            self.prompt.label_words_tie,
        )
        absolute = resolve_absolute(self.absolute, tokenizer, judge.name, self.criteria_options)
        unknown = sorted({t.attribute for t in absolute if t.attribute} - set(dataset.attributes))
        if unknown:
            raise ConfigError(
                f"config criteria_options names {unknown}, which are not judged here (attributes: "
                f"{', '.join(dataset.attributes)})"
            )
        plan = plan_prompts(
            self.prompt,
            dataset.attributes,
            dataset.words,
            tokenizer,
            labels,
            judge.name,
            absolute,
            self.comparative,
        )
        lengths = check_prompt_lengths(candidates, plan, tokenizer, judge.max_model_len, self.prompt.too_long)
        log.info(
            "prompts: chat template %s, %s, longest prompt %d tokens with its answer",
            "on" if plan.chat else "off",
            ", ".join(
                ([f"comparative label words {list(labels.words)}"] if plan.templates else [])
                + [f"absolute {t.mode} ({t.id})" for t in absolute]
            ),
            lengths.longest_prompt_tokens,
        )
        if not is_exact(tokenizer):
            log.info("prompt lengths are estimated (%s)", tokenizer.source)
            check_words_by_request(judge, plan, lengths.candidates)
        report = dataclasses.replace(input_report, truncated_contexts=list(lengths.truncated))
        return {"candidates": lengths.candidates, "input_report": report, "prompt_plan": plan}


@dataclass(frozen=True)
class OpenStore(Stage):
    """Open the run folder's judgments and ratings: refuse those made with another judging identity, list what
    is judged.

    (A folder holding judgments with ``runtime.resume=false`` is refused when the run starts, before any stage.)
    """

    # The dataset, pairs and prompt settings that decide what is compared (the judge's part comes from ``judge``).
    identity: dict[str, Any]
    # The dataset and absolute settings that decide what is rated: a run folder's comparisons are kept when only
    # its absolute settings change, and the other way round.
    rating_identity: dict[str, Any]

    name = "open_store"
    reads = (ports.JUDGE, ports.PROMPT_PLAN)
    writes = (ports.STORE, ports.RATING_STORE, ports.JUDGED)

    def run(self, ctx: StageContext, *, judge: JudgeSpec, prompt_plan: PromptPlan) -> dict[str, Any]:
        identity = {**self.identity, "judge": judge.identity()}
        rating_identity = {**self.rating_identity, "judge": judge.identity()}
        words = prompt_plan.labels.words
        # refused before the run folder is opened, so its config.json and MLflow history stay those of its judgments
        JudgmentStore(ctx.planned_run_dir / "judgments", identity, words).check_identity()
        RatingStore(ctx.planned_run_dir / "ratings", rating_identity).check_identity()
        store = JudgmentStore(ctx.run_dir / "judgments", identity, words)
        rating_store = RatingStore(ctx.run_dir / "ratings", rating_identity)
        judged = pa.concat_tables([store.judged(), rating_store.judged()]).select(JUDGED_KEYS.names)
        if judged.num_rows:
            log.info("%d prompts already judged in %s: skipped", judged.num_rows, ctx.run_dir)
        return {"store": store, "rating_store": rating_store, "judged": judged}


@dataclass(frozen=True)
class ShardContexts(Stage):
    """Group the candidates by context and balance the contexts over shards by the prompts each will make."""

    pairs: PairsConfig
    max_shards: int

    name = "shard_contexts"
    reads = (ports.CANDIDATES, ports.PROMPT_PLAN, ports.JUDGED)
    writes = (ports.CONTEXTS,)

    def run(
        self, ctx: StageContext, *, candidates: pa.Table, prompt_plan: PromptPlan, judged: pa.Table
    ) -> dict[str, Any]:
        groups = group_by_context(candidates)
        adjusted = k_adjustments(self.pairs, [c.size for c in groups])
        if adjusted["raised"] or adjusted["lowered"]:
            log.warning(
                "pairs: the requested k (pairs.k=%s, pairs.fraction=%s) was raised to the %s minimum in %d "
                "context(s) and lowered (to the distinct pairs there are; to an even k for symmetric) in %d",
                self.pairs.k,
                self.pairs.fraction,
                self.pairs.strategy,
                adjusted["raised"],
                adjusted["lowered"],
            )
        contexts = build_contexts(
            groups,
            self.pairs,
            len(prompt_plan.attributes),
            len(prompt_plan.templates),
            self.max_shards,
            judged,
            prompt_plan.rated_per_candidate(),
        )
        return {"contexts": contexts}


def column_total(table: pa.Table, column: str) -> int:
    return int(pc.sum(table.column(column)).as_py() or 0)


def judge_steps(
    pairs: PairsConfig,
    judge: JudgeConfig,
    chunk_rows: int,
    plan: PromptPlan,
    spec: JudgeSpec,
    worker: type[JudgeWorker] = JudgeWorker,
    events: Path | None = None,
    max_restarts: int | None = None,
    store: Path | None = None,
    given: Mapping[str, np.ndarray] | None = None,
    keep_alive: bool = False,
) -> list[MapStep]:
    """The streamed chain: prompt generation per shard (tasks), then the judge (one engine per actor), one
    engine batch per call so results reach the driver and the store batch by batch. A worker whose engine dies
    records it in ``events`` and is replaced at most ``max_restarts`` times (its batch judged again)."""
    return [
        MapStep(
            "prompts",
            generate_prompts,
            {"pairs": pairs, "plan": plan, "chunk_rows": chunk_rows, "given": given},
            num_cpus=0.25,
        ),
        MapStep(
            "judge",
            worker,
            {
                "spec": spec,
                "reads": plan.reads(),
                "frame": plan.frame,
                "events": str(events) if events else None,
                "store": str(store) if store else None,
            },
            batch_size=judge.batch_size,
            exact_batches=True,
            workers=judge.num_actors,
            num_cpus=judge.num_cpus_per_actor,
            num_gpus=judge.num_gpus_per_actor,
            max_restarts=max_restarts,
            keep_alive=keep_alive,
        ),
    ]


def split_responses(responses: pa.Table, plan: PromptPlan) -> tuple[pa.Table, pa.Table]:
    """(JUDGMENTS, RATINGS) of a batch of RESPONSES: comparisons read as label probabilities, absolute prompts
    read or parsed as their mode says."""
    is_compare = pc.equal(responses.column("mode"), COMPARE)
    return (
        judgments_from_responses(responses.filter(is_compare), plan.labels),
        ratings_from_responses(responses.filter(pc.invert(is_compare)), plan.absolute),
    )


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

    # the paths the requests took (api/token_ids, api/chat)
    paths: set[str] = dataclasses.field(default_factory=set)

    def add(self, batch: pa.Table) -> None:
        source = batch.column("source")
        billed = batch.filter(pc.starts_with(source, "api/"))
        self.paths |= {s for s in pc.unique(billed.column("source")).to_pylist() if s != "api/failed"}
        from_api = batch.filter(pc.not_equal(source, "engine"))
        self.logprobs_read += int(
            pc.sum(pc.list_value_length(from_api.column("token_logprobs"))).as_py() or 0
        )
        self.missing += column_total(batch, "missing_logprobs")
        self.requests += column_total(batch, "requests")
        self.cached += pc.sum(pc.equal(source, "cache")).as_py() or 0
        self.prompt_tokens += column_total(billed, "prompt_tokens")
        self.completion_tokens += column_total(billed, "generated_tokens")

    def money(self, price_input: float | None, price_output: float | None) -> float | None:
        """The price of the billed tokens (per million), None without prices."""
        if price_input is None and price_output is None:
            return None
        return (self.prompt_tokens * (price_input or 0) + self.completion_tokens * (price_output or 0)) / 1e6


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
    prices = {m.name: m.api for m in cfg.models if m.api is not None}
    total = ApiUsage()
    money: float | None = None
    for name, u in usage.items():
        total.requests += u.requests
        total.cached += u.cached
        total.prompt_tokens += u.prompt_tokens
        total.completion_tokens += u.completion_tokens
        api = prices.get(name)
        cost = u.money(api.price_input, api.price_output) if api else None
        if cost is not None:
            money = (money or 0.0) + cost
    metrics["generate/api_requests"] = float(total.requests)
    metrics["generate/api_cached_replies"] = float(total.cached)
    metrics["generate/api_prompt_tokens"] = float(total.prompt_tokens)
    metrics["generate/api_completion_tokens"] = float(total.completion_tokens)
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


def report_interruptions(ctx: StageContext, events: Path, seen: int) -> Interruptions:
    """Log and record (MLflow metrics) the engine deaths, lost workers and redone prompts of this stage's events
    (those after the first ``seen``)."""
    lost = interruptions(read_events(events)[seen:])
    if lost.engine_deaths:
        log.warning(
            "%d judge engine(s) died during the run (%s)",
            len(lost.engine_deaths),
            ", ".join(f"{e['worker']} with {e['in_flight']} in flight" for e in lost.engine_deaths),
        )
    if lost.lost_workers:
        log.warning(
            "%d judge worker(s) were lost during the run with a batch unfinished (%s)",
            len(lost.lost_workers),
            ", ".join(lost.lost_workers),
        )
    if lost.redone:
        log.warning(
            "the %d prompt(s) of the unfinished batches went to new workers; nothing already stored was judged "
            "twice",
            lost.redone,
        )
    ctx.metrics["judge/engine_deaths"] = float(len(lost.engine_deaths))
    ctx.metrics["judge/lost_workers"] = float(len(lost.lost_workers))
    ctx.metrics["judge/redone_prompts"] = float(lost.redone)
    return lost


# The run folder's record of judge engines that died (pipeline.judge.watchdog), under logs/.
ENGINE_EVENTS = "engine_events.jsonl"


@dataclass(frozen=True)
class Judge(Stage):
    """Make the prompts of each shard (every pair in both orderings, then one prompt per candidate for each
    absolute mode; prompts sharing a prefix adjacent) and judge them with the engine actors; results stream to
    Parquet parts in the run folder as they arrive."""

    pairs: PairsConfig
    judge: JudgeConfig
    chunk_rows: int
    max_restarts: int = 3
    # The judgement store (pipeline.judge.memo); None: off.
    store_path: Path | None = None
    # The pairs to judge per context (candidate index rows, slot A then B), chosen by adaptive rounds; None: the
    # pairs config's selection.
    given: Mapping[str, np.ndarray] | None = None
    # The judge workers (their engines) stay up after the stage for the next call (adaptive rounds).
    keep_workers: bool = False

    name = "judge"
    reads = (ports.CONTEXTS, ports.PROMPT_PLAN, ports.JUDGE, ports.STORE, ports.RATING_STORE)
    writes = (ports.JUDGMENTS, ports.RATINGS, ports.JUDGE_STATS)

    def run(
        self,
        ctx: StageContext,
        *,
        contexts: pa.Table,
        prompt_plan: PromptPlan,
        judge: JudgeSpec,
        store: JudgmentStore,
        rating_store: RatingStore,
    ) -> dict[str, Any]:
        remaining = column_total(contexts, "n_prompts")
        shards = split_shards(contexts)
        log.info("%d prompts to judge in %d shard(s)", remaining, len(shards))
        progress = Progress(remaining)
        failed: list[pa.Table] = []
        api = ApiUsage()
        reused = 0
        events = ctx.run_dir / "logs" / ENGINE_EVENTS
        seen_events = len(read_events(events))
        if remaining:
            steps = judge_steps(
                self.pairs,
                self.judge,
                self.chunk_rows,
                prompt_plan,
                judge,
                events=events,
                max_restarts=self.max_restarts,
                store=self.store_path,
                given=self.given,
                keep_alive=self.keep_workers,
            )
            try:
                for batch in ctx.executor.stream(shards, steps):
                    api.add(batch)
                    reused += pc.sum(pc.equal(batch.column("source"), "store")).as_py() or 0
                    unanswered = pc.is_valid(batch.column("error"))
                    if pc.any(unanswered).as_py():  # left out of the stores: a rerun judges them
                        failed.append(batch.filter(unanswered))
                        answered = batch.filter(pc.invert(unanswered))
                    else:
                        answered = batch
                    judgments, ratings = split_responses(answered, prompt_plan)
                    store.add(judgments)
                    rating_store.add(ratings)
                    progress.update(
                        batch.num_rows,
                        column_total(batch, "prompt_tokens"),
                        column_total(batch, "cached_tokens"),
                    )
            except Exception as exc:
                store.flush()  # everything judged so far stays on disk
                rating_store.flush()
                lost = report_interruptions(ctx, events, seen_events)
                if isinstance(exc, UserError):  # bad input or config: its own message says what to do
                    raise
                raise JudgeStageError(
                    f"the judge stage stopped: {error_cause(exc)}. {progress.done} of {remaining} prompt(s) were "
                    f"judged and are stored in {store.folder.parent}; the same command with "
                    f"paths.run_dir={ctx.run_dir} (or paths.run_dir=latest) judges only the rest. "
                    + judge_failure_hint(exc, lost, self.max_restarts)
                ) from exc
        store.flush()
        rating_store.flush()
        seconds = time.monotonic() - progress.started
        if progress.done != remaining:
            raise RuntimeError(f"the judge stage returned {progress.done} prompts, expected {remaining}")
        if remaining:
            log.info("judge stage finished: %d prompts in %s", progress.done, format_seconds(seconds))
        if reused:
            log.info(
                "%d of the %d prompt(s) were answered from the judgement store %s (the same prompt judged "
                "before: by an earlier run, or for candidates with the same texts); %d judged now",
                reused,
                progress.done,
                self.store_path,
                progress.done - reused,
            )
        report_interruptions(ctx, events, seen_events)
        if failed:
            raise_failed(pa.concat_tables(failed), store.folder.parent)
        judgments, ratings = store.read(), rating_store.read()
        prompts = judgments.num_rows + ratings.num_rows
        prompt_tokens = column_total(judgments, "prompt_tokens") + column_total(ratings, "prompt_tokens")
        cached_tokens = column_total(judgments, "cached_tokens") + column_total(ratings, "cached_tokens")
        stats = JudgeStats(
            prompts=prompts,
            judged_now=progress.done,
            seconds=seconds,
            rate=progress.rate(),
            rate_with_startup=progress.overall_rate(),
            prompt_tokens=prompt_tokens,
            cached_tokens=cached_tokens,
            requests=api.requests,
            cached_replies=api.cached,
            billed_prompt_tokens=api.prompt_tokens,
            billed_completion_tokens=api.completion_tokens,
            money=api.money(self.judge.api.price_input, self.judge.api.price_output),
            logprobs_read=api.logprobs_read,
            missing_logprobs=api.missing,
            api_paths=tuple(sorted(p.removeprefix("api/") for p in api.paths)),
            reused=reused,
        )
        ctx.metrics.update(stats.metrics())
        return {"judgments": judgments, "ratings": ratings, "judge_stats": stats}


@dataclass(frozen=True)
class Reduce(Stage):
    """Join the two orderings of every pair into the debiased P(i beats j) and measure position bias P(A)."""

    debias: Debias
    orderings: Orderings

    name = "reduce"
    reads = (ports.JUDGMENTS,)
    writes = (ports.COMPARISONS, ports.POSITION_BIAS)

    def run(self, ctx: StageContext, *, judgments: pa.Table) -> dict[str, Any]:
        reduced = reduce_judgments(pl.from_arrow(judgments), self.debias, self.orderings)
        return {"comparisons": reduced.comparisons, "position_bias": reduced.position_bias}


@dataclass(frozen=True)
class Score(Stage):
    """Turn each context's comparisons into scores and ranks with every scoring method; count what cannot be."""

    methods: tuple[str, ...]
    debias: Debias
    # How poe_logit fits: the rounds' defaults, or the run's adaptive.* settings in workflow=adaptive.
    logit: poe_logit.Settings = poe_logit.DEFAULTS

    name = "score"
    reads = (ports.COMPARISONS, ports.CANDIDATES, ports.HUMAN_SCORES)
    writes = (ports.SCORES, ports.UNSCORED)

    def run(
        self, ctx: StageContext, *, comparisons: pa.Table, candidates: pa.Table, human_scores: pa.Table
    ) -> dict[str, Any]:
        scored = score_comparisons(
            pl.from_arrow(comparisons),
            candidates,
            pl.from_arrow(human_scores),
            list(self.methods),
            self.debias,
            self.logit,
        )
        ctx.metrics["scoring/unscored_groups"] = float(len(scored.unscored))
        if "poe_logit" in self.methods:
            ctx.metrics["scoring/poe_logit_contradicted"] = float(scored.contradicted)
        return {"scores": scored.scores, "unscored": scored.unscored_table()}


@dataclass(frozen=True)
class Rate(Stage):
    """Turn the absolute ratings into scores and ranks per mode (Chen's max(p(yes), 1 - p(no)) beside the implicit
    score); list every generation that did not parse."""

    name = "rate"
    reads = (ports.RATINGS, ports.PROMPT_PLAN, ports.HUMAN_SCORES)
    writes = (ports.ABSOLUTE_SCORES, ports.RATING_FAILURES)

    def run(
        self, ctx: StageContext, *, ratings: pa.Table, prompt_plan: PromptPlan, human_scores: pa.Table
    ) -> dict[str, Any]:
        frame = pl.from_arrow(ratings)
        failures = rating_failures(frame) if frame.height else pl.from_arrow(RATING_FAILURES.empty_table())
        for (mode,), group in failures.group_by(["mode"], maintain_order=True):
            unscored = int((~group["scored"]).sum())
            ctx.metrics[f"absolute/{mode}/parse_failures"] = float(group["n_failed"].sum())
            ctx.metrics[f"absolute/{mode}/unscored_ratings"] = float(unscored)
            first = group.row(0, named=True)
            log.warning(
                "%s: %d generated sample(s) did not parse, %d rating(s) left without a score "
                "(rating_failures.csv), e.g. %s / %s: %r (%s)",
                mode,
                int(group["n_failed"].sum()),
                unscored,
                first["context_id"],
                first["candidate_id"],
                first["text"],
                first["failure"],
            )
        scores = rating_scores(frame, prompt_plan.absolute) if frame.height else None
        absolute = rank_and_join(scores, pl.from_arrow(human_scores)) if scores is not None else None
        return {
            "absolute_scores": absolute
            if absolute is not None
            else ports.ABSOLUTE_SCORES.schema.empty_table(),
            "rating_failures": failures,
        }


@dataclass(frozen=True)
class Combine(Stage):
    """Combine absolute and comparative information: absolute scores as Gaussian priors in the PoE-Gaussian
    solve of the comparisons (weight estimated or set); every score of the run in one table."""

    debias: Debias
    weight: float | None
    enabled: bool

    name = "combine"
    reads = (
        ports.SCORES,
        ports.UNSCORED,
        ports.ABSOLUTE_SCORES,
        ports.COMPARISONS,
        ports.CANDIDATES,
        ports.HUMAN_SCORES,
    )
    writes = (ports.SCORES, ports.UNSCORED)

    def run(
        self,
        ctx: StageContext,
        *,
        scores: pa.Table,
        unscored: pa.Table,
        absolute_scores: pa.Table,
        comparisons: pa.Table,
        candidates: pa.Table,
        human_scores: pa.Table,
    ) -> dict[str, Any]:
        parts = [pl.from_arrow(scores), pl.from_arrow(absolute_scores)]
        not_scored = pl.from_arrow(unscored)
        more: list = []
        if self.enabled and comparisons.num_rows and absolute_scores.num_rows:
            combined = combine_scores(
                pl.from_arrow(comparisons),
                pl.from_arrow(absolute_scores),
                candidates,
                pl.from_arrow(human_scores),
                self.debias,
                self.weight,
            )
            parts.append(combined.scores)
            more = combined.unscored
            for (_judge, attribute, template_id, method), est in combined.estimates.items():
                log.info(
                    "combined %s (%s, %s): slope %.4g, weight %.3g (%s) from %d context(s)",
                    method,
                    attribute,
                    template_id,
                    est.slope,
                    est.weight,
                    "estimated" if est.estimated else "set",
                    est.n_contexts,
                    extra=FILE_ONLY,
                )
                ctx.metrics[f"{attribute}/{method}/weight"] = float(est.weight)
                ctx.metrics[f"{attribute}/{method}/slope"] = float(est.slope)
            flat = sorted(
                {f"{m} ({a})" for (_, a, _, m), est in combined.estimates.items() if est.slope == 0}
            )
            if flat:
                log.info(
                    "%s: the absolute scores do not agree with the comparisons (estimated slope 0), so the combined "
                    "scores follow the comparisons; which of the two is right cannot be told without human scores "
                    "(see assessment.csv)",
                    ", ".join(flat),
                )
        merged = pl.concat([p.select(ports.SCORES.schema.names) for p in parts])
        if more:
            added = pl.DataFrame(more, schema=ports.UNSCORED.schema.names, orient="row", strict=False)
            not_scored = pl.concat([not_scored, added.cast(dict(not_scored.schema))])
        return {"scores": merged, "unscored": not_scored}


@dataclass(frozen=True)
class Leaderboard(Stage):
    """Rank the models that made the candidates (their ``system``): win rate and mean scores per model with
    bootstrap intervals over inputs (over the items when the run has one context, a pool), and which models are
    statistically tied."""

    methods: tuple[str, ...]
    rounds: int
    level: float
    seed: int

    name = "leaderboard"
    reads = (ports.COMPARISONS, ports.SCORES, ports.CANDIDATES)
    writes = (ports.LEADERBOARD,)

    def run(
        self, ctx: StageContext, *, comparisons: pa.Table, scores: pa.Table, candidates: pa.Table
    ) -> dict[str, Any]:
        from pipeline.leaderboard import ITEM, WIN_RATE, leaderboard_table

        board = leaderboard_table(
            pl.from_arrow(comparisons),
            pl.from_arrow(scores),
            candidates,
            list(self.methods),
            self.rounds,
            self.level,
            self.seed,
        )
        for r in board.iter_rows(named=True):
            if r["metric"] == WIN_RATE:
                prefix = f"leaderboard/{r['attribute']}/{r['model']}"
                for name in ("estimate", "lower", "upper"):
                    if r[name] is not None and np.isfinite(r[name]):
                        ctx.metrics[f"{prefix}/win_rate_{name}"] = float(r[name])
        if board.height:
            units = int(board["n_inputs"].max())
            pooled = bool((board["unit"] == ITEM).any())
            log.info(
                "leaderboard: %d model(s) over %s, %d bootstrap rounds",
                board["model"].n_unique(),
                f"one pool (up to {units} item(s) per model, resampled)" if pooled else f"{units} input(s)",
                self.rounds,
            )
            if units == 1:
                log.warning(
                    "leaderboard: every model has one %s, so the bootstrap has nothing to resample and every "
                    "interval is a point; the models' order is the estimate alone",
                    "item in the one input" if pooled else "input",
                )
        return {"leaderboard": board}


@dataclass(frozen=True)
class Correlate(Stage):
    """Agreement of every method's scores with the human scores: Spearman, Pearson and Kendall per context
    (averaged) and pooled, and pairwise accuracy."""

    correlation: Correlation

    name = "correlate"
    reads = (ports.SCORES,)
    writes = (ports.CORRELATIONS,)

    def run(self, ctx: StageContext, *, scores: pa.Table) -> dict[str, Any]:
        if self.correlation == Correlation.off:
            return {"correlations": CORRELATIONS.empty_table()}
        return {"correlations": correlation_table(pl.from_arrow(scores))}


@dataclass(frozen=True)
class Cost(Stage):
    """What each approach cost (prompts, prompt tokens, prefix-cache share, generated tokens, engine seconds) and,
    per attribute, every method's agreement with people beside its cost."""

    name = "cost"
    reads = (ports.JUDGMENTS, ports.RATINGS, ports.CORRELATIONS, ports.PROMPT_PLAN)
    writes = (ports.COST, ports.ASSESSMENT)

    def run(
        self,
        ctx: StageContext,
        *,
        judgments: pa.Table,
        ratings: pa.Table,
        correlations: pa.Table,
        prompt_plan: PromptPlan,
    ) -> dict[str, Any]:
        from pipeline.absolute import absolute_methods

        cost = cost_table(pl.from_arrow(judgments), pl.from_arrow(ratings))
        for r in cost.iter_rows(named=True):
            prefix = f"cost/{r['attribute']}/{r['mode']}/{r['template_id']}"
            ctx.metrics[f"{prefix}/prompts"] = float(r["prompts"])
            ctx.metrics[f"{prefix}/seconds"] = float(r["seconds"])
            ctx.metrics[f"{prefix}/prompt_tokens"] = float(r["prompt_tokens"])
        assessment = assessment_table(
            pl.from_arrow(correlations), cost, absolute_methods(prompt_plan.absolute)
        )
        return {"cost": cost, "assessment": assessment}


@dataclass(frozen=True)
class Report(Stage):
    """Write the summary table, CSV copies of the tables and the plots into the run folder; gather the metrics."""

    plots: bool
    # The method drawn against the human scores: poe_logit, else poe_gaussian, else the first of scoring.methods.
    plot_method: str
    # The leaderboard's interval coverage (for its printed header).
    level: float = 0.90
    # The whole leaderboard in the summary (workflow=generate); otherwise one line per attribute pointing to it.
    full_leaderboard: bool = False

    name = "report"
    reads = (
        ports.SCORES,
        ports.CORRELATIONS,
        ports.POSITION_BIAS,
        ports.UNSCORED,
        ports.INPUT_REPORT,
        ports.JUDGE_STATS,
        ports.COST,
        ports.ASSESSMENT,
        ports.RATING_FAILURES,
        ports.LEADERBOARD,
        ports.REASONS,
    )
    writes = (ports.SUMMARY,)

    def run(
        self,
        ctx: StageContext,
        *,
        scores: pa.Table,
        correlations: pa.Table,
        position_bias: pa.Table,
        unscored: pa.Table,
        input_report: InputReport,
        judge_stats: JudgeStats,
        cost: pa.Table,
        assessment: pa.Table,
        rating_failures: pa.Table,
        leaderboard: pa.Table,
        reasons: pa.Table,
    ) -> dict[str, Any]:
        from pipeline.leaderboard import leaderboard_line, leaderboard_text

        run_dir = ctx.run_dir
        board = pl.from_arrow(leaderboard)
        scores_df, corr, bias = (
            pl.from_arrow(scores),
            pl.from_arrow(correlations),
            pl.from_arrow(position_bias),
        )
        cost_df, assessment_df, failures = (
            pl.from_arrow(cost),
            pl.from_arrow(assessment),
            pl.from_arrow(rating_failures),
        )
        absolute = cost_df.filter(pl.col("mode") != COMPARE).height > 0
        written = {
            "scores.csv": scores_df.sort(["attribute", "template_id", "method", "context_id", "rank"]),
            "position_bias.csv": bias if bias.height else None,
            "correlations.csv": corr if corr.height else None,
            "unscored.csv": pl.from_arrow(unscored) if unscored.num_rows else None,
            "cost.csv": cost_df if cost_df.height else None,
            "assessment.csv": assessment_df if assessment_df.height and absolute else None,
            "rating_failures.csv": failures if failures.height else None,
            "leaderboard.csv": board if board.height else None,
            "reasons.csv": pl.from_arrow(reasons) if reasons.num_rows else None,
        }
        for name, frame in written.items():
            if frame is not None:
                frame.write_csv(run_dir / name)
                ctx.files.append(run_dir / name)
        counts = {k: float(v) for k, v in input_report.counts().items()}
        ctx.metrics.update(mlflow_metrics(corr, bias, counts))
        summary = summary_text(corr, bias, judge_stats)
        ties = bias.height > 0 and bias["p_tie"].max() > 0
        if absolute or ties:
            # the approaches side by side (and the cost per mode) only when there is more than one approach
            shown = (assessment_df, cost_df) if absolute else (assessment_df.clear(), cost_df.clear())
            summary += "\n\n" + absolute_text(*shown, failures, bias)
        if board.height:
            summary += "\n\n" + (
                leaderboard_text(board, self.level) if self.full_leaderboard else leaderboard_line(board)
            )
        if reasons.num_rows:
            first = reasons.slice(0, 1).to_pylist()[0]
            summary += (
                f"\n\nthe judge's reasons for {reasons.num_rows} comparison(s) are in reasons.csv, e.g. "
                f"{first['decision']} over the other ({first['why']}): {first['reason'][:160]!r}"
            )
        (run_dir / "summary.txt").write_text(summary + "\n")
        ctx.files.append(run_dir / "summary.txt")
        if self.plots:
            plot_dir = run_dir / "plots"
            plot_dir.mkdir(exist_ok=True)
            if scores_df.filter(pl.col("method") == self.plot_method).height:
                plots.predicted_vs_human(scores_df, self.plot_method, plot_dir / "predicted_vs_human.png")
            if bias.height:
                plots.position_bias(bias, plot_dir / "position_bias.png")
            if corr.height:
                plots.correlation_by_method(corr, "spearman", plot_dir / "spearman_by_method.png")
            if absolute and assessment_df.height:
                plots.spearman_by_mode(assessment_df, plot_dir / "spearman_by_mode.png")
            if board.height:
                plots.leaderboard(board, plot_dir / "leaderboard.png")
            ctx.files.append(plot_dir)
        return {"summary": summary}


@dataclass(frozen=True)
class ReportRounds(Stage):
    """Add the adaptive rounds to the report: the stopping criterion over rounds, and the ranking with per-item
    intervals (rounds.csv, ranking.csv, plots/rounds.png, plots/ranking.png, and the summary)."""

    plots: bool
    # The method whose ranking is shown (the report's drawn method: poe_logit, the rounds' model, where listed).
    method: str
    # The coverage of the per-item intervals (score ± z standard errors).
    level: float = 0.95

    name = "report_rounds"
    reads = (ports.ROUNDS, ports.SCORES, ports.SUMMARY)
    writes = (ports.SUMMARY,)

    def run(self, ctx: StageContext, *, rounds: pa.Table, scores: pa.Table, summary: str) -> dict[str, Any]:
        from pipeline.rounds_report import ranking_table, ranking_text, rounds_text

        run_dir = ctx.run_dir
        frame = pl.from_arrow(rounds)
        ranking = ranking_table(pl.from_arrow(scores), self.method, self.level)
        parts = [summary, rounds_text(frame), ranking_text(ranking, self.method, self.level)]
        summary = "\n\n".join(p for p in parts if p)
        for name, table in (("rounds.csv", frame), ("ranking.csv", ranking)):
            if table.height:
                table.write_csv(run_dir / name)
                ctx.files.append(run_dir / name)
        (run_dir / "summary.txt").write_text(summary + "\n")
        if self.plots:
            plot_dir = run_dir / "plots"
            plot_dir.mkdir(exist_ok=True)
            if frame.height:
                plots.rounds_curve(frame, plot_dir / "rounds.png")
            if ranking.height:
                plots.ranking(ranking, self.method, self.level, plot_dir / "ranking.png")
        return {"summary": summary}


# --- generate, then evaluate ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadTasks(Stage):
    """Read the task records and fill the task prompt from each; refuse every record missing a field at once."""

    generate: GenerateConfig
    root: Path
    cache_dir: Path

    name = "load_tasks"
    writes = (ports.TASKS,)

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from pipeline.data.source import resolve_path
        from pipeline.generate import load_tasks, write_demo_tasks

        if self.generate.inputs is None:
            path = write_demo_tasks(self.cache_dir / "demo")
        else:
            path = resolve_path(self.generate.inputs, self.root)
        loaded = load_tasks(self.generate, path)
        log.info(
            "tasks %s: %d input(s), fields %s", path, loaded.tasks.num_rows, ", ".join(loaded.fields) or "-"
        )
        return {"tasks": loaded.tasks}


@dataclass(frozen=True)
class Generate(Stage):
    """Every generator model answers every task input: generators that share a model share one engine (one
    actor pool, run to completion before the next); outputs stream to Parquet in the run folder, resumable."""

    generate: GenerateConfig
    judge: JudgeConfig
    cache_dir: Path
    identity: dict[str, Any]

    name = "generate"
    reads = (ports.TASKS,)
    writes = (ports.GENERATIONS, ports.GENERATORS)

    def run(self, ctx: StageContext, *, tasks: pa.Table) -> dict[str, Any]:
        from pipeline.generate import (
            Generator,
            engine_groups,
            generation_prompts,
            generation_rows,
            generation_step,
            generator_identity,
            generator_judge_config,
            generator_read,
        )
        from pipeline.judge.tokenizers import load_tokenizer
        from pipeline.schemas import GENERATIONS
        from pipeline.store import PartStore

        generators = []
        for cfg in self.generate.models:
            key = f"generate.models[{cfg.name}].model"
            spec = resolve_judge(generator_judge_config(cfg, self.judge), self.cache_dir, key)
            generators.append(Generator(cfg.name, spec, generator_read(cfg), cfg.system_prompt))
        inputs = tasks.column("input_id").to_pylist()
        identities = {g.name: {**self.identity, "generator": generator_identity(g)} for g in generators}
        # every generator's earlier outputs checked before anything is generated (or the run folder opened)
        for g in generators:
            PartStore(
                ctx.planned_run_dir / "generations" / g.name, identities[g.name], GENERATIONS
            ).check_identity()
        wanted = pa.array(inputs, pa.string())
        parts = []
        generated_now = 0
        failed: list[pa.Table] = []
        # generators behind an API, by their engine group's first member: requests, cache, billed tokens
        api_usage: dict[str, ApiUsage] = {}
        for group in engine_groups(generators):
            spec = group[0].spec
            tokenizer = load_tokenizer(spec)
            stores = {
                g.name: PartStore(ctx.run_dir / "generations" / g.name, identities[g.name], GENERATIONS)
                for g in group
            }
            done = {name: set(store.read().column("input_id").to_pylist()) for name, store in stores.items()}
            prompts = generation_prompts(group, tasks, tokenizer, done)
            log.info(
                "generating %d output(s) with %s (%s) for %s",
                prompts.num_rows,
                spec.model,
                spec.dtype,
                ", ".join(g.name for g in group),
            )
            generated_now += prompts.num_rows
            if prompts.num_rows:
                size = self.generate.batch_size
                blocks = [prompts.slice(k, size) for k in range(0, prompts.num_rows, size)]
                step = generation_step(group, tokenizer, size, self.judge)
                progress = Progress(prompts.num_rows, verb="generated", noun="outputs")
                for batch in ctx.executor.stream(blocks, [step]):
                    if spec.api:
                        usage = api_usage.setdefault(group[0].name, ApiUsage())
                        usage.add(batch)
                    is_failed = pc.is_valid(batch.column("error"))
                    if pc.any(is_failed).as_py():  # requests that kept failing: not outputs, reported below
                        failed.append(batch.filter(is_failed))
                        batch = batch.filter(pc.invert(is_failed))
                    out = generation_rows(batch)
                    for (model,), part in pl.from_arrow(out).group_by(["model"], maintain_order=True):
                        stores[model].add(part.to_arrow())
                    progress.update(
                        batch.num_rows,
                        column_total(batch, "prompt_tokens"),
                        column_total(batch, "cached_tokens"),
                    )
            for store in stores.values():
                store.flush()
                held = (
                    store.read()
                )  # outputs of inputs no longer in the task set (e.g. a lower max_inputs) stay out
                parts.append(held.filter(pc.is_in(held.column("input_id"), value_set=wanted)))
        report_generator_usage(api_usage, self.generate, ctx.metrics)
        if failed:
            raise_failed(pa.concat_tables(failed), ctx.run_dir, what="generated")
        generations = pa.concat_tables(parts) if parts else GENERATIONS.empty_table()
        missing = len(inputs) * len(generators) - generations.num_rows
        if missing:
            raise RuntimeError(
                f"the generate stage has {generations.num_rows} outputs, expected {len(inputs) * len(generators)}"
            )
        tokens = column_total(generations, "output_tokens")
        ctx.metrics["generate/outputs"] = float(generations.num_rows)
        ctx.metrics["generate/generated_now"] = float(generated_now)
        ctx.metrics["generate/output_tokens"] = float(tokens)
        from pipeline.generate import describe_generators

        return {"generations": generations, "generators": describe_generators(generators)}


@dataclass(frozen=True)
class MakeCandidates(Stage):
    """Turn the outputs into candidates (context = the task prompt, system = the model), empty and cut-off outputs
    handled as configured and counted; the criteria become the attributes judged."""

    generate: GenerateConfig
    criteria: dict[str, str]

    name = "make_candidates"
    reads = (ports.TASKS, ports.GENERATIONS)
    writes = (ports.CANDIDATES, ports.HUMAN_SCORES, ports.INPUT_REPORT, ports.DATASET)

    def run(self, ctx: StageContext, *, tasks: pa.Table, generations: pa.Table) -> dict[str, Any]:
        from pipeline.generate import candidates_from_generations
        from pipeline.prompts import PromptWords
        from pipeline.schemas import HUMAN_SCORES

        candidates, report = candidates_from_generations(generations, tasks, self.generate)
        for key, value in report.counts().items():
            ctx.metrics[f"generate/{key}"] = float(value)
        if report.empty or report.cut_off:
            log.warning(
                "outputs: %d empty (%s), %d cut off at max_tokens (%s); %d dropped, %d replaced by %r",
                len(report.empty),
                self.generate.empty_output,
                len(report.cut_off),
                self.generate.cut_off_output,
                len(report.dropped),
                len(report.placeholders),
                self.generate.placeholder,
            )
        attributes = tuple(self.criteria)
        words = PromptWords("task", "output", dict.fromkeys(attributes, "good"), dict(self.criteria))
        input_report = InputReport(
            n_contexts=len(set(candidates.column("context_id").to_pylist())),
            n_candidates=candidates.num_rows,
            empty_text_replaced=list(report.placeholders),
            empty_text_dropped=list(report.dropped),
            attributes_without_scores=list(attributes),
        )
        info = DatasetInfo("generate", self.generate.inputs or "demo tasks", attributes, words)
        return {
            "candidates": candidates,
            "human_scores": HUMAN_SCORES.empty_table(),
            "input_report": input_report,
            "dataset": info,
        }


@dataclass(frozen=True)
class Reasons(Stage):
    """Ask the judge why, for a sample of comparisons (orderings that disagree, the closest calls, random): a
    short explanation generated after the decision and stored beside it, never used to change a score."""

    n: int
    sample: tuple[str, ...]
    max_tokens: int
    seed: int
    judge_cfg: JudgeConfig

    name = "reasons"
    reads = (ports.COMPARISONS, ports.CANDIDATES, ports.PROMPT_PLAN, ports.JUDGE)
    writes = (ports.REASONS,)

    def run(
        self,
        ctx: StageContext,
        *,
        comparisons: pa.Table,
        candidates: pa.Table,
        prompt_plan: PromptPlan,
        judge: JudgeSpec,
    ) -> dict[str, Any]:
        from pipeline.absolute import Read
        from pipeline.config import ReasonSample
        from pipeline.reasons import choose, reason_prompt
        from pipeline.schemas import PROMPTS, REASONS

        chosen = choose(pl.from_arrow(comparisons), self.n, [ReasonSample(s) for s in self.sample], self.seed)
        if not chosen.height:
            return {"reasons": REASONS.empty_table()}
        from pipeline.judge.tokenizers import load_tokenizer

        tokenizer = load_tokenizer(judge)
        text = {
            (c, k): t
            for c, k, t in zip(
                *(candidates.column(n).to_pylist() for n in ("context_id", "candidate_id", "text")),
                strict=True,
            )
        }
        context = dict(
            zip(
                candidates.column("context_id").to_pylist(),
                candidates.column("context").to_pylist(),
                strict=True,
            )
        )
        rows: dict[str, list] = {name: [] for name in PROMPTS.names}
        for r in chosen.iter_rows(named=True):
            cid = r["context_id"]
            prompt = reason_prompt(
                prompt_plan,
                tokenizer,
                r["attribute"],
                r["template_id"],
                context[cid],
                text[(cid, r["cand_i"])],
                text[(cid, r["cand_j"])],
                r["p"] >= 0.5,
                as_messages=bool(judge.api),  # an API judge: the server applies its own chat template
            )
            # the comparison's template rides in ``mode`` (the read is keyed by template_id "reason")
            values = (
                cid,
                f"reason:{r['template_id']}",
                r["attribute"],
                "reason",
                r["cand_i"],
                r["cand_j"],
                prompt,
            )
            for name, value in zip(PROMPTS.names, values, strict=True):
                rows[name].append(value)
        prompts = pa.table(rows, schema=PROMPTS)
        step = MapStep(
            "reasons",
            JudgeWorker,
            {
                "spec": judge,
                "reads": {"reason": Read(max_tokens=self.max_tokens)},
                "frame": prompt_plan.frame,
            },
            batch_size=self.judge_cfg.batch_size,
            exact_batches=True,
            workers=1,
            num_cpus=self.judge_cfg.num_cpus_per_actor,
            num_gpus=self.judge_cfg.num_gpus_per_actor,
        )
        log.info("asking the judge why for %d comparison(s)", prompts.num_rows)
        answers = pa.concat_tables(list(ctx.executor.stream([prompts], [step])))
        said = {
            (a["mode"], a["context_id"], a["attribute"], a["cand_a"], a["cand_b"]): (
                a["texts"][0] if a["texts"] else ""
            )
            for a in answers.select(
                ["mode", "context_id", "attribute", "cand_a", "cand_b", "texts"]
            ).to_pylist()
        }
        out = chosen.with_columns(
            decision=pl.when(pl.col("p") >= 0.5).then(pl.col("cand_i")).otherwise(pl.col("cand_j")),
            reason=pl.struct("template_id", "context_id", "attribute", "cand_i", "cand_j").map_elements(
                lambda k: said[
                    (f"reason:{k['template_id']}", k["context_id"], k["attribute"], k["cand_i"], k["cand_j"])
                ].strip(),
                return_dtype=pl.String,
            ),
        )
        return {"reasons": out.select(REASONS.names)}
