"""The stages that turn judgments into scores: the reduce, the comparative and absolute scores, their combination,
the leaderboard, the correlations with people and the cost.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.config.enums import Calibrate, Correlation, Debias, Orderings
from pipeline.contracts.schemas import CORRELATIONS, RATING_FAILURES
from pipeline.methods.scorers import poe_logit
from pipeline.prompts.plan import PromptPlan
from pipeline.reporting.summary import metric_prefix
from pipeline.runtime.logs import FILE_ONLY
from pipeline.scoring.card_table import calibrate_comparisons
from pipeline.scoring.combine import combine_scores
from pipeline.scoring.comparative import leaves_out_contradictions, rank_and_join, score_comparisons
from pipeline.scoring.correlate import correlation_table
from pipeline.scoring.cost import assessment_table, cost_table
from pipeline.scoring.leaderboard import ITEM, MIN_UNITS, WIN_RATE, Board, leaderboard_table
from pipeline.scoring.ratings import rating_failures, rating_scores
from pipeline.scoring.reduce import reduce_judgments
from pipeline.stages import ports
from pipeline.stages.base import Stage, StageContext

log = logging.getLogger("pipeline")


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
    # scoring.calibrate: the comparisons' probabilities as the judge gives them, or after a temperature fitted to
    # people's preferences and cross-fitted over contexts (the comparisons table keeps the judge's own).
    calibrate: Calibrate = Calibrate.none
    # scoring.options: per method, its own settings (a plugin scorer's)
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    name = "score"
    reads = (ports.COMPARISONS, ports.CANDIDATES, ports.HUMAN_SCORES)
    writes = (ports.SCORES, ports.UNSCORED)

    def run(
        self, ctx: StageContext, *, comparisons: pa.Table, candidates: pa.Table, human_scores: pa.Table
    ) -> dict[str, Any]:
        frame = pl.from_arrow(comparisons)
        if self.calibrate == Calibrate.temperature:
            frame = calibrate_comparisons(frame, candidates, pl.from_arrow(human_scores))
            log.info(
                "scoring with probabilities calibrated to people's preferences (cross-fitted temperature)"
            )
        scored = score_comparisons(
            frame,
            candidates,
            pl.from_arrow(human_scores),
            list(self.methods),
            self.debias,
            self.logit,
            self.options,
        )
        ctx.metrics["scoring/unscored_groups"] = float(len(scored.unscored))
        for method in leaves_out_contradictions(list(self.methods)):
            ctx.metrics[f"scoring/{method}_contradicted"] = float(scored.contradicted)
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
            multi_judge = len({k[0] for k in combined.estimates}) > 1
            multi_template = len({k[2] for k in combined.estimates}) > 1
            for (judge, attribute, template_id, method), est in combined.estimates.items():
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
                prefix = metric_prefix(judge, attribute, template_id, multi_judge, multi_template)
                ctx.metrics[f"{prefix}/{method}/weight"] = float(est.weight)
                ctx.metrics[f"{prefix}/{method}/slope"] = float(est.slope)
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
    board: Board

    name = "leaderboard"
    reads = (ports.COMPARISONS, ports.SCORES, ports.CANDIDATES, ports.HUMAN_SCORES)
    writes = (ports.LEADERBOARD,)

    def run(
        self,
        ctx: StageContext,
        *,
        comparisons: pa.Table,
        scores: pa.Table,
        candidates: pa.Table,
        human_scores: pa.Table,
    ) -> dict[str, Any]:
        board = leaderboard_table(
            pl.from_arrow(comparisons),
            pl.from_arrow(scores),
            candidates,
            list(self.methods),
            self.board,
            pl.from_arrow(human_scores),
        )
        multi_judge, multi_template = board["judge"].n_unique() > 1, board["template_id"].n_unique() > 1
        for r in board.iter_rows(named=True):
            if r["metric"] == WIN_RATE:
                group = metric_prefix(
                    r["judge"], r["attribute"], r["template_id"], multi_judge, multi_template
                )
                prefix = f"leaderboard/{group}/{r['model']}"
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
                self.board.rounds,
            )
            if units < MIN_UNITS:
                log.warning(
                    "leaderboard: every model has fewer than %d %s (at most %d), too few for a bootstrap interval "
                    "that holds its level: no model has one, the models' order is the estimate alone and every model "
                    "is tied with every other",
                    MIN_UNITS,
                    "items in the one input" if pooled else "inputs",
                    units,
                )
        return {"leaderboard": board}


@dataclass(frozen=True)
class Correlate(Stage):
    """Agreement of every method's scores with the human scores: Spearman, Pearson and Kendall per context
    (averaged), pooled and system-level (per-system means, where the candidates name their systems), and pairwise
    accuracy."""

    correlation: Correlation

    name = "correlate"
    reads = (ports.SCORES, ports.CANDIDATES)
    writes = (ports.CORRELATIONS,)

    def run(self, ctx: StageContext, *, scores: pa.Table, candidates: pa.Table) -> dict[str, Any]:
        if self.correlation == Correlation.off:
            return {"correlations": CORRELATIONS.empty_table()}
        systems = pl.from_arrow(candidates.select(["context_id", "candidate_id", "system"])).drop_nulls(
            "system"
        )
        return {"correlations": correlation_table(pl.from_arrow(scores), systems)}


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
        from pipeline.scoring.ratings import absolute_methods

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
