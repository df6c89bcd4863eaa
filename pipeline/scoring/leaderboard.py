"""The model leaderboard of a run: per system (model), its win rate and mean scores with bootstrap intervals over
inputs (the maths is :mod:`pipeline.methods.leaderboard`), for every judge, attribute (criterion) and template.

A run of one context (a pool, ``dataset.pool=true``) has one input, where a bootstrap over inputs has nothing to
resample: there the units are the pool's items. Each round draws the items with replacement, so a model's value is
over a random sample of its own items; the draw is not paired across models (a pool's items share no input).

Candidates name their model in ``system`` (generated outputs, or data sets such as SummEval whose summaries come
from named systems); a run whose candidates name none has no leaderboard.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.contracts.schemas import LEADERBOARD
from pipeline.methods.bootstrap import (
    bootstrap_counts,
    bootstrap_means,
    bootstrap_ratio,
    statistical_ranks,
    tied_groups,
)

WIN_RATE = "win_rate"


# What the bootstrap resamples (the LEADERBOARD's unit): the inputs (contexts), or a one-context pool's items.
INPUT, ITEM = "input", "item"


# What the bootstrap resamples (the LEADERBOARD's unit): the inputs (contexts), or a one-context pool's items.
INPUT, ITEM = "input", "item"


def _empty() -> pl.DataFrame:
    return pl.from_arrow(LEADERBOARD.empty_table())


def leaderboard_table(
    comparisons: pl.DataFrame,
    scores: pl.DataFrame,
    candidates: pa.Table,
    methods: list[str],
    rounds: int,
    level: float,
    seed: int,
) -> pl.DataFrame:
    """LEADERBOARD rows: per (judge, attribute, template), model and metric (win rate, then each method's mean
    score), the estimate on all inputs, the interval, the statistical rank and the models it is tied with."""
    systems = pl.from_arrow(candidates.select(["context_id", "candidate_id", "system"])).drop_nulls("system")
    if not systems.height or not comparisons.height:
        return _empty()
    system_of = dict(
        zip(systems["context_id"] + "\x1f" + systems["candidate_id"], systems["system"], strict=True)
    )
    rows = []
    for (judge, attribute, template_id), comps in comparisons.group_by(
        ["judge", "attribute", "template_id"], maintain_order=True
    ):
        games = Games.of(comps, system_of)
        if games is None:
            continue
        counts = bootstrap_counts(len(games.units), rounds, np.random.default_rng(seed))
        metrics = {WIN_RATE: bootstrap_ratio(games.wins, games.played, counts, level)}
        attribute_scores = scores.filter((pl.col("judge") == judge) & (pl.col("attribute") == attribute))
        for method in methods:
            values = games.mean_scores(
                attribute_scores.filter(pl.col("method") == method), template_id, system_of
            )
            if values is not None:
                metrics[method] = bootstrap_means(values, counts, level)
        group = {"judge": judge, "attribute": attribute, "template_id": template_id}
        for metric, interval in metrics.items():
            rows += games.rows(group, metric, interval)
    if not rows:
        return _empty()
    out = pl.DataFrame(rows, schema=_empty().schema)
    return out.sort(
        ["judge", "attribute", "template_id", "metric", "rank", "estimate"], descending=[False] * 5 + [True]
    )


@dataclass(frozen=True)
class Games:
    """The games of one judge, attribute and template: each model's wins and games in each bootstrap unit (the
    inputs, or a one-context pool's items, each game counted for the item on each side)."""

    unit: str
    units: list[str]
    models: list[str]
    wins: np.ndarray
    played: np.ndarray

    @classmethod
    def of(cls, comps: pl.DataFrame, system_of: dict[str, str]) -> Games | None:
        """The games of the comparisons whose two candidates name their model (None: none do)."""
        with_sys = comps.with_columns(
            sys_i=(pl.col("context_id") + "\x1f" + pl.col("cand_i")).replace_strict(system_of, default=None),
            sys_j=(pl.col("context_id") + "\x1f" + pl.col("cand_j")).replace_strict(system_of, default=None),
        ).drop_nulls(["sys_i", "sys_j"])
        if not with_sys.height:
            return None
        unit = ITEM if with_sys["context_id"].n_unique() == 1 else INPUT
        if unit == ITEM:
            unit_i = pl.col("context_id") + "\x1f" + pl.col("cand_i")
            unit_j = pl.col("context_id") + "\x1f" + pl.col("cand_j")
        else:
            unit_i = unit_j = pl.col("context_id")
        # won when the debiased P(i beats j) says so (a draw at 1/2 each)
        won = pl.when(pl.col("p") > 0.5).then(1.0).when(pl.col("p") < 0.5).then(0.0).otherwise(0.5)
        games = pl.concat(
            [
                with_sys.select(unit=unit_i, model="sys_i", win=won),
                with_sys.select(unit=unit_j, model="sys_j", win=1.0 - won),
            ]
        )
        units = sorted(games["unit"].unique().to_list())
        models = sorted(games["model"].unique().to_list())
        row_of = {c: k for k, c in enumerate(units)}
        col_of = {m: k for k, m in enumerate(models)}
        wins = np.zeros((len(units), len(models)))
        played = np.zeros_like(wins)
        r = np.array([row_of[c] for c in games["unit"].to_list()], dtype=np.int64)
        c = np.array([col_of[m] for m in games["model"].to_list()], dtype=np.int64)
        np.add.at(wins, (r, c), games["win"].to_numpy())
        np.add.at(played, (r, c), 1.0)
        return cls(unit, units, models, wins, played)

    def mean_scores(
        self, part: pl.DataFrame, template_id: str, system_of: dict[str, str]
    ) -> np.ndarray | None:
        """A method's mean score of each model in each unit (NaN where none): a comparative method's scores of this
        template, an absolute method's whatever its own template; None where no model has any."""
        if part.filter(pl.col("template_id") == template_id).height:
            part = part.filter(pl.col("template_id") == template_id)
        item = pl.col("context_id") + "\x1f" + pl.col("candidate_id")
        part = part.with_columns(
            model=item.replace_strict(system_of, default=None),
            unit=item if self.unit == ITEM else pl.col("context_id"),
        )
        part = part.filter(pl.col("model").is_in(self.models) & pl.col("unit").is_in(self.units))
        if not part.height:
            return None
        means = part.group_by("unit", "model").agg(pl.col("score").mean())
        row_of = {c: k for k, c in enumerate(self.units)}
        col_of = {m: k for k, m in enumerate(self.models)}
        values = np.full((len(self.units), len(self.models)), np.nan)
        values[
            [row_of[x] for x in means["unit"].to_list()],
            [col_of[m] for m in means["model"].to_list()],
        ] = means["score"].to_numpy()
        return values

    def rows(self, group: dict[str, str], metric: str, interval) -> list[dict]:
        """LEADERBOARD rows of one metric: every model's estimate, interval, statistical rank and ties."""
        ranks = statistical_ranks(interval.lower, interval.upper)
        tied = tied_groups(self.models, interval.lower, interval.upper)
        return [
            {
                **group,
                "metric": metric,
                "model": model,
                "estimate": float(interval.estimate[m]),
                "lower": float(interval.lower[m]),
                "upper": float(interval.upper[m]),
                "rank": int(ranks[m]),
                "tied_with": ", ".join(tied[m]),
                "unit": self.unit,
                "n_inputs": int((self.played[:, m] > 0).sum()),
                "n_games": int(self.played[:, m].sum()),
            }
            for m, model in enumerate(self.models)
        ]
