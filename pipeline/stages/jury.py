"""The jury stage: every juror (judge, template) of the run scored together (``scoring.jury``,
:mod:`pipeline.scoring.jury_table`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline.scoring.comparative import rank_and_join
from pipeline.scoring.jury_table import juror_name, jury_tables
from pipeline.stages import ports
from pipeline.stages.base import Stage, StageContext

log = logging.getLogger("pipeline")


@dataclass(frozen=True)
class Jury(Stage):
    """Score the run's jurors together: the jury's scores (``jury_poe``, ``jury_majority``, ``jury_mean``) join
    the scores table (so they are correlated, costed and drawn like any method), each juror's line and share
    (``jurors``) and every two jurors' agreement (``juror_agreement``). In the workflow with ``scoring.jury``."""

    name = "jury"
    reads = (ports.JUDGMENTS, ports.SCORES, ports.HUMAN_SCORES)
    writes = (ports.SCORES, ports.JURORS, ports.JUROR_AGREEMENT)

    def run(
        self, ctx: StageContext, *, judgments: pa.Table, scores: pa.Table, human_scores: pa.Table
    ) -> dict[str, Any]:
        if judgments.num_rows == 0:
            return {
                "scores": scores,
                "jurors": ports.JURORS.schema.empty_table(),
                "juror_agreement": ports.JUROR_AGREEMENT.schema.empty_table(),
            }
        tables = jury_tables(pl.from_arrow(judgments))
        for attribute, why in tables.skipped:
            ctx.metrics[f"jury/{attribute}/skipped"] = 1.0
            log.warning("jury (%s): no jury scores: %s", attribute, why)
        ranked = rank_and_join(tables.scores, pl.from_arrow(human_scores))
        merged = pl.concat([pl.from_arrow(scores).select(ports.SCORES.schema.names), ranked])
        for row in tables.jurors.iter_rows(named=True):
            name = juror_name(row["judge"], row["template_id"])
            ctx.metrics[f"jury/{row['attribute']}/{name}/share"] = float(row["share"])
            log.info(
                "jury (%s): %s scale %.3g, bias %+.3g, noise sd %.3g, share %.1f%% of the jury's information",
                row["attribute"],
                name,
                row["scale"],
                row["bias"],
                row["sigma2"] ** 0.5,
                100 * row["share"],
            )
        for row in tables.agreement.iter_rows(named=True):
            log.info(
                "jury (%s): %s and %s agree on %.0f%% of %d pairs (kappa %.3f), Spearman of their scores %.3f",
                row["attribute"],
                row["juror_a"],
                row["juror_b"],
                100 * row["raw_agreement"],
                row["pairs"],
                row["kappa"],
                row["spearman"],
            )
        return {"scores": merged, "jurors": tables.jurors, "juror_agreement": tables.agreement}
