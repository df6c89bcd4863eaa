"""The report writes what it can: a figure that cannot be drawn is a warning naming it and a line of the summary,
never the end of a finished run (the issue's SummEval run behind an API judged all 480 prompts and then died in
matplotlib on an error bar). The tables come from the product's own stages on a simulated world
(:mod:`tests.invariance.world`); the failing figure is injected (a fault injection: no real input makes matplotlib
fail now that error bars are clipped at 0)."""

from __future__ import annotations

import logging

import pytest

from pipeline.contracts.schemas import LEFT_OUT
from pipeline.contracts.stats import JudgeStats
from pipeline.data.records import InputReport
from pipeline.reporting import plots
from pipeline.stages.reporting import Report
from pipeline.testing.stages import Context
from tests.invariance.test_invariance import base
from tests.invariance.world import Judge, World, run_world


@pytest.fixture(scope="module")
def tables():
    world = World(sizes=(3, 3, 3), models=3, judges=(Judge(),), generate=True, human=False, seed=2, rounds=10)
    return run_world(world, base(), ("win_ratio", "poe_gaussian")).tables


def report_inputs(tables) -> dict:
    names = (
        "scores", "correlations", "position_bias", "unscored", "cost", "assessment", "rating_failures",
        "leaderboard", "reasons", "judge_card", "judge_reliability", "meta_evaluation", "labels", "trust",
        "accepted", "risk_coverage", "ppi_leaderboard",
    )  # fmt: skip
    stats = JudgeStats(
        prompts=54,
        judged_now=54,
        seconds=1.0,
        rate=54.0,
        rate_with_startup=54.0,
        prompt_tokens=10,
        cached_tokens=0,
    )
    return {
        # a world without trust leaves its tables out: the report reads them empty, as a run does
        **{p.name: p.schema.empty_table() for p in Report.reads if p.optional},
        **{n: tables[n].to_arrow() for n in names if n in tables},
        "input_report": InputReport(),
        "judge_stats": stats,
        "left_out": LEFT_OUT.empty_table(),
    }


def test_a_figure_that_cannot_be_drawn_is_a_warning_and_the_report_is_written(
    tables, tmp_path, monkeypatch, caplog
):
    def refuses(*_args, **_kwargs):
        raise ValueError("'xerr' must not contain negative values")

    monkeypatch.setattr(plots, "leaderboard", refuses)
    ctx = Context(tmp_path)
    with caplog.at_level(logging.WARNING, logger="pipeline"):
        out = Report(plots=True, plot_method="poe_gaussian", full_leaderboard=True).run(
            ctx, **report_inputs(tables)
        )
    problem = "figure plots/leaderboard.png could not be drawn (ValueError: 'xerr' must not contain negative values)"
    assert problem in out["summary"] and problem in (tmp_path / "summary.txt").read_text()
    assert any(problem in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
    assert ctx.metrics["report/figures_not_drawn"] == 1.0
    assert (tmp_path / "leaderboard.csv").exists() and (tmp_path / "scores.csv").exists()
    drawn = {p.name for p in (tmp_path / "plots").iterdir()}
    assert "leaderboard.png" not in drawn and {"position_bias.png", "judge_card.png"} <= drawn


def test_every_figure_draws_from_the_tables_of_a_run(tables, tmp_path):
    ctx = Context(tmp_path)
    out = Report(plots=True, plot_method="poe_gaussian", full_leaderboard=True).run(
        ctx, **report_inputs(tables)
    )
    assert "could not be drawn" not in out["summary"] and "report/figures_not_drawn" not in ctx.metrics
    assert {"leaderboard.png", "position_bias.png", "judge_card.png"} <= {
        p.name for p in (tmp_path / "plots").iterdir()
    }
