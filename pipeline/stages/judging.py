"""The stages that judge: shard the contexts and stream their prompts through the judge workers into the run
folder's stores.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.config.assessment import PairsConfig
from pipeline.contracts.errors import UserError
from pipeline.contracts.stats import JudgeStats
from pipeline.data.contexts import group_by_context
from pipeline.judge.endpoint.batch import RECORD_FILE, batch_states
from pipeline.judge.hosting.worker import JudgeWorker, Task, engine_spec
from pipeline.judge.recorded.answers import SOURCE as RECORDED
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.stored import closing_front, on_the_driver
from pipeline.judge.vllm.cores import worker_process_env
from pipeline.judge.vllm.mode import Choice, ModeRecord, is_auto, settled
from pipeline.judge.vllm.mode import choose as choose_mode
from pipeline.prompts.pairs import (
    build_contexts,
    generate_prompts,
    k_adjustments,
    split_shards,
)
from pipeline.prompts.plan import PromptPlan
from pipeline.runtime import MapStep
from pipeline.runtime.progress import Progress, format_seconds
from pipeline.scoring.responses import split_responses
from pipeline.stages import ports
from pipeline.stages.accounting import (
    ENGINE_EVENTS,
    ApiUsage,
    JudgeStageError,
    column_total,
    error_cause,
    judge_failure_hint,
    raise_failed,
    report_interruptions,
)
from pipeline.stages.base import Stage, StageContext
from pipeline.storage.events import read_events
from pipeline.storage.parts import JudgmentParts, RatingParts

log = logging.getLogger("pipeline")


@dataclass(frozen=True)
class ShardContexts(Stage):
    """Group the candidates by context and balance the contexts over shards by the prompts each will make (those
    judged in the run folder already and those the judge leaves out are not made)."""

    pairs: PairsConfig
    max_shards: int

    name = "shard_contexts"
    reads = (ports.CANDIDATES, ports.PROMPT_PLAN, ports.JUDGED, ports.LEFT_OUT)
    writes = (ports.CONTEXTS,)

    def run(
        self,
        ctx: StageContext,
        *,
        candidates: pa.Table,
        prompt_plan: PromptPlan,
        judged: pa.Table,
        left_out: pa.Table,
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
            pa.concat_tables([judged, left_out.select(judged.column_names).cast(judged.schema)]),
            prompt_plan.rated_per_candidate,
        )
        return {"contexts": contexts}


def judge_steps(
    pairs: PairsConfig,
    chunk_rows: int,
    plan: PromptPlan,
    spec: JudgeSpec,
    worker: type[JudgeWorker] = JudgeWorker,
    events: Path | None = None,
    max_restarts: int | None = None,
    judgement_store: Path | None = None,
    given: Mapping[str, np.ndarray] | None = None,
    keep_alive: bool = False,
    eager: bool | None = None,
) -> list[MapStep]:
    """The streamed chain: prompt generation per shard (on the driver as the judge's pool reads it: far lighter
    than a task), then the judge (one engine per actor), one engine batch per call so results reach the driver and
    the store batch by batch. The ``judgement_store`` is consulted and written on the driver
    (:class:`pipeline.judge.stored.StoreFront`: close it after the stream). A worker whose engine dies records it in
    ``events`` and is replaced at most ``max_restarts`` times (its batch judged again); ``eager``: the engine's mode
    (:func:`pipeline.judge.vllm.mode.settled`)."""
    task = Task(spec, plan.requests(), plan.frame)
    return [
        MapStep(
            "prompts",
            generate_prompts,
            {"pairs": pairs, "plan": plan, "chunk_rows": chunk_rows, "given": given},
            on_driver=True,
        ),
        engine_step(
            "judge", spec, task, on_the_driver(task, judgement_store, plan.labels), events, keep_alive, worker,
            max_restarts=max_restarts, eager=eager,
        ),
    ]  # fmt: skip


def engine_step(
    name: str,
    spec: JudgeSpec,
    task: Task,
    front: Mapping[str, Any],
    events: Path | None,
    keep_alive: bool,
    worker: type = JudgeWorker,
    batch_size: int | None = None,
    max_restarts: int | None = None,
    eager: bool | None = None,
) -> MapStep:
    """The one worker step of a judge's engine (judging, generating, giving reasons, adaptive rounds): an actor pool
    of ``worker`` with the judge's placement (``spec.placement``), its exact batches, ``task`` asked of every batch,
    what the driver answers itself (``front``: :func:`pipeline.judge.stored.on_the_driver`), the engine's events and
    process env, its mode settled (``eager``, else vLLM's default for the device)."""
    where = str(events) if events else None
    place = spec.placement
    return MapStep(
        name,
        worker,
        {"spec": engine_spec(settled(spec, eager)), "events": where},
        call_kwargs={"task": task},
        batch_size=batch_size or place.batch_size,
        exact_batches=True,
        workers=place.workers[0],
        max_workers=place.workers[1],
        num_cpus=place.num_cpus,
        num_gpus=place.num_gpus,
        max_restarts=max_restarts,
        keep_alive=keep_alive,
        env=worker_process_env(spec),
        events=where,
        **front,
    )


@dataclass(frozen=True)
class Judge(Stage):
    """Make the prompts of each shard (every pair in both orderings, then one prompt per candidate for each
    absolute mode; prompts sharing a prefix adjacent) and judge them with the engine actors; results stream to
    Parquet parts in the run folder as they arrive."""

    pairs: PairsConfig
    chunk_rows: int
    max_restarts: int = 3
    # The judgement store (pipeline.storage.judgements); None: off.
    judgement_store: Path | None = None
    # The pairs to judge per context (candidate index rows, slot A then B), chosen by adaptive rounds; None: the
    # pairs config's selection.
    given: Mapping[str, np.ndarray] | None = None
    # The judge workers (their engines) stay up after the stage for the next call (adaptive rounds).
    keep_workers: bool = False
    # This machine's measurements of the engine's modes (pipeline.judge.vllm.mode), for enforce_eager=auto; None:
    # none read (auto is the generators' mode).
    engine_modes: ModeRecord | None = None

    name = "judge"
    reads = (ports.CONTEXTS, ports.PROMPT_PLAN, ports.JUDGE, ports.PARTS, ports.RATING_PARTS)
    writes = (ports.JUDGMENTS, ports.RATINGS, ports.JUDGE_STATS)

    def mode(self, judge: JudgeSpec, prompts: int) -> Choice | None:
        """The engine's mode for ``prompts`` prompts where the judge's is ``auto`` (the run's and ``make check``'s
        one call of :func:`pipeline.judge.vllm.mode.choose`); None: set in the config, or nothing to judge."""
        return choose_mode(judge, prompts, self.engine_modes) if is_auto(judge) and prompts else None

    def run(
        self,
        ctx: StageContext,
        *,
        contexts: pa.Table,
        prompt_plan: PromptPlan,
        judge: JudgeSpec,
        parts: JudgmentParts,
        rating_parts: RatingParts,
    ) -> dict[str, Any]:
        remaining = column_total(contexts, "n_prompts")
        shards = split_shards(contexts)
        log.info("%d prompts to judge in %d shard(s)", remaining, len(shards))
        choice = self.mode(judge, remaining)
        if choice is not None:
            log.info("engine mode %s", choice.reason)
        progress = Progress(remaining)
        tally = Tally()
        events = ctx.run_dir / "logs" / ENGINE_EVENTS
        seen_events = len(read_events(events))
        if remaining:
            steps = judge_steps(
                self.pairs,
                self.chunk_rows,
                prompt_plan,
                judge,
                events=events,
                max_restarts=self.max_restarts,
                judgement_store=self.judgement_store,
                given=self.given,
                keep_alive=self.keep_workers,
                eager=choice.eager if choice is not None else None,
            )
            try:
                with closing_front(steps[-1]), closing(ctx.executor.stream(shards, steps)) as batches:
                    for batch in batches:
                        tally.add(batch, prompt_plan, parts, rating_parts)
                        progress.update(
                            batch.num_rows,
                            column_total(batch, "prompt_tokens"),
                            column_total(batch, "cached_tokens"),
                        )
            except Exception as exc:
                parts.flush()  # everything judged so far stays on disk
                rating_parts.flush()
                lost = report_interruptions(ctx, events, seen_events)
                if isinstance(exc, UserError):  # bad input or config: its own message says what to do
                    raise
                raise JudgeStageError(
                    f"the judge stage stopped: {error_cause(exc)}. {progress.done} of {remaining} prompt(s) were "
                    f"judged and are stored in {parts.folder.parent}; the same command with "
                    f"paths.run_dir={ctx.run_dir} (or paths.run_dir=latest) judges only the rest. "
                    + judge_failure_hint(exc, lost, self.max_restarts)
                ) from exc
        parts.flush()
        rating_parts.flush()
        if progress.done != remaining:
            raise RuntimeError(f"the judge stage returned {progress.done} prompts, expected {remaining}")
        self._log(progress, tally.reused)
        lost = report_interruptions(ctx, events, seen_events)
        if tally.failed:
            raise_failed(pa.concat_tables(tally.failed), parts.folder.parent)
        judgments, ratings = parts.read(), rating_parts.read()
        stats = replace(
            self._stats(judge, judgments, ratings, progress, tally, ctx.run_dir),
            interruptions=tuple((k, n) for k, n in lost.counts() if n),
            engine_mode=choice.reason if choice is not None else "",
            engine_eager=choice.eager if choice is not None else None,
        )
        ctx.metrics.update(stats.metrics())
        return {"judgments": judgments, "ratings": ratings, "judge_stats": stats}

    def _log(self, progress: Progress, reused: int) -> None:
        if progress.total:
            seconds = time.monotonic() - progress.started
            log.info("judge stage finished: %d prompts in %s", progress.done, format_seconds(seconds))
        if reused:
            log.info(
                "%d of the %d prompt(s) were answered from the judgement store %s (the same prompt judged "
                "before: by an earlier run, or for candidates with the same texts); %d judged now",
                reused,
                progress.done,
                self.judgement_store,
                progress.done - reused,
            )

    def _stats(
        self,
        judge: JudgeSpec,
        judgments: pa.Table,
        ratings: pa.Table,
        progress: Progress,
        tally: Tally,
        run_dir: Path,
    ) -> JudgeStats:
        """What the stage judged and what it cost, over the run folder's judgments and ratings."""
        api = tally.api
        return JudgeStats(
            prompts=judgments.num_rows + ratings.num_rows,
            judged_now=progress.done,
            seconds=time.monotonic() - progress.started,
            rate=progress.rate(),
            rate_with_startup=progress.overall_rate(),
            prompt_tokens=column_total(judgments, "prompt_tokens") + column_total(ratings, "prompt_tokens"),
            cached_tokens=column_total(judgments, "cached_tokens") + column_total(ratings, "cached_tokens"),
            requests=api.requests,
            cached_replies=api.cached,
            billed_prompt_tokens=api.prompt_tokens,
            billed_completion_tokens=api.completion_tokens,
            money=api.money(judge.endpoint.settings if judge.endpoint else None),
            logprobs_read=api.logprobs_read,
            missing_logprobs=api.missing,
            api_paths=tuple(sorted(p.removeprefix("api/") for p in api.paths)),
            reused=tally.reused,
            recorded=tally.recorded,
            failed_attempts=tuple(sorted(api.failures.items())),
            usage_unknown=api.usage_unknown,
            batches=tuple(batch_states(run_dir / RECORD_FILE).items()),
            served_models=tuple(sorted((j, m, n) for (j, m), n in api.models.items())),
        )


@dataclass
class Tally:
    """What the judge stage's stream brought: answers stored as they arrive, prompts that could not be answered
    (left out of the stores: a rerun judges them), what an endpoint was asked, answers from the judgement store."""

    failed: list[pa.Table] = field(default_factory=list)
    api: ApiUsage = field(default_factory=ApiUsage)
    reused: int = 0
    recorded: int = 0

    def add(self, batch: pa.Table, plan: PromptPlan, parts: JudgmentParts, rating_parts: RatingParts) -> None:
        self.api.add(batch)
        self.reused += pc.sum(pc.equal(batch.column("source"), "store")).as_py() or 0
        self.recorded += pc.sum(pc.equal(batch.column("source"), RECORDED)).as_py() or 0
        unanswered = pc.is_valid(batch.column("error"))
        if pc.any(unanswered).as_py():
            self.failed.append(batch.filter(unanswered))
            batch = batch.filter(pc.invert(unanswered))
        judgments, ratings = split_responses(batch, plan)
        parts.add(judgments)
        rating_parts.add(ratings)
