"""Open a finished run's folder: its tables as Polars frames (for notebooks and scripts)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import polars as pl


@dataclass
class RunTables:
    run_dir: Path
    config: dict
    judgments: pl.DataFrame
    comparisons: pl.DataFrame
    position_bias: pl.DataFrame
    scores: pl.DataFrame
    correlations: pl.DataFrame
    candidates: pl.DataFrame
    human_scores: pl.DataFrame
    # Absolute assessment (empty frames for a comparative-only run).
    ratings: pl.DataFrame
    cost: pl.DataFrame
    assessment: pl.DataFrame
    # Models (the candidates' system) with intervals, the judge's reasons, generated outputs (empty if none).
    leaderboard: pl.DataFrame
    reasons: pl.DataFrame
    generations: pl.DataFrame
    # The judge's report card and its reliability diagrams (empty for runs made before them).
    judge_card: pl.DataFrame
    judge_reliability: pl.DataFrame


def load_run(run_dir: Path) -> RunTables:
    tables = run_dir / "tables"

    def read(name: str) -> pl.DataFrame:
        path = tables / f"{name}.parquet"
        return pl.read_parquet(path) if path.exists() else pl.DataFrame()

    return RunTables(
        run_dir=run_dir,
        config=json.loads((run_dir / "config.json").read_text()),
        judgments=read("judgments"),
        comparisons=read("comparisons"),
        position_bias=read("position_bias"),
        scores=read("scores"),
        correlations=read("correlations"),
        candidates=read("candidates"),
        human_scores=read("human_scores"),
        ratings=read("ratings"),
        cost=read("cost"),
        assessment=read("assessment"),
        leaderboard=read("leaderboard"),
        reasons=read("reasons"),
        generations=read("generations"),
        judge_card=read("judge_card"),
        judge_reliability=read("judge_reliability"),
    )
