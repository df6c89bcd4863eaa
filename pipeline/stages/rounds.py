"""Adaptive rounds as a stage: rank each context (a large pool) by rounds of fit, select, judge.

Every round, for every context still going:

1. **fit** the PoE-Gaussian posterior (:mod:`pipeline.methods.posterior`) to everything judged so far (both
   orderings of every pair, debiased; read by ``adaptive.link``, robust to contradicting answers by
   ``adaptive.robust``, an answer at the log-odds cap read as "at least the cap" by ``adaptive.censor``, a pair
   whose orderings contradict each other left out by ``adaptive.drop_contradicted``;
   warm-started from an absolute mode's scores when ``adaptive.warm_start`` names one), and record the round:
   pairs and calls so far, the stopping criterion, Spearman with the human scores where there are some
   (``tables/rounds.parquet``, and MLflow metrics with the round as the step);
2. **stop** the context when the budget (calls, prompt tokens, money, time) cannot pay for another round or the
   stopping rule (:mod:`pipeline.methods.stopping`) is met;
3. **select** the next pairs (:func:`pipeline.methods.rounds.select_round`) and write them to
   ``rounds/round-<r>.parquet`` *before* judging them: the state a resumed run needs;
4. **judge** them, both orderings, with the judge stage (:class:`pipeline.stages.Judge`, its pairs given), which
   streams the answers to the run folder and consults the judgement store.

Resume: a run started again in the same folder reads the chosen pairs of every round, judges those prompts not
yet in the folder (a round cut short) and goes on from the next round. A prompt in the folder is never judged
again, and the fit and selection are deterministic given what was judged (seeded by ``adaptive.seed`` and the
round), so a resumed run chooses what the uninterrupted one would have chosen.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.config.enums import Debias, Orderings, RoundStrategy
from pipeline.config.rounds import AdaptiveConfig
from pipeline.contracts.errors import ConfigError
from pipeline.contracts.schemas import CONTEXTS, ROUND_PAIRS, ROUNDS, check_schema
from pipeline.contracts.stats import JudgeStats
from pipeline.data.contexts import Context, group_by_context
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.watchdog import read_events
from pipeline.methods.contradiction import contradicted
from pipeline.methods.locate import sample_pairs
from pipeline.methods.posterior import Posterior
from pipeline.methods.rounds import Model, Prior, first_pairs, fit_round, select_round
from pipeline.methods.selection import PairSet
from pipeline.methods.stopping import StopRule
from pipeline.prompts.plan import PromptPlan
from pipeline.scoring.reduce import reduce_judgments
from pipeline.stages import ports
from pipeline.stages.accounting import report_interruptions
from pipeline.stages.base import Stage, StageContext
from pipeline.stages.judging import ENGINE_EVENTS, Judge
from pipeline.storage.parts import JudgmentStore, RatingStore

log = logging.getLogger(__name__)


ROUNDS_DIR = "rounds"


@dataclass
class PoolState:
    """One context's rounds: its items, what is judged, its last posterior, whether it goes on."""

    context: Context
    index: dict[str, int]
    human: np.ndarray | None
    post: Posterior | None = None
    pairs: int = 0
    calls: int = 0
    prompt_tokens: int = 0
    stopped: str | None = None
    # the previous round's means (for the "change" criterion), the pairs judged, the last fit's seconds
    previous: np.ndarray | None = None
    judged: PairSet | None = None
    fit_seconds: float = 0.0
    # the comparisons of the last fit (i, j, p), and which of them have contradicting orderings: the locate
    # strategy reads them
    answers: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    contradicted: np.ndarray | None = None

    @property
    def n(self) -> int:
        return self.context.size


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
        ports.STORE,
        ports.RATING_STORE,
    )
    writes = (ports.JUDGMENTS, ports.RATINGS, ports.JUDGE_STATS, ports.ROUNDS, ports.ROUND_PAIRS)

    @property
    def model(self) -> Model:
        """How every round's fit reads the comparisons (``adaptive.link``, ``logit_clip``, ``robust``, ``censor``,
        ``drop_contradicted``)."""
        a = self.adaptive
        return Model(
            link=str(a.link),
            clip=a.logit_clip,
            robust=a.robust,
            censor=a.censor,
            drop_contradicted=a.drop_contradicted,
        )

    def run(
        self,
        ctx: StageContext,
        *,
        candidates: pa.Table,
        human_scores: pa.Table,
        prompt_plan: PromptPlan,
        judge: JudgeSpec,
        store: JudgmentStore,
        rating_store: RatingStore,
    ) -> dict[str, Any]:
        a = self.adaptive
        if len(prompt_plan.attributes) != 1:
            raise ConfigError(
                f"workflow=adaptive ranks one attribute at a time; the input has {list(prompt_plan.attributes)}: "
                "choose one with dataset.attributes=[name]"
            )
        attribute = prompt_plan.attributes[0]
        pools = {c.context_id: self._pool(c, human_scores, attribute) for c in group_by_context(candidates)}
        folder = ctx.run_dir / ROUNDS_DIR
        folder.mkdir(exist_ok=True)
        chosen = read_round_pairs(folder)
        # a round's record is written before its pairs: rounds up to the last one with chosen pairs are complete,
        # a later record (cut off before its pairs were written) is made again
        first_round = int(max(chosen.column("round").to_pylist())) + 1 if chosen.num_rows else 0
        records = [row for row in read_rounds(folder).to_pylist() if row["round"] < first_round]
        started = time.monotonic()
        stats: list[JudgeStats] = []
        events = ctx.run_dir / "logs" / ENGINE_EVENTS
        seen_events = len(read_events(events))
        if records:
            log.info(
                "continuing adaptive rounds in %s: %d round(s) on record, %d prompt(s) chosen",
                folder,
                first_round,
                chosen.num_rows,
            )
            for row in records:  # the curve of the earlier runs, in this MLflow run too
                ctx.log_step(step_metrics(row, len(pools)), int(row["round"]))
        # the warm start's absolute prompts (one per item), and any chosen prompt not judged yet (a round cut short)
        pending = given_from(chosen, pools)
        if a.warm_start is not None or chosen.num_rows:
            stats.append(self._judge(ctx, pools, pending, prompt_plan, judge, store, rating_store))
        prior = self._prior(rating_store, pools)
        rule = (
            StopRule(str(a.stop.criterion), a.stop.threshold)  # type: ignore[arg-type]
            if a.stop.criterion is not None
            else None
        )
        r = first_round
        while True:
            self._fit(store, pools, prior)
            rows = []
            selected: dict[str, np.ndarray] = {}
            for cid, pool in pools.items():
                if pool.stopped is not None:
                    continue
                fit_s = pool.fit_seconds
                value = rule.value(pool.post, pool.previous) if rule is not None else None  # type: ignore[arg-type]
                k = self._next_size(pool)
                why = self._why_stop(pool, rule, value, k, time.monotonic() - started, stats)
                t0 = time.perf_counter()
                pairs = np.zeros((0, 2), dtype=np.int64)
                if why is None:
                    pairs = self._select(pool, k, r)
                    if not pairs.shape[0]:
                        why = "every pair judged"
                select_s = time.perf_counter() - t0
                pool.stopped = why
                rows.append(self._record(r, pool, value, fit_s, select_s, why))
                if why is None:
                    selected[cid] = pairs
            if rows:
                records.extend(rows)
                write_rounds(folder, records)
                for row in rows:
                    ctx.log_step(step_metrics(row, len(pools)), r)
                    log.info(
                        "round %d, %s: %d pairs (%d calls) judged; %s%s%s%s%s%s",
                        r,
                        row["context_id"],
                        row["pairs"],
                        row["calls"],
                        f"{row['downweighted']} answer(s) weighted below 1/2 by the robust fit; "
                        if row["downweighted"]
                        else "",
                        f"{row['beyond_cap']} answer(s) at the log-odds cap placed beyond it; "
                        if row["beyond_cap"]
                        else "",
                        f"{row['contradicted']} pair(s) with contradicting orderings"
                        f"{' left out' if self.adaptive.drop_contradicted else ''}; "
                        if row["contradicted"]
                        else "",
                        f"{row['criterion']} {row['value']:.4f}; " if row["value"] is not None else "",
                        f"Spearman {row['spearman']:.3f}; " if row["spearman"] is not None else "",
                        f"stopped: {row['stopped']}"
                        if row["stopped"]
                        else f"next: {len(selected.get(row['context_id'], []))} pairs",
                    )
            if not selected:
                break
            new = round_pairs_table(r, selected, pools, attribute)
            write_round_pairs(folder, r, new)  # the state: chosen before judged
            chosen = pa.concat_tables([chosen, new])
            stats.append(
                self._judge(ctx, pools, ordered_given(selected), prompt_plan, judge, store, rating_store)
            )
            r += 1
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
        judgments, ratings = store.read(), rating_store.read()
        total = combine_stats(stats, judgments.num_rows + ratings.num_rows, time.monotonic() - started)
        ctx.metrics.update(total.metrics())
        report_interruptions(ctx, events, seen_events)  # over every round (each judge call reported its own)
        # run totals under names of their own: the per-round series (step_metrics) keep theirs
        ctx.metrics["adaptive/rounds_run"] = float(r + 1)
        ctx.metrics["adaptive/total_pairs"] = float(sum(p.pairs for p in pools.values()))
        ctx.metrics["adaptive/total_calls"] = float(sum(p.calls for p in pools.values()))
        rounds = check_schema(pa.Table.from_pylist(records, schema=ROUNDS), ROUNDS, "rounds")
        return {
            "judgments": judgments,
            "ratings": ratings,
            "judge_stats": total,
            "rounds": rounds,
            "round_pairs": chosen,
        }

    # --- the parts ---------------------------------------------------------------------------------------------
    def _pool(self, context: Context, human_scores: pa.Table, attribute: str) -> PoolState:
        index = {c: k for k, c in enumerate(context.candidate_ids)}
        human = None
        scores = pl.from_arrow(human_scores).filter(
            (pl.col("context_id") == context.context_id) & (pl.col("attribute") == attribute)
        )
        if scores.height:
            human = np.full(context.size, np.nan)
            for cand, value in scores.select("candidate_id", "human_score").iter_rows():
                if cand in index:
                    human[index[cand]] = value
        return PoolState(context, index, human)

    def _prior(self, rating_store: RatingStore, pools: dict[str, PoolState]) -> dict[str, Prior]:
        mode = self.adaptive.warm_start
        if mode is None:
            return {}
        ratings = pl.from_arrow(rating_store.read()).filter(pl.col("mode") == mode)
        out = {}
        for cid, pool in pools.items():
            scores = np.full(pool.n, np.nan)
            rows = (
                ratings.filter(pl.col("context_id") == cid)
                .group_by("candidate_id")
                .agg(pl.col("score").mean())
            )
            for cand, value in rows.iter_rows():
                if cand in pool.index and value is not None:
                    scores[pool.index[cand]] = value
            missing = int(np.isnan(scores).sum())
            if missing:
                log.warning(
                    "warm start: %d of %d item(s) of %s have no %s score (no prior for them)",
                    missing,
                    pool.n,
                    cid,
                    mode,
                )
            fill = np.nanmean(scores) if missing < pool.n else 0.0
            out[cid] = Prior(np.where(np.isnan(scores), fill, scores), self.adaptive.warm_weight)
        return out

    def _fit(self, store: JudgmentStore, pools: dict[str, PoolState], prior: dict[str, Prior]) -> None:
        judgments = store.read()
        frame = pl.from_arrow(judgments)
        comparisons = (
            reduce_judgments(frame, Debias.average, Orderings.both).comparisons if frame.height else None
        )
        for cid, pool in pools.items():
            if pool.stopped is not None and pool.post is not None:
                continue
            t0 = time.perf_counter()
            if comparisons is not None:
                mine = comparisons.filter(pl.col("context_id") == cid)
                i = np.array([pool.index[c] for c in mine.get_column("cand_i").to_list()], dtype=np.int64)
                j = np.array([pool.index[c] for c in mine.get_column("cand_j").to_list()], dtype=np.int64)
                p = mine.get_column("p").to_numpy().astype(np.float64)
                bad = contradicted(
                    mine.get_column("p_ij").to_numpy().astype(np.float64),
                    mine.get_column("p_ji").to_numpy().astype(np.float64),
                    clip=self.adaptive.logit_clip,
                )
            else:
                i = j = np.zeros(0, dtype=np.int64)
                p = np.zeros(0)
                bad = np.zeros(0, dtype=bool)
            mine_j = frame.filter(pl.col("context_id") == cid) if frame.height else frame
            pool.previous = None if pool.post is None else pool.post.mean
            try:
                pool.post = fit_round(
                    pool.n,
                    i,
                    j,
                    p,
                    prior=prior.get(cid),
                    model=self.model,
                    ridge=self.adaptive.ridge,
                    x0=None if pool.post is None else pool.post.mean,
                    contradicted=bad,
                )
            except RuntimeError as exc:  # the fit did not converge: which pool, and what it had judged
                raise RuntimeError(
                    f"context {cid!r} ({pool.n} items, {int(i.shape[0])} pairs judged): {exc}"
                ) from exc
            pool.judged = PairSet(pool.n, np.stack([i, j], axis=1)) if pool.n >= 2 else None
            pool.answers = (i, j, p)
            pool.contradicted = bad
            pool.pairs = int(i.shape[0])
            absolute = int(prior[cid].scores.shape[0]) if cid in prior else 0
            pool.calls = int(mine_j.height) + absolute
            pool.prompt_tokens = int(mine_j.get_column("prompt_tokens").sum()) if mine_j.height else 0
            pool.fit_seconds = time.perf_counter() - t0

    def _next_size(self, pool: PoolState) -> int:
        return min(self.adaptive.schedule(pool.n)(pool.pairs), self._left(pool))

    def _left(self, pool: PoolState) -> int:
        """Pairs the call budgets leave (every pair when there is none)."""
        b = self.adaptive.budget
        limits = [
            x
            for x in (b.calls, None if b.calls_per_item is None else int(b.calls_per_item * pool.n))
            if x is not None
        ]
        every = pool.n * (pool.n - 1) // 2
        return every if not limits else max(0, (min(limits) - pool.calls) // 2)

    def _why_stop(
        self,
        pool: PoolState,
        rule: StopRule | None,
        value: float | None,
        k: int,
        seconds: float,
        stats: list[JudgeStats],
    ) -> str | None:
        b = self.adaptive.budget
        if rule is not None and value is not None and rule.met(value):
            return f"{rule.criterion} {value:.4f} reached {rule.threshold}"
        if k < 1:
            return "call budget spent"
        if b.prompt_tokens is not None and pool.prompt_tokens >= b.prompt_tokens:
            return f"prompt-token budget spent ({pool.prompt_tokens} >= {b.prompt_tokens})"
        if b.seconds is not None and seconds >= b.seconds:
            return f"time budget spent ({seconds:.0f} s >= {b.seconds:g} s)"
        if b.money is not None:
            spent = sum((s.money or 0.0) for s in stats)
            if spent >= b.money:
                return f"money budget spent ({spent:.4f} >= {b.money:g})"
        return None

    def _select(self, pool: PoolState, k: int, r: int) -> np.ndarray:
        a = self.adaptive
        rng = np.random.default_rng([a.seed, r, _stable(pool.context.context_id)])
        if pool.pairs == 0 and a.strategy == RoundStrategy.locate:
            pairs = sample_pairs(pool.n, rng)[:k]
        elif pool.pairs == 0:
            pairs = first_pairs(pool.n, min(k, pool.n * (pool.n - 1) // 2), rng)
        else:
            pairs = select_round(
                str(a.strategy),
                pool.post,
                k,
                pool.judged,
                rng,
                window=a.window,
                explore=a.explore,  # type: ignore[arg-type]
                answers=pool.answers,
                budget=self._left(pool),
                clip=a.logit_clip,
                contradicted=pool.contradicted,
            )
        return pairs

    def _record(
        self, r: int, pool: PoolState, value: float | None, fit_s: float, select_s: float, why: str | None
    ) -> dict:
        from scipy.stats import spearmanr

        from pipeline.methods.stopping import expected_tau

        post = pool.post
        assert post is not None
        rho = None
        if pool.human is not None:
            ok = ~np.isnan(pool.human)
            if ok.sum() >= 3:
                stat = spearmanr(post.mean[ok], pool.human[ok]).statistic
                rho = float(stat) if np.isfinite(stat) else None
        return {
            "round": r,
            "context_id": pool.context.context_id,
            "items": pool.n,
            "pairs": pool.pairs,
            "calls": pool.calls,
            "prompt_tokens": pool.prompt_tokens,
            "criterion": str(self.adaptive.stop.criterion) if self.adaptive.stop.criterion else None,
            "value": None if value is None or not math.isfinite(value) else float(value),
            "expected_tau": expected_tau(post) if pool.n >= 2 else 1.0,
            "max_stderr": float(np.sqrt(post.var.max())),
            "downweighted": post.downweighted,
            "beyond_cap": post.censored if post.beyond_cap is not None else None,
            "contradicted": 0 if pool.contradicted is None else int(pool.contradicted.sum()),
            "spearman": rho,
            "fit_seconds": fit_s,
            "select_seconds": select_s,
            "stopped": why,
        }

    def _judge(self, ctx, pools, given, prompt_plan, judge, store, rating_store) -> JudgeStats:
        """Judge the given pairs (and the warm start's absolute prompts) with the judge stage, skipping what the
        run folder holds."""
        contexts = round_contexts(pools, given, store, rating_store, prompt_plan)
        # one set of judge workers (engines started once) for every round
        stage = dataclasses.replace(self.judge_stage, given=given, keep_workers=True)
        out = stage.run(
            ctx,
            contexts=contexts,
            prompt_plan=prompt_plan,
            judge=judge,
            store=store,
            rating_store=rating_store,
        )
        return out["judge_stats"]


def _stable(text: str) -> int:
    import hashlib

    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def ordered_given(selected: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Both orderings of every selected pair (rows slot A, slot B)."""
    return {cid: np.concatenate([pairs, pairs[:, ::-1]]) for cid, pairs in selected.items()}


def given_from(
    chosen: pa.Table, pools: dict[str, PoolState], candidates_only: bool = True
) -> dict[str, np.ndarray]:
    """The chosen prompts of every round as candidate index rows per context."""
    out: dict[str, list[tuple[int, int]]] = {cid: [] for cid in pools}
    for cid, a, b in zip(
        *(chosen.column(c).to_pylist() for c in ("context_id", "cand_a", "cand_b")), strict=True
    ):
        pool = pools.get(cid)
        if pool is None or a not in pool.index or b not in pool.index:
            raise ConfigError(
                f"the run folder's adaptive rounds chose a pair ({cid}: {a} vs {b}) that is not in the input: it "
                "belongs to a different input; use a new paths.run_dir"
            )
        out[cid].append((pool.index[a], pool.index[b]))
    return {cid: np.array(rows, dtype=np.int64).reshape(-1, 2) for cid, rows in out.items()}


def round_contexts(
    pools: dict[str, PoolState],
    given: dict[str, np.ndarray],
    store: JudgmentStore,
    rating_store: RatingStore,
    plan: PromptPlan,
) -> pa.Table:
    """A CONTEXTS table for the judge stage: every context with prompts left among ``given`` (and its absolute
    prompts), with what the run folder already holds in ``done``."""
    from pipeline.contracts.keys import COMPARE

    judged = pa.concat_tables([store.judged(), rating_store.judged()])
    done: dict[str, set[tuple[str, ...]]] = {}
    for row in judged.to_pylist():
        done.setdefault(row["context_id"], set()).add(
            (row["mode"], row["attribute"], row["template_id"], row["cand_a"], row["cand_b"])
        )
    rows: dict[str, list] = {name: [] for name in CONTEXTS.names}
    template = plan.templates[0].id if plan.templates else ""
    for cid, pool in pools.items():
        mine = done.get(cid, set())
        ids = pool.context.candidate_ids
        left = 0
        for a, b in given.get(cid, np.zeros((0, 2), dtype=np.int64)).tolist():
            for attribute in plan.attributes:
                left += (COMPARE, attribute, template, ids[a], ids[b]) not in mine
        for rated in plan.absolute:
            for cand in ids:
                for attribute in plan.attributes:
                    if rated.asks(attribute):
                        left += (str(rated.mode), attribute, rated.id, cand, "") not in mine
        if not left:
            continue
        rows["context_id"].append(cid)
        rows["context"].append(pool.context.text)
        rows["candidate_ids"].append(list(ids))
        rows["texts"].append(list(pool.context.texts))
        rows["shard"].append(len(rows["shard"]))
        rows["n_prompts"].append(left)
        rows["done"].append(
            [
                dict(zip(("mode", "attribute", "template_id", "cand_a", "cand_b"), d, strict=True))
                for d in mine
            ]
        )
    return pa.table(rows, schema=CONTEXTS)


def round_pairs_table(
    r: int, selected: dict[str, np.ndarray], pools: dict[str, PoolState], attribute: str
) -> pa.Table:
    rows: dict[str, list] = {name: [] for name in ROUND_PAIRS.names}
    for cid, pairs in ordered_given(selected).items():
        ids = pools[cid].context.candidate_ids
        for a, b in pairs.tolist():
            rows["round"].append(r)
            rows["context_id"].append(cid)
            rows["attribute"].append(attribute)
            rows["cand_a"].append(ids[a])
            rows["cand_b"].append(ids[b])
    return pa.table(rows, schema=ROUND_PAIRS)


def write_round_pairs(folder: Path, r: int, table: pa.Table) -> None:
    """The round's chosen prompts, written atomically before any is judged."""
    target = folder / f"round-{r:05d}.parquet"
    tmp = target.with_suffix(".tmp")
    pq.write_table(table, tmp)
    tmp.replace(target)


def read_round_pairs(folder: Path) -> pa.Table:
    files = sorted(folder.glob("round-*.parquet"))
    if not files:
        return ROUND_PAIRS.empty_table()
    return check_schema(
        pa.concat_tables([pq.read_table(f) for f in files]), ROUND_PAIRS, "chosen pairs on disk"
    )


def write_rounds(folder: Path, records: list[dict]) -> None:
    target = folder / "rounds.parquet"
    tmp = target.with_suffix(".tmp")
    pq.write_table(pa.Table.from_pylist(records, schema=ROUNDS), tmp)
    tmp.replace(target)


def read_rounds(folder: Path) -> pa.Table:
    target = folder / "rounds.parquet"
    if not target.exists():
        return ROUNDS.empty_table()
    table = pq.read_table(target)
    for f in ROUNDS:  # a column added since the folder was written (nullable: "not recorded")
        if f.nullable and f.name not in table.column_names:
            table = table.append_column(f, pa.nulls(table.num_rows, f.type))
    return check_schema(table, ROUNDS, "adaptive rounds on disk")


def step_metrics(row: dict, n_contexts: int) -> dict[str, float]:
    """A round's metrics for MLflow (prefixed by the context when the run has several)."""
    prefix = "adaptive/" if n_contexts == 1 else f"adaptive/{row['context_id']}/"
    out = {
        f"{prefix}pairs": float(row["pairs"]),
        f"{prefix}calls": float(row["calls"]),
        f"{prefix}expected_tau": float(row["expected_tau"]),
        f"{prefix}max_stderr": float(row["max_stderr"]),
    }
    # null: a record of a version without the count, or no censor
    for name in ("downweighted", "beyond_cap", "contradicted"):
        if row.get(name) is not None:
            out[f"{prefix}{name}"] = float(row[name])
    if row["value"] is not None:
        out[f"{prefix}criterion"] = float(row["value"])
    if row["spearman"] is not None:
        out[f"{prefix}spearman"] = float(row["spearman"])
    return out


def combine_stats(stats: list[JudgeStats], prompts: int, seconds: float) -> JudgeStats:
    """The judge stage's numbers over every round."""
    if not stats:
        return JudgeStats(prompts, 0, seconds, float("nan"), float("nan"), 0, 0)
    judged = sum(s.judged_now for s in stats)
    judge_seconds = sum(s.seconds for s in stats)
    last = stats[-1]
    money = [s.money for s in stats if s.money is not None]
    return dataclasses.replace(
        last,
        prompts=prompts,
        judged_now=judged,
        seconds=seconds,
        rate=judged / judge_seconds if judge_seconds > 0 else float("nan"),
        rate_with_startup=judged / seconds if seconds > 0 else float("nan"),
        prompt_tokens=sum(s.prompt_tokens for s in stats),
        cached_tokens=sum(s.cached_tokens for s in stats),
        requests=sum(s.requests for s in stats),
        cached_replies=sum(s.cached_replies for s in stats),
        billed_prompt_tokens=sum(s.billed_prompt_tokens for s in stats),
        billed_completion_tokens=sum(s.billed_completion_tokens for s in stats),
        money=sum(money) if money else None,
        logprobs_read=sum(s.logprobs_read for s in stats),
        missing_logprobs=sum(s.missing_logprobs for s in stats),
        reused=sum(s.reused for s in stats),
    )
