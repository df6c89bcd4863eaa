"""The stages that write the report: the summary, CSV copies and plots; the adaptive rounds' part."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline.contracts.keys import COMPARE
from pipeline.contracts.stats import JudgeStats
from pipeline.data.validate import InputReport
from pipeline.reporting import plots
from pipeline.reporting.card import card_figure, card_text, rank_changes
from pipeline.reporting.summary import absolute_text, mlflow_metrics, summary_text
from pipeline.stages import ports
from pipeline.stages.base import Stage, StageContext


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
        ports.JUDGE_CARD,
        ports.JUDGE_RELIABILITY,
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
    ) -> dict[str, Any]:
        from pipeline.reporting.summary import leaderboard_line, leaderboard_text

        run_dir = ctx.run_dir
        board = pl.from_arrow(leaderboard)
        card = pl.from_arrow(judge_card)
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
            "judge_card.csv": card if card.height else None,
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
            changed = rank_changes(board)
            summary += "\n" + changed if changed else ""
        if card.height:
            summary += "\n\n" + card_text(card)
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
            if card.height:
                card_figure(card, pl.from_arrow(judge_reliability), plot_dir / "judge_card.png")
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
        from pipeline.reporting.rounds import ranking_table, ranking_text, rounds_text

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
