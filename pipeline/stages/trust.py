"""The stages of trust with a guarantee (``trust``, off unless enabled): people's labels drawn with known chances,
the judges' verdicts certified in a cascade (the rest escalated to people), and the prediction-powered leaderboard
(:mod:`pipeline.scoring.trust_table`, :mod:`pipeline.scoring.ppi_board`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.config.enums import LabelSample, LabelSource
from pipeline.config.trust import TrustConfig
from pipeline.contracts.errors import UserError
from pipeline.scoring.ppi_board import ppi_board
from pipeline.scoring.trust_table import ESCALATED, cascade_jurors, certify, data_labels, review_labels
from pipeline.stages import ports
from pipeline.stages.base import Stage, StageContext
from pipeline.storage.csv import read_csv

log = logging.getLogger("pipeline")

# The review's files trust reads (pipeline.review: the answers with their items, every item's chance).
REVIEW_LABELS, REVIEW_INCLUSION = "labels.csv", "inclusion.parquet"


def uniform(labels: pl.DataFrame) -> bool:
    """Whether every pair of the labels' population had the same chance of being drawn (what certification needs)."""
    inclusion = labels["inclusion"].to_numpy()
    return bool(len(inclusion)) and bool(np.allclose(inclusion, inclusion[0], rtol=1e-9, atol=0.0))


@dataclass(frozen=True)
class CheckTrust(Stage):
    """Before anything is judged: the cascade names only the run's judges (``judge`` or ``judge/template``) and
    people's labels can come from where ``trust.labels`` says (labels=data: the data has human scores)."""

    trust: TrustConfig
    templates: tuple[str, ...] = ()

    name = "check_trust"
    reads = (ports.JUDGES, ports.HUMAN_SCORES)

    def run(self, ctx: StageContext, *, judges: tuple, human_scores: pa.Table) -> dict[str, Any]:
        for name in self.trust.cascade or ():
            judge, _, template = name.rpartition("/") if "/" in name else (name, "", "")
            if name not in judges and not (judge in judges and template in self.templates):
                raise UserError(
                    f"config trust.cascade names {name!r}, which is none of the run's judges {list(judges)} (a "
                    f"judge's name, or judge/template with a template of {list(self.templates)})"
                )
        if self.trust.labels == LabelSource.data and not human_scores.num_rows:
            raise UserError(
                "trust.labels=data: the data has no human scores to calibrate the judges on; give them, or review "
                "a sample of the run and calibrate on the answers (trust.labels=review)"
            )
        return {}


@dataclass(frozen=True)
class DrawLabels(Stage):
    """Draw the pairs people label (from the data's human scores, uniformly or where the judge is unsure), or read
    the blind review's answers, each pair with its probability of being drawn."""

    trust: TrustConfig
    # the prompt's templates in order (a judge's templates in the cascade)
    templates: tuple[str, ...] = ()

    name = "draw_labels"
    reads = (ports.COMPARISONS, ports.CANDIDATES, ports.HUMAN_SCORES, ports.JUDGES)
    writes = (ports.LABELS,)

    def run(
        self,
        ctx: StageContext,
        *,
        comparisons: pa.Table,
        candidates: pa.Table,
        human_scores: pa.Table,
        judges: tuple,
    ) -> dict[str, Any]:
        comps = pl.from_arrow(comparisons)
        if self.trust.labels == LabelSource.review:
            labels = self._review(ctx, comps)
        else:
            jurors = cascade_jurors(comps, judges, self.templates, self.trust.cascade)
            labels = data_labels(
                comps,
                candidates,
                pl.from_arrow(human_scores),
                self.trust.n,
                self.trust.sample == LabelSample.active,
                self.trust.seed,
                jurors[0] if jurors else None,
            )
        labelled = labels["preference"].is_not_null().sum()
        if not labelled:
            raise UserError(
                "trust: no pair of the run's comparisons has people's labels, so nothing can be calibrated "
                + (
                    "(trust.labels=data: the data has no human scores for the attributes judged; give them, or "
                    "review a sample: trust.labels=review)"
                    if self.trust.labels == LabelSource.data
                    else "(the review has no answers)"
                )
            )
        ctx.metrics["trust/labels"] = float(labelled)
        ctx.metrics["trust/population"] = float(labels.height)
        log.info(
            "trust: %d pair(s) labelled by people (%s, %s sample) of the %d pair(s) they were drawn from",
            labelled,
            self.trust.labels,
            "uniform" if uniform(labels) else "weighted",
            labels.height,
        )
        return {"labels": labels}

    def _review(self, ctx: StageContext, comparisons: pl.DataFrame) -> pl.DataFrame:
        folder = (
            Path(self.trust.review_folder) if self.trust.review_folder else ctx.planned_run_dir / "review"
        )
        answers, every = folder / REVIEW_LABELS, folder / REVIEW_INCLUSION
        if not answers.exists():
            raise UserError(
                f"trust.labels=review: no review answers at {answers}: review a random sample of the run "
                "(make review RUN=<run folder> ARGS='--strategy random'), then `make review-report` writes them"
            )
        frame = read_csv(answers, {"inclusion": pl.Float64})  # ids as the run wrote them: text
        return review_labels(frame, pl.read_parquet(every) if every.exists() else None, comparisons)


@dataclass(frozen=True)
class Certify(Stage):
    """Certify each judge of the cascade on people's labels: the verdicts it keeps agree with people at least 1 - alpha
    with probability 1 - delta; what no judge keeps is escalated to people."""

    trust: TrustConfig
    templates: tuple[str, ...] = ()

    name = "certify"
    reads = (ports.COMPARISONS, ports.LABELS, ports.CANDIDATES, ports.JUDGES)
    writes = (ports.TRUST, ports.ACCEPTED, ports.RISK_COVERAGE)

    def run(
        self,
        ctx: StageContext,
        *,
        comparisons: pa.Table,
        labels: pa.Table,
        candidates: pa.Table,
        judges: tuple,
    ) -> dict[str, Any]:
        frame, comps = pl.from_arrow(labels), pl.from_arrow(comparisons)
        if not uniform(frame):
            log.warning(
                "trust: the labels were not drawn uniformly (an active sample): they power the leaderboards but "
                "certify no threshold, which needs a uniform sample (trust.sample=random, or a random review)"
            )
            return {p.name: p.schema.empty_table() for p in self.writes}  # type: ignore[union-attr]
        jurors = cascade_jurors(comps, judges, self.templates, self.trust.cascade)
        found = certify(comps, frame, candidates, jurors, self.trust.alpha, self.trust.delta)
        for row in found.trust.iter_rows(named=True):
            prefix = f"trust/{row['attribute']}/{row['judge']}/{row['template_id']}"
            ctx.metrics[f"{prefix}/coverage"] = float(row["coverage"])
            ctx.metrics[f"{prefix}/bound"] = float(row["bound"])
            ctx.metrics[f"{prefix}/certified"] = float(row["certified"])
            if row["agreement"] is not None:
                ctx.metrics[f"{prefix}/agreement"] = float(row["agreement"])
        escalated = found.accepted.filter(pl.col("accepted_by") == ESCALATED).height
        ctx.metrics["trust/escalated"] = float(escalated)
        ctx.metrics["trust/kept"] = float(found.accepted.height - escalated)
        return {"trust": found.trust, "accepted": found.accepted, "risk_coverage": found.curve}


@dataclass(frozen=True)
class PPIBoard(Stage):
    """Rank the models with people's labels and the judges' verdicts together: win rates and Bradley-Terry
    coefficients with prediction-powered (PPI++) intervals, beside people's alone."""

    level: float = 0.90

    name = "ppi_leaderboard"
    reads = (ports.COMPARISONS, ports.CANDIDATES, ports.LABELS)
    writes = (ports.PPI_LEADERBOARD,)

    def run(
        self, ctx: StageContext, *, comparisons: pa.Table, candidates: pa.Table, labels: pa.Table
    ) -> dict[str, Any]:
        # in the workflow only with trust on, after draw_labels, which refuses a run without people's labels
        board = ppi_board(pl.from_arrow(comparisons), candidates, pl.from_arrow(labels), self.level)
        for row in board.filter(pl.col("source") == "ppi").iter_rows(named=True):
            prefix = (
                f"ppi/{row['attribute']}/{row['judge']}/{row['template_id']}/{row['model']}/{row['metric']}"
            )
            for name in ("estimate", "lower", "upper", "effective_labels"):
                if row[name] is not None:
                    ctx.metrics[f"{prefix}/{name}"] = float(row[name])
        return {"ppi_leaderboard": board}
