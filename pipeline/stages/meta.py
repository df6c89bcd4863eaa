"""The meta-evaluation stage: every judge measured as the judge benchmarks measure it, where the human scores are an
objective label (:mod:`pipeline.scoring.meta_table`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.contracts.card_schema import META_SHARES
from pipeline.scoring.meta_table import meta_evaluation_table
from pipeline.stages import ports
from pipeline.stages.base import Stage, StageContext

log = logging.getLogger("pipeline")

# The measures logged to MLflow (meta/<attribute>/<judge>/<template>/<category or all>/<measure>).
LOGGED = ("n_pairs", *META_SHARES)
# The name of every category together, in metric names and the summary.
ALL = "all"


@dataclass(frozen=True)
class MetaEvaluate(Stage):
    """Measure every judge the way the judge benchmarks do, on the pairs whose human scores are an objective label
    (one right candidate): JudgeBench's accuracy with an interval and the judges' rank, LLMBar's accuracy of each
    ordering, their mean and the positional agreement, per category and over all."""

    # The interval's level (leaderboard.level): Clopper-Pearson's exact interval of each judge's accuracy.
    level: float = 0.90

    name = "meta_evaluate"
    reads = (ports.COMPARISONS, ports.CANDIDATES, ports.HUMAN_SCORES)
    writes = (ports.META_EVALUATION,)

    def run(
        self, ctx: StageContext, *, comparisons: pa.Table, candidates: pa.Table, human_scores: pa.Table
    ) -> dict[str, Any]:
        table = meta_evaluation_table(
            pl.from_arrow(comparisons),
            candidates,
            pl.from_arrow(human_scores),
            self.level,
        )
        for row in table.iter_rows(named=True):
            prefix = f"meta/{row['attribute']}/{row['judge']}/{row['template_id']}/{row['category'] or ALL}"
            for measure in LOGGED:
                value = row[measure]
                if value is not None and np.isfinite(value):
                    ctx.metrics[f"{prefix}/{measure}"] = float(value)
        if table.height:
            overall = table.filter(pl.col("category").is_null())
            log.info(
                "meta-evaluation on the objective pairs of %s: %d judge(s) and template(s), %d pair(s)",
                ", ".join(overall["attribute"].unique(maintain_order=True).to_list()),
                overall.height,
                int(overall["n_pairs"].max()),
            )
        return {"meta_evaluation": table}
