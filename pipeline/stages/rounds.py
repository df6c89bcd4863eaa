"""Adaptive rounds as a stage: the run folder's I/O around the one round loop
(:func:`pipeline.methods.adaptive.loop.run_rounds`, which ``make bench-adaptive`` measures).

Every round, for every context (a pool) still going, the loop fits the posterior to everything judged so far,
records the round, decides whether the context stops and chooses its next pairs (:mod:`pipeline.methods.adaptive.loop`).
Around it, this stage:

1. records each round: pairs and calls so far, the stopping criterion, expected tau, Spearman with the human
   scores where there are some (``rounds/rounds.parquet``, the log, and MLflow metrics with the round as the step);
2. stops a context on the budgets only a run knows (prompt tokens, money, time);
3. writes each round's chosen pairs to ``rounds/round-<r>.parquet`` *before* judging them: the state a resumed run
   needs (:mod:`pipeline.stages.rounds_files`);
4. judges them, both orderings, with the judge stage (:class:`pipeline.stages.judging.Judge`, its pairs given, its
   workers kept for every round), which streams the answers to the run folder and consults the judgement store,
   and gives the loop each pair's two answers.

Resume: a run started again in the same folder reads the chosen pairs of every round, judges those prompts not
yet in the folder (a round cut short) and goes on from the next round with what was judged. A prompt in the
folder is never judged again, and the fit and selection are deterministic given what was judged (seeded by
``adaptive.seed``, the round and the context's content key, with its items in content-key order: the same whatever
the ids are called or the input's order), so a resumed run chooses what the uninterrupted one would have.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
from numpy.typing import NDArray

from pipeline.config.adaptive_rounds import AdaptiveConfig
from pipeline.contracts.errors import ConfigError
from pipeline.contracts.schemas import ROUNDS, check_schema
from pipeline.contracts.stats import JudgeStats
from pipeline.data.contexts import Context, group_by_context
from pipeline.judge.spec import JudgeSpec
from pipeline.methods.adaptive.loop import Pool, RoundRecord, run_rounds
from pipeline.methods.adaptive.stopping import expected_tau
from pipeline.methods.scorers.model_fit import Prior
from pipeline.prompts.plan import PromptPlan
from pipeline.stages import ports
from pipeline.stages.accounting import ENGINE_EVENTS, report_interruptions
from pipeline.stages.base import Stage, StageContext
from pipeline.stages.judging import Judge
from pipeline.stages.rounds_files import (
    ROUNDS_DIR,
    chosen_pairs,
    combine_stats,
    given_from,
    ordered_given,
    read_round_pairs,
    read_rounds,
    round_contexts,
    round_pairs_table,
    step_metrics,
    write_round_pairs,
    write_rounds,
)
from pipeline.storage.events import read_events
from pipeline.storage.parts import JudgmentParts, RatingParts

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rounds(Stage):
    """Rank each context in adaptive rounds (fit, select, judge) until its budget is spent or its ranking has
    settled; resume between or inside rounds without judging anything twice."""

    adaptive: AdaptiveConfig
    judge_stage: Judge

    name = "rounds"
    reads = (
        ports.CANDIDATES,
        ports.HUMAN_SCORES,
        ports.PROMPT_PLAN,
        ports.JUDGE,
        ports.PARTS,
        ports.RATING_PARTS,
    )
    writes = (ports.JUDGMENTS, ports.RATINGS, ports.JUDGE_STATS, ports.ROUNDS, ports.ROUND_PAIRS)

    def run(
        self,
        ctx: StageContext,
        *,
        candidates: pa.Table,
        human_scores: pa.Table,
        prompt_plan: PromptPlan,
        judge: JudgeSpec,
        parts: JudgmentParts,
        rating_parts: RatingParts,
    ) -> dict[str, Any]:
        if len(prompt_plan.attributes) != 1:
            raise ConfigError(
                f"workflow=adaptive ranks one attribute at a time; the input has {list(prompt_plan.attributes)}: "
                "choose one with dataset.attributes=[name]"
            )
        contexts = {c.context_id: c for c in group_by_context(candidates)}
        io = RoundsIO(self, ctx, contexts, human_scores, prompt_plan, judge, parts, rating_parts)
        start = io.resume()
        pools = io.pools()
        run_rounds(
            pools,
            io.judge_round,
            self.adaptive.round_settings(),
            stop=self.adaptive.stop_rule(),
            start=start,
            on_round=io.record,
            should_stop=io.budget_stop,
        )
        return io.finish(pools)


class RoundsIO:
    """One run of the rounds stage: the run folder's rounds files, the judge stage behind the loop's judge
    function, the budgets the loop does not know, and the records as rows."""

    def __init__(
        self,
        stage: Rounds,
        ctx: StageContext,
        contexts: dict[str, Context],
        human_scores: pa.Table,
        plan: PromptPlan,
        judge: JudgeSpec,
        parts: JudgmentParts,
        rating_parts: RatingParts,
    ):
        self.stage, self.adaptive, self.ctx = stage, stage.adaptive, ctx
        self.contexts, self.plan, self.judge, self.parts, self.rating_parts = (
            contexts,
            plan,
            judge,
            parts,
            rating_parts,
        )
        self.attribute = plan.attributes[0]
        self.human = human_arrays(human_scores, contexts, self.attribute)
        self.folder = ctx.run_dir / ROUNDS_DIR
        self.folder.mkdir(exist_ok=True)
        self.chosen = read_round_pairs(self.folder)
        self.rows: list[dict] = []
        self.stats: list[JudgeStats] = []
        self.tokens: dict[str, int] = dict.fromkeys(contexts, 0)
        self.started = time.monotonic()
        self.events = ctx.run_dir / "logs" / ENGINE_EVENTS
        self.seen_events = len(read_events(self.events))

    # --- before the loop -----------------------------------------------------------------------------------
    def resume(self) -> int:
        """Judge what the folder chose but did not judge (a round cut short) and the warm start's absolute
        prompts; keep the records of the rounds whose pairs were chosen. The first round to run."""
        start = int(max(self.chosen.column("round").to_pylist())) + 1 if self.chosen.num_rows else 0
        # a round's record is written before its pairs: rounds up to the last one with chosen pairs are complete,
        # a later record (cut off before its pairs were written) is made again
        self.rows = [row for row in read_rounds(self.folder).to_pylist() if row["round"] < start]
        if self.rows:
            log.info(
                "continuing adaptive rounds in %s: %d round(s) on record, %d prompt(s) chosen",
                self.folder,
                start,
                self.chosen.num_rows,
            )
            for row in self.rows:  # the curve of the earlier runs, in this MLflow run too
                self.ctx.log_step(step_metrics(row, len(self.contexts)), int(row["round"]))
        if self.adaptive.warm_start is not None or self.chosen.num_rows:
            self.stats.append(self._judge(given_from(self.chosen, self.contexts)))
        return start

    def pools(self) -> dict[str, Pool]:
        """Every context as a pool of the loop, holding what the folder has judged (in the order it was chosen)."""
        prior = self._prior()
        judged = chosen_pairs(self.chosen, self.contexts)
        answers = self._orderings(judged)
        out = {}
        for cid, context in self.contexts.items():
            extra = context.size if cid in prior else 0
            pool = Pool(
                context.size,
                key=context.key,
                budget_pairs=self._budget_pairs(context.size, extra),
                prior=prior.get(cid),
                extra_calls=extra,
            )
            pool.add(judged[cid], answers[cid])
            out[cid] = pool
        return out

    def _budget_pairs(self, n: int, extra_calls: int) -> int | None:
        """The pairs the call budgets allow a context of ``n`` items (None: no call budget)."""
        b = self.adaptive.budget
        limits = [x for x in (b.calls, None if b.calls_per_item is None else int(b.calls_per_item * n)) if x]
        return None if not limits else max(0, (min(limits) - extra_calls) // 2)

    def _prior(self) -> dict[str, Prior]:
        """The warm start: each context's absolute scores (``adaptive.warm_start``) as the prior of its fits."""
        mode = self.adaptive.warm_start
        if mode is None:
            return {}
        ratings = pl.from_arrow(self.rating_parts.read()).filter(pl.col("mode") == mode)
        out = {}
        for cid, context in self.contexts.items():
            index = {c: k for k, c in enumerate(context.candidate_ids)}
            scores = np.full(context.size, np.nan)
            rows = (
                ratings.filter(pl.col("context_id") == cid)
                .group_by("candidate_id")
                .agg(pl.col("score").mean())
            )
            for cand, value in rows.iter_rows():
                if cand in index and value is not None:
                    scores[index[cand]] = value
            missing = int(np.isnan(scores).sum())
            if missing:
                log.warning(
                    "warm start: %d of %d item(s) of %s have no %s score (no prior for them)",
                    missing,
                    context.size,
                    cid,
                    mode,
                )
            fill = np.nanmean(scores) if missing < context.size else 0.0
            out[cid] = Prior(np.where(np.isnan(scores), fill, scores), self.adaptive.warm_weight)
        return out

    # --- the loop's callbacks --------------------------------------------------------------------------------
    def judge_round(
        self, r: int, selected: Mapping[str, NDArray[np.int64]]
    ) -> dict[str, NDArray[np.float64]]:
        """Write round ``r``'s pairs, judge them (both orderings), and give the loop each pair's two answers."""
        new = round_pairs_table(r, selected, self.contexts, self.attribute)
        write_round_pairs(self.folder, r, new)  # the state: chosen before judged
        self.chosen = pa.concat_tables([self.chosen, new])
        self.stats.append(self._judge(ordered_given(selected)))
        return self._orderings(selected)

    def record(self, record: RoundRecord) -> None:
        """A round of one context: a ROUNDS row in the folder, the log and MLflow."""
        row = self._row(record)
        self.rows.append(row)
        write_rounds(self.folder, self.rows)
        self.ctx.log_step(step_metrics(row, len(self.contexts)), record.round)
        log.info("round %d, %s: %s", record.round, record.pool, round_line(row, record, self.adaptive))

    def budget_stop(self, cid: str, pool: Pool) -> str | None:
        """Why a context stops on a budget the loop does not know (prompt tokens, time, money), else None."""
        b = self.adaptive.budget
        if b.prompt_tokens is not None and self.tokens[cid] >= b.prompt_tokens:
            return f"prompt-token budget spent ({self.tokens[cid]} >= {b.prompt_tokens})"
        seconds = time.monotonic() - self.started
        if b.seconds is not None and seconds >= b.seconds:
            return f"time budget spent ({seconds:.0f} s >= {b.seconds:g} s)"
        if b.money is not None:
            spent = sum((s.money or 0.0) for s in self.stats)
            if spent >= b.money:
                return f"money budget spent ({spent:.4f} >= {b.money:g})"
        return None

    # --- the parts ---------------------------------------------------------------------------------------------
    def _judge(self, given: Mapping[str, NDArray[np.int64]]) -> JudgeStats:
        """Judge the given prompts (and the warm start's absolute prompts) with the judge stage, skipping what the
        run folder holds; one set of judge workers (engines started once) for every round."""
        contexts = round_contexts(self.contexts, given, self.parts, self.rating_parts, self.plan)
        stage = dataclasses.replace(self.stage.judge_stage, given=given, keep_workers=True)
        out = stage.run(
            self.ctx,
            contexts=contexts,
            prompt_plan=self.plan,
            judge=self.judge,
            parts=self.parts,
            rating_parts=self.rating_parts,
        )
        return out["judge_stats"]

    def _orderings(self, pairs: Mapping[str, NDArray[np.int64]]) -> dict[str, NDArray[np.float64]]:
        """Both orderings' answers of every pair (rows ``(p(A wins) with i in A, with j in A)``) from the folder's
        judgments; the prompt tokens each context has spent."""
        frame = pl.from_arrow(
            self.parts.read().select(["context_id", "cand_a", "cand_b", "p_a", "prompt_tokens"])
        )
        answer = {(cid, a, b): p for cid, a, b, p, _ in frame.iter_rows() if cid in self.contexts}
        for (cid,), group in frame.group_by(["context_id"]):
            if cid in self.tokens:
                self.tokens[cid] = int(group["prompt_tokens"].sum())
        out = {}
        for cid, rows in pairs.items():
            ids = self.contexts[cid].candidate_ids
            try:
                out[cid] = np.array(
                    [
                        [answer[(cid, ids[a], ids[b])], answer[(cid, ids[b], ids[a])]]
                        for a, b in rows.tolist()
                    ],
                    dtype=np.float64,
                ).reshape(-1, 2)
            except KeyError as exc:
                raise RuntimeError(
                    f"context {cid!r}: the judged prompt {exc.args[0]} is not in the run folder"
                ) from exc
        return out

    def _row(self, record: RoundRecord) -> dict[str, Any]:
        from scipy.stats import spearmanr

        post, cid = record.post, record.pool
        n = self.contexts[cid].size
        human = self.human.get(cid)
        rho = None
        if human is not None:
            ok = ~np.isnan(human)
            if ok.sum() >= 3:
                stat = spearmanr(post.mean[ok], human[ok]).statistic
                rho = float(stat) if np.isfinite(stat) else None
        value = record.criterion
        criterion = self.adaptive.stop.criterion
        return {
            "round": record.round,
            "context_id": cid,
            "items": n,
            "pairs": record.pairs,
            "calls": record.calls,
            "prompt_tokens": self.tokens[cid],
            "criterion": str(criterion) if criterion else None,
            "value": None if value is None or not math.isfinite(value) else float(value),
            "expected_tau": expected_tau(post) if n >= 2 else 1.0,
            "max_stderr": float(np.sqrt(post.var.max())),
            "downweighted": post.downweighted,
            "beyond_cap": post.censored if post.beyond_cap is not None else None,
            "contradicted": record.contradicted,
            "spearman": rho,
            "fit_seconds": record.fit_seconds,
            "select_seconds": record.select_seconds,
            "stopped": record.stopped,
        }

    # --- after the loop ----------------------------------------------------------------------------------------
    def finish(self, pools: Mapping[str, Pool]) -> dict[str, Any]:
        """The stage's outputs: every judgment and rating in the folder, the judge's numbers over every round, the
        rounds and the chosen pairs."""
        for cid, pool in pools.items():
            ordered = pool.n * (pool.n - 1)
            log.info(
                "adaptive rounds, %s: %d items, %d pairs judged in both orderings (%d calls, %.1f per item, %.2f%% of "
                "the %d ordered pairs); stopped: %s",
                cid,
                pool.n,
                pool.pairs,
                pool.calls,
                pool.calls / max(pool.n, 1),
                100.0 * 2 * pool.pairs / max(ordered, 1),
                ordered,
                pool.stopped,
            )
        judgments, ratings = self.parts.read(), self.rating_parts.read()
        total = combine_stats(
            self.stats, judgments.num_rows + ratings.num_rows, time.monotonic() - self.started
        )
        metrics = self.ctx.metrics
        metrics.update(total.metrics())
        report_interruptions(self.ctx, self.events, self.seen_events)  # over every round
        # run totals under names of their own: the per-round series (step_metrics) keep theirs
        metrics["adaptive/rounds_run"] = float(max((row["round"] for row in self.rows), default=-1) + 1)
        metrics["adaptive/total_pairs"] = float(sum(p.pairs for p in pools.values()))
        metrics["adaptive/total_calls"] = float(sum(p.calls for p in pools.values()))
        rounds = check_schema(pa.Table.from_pylist(self.rows, schema=ROUNDS), ROUNDS, "rounds")
        return {
            "judgments": judgments,
            "ratings": ratings,
            "judge_stats": total,
            "rounds": rounds,
            "round_pairs": self.chosen,
        }


def human_arrays(
    human_scores: pa.Table, contexts: Mapping[str, Context], attribute: str
) -> dict[str, NDArray]:
    """Each context's human scores in candidate order (NaN where a candidate has none); contexts without any are
    left out."""
    frame = pl.from_arrow(human_scores).filter(pl.col("attribute") == attribute)
    out = {}
    for cid, context in contexts.items():
        scores = frame.filter(pl.col("context_id") == cid)
        if not scores.height:
            continue
        index = {c: k for k, c in enumerate(context.candidate_ids)}
        human = np.full(context.size, np.nan)
        for cand, value in scores.select("candidate_id", "human_score").iter_rows():
            if cand in index:
                human[index[cand]] = value
        out[cid] = human
    return out


def round_line(row: dict[str, Any], record: RoundRecord, adaptive: AdaptiveConfig) -> str:
    """A round's log line: what was judged, what the fit left out or down-weighted, the criterion, the Spearman,
    and the pairs chosen next or why the context stopped."""
    parts = [f"{row['pairs']} pairs ({row['calls']} calls) judged"]
    if row["downweighted"]:
        parts.append(f"{row['downweighted']} answer(s) weighted below 1/2 by the robust fit")
    if row["beyond_cap"]:
        parts.append(f"{row['beyond_cap']} answer(s) at the log-odds cap placed beyond it")
    if row["contradicted"]:
        left_out = " left out" if adaptive.drop_contradicted else ""
        parts.append(f"{row['contradicted']} pair(s) with contradicting orderings{left_out}")
    if row["value"] is not None:
        parts.append(f"{row['criterion']} {row['value']:.4f}")
    if row["spearman"] is not None:
        parts.append(f"Spearman {row['spearman']:.3f}")
    parts.append(f"stopped: {row['stopped']}" if row["stopped"] else f"next: {len(record.chosen)} pairs")
    return "; ".join(parts)
