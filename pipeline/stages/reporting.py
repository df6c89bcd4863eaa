"""The stages that write the report: the summary, CSV copies and plots; the adaptive rounds' part."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline.contracts.keys import COMPARE
from pipeline.contracts.stats import JudgeStats
from pipeline.data.records import InputReport
from pipeline.reporting import plots
from pipeline.reporting.card_report import (
    card_figure,
    card_text,
    rank_changes,
    signal_lines,
    uninformative,
)
from pipeline.reporting.meta_report import left_out_text, meta_text
from pipeline.reporting.summary import absolute_text, mlflow_metrics, summary_text
from pipeline.reporting.trust_report import ppi_text, risk_coverage_figure, trust_text
from pipeline.stages import ports
from pipeline.stages.base import Stage, StageContext
from pipeline.storage.csv import write_csv


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
    # The prediction-powered leaderboard was asked for (trust.enabled and trust.ppi): the summary says why it is empty.
    ppi: bool = False

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
        ports.JUDGE_CARD,
        ports.JUDGE_RELIABILITY,
        ports.META_EVALUATION,
        ports.LEFT_OUT,
        ports.LABELS,
        ports.TRUST,
        ports.ACCEPTED,
        ports.RISK_COVERAGE,
        ports.PPI_LEADERBOARD,
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
        judge_card: pa.Table,
        judge_reliability: pa.Table,
        meta_evaluation: pa.Table,
        left_out: pa.Table,
        labels: pa.Table,
        trust: pa.Table,
        accepted: pa.Table,
        risk_coverage: pa.Table,
        ppi_leaderboard: pa.Table,
    ) -> dict[str, Any]:
        run_dir = ctx.run_dir
        t = Frames(
            scores=pl.from_arrow(scores),
            correlations=pl.from_arrow(correlations),
            bias=pl.from_arrow(position_bias),
            cost=pl.from_arrow(cost),
            assessment=pl.from_arrow(assessment),
            failures=pl.from_arrow(rating_failures),
            board=pl.from_arrow(leaderboard),
            card=pl.from_arrow(judge_card),
            reasons=pl.from_arrow(reasons),
            unscored=pl.from_arrow(unscored),
            meta=pl.from_arrow(meta_evaluation),
            left_out=pl.from_arrow(left_out),
            labels=pl.from_arrow(labels),
            trust=pl.from_arrow(trust),
            accepted=pl.from_arrow(accepted),
            curve=pl.from_arrow(risk_coverage),
            ppi=pl.from_arrow(ppi_leaderboard),
        )
        for name, frame in t.csv_files().items():
            ctx.files.append(write_csv(frame, run_dir / name))
        counts = {k: float(v) for k, v in input_report.counts().items()}
        ctx.metrics.update(mlflow_metrics(t.correlations, t.bias, counts))
        summary = self._summary(t, judge_stats)
        if self.plots:
            plot_dir = run_dir / "plots"
            plot_dir.mkdir(exist_ok=True)
            problems = self._plots(t, pl.from_arrow(judge_reliability), plot_dir)
            ctx.files.append(plot_dir)
            summary = with_figure_problems(summary, problems, ctx)
        (run_dir / "summary.txt").write_text(summary + "\n")
        ctx.files.append(run_dir / "summary.txt")
        return {"summary": summary}

    def _summary(self, t: Frames, judge_stats: JudgeStats) -> str:
        """The summary: correlations and position bias, the approaches side by side where there is more than one,
        the leaderboard (and where length control changes it), the judges measured as the judge benchmarks measure
        them, what was left out, the judge's card, the reasons."""
        from pipeline.reporting.summary import leaderboard_line, leaderboard_text

        noise = uninformative(t.card)
        summary = "\n".join([*signal_lines(t.card), ""]) if t.card.height else ""
        summary += summary_text(t.correlations, t.bias, judge_stats)
        ties = t.bias.height > 0 and t.bias["p_tie"].max() > 0
        if t.absolute or ties:
            shown = (t.assessment, t.cost) if t.absolute else (t.assessment.clear(), t.cost.clear())
            summary += "\n\n" + absolute_text(*shown, t.failures, t.bias)
        if t.board.height:
            summary += "\n\n" + (
                leaderboard_text(t.board, self.level, noise)
                if self.full_leaderboard
                else leaderboard_line(t.board, noise, t.card)
            )
            changed = rank_changes(t.board, noise)
            summary += "\n" + changed if changed else ""
        if t.meta.height:
            summary += "\n\n" + meta_text(t.meta, self.level)
        if t.left_out.height:
            summary += "\n\n" + left_out_text(t.left_out)
        trusted = trust_text(t.trust, t.accepted, t.labels)
        if trusted:
            summary += "\n\n" + trusted
        if t.ppi.height:
            summary += "\n\n" + ppi_text(t.ppi, self.level)
        elif self.ppi and t.labels.height:
            summary += (
                "\n\nno prediction-powered leaderboard: no comparison of the run is a game (a pair of outputs of two "
                "different models, as the candidates' system names them)"
            )
        if t.card.height:
            summary += "\n\n" + card_text(t.card)
        if t.reasons.height:
            first = t.reasons.row(0, named=True)
            summary += (
                f"\n\nthe judge's reasons for {t.reasons.height} comparison(s) are in reasons.csv, e.g. "
                f"{first['decision']} over the other ({first['why']}): {first['reason'][:160]!r}"
            )
        return summary

    def _plots(self, t: Frames, reliability: pl.DataFrame, plot_dir: Path) -> list[str]:
        """Every figure the tables allow, each drawn apart (:func:`plots.draw`): what could not be drawn."""
        figures: list[tuple[str, Any, tuple[Any, ...]]] = []
        if t.scores.filter(pl.col("method") == self.plot_method).height:
            figures.append(("predicted_vs_human.png", plots.predicted_vs_human, (t.scores, self.plot_method)))
        if t.bias.height:
            figures.append(("position_bias.png", plots.position_bias, (t.bias,)))
        if t.correlations.height:
            figures.append(
                ("spearman_by_method.png", plots.correlation_by_method, (t.correlations, "spearman"))
            )
        if t.absolute and t.assessment.height:
            figures.append(("spearman_by_mode.png", plots.spearman_by_mode, (t.assessment,)))
        if t.board.height:
            figures.append(("leaderboard.png", plots.leaderboard, (t.board,)))
        if t.card.height:
            figures.append(("judge_card.png", card_figure, (t.card, reliability)))
        if t.curve.height:
            figures.append(("risk_coverage.png", risk_coverage_figure, (t.curve, t.trust)))
        problems = [plots.draw(plot_dir / name, figure, *args) for name, figure, args in figures]
        return [p for p in problems if p]


def with_figure_problems(summary: str, problems: list[str], ctx: StageContext) -> str:
    """The summary with a line per figure that could not be drawn, counted in the run's metrics."""
    if not problems:
        return summary
    ctx.metrics["report/figures_not_drawn"] = ctx.metrics.get("report/figures_not_drawn", 0.0) + len(problems)
    return summary + "\n\n" + "\n".join(problems)


@dataclass(frozen=True)
class Frames:
    """The tables the report reads, as Polars frames."""

    scores: pl.DataFrame
    correlations: pl.DataFrame
    bias: pl.DataFrame
    cost: pl.DataFrame
    assessment: pl.DataFrame
    failures: pl.DataFrame
    board: pl.DataFrame
    card: pl.DataFrame
    reasons: pl.DataFrame
    unscored: pl.DataFrame
    meta: pl.DataFrame
    left_out: pl.DataFrame
    labels: pl.DataFrame
    trust: pl.DataFrame
    accepted: pl.DataFrame
    curve: pl.DataFrame
    ppi: pl.DataFrame

    @property
    def absolute(self) -> bool:
        """Whether the run rated candidates on their own (more than one approach to compare)."""
        return self.cost.filter(pl.col("mode") != COMPARE).height > 0

    def csv_files(self) -> dict[str, pl.DataFrame]:
        """The CSV copies written beside the summary (the tables that have rows)."""
        written = {
            "scores.csv": self.scores.sort(["attribute", "template_id", "method", "context_id", "rank"]),
            "position_bias.csv": self.bias,
            "correlations.csv": self.correlations,
            "unscored.csv": self.unscored,
            "cost.csv": self.cost,
            "assessment.csv": self.assessment if self.absolute else self.assessment.clear(),
            "rating_failures.csv": self.failures,
            "leaderboard.csv": self.board,
            "reasons.csv": self.reasons,
            "judge_card.csv": self.card,
            "meta_evaluation.csv": self.meta,
            "left_out.csv": self.left_out,
            "labels.csv": self.labels,
            "trust.csv": self.trust,
            "accepted.csv": self.accepted,
            "ppi_leaderboard.csv": self.ppi,
        }
        return {name: frame for name, frame in written.items() if name == "scores.csv" or frame.height}


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
    reads = (ports.ROUNDS, ports.SCORES, ports.SUMMARY, ports.JUDGE_CARD)
    writes = (ports.SUMMARY,)

    def run(
        self, ctx: StageContext, *, rounds: pa.Table, scores: pa.Table, summary: str, judge_card: pa.Table
    ) -> dict[str, Any]:
        from pipeline.reporting.rounds_report import ranking_table, ranking_text, rounds_text

        run_dir = ctx.run_dir
        frame = pl.from_arrow(rounds)
        ranking = ranking_table(pl.from_arrow(scores), self.method, self.level)
        parts = [
            summary,
            rounds_text(frame),
            ranking_text(ranking, self.method, self.level, uninformative(pl.from_arrow(judge_card))),
        ]
        summary = "\n\n".join(p for p in parts if p)
        for name, table in (("rounds.csv", frame), ("ranking.csv", ranking)):
            if table.height:
                ctx.files.append(write_csv(table, run_dir / name))
        if self.plots:
            plot_dir = run_dir / "plots"
            plot_dir.mkdir(exist_ok=True)
            problems = []
            if frame.height:
                problems.append(plots.draw(plot_dir / "rounds.png", plots.rounds_curve, frame))
            if ranking.height:
                problems.append(
                    plots.draw(plot_dir / "ranking.png", plots.ranking, ranking, self.method, self.level)
                )
            summary = with_figure_problems(summary, [p for p in problems if p], ctx)
        (run_dir / "summary.txt").write_text(summary + "\n")
        return {"summary": summary}
