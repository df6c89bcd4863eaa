"""The judge's report card: how far to trust each judge, attribute and template (:mod:`pipeline.scoring.card_table`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.contracts.stats import JudgeStats
from pipeline.reporting.card_report import not_informative
from pipeline.scoring.card_table import card_tables
from pipeline.scoring.leaderboard import Board
from pipeline.stages import ports
from pipeline.stages.base import Stage, StageContext

log = logging.getLogger("pipeline")

# The card's measures logged to MLflow (card/<attribute>/<judge>/<template>/<measure>).
LOGGED = (
    "accuracy",
    "ece",
    "brier",
    "log_loss",
    "temperature",
    "ece_calibrated",
    "position_consistency",
    "longer_share_judge",
    "longer_share_people",
    "length_coef",
    "self_preference",
    "benchmark_accuracy",
    "ordering_accuracy",
    "positional_agreement",
    "models_spearman",
    "models_kendall",
)


@dataclass(frozen=True)
class Card(Stage):
    """Each judge's report card per attribute and template: calibration of its P(i beats j) against people's
    preferences (and after a cross-fitted temperature), position consistency, preference for the longer text,
    self-preference, agreement with people, and where the human scores are an objective label the judge benchmarks'
    numbers; the reliability diagrams."""

    # Per judge, the systems (generators) that run on its own model: its self-preference is measured on them.
    own_systems: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The false-alarm rate of the test of "no signal" (scoring.signal_alpha).
    alpha: float = 0.05
    # The leaderboard's bootstrap (its rounds give the interval of the judge's and people's agreement across models).
    board: Board = Board()

    name = "card"
    reads = (
        ports.COMPARISONS,
        ports.POSITION_BIAS,
        ports.CANDIDATES,
        ports.HUMAN_SCORES,
        ports.CORRELATIONS,
        ports.META_EVALUATION,
        ports.JUDGE_STATS,
    )
    writes = (ports.JUDGE_CARD, ports.JUDGE_RELIABILITY)

    def run(
        self,
        ctx: StageContext,
        *,
        comparisons: pa.Table,
        position_bias: pa.Table,
        candidates: pa.Table,
        human_scores: pa.Table,
        correlations: pa.Table,
        meta_evaluation: pa.Table,
        judge_stats: JudgeStats,
    ) -> dict[str, Any]:
        tables = card_tables(
            pl.from_arrow(comparisons),
            pl.from_arrow(position_bias),
            candidates,
            pl.from_arrow(human_scores),
            pl.from_arrow(correlations),
            self.own_systems,
            meta=pl.from_arrow(meta_evaluation),
            served=judge_stats.models_by_judge(),
            alpha=self.alpha,
            board=self.board,
        )
        for row in tables.card.iter_rows(named=True):
            where = f"{row['attribute']}/{row['judge']}/{row['template_id']}"
            ctx.metrics[f"quality/{where}/informative"] = float(row["informative"])
            ctx.metrics[f"quality/{where}/signal_p_value"] = row["signal_p_value"]
            if row["signal"] is not None:
                ctx.metrics[f"quality/{where}/signal"] = row["signal"]
            if not row["informative"]:
                log.warning(not_informative(row))
            prefix = f"card/{where}"
            for measure in LOGGED:
                value = row[measure]
                if value is not None and np.isfinite(value):
                    ctx.metrics[f"{prefix}/{measure}"] = float(value)
        return {"judge_card": tables.card, "judge_reliability": tables.reliability}
