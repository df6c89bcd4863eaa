"""The model leaderboard of a run: per system (model), its win rate and mean scores with bootstrap intervals over
inputs (the maths is :mod:`pipeline.methods.agreement.bootstrap`), for every judge, attribute (criterion) and template; and
beside them the win rate and Bradley-Terry rating with the texts' length regressed out (and their style, with
``leaderboard.control`` naming it: :mod:`pipeline.methods.quality.style`), so that a model that wins only by writing more
shows.

A game is one pair's averaged verdict (``leaderboard.games=pair``, the debiased P(i beats j)), or one per judged
ordering (``ordering``, arena-hard-auto's count: each ordering's own verdict, ``show_result.py: load_judgments``).

A run of one context (a pool, ``dataset.pool=true``) has one input, where a bootstrap over inputs has nothing to
resample: there the units are the pool's items. Each round draws the items with replacement, so a model's value is
over a random sample of its own items; the draw is not paired across models (a pool's items share no input).

The bootstrap draws its units in the order of their content keys (:mod:`pipeline.contracts.keys`: an input's
text and its candidates' texts, an item's text), so that the same seed gives the same intervals whatever the inputs,
candidates and models are called and however the rows are ordered. A game's sides follow the candidates' ids
(``cand_i < cand_j``); nothing computed here depends on which side a game's model is on.

Candidates name their model in ``system`` (generated outputs, or data sets such as SummEval whose summaries come
from named systems); a run whose candidates name none has no leaderboard.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.contracts.keys import content_key, stable_hash
from pipeline.contracts.schemas import LEADERBOARD
from pipeline.data.contexts import group_by_context
from pipeline.methods.agreement.bootstrap import (
    Interval,
    bootstrap_counts,
    bootstrap_means,
    bootstrap_ratio,
    expanded_level,
    quantile_interval,
    statistical_ranks,
    tied_groups,
)
from pipeline.methods.quality.alpaca_lc import instruction_difficulty, lc_win_rate
from pipeline.methods.quality.style import bootstrap_controlled, feature_differences, text_features
from pipeline.methods.scorers.win_ratio import hard_outcomes

WIN_RATE = "win_rate"
BRADLEY_TERRY = "bradley_terry"
# The suffix of a metric with the texts' length (and style) regressed out: win_rate:length_controlled, ...
CONTROLLED = {"length": "length_controlled", "style": "style_controlled"}
# AlpacaEval 2's length-controlled win rate against leaderboard.baseline (pipeline.methods.quality.alpaca_lc).
ALPACA_EVAL_LC = f"{WIN_RATE}:alpaca_eval_lc"

# What the bootstrap resamples (the LEADERBOARD's unit): the inputs (contexts), or a one-context pool's items.
INPUT, ITEM = "input", "item"
# People's own per-model mean score (the data's human scores of the attribute), beside the judge's metrics.
PEOPLE = "people"
# The fewest units (inputs, or a pool's items) a model's bootstrap interval needs: with fewer, even the expanded
# percentile interval covers less than its level (simulated: 0.86 at 5 units for 0.90), so none is given.
MIN_UNITS = 10
# The fewest models whose agreement across models (judge against people) gets a bootstrap interval: with fewer, a
# rank correlation takes a handful of values and the rounds may all give one of them (an interval of no width).
MIN_MODELS = 5


def _empty() -> pl.DataFrame:
    return pl.from_arrow(LEADERBOARD.empty_table())


@dataclass(frozen=True)
class Board:
    """How the leaderboard is made: the bootstrap (rounds, interval level, seed), what a game is (``pair`` or
    ``ordering``) and what the controlled ratings regress out (``length``, ``style``)."""

    rounds: int = 100
    level: float = 0.90
    seed: int = 0
    games: str = "pair"
    control: tuple[str, ...] = ("length",)
    # AlpacaEval's length-controlled win rate against this model (None: not computed)
    baseline: str | None = None


def leaderboard_table(
    comparisons: pl.DataFrame,
    scores: pl.DataFrame,
    candidates: pa.Table,
    methods: list[str],
    board: Board,
    human: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """LEADERBOARD rows: per (judge, attribute, template), model and metric (win rate, each method's mean score, then
    the controlled win rate and Bradley-Terry rating, and people's own mean score where ``human`` has the attribute's),
    the estimate on all inputs, the interval, the statistical rank and the models it is tied with."""
    frame = pl.from_arrow(candidates.select(["context_id", "candidate_id", "system", "text"]))
    systems = frame.drop_nulls("system")
    if not systems.height or not comparisons.height:
        return _empty()
    keys = systems["context_id"] + "\x1f" + systems["candidate_id"]
    system_of = dict(zip(keys, systems["system"], strict=True))
    features = dict(zip(keys, text_features(systems["text"].to_list()), strict=True))
    order = unit_keys(candidates)
    rows = []
    for (judge, attribute, template_id), comps in comparisons.group_by(
        ["judge", "attribute", "template_id"], maintain_order=True
    ):
        games = Games.of(comps, system_of, order, board.games)
        if games is None:
            continue
        counts = bootstrap_counts(len(games.units), board.rounds, np.random.default_rng(board.seed))
        level = expanded_level(board.level, len(games.units))
        metrics = {WIN_RATE: bootstrap_ratio(games.wins, games.played, counts, level)}
        attribute_scores = scores.filter((pl.col("judge") == judge) & (pl.col("attribute") == attribute))
        for method in methods:
            values = games.mean_scores(
                attribute_scores.filter(pl.col("method") == method), template_id, system_of
            )
            if values is not None:
                metrics[method] = bootstrap_means(values, counts, level)
        people = games.people(human, attribute, template_id, system_of)
        if people is not None:
            metrics[PEOPLE] = bootstrap_means(people, counts, level)
        for control in board.control:
            metrics |= games.controlled(features, counts, level, style=control == "style")
        if board.baseline is not None:
            lc = games.alpaca_eval(features, board.baseline, board.level)
            if lc is not None:
                metrics[ALPACA_EVAL_LC] = lc
        group = {"judge": judge, "attribute": attribute, "template_id": template_id}
        for metric, interval in metrics.items():
            rows += games.rows(group, metric, interval)
    if not rows:
        return _empty()
    out = pl.DataFrame(rows, schema=_empty().schema)
    return out.sort(
        ["judge", "attribute", "template_id", "metric", "rank", "estimate"], descending=[False] * 5 + [True]
    )


def models_agreement(
    comps: pl.DataFrame, candidates: pa.Table, human: pl.DataFrame, board: Board
) -> dict[str, float | int | None]:
    """How far one judge's leaderboard (its win rate) and people's (their mean score) order the models alike: Spearman
    and Kendall (tau-b) across the models, each with the interval of the leaderboard's own bootstrap rounds over inputs
    (the same draws; none from fewer than :data:`MIN_UNITS` units or where every round gives one value); nothing (the models counted) with fewer than
    :data:`MIN_MODELS` models or where no model has people's scores. ``comps``: one judge, attribute and template's comparisons."""
    from pipeline.methods.agreement.metrics import kendall_tau_b, pooled_correlation

    frame = pl.from_arrow(candidates.select(["context_id", "candidate_id", "system"])).drop_nulls("system")
    system_of = dict(zip(frame["context_id"] + "\x1f" + frame["candidate_id"], frame["system"], strict=True))
    games = Games.of(comps, system_of, unit_keys(candidates), board.games) if system_of else None
    row = comps.row(0, named=True) if comps.height else None
    people = games.people(human, row["attribute"], row["template_id"], system_of) if games and row else None
    if games is None or people is None or len(games.models) < MIN_MODELS:
        return {"n_models": len(games.models) if games is not None else 0}
    present = np.isfinite(people)
    counts = bootstrap_counts(len(games.units), board.rounds, np.random.default_rng(board.seed))
    draws = np.vstack([np.ones(len(games.units)), counts])  # all inputs, then each round
    with np.errstate(invalid="ignore", divide="ignore"):
        judge = (draws @ games.wins) / (draws @ games.played)
        them = (draws @ np.where(present, people, 0.0)) / (draws @ present)
    out: dict[str, float | int | None] = {"n_models": len(games.models)}
    for name, measure in (("spearman", pooled_correlation), ("kendall", kendall_tau_b)):
        values = np.array([_correlation(measure, j, t) for j, t in zip(judge, them, strict=True)])
        found = quantile_interval(values[:1], values[1:, None], expanded_level(board.level, len(games.units)))
        out[f"models_{name}"] = _defined(found.estimate[0])
        # too few units, or rounds that all agree (no spread): the estimate alone
        if len(games.units) >= MIN_UNITS and found.upper[0] > found.lower[0]:
            out[f"models_{name}_lower"] = _defined(found.lower[0])
            out[f"models_{name}_upper"] = _defined(found.upper[0])
    return out


def _correlation(measure, judge: np.ndarray, people: np.ndarray) -> float:
    known = np.isfinite(judge) & np.isfinite(people)
    if known.sum() < 3 or np.ptp(judge[known]) == 0 or np.ptp(people[known]) == 0:
        return float("nan")
    return float(measure(judge[known], people[known]))


def _defined(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def unit_keys(candidates: pa.Table) -> dict[str, int]:
    """The content key of every unit a bootstrap may draw: each input (its context id) and each item (context \x1f
    candidate); equal keys (equal texts) fall back on the names."""
    out: dict[str, int] = {}
    for context in group_by_context(candidates):
        out[context.context_id] = context.key
        for cand, text in zip(context.candidate_ids, context.texts, strict=True):
            out[f"{context.context_id}\x1f{cand}"] = content_key(text)
    return out


@dataclass(frozen=True)
class Games:
    """The games of one judge, attribute and template: each model's wins and games in each bootstrap unit (the
    inputs, or a one-context pool's items, each game counted for the item on each side), and the games themselves
    (models, outcome, the two candidates) for the controlled ratings."""

    unit: str
    units: list[str]
    models: list[str]
    wins: np.ndarray
    played: np.ndarray
    # per game: its two models (indices into models), its outcome for the first, the units of its two sides and
    # its two candidates (context \x1f candidate)
    a: np.ndarray
    b: np.ndarray
    y: np.ndarray
    # the soft outcome for a (its P(a beats b)), and each model's content key (its outputs' texts)
    p: np.ndarray
    model_keys: tuple[int, ...]
    unit_a: np.ndarray
    unit_b: np.ndarray
    cand_a: list[str]
    cand_b: list[str]

    @classmethod
    def of(
        cls, comps: pl.DataFrame, system_of: dict[str, str], order: dict[str, int], games: str = "pair"
    ) -> Games | None:
        """The games of the comparisons whose two candidates name their model (None: none do): one per pair (the
        debiased P(i beats j)) or one per judged ordering (that ordering's own verdict). ``order``: the content key
        of every unit (:func:`unit_keys`), the order the bootstrap draws them in."""
        with_sys = (
            comps.with_columns(
                key_i=pl.col("context_id") + "\x1f" + pl.col("cand_i"),
                key_j=pl.col("context_id") + "\x1f" + pl.col("cand_j"),
            )
            .with_columns(
                sys_i=pl.col("key_i").replace_strict(system_of, default=None),
                sys_j=pl.col("key_j").replace_strict(system_of, default=None),
            )
            .drop_nulls(["sys_i", "sys_j"])
        )
        if not with_sys.height:
            return None
        # each game's P(i wins): the pair's debiased p, or each ordering's own (i in slot A: p_ij; j: 1 - p_ji)
        if games == "ordering":
            played = pl.concat(
                [
                    with_sys.filter(pl.col("p_ij").is_not_null()).with_columns(p_game=pl.col("p_ij")),
                    with_sys.filter(pl.col("p_ji").is_not_null()).with_columns(p_game=1.0 - pl.col("p_ji")),
                ]
            )
        else:
            played = with_sys.with_columns(p_game=pl.col("p"))
        unit = ITEM if with_sys["context_id"].n_unique() == 1 else INPUT
        unit_i = pl.col("key_i") if unit == ITEM else pl.col("context_id")
        unit_j = pl.col("key_j") if unit == ITEM else pl.col("context_id")
        # in a fixed order, so that no fit or sum depends on the order the comparisons came in
        played = played.with_columns(unit_i=unit_i, unit_j=unit_j).sort(["key_i", "key_j", "p_game"])
        units = sorted(
            set(played["unit_i"].to_list()) | set(played["unit_j"].to_list()), key=lambda u: (order[u], u)
        )
        models = sorted(set(played["sys_i"].to_list()) | set(played["sys_j"].to_list()))
        row_of = {c: k for k, c in enumerate(units)}
        col_of = {m: k for k, m in enumerate(models)}
        a = np.array([col_of[m] for m in played["sys_i"].to_list()], dtype=np.int64)
        b = np.array([col_of[m] for m in played["sys_j"].to_list()], dtype=np.int64)
        ua = np.array([row_of[u] for u in played["unit_i"].to_list()], dtype=np.int64)
        ub = np.array([row_of[u] for u in played["unit_j"].to_list()], dtype=np.int64)
        # won when p says so, a draw half each
        y = hard_outcomes(played["p_game"].to_numpy().astype(np.float64))
        wins = np.zeros((len(units), len(models)))
        games_played = np.zeros_like(wins)
        np.add.at(wins, (ua, a), y)
        np.add.at(wins, (ub, b), 1.0 - y)
        np.add.at(games_played, (ua, a), 1.0)
        np.add.at(games_played, (ub, b), 1.0)
        model_keys = tuple(
            stable_hash("\x1f".join(sorted(str(order[k]) for k, m in system_of.items() if m == model)))
            for model in models
        )
        p_game = played["p_game"].to_numpy().astype(np.float64)
        return cls(
            unit, units, models, wins, games_played, a, b, y, p_game, model_keys, ua, ub,
            played["key_i"].to_list(), played["key_j"].to_list(),
        )  # fmt: skip

    def controlled(
        self, features: dict[str, np.ndarray], counts: np.ndarray, level: float, style: bool = False
    ) -> dict[str, Interval]:
        """The win rate and the Bradley-Terry rating with the texts' length (and ``style``) regressed out, with
        bootstrap intervals over the same rounds as the other metrics (a game weighs the draws of its units)."""
        suffix = CONTROLLED["style" if style else "length"]
        x = feature_differences(
            np.stack([features[k] for k in self.cand_a]), np.stack([features[k] for k in self.cand_b]), style
        )
        game_counts = (counts[:, self.unit_a] + counts[:, self.unit_b]) / 2
        fit, thetas, rates, rate = bootstrap_controlled(
            self.a, self.b, self.y, x, len(self.models), game_counts
        )
        return {
            f"{WIN_RATE}:{suffix}": quantile_interval(rate, rates, level),
            f"{BRADLEY_TERRY}:{suffix}": quantile_interval(fit.theta, thetas, level),
        }

    def alpaca_eval(self, features: dict[str, np.ndarray], baseline: str, level: float) -> Interval | None:
        """AlpacaEval 2's length-controlled win rate of every model against ``baseline``
        (:mod:`pipeline.methods.quality.alpaca_lc`): the instructions' difficulty from the joint fit of every model's games
        against it, then a GLM per model; the interval is the estimate +- the normal quantile of ``level`` times
        AlpacaEval's standard error (not a bootstrap); the baseline's own is 1/2. None: the baseline is not a model
        here, or the run has one input (a pool: its items are no instructions)."""
        from scipy.stats import norm

        if self.unit != INPUT or baseline not in self.models:
            return None
        base = self.models.index(baseline)
        vs = (self.a == base) ^ (self.b == base)
        if vs.sum() < 2:
            return None
        turned = self.a == base  # the baseline on side a: the model's preference is 1 - p
        length_a = np.array([features[k][0] for k in self.cand_a])
        length_b = np.array([features[k][0] for k in self.cand_b])
        model = np.where(turned, self.b, self.a)[vs]
        y = np.where(turned, 1.0 - self.p, self.p)[vs]
        l_model = np.where(turned, length_b, length_a)[vs]
        l_base = np.where(turned, length_a, length_b)[vs]
        unit = self.unit_a[vs]
        # every row in content-key order (the fit's folds and coordinates follow the rows and columns)
        rank = np.argsort(np.argsort(self.model_keys))
        rows = np.lexsort((l_base, l_model, np.round(y, 12), rank[model], unit))
        model, y, l_model, l_base, unit = (v[rows] for v in (model, y, l_model, l_base, unit))
        difficulty = instruction_difficulty(rank[model], unit, y, l_model, l_base)
        estimate = np.full(len(self.models), np.nan)
        error = np.full(len(self.models), np.nan)
        estimate[base], error[base] = 0.5, 0.0
        for m in np.unique(model):
            mine = model == m
            if mine.sum() >= 2:
                fit = lc_win_rate(y[mine], l_model[mine], l_base[mine], difficulty[unit[mine]])
                estimate[m], error[m] = fit.win_rate, fit.standard_error
        z = float(norm.ppf((1 + level) / 2))
        return Interval(estimate, np.clip(estimate - z * error, 0, 1), np.clip(estimate + z * error, 0, 1))

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

    def people(
        self, human: pl.DataFrame | None, attribute: str, template_id: str, system_of: dict[str, str]
    ) -> np.ndarray | None:
        """People's mean score of each model in each unit (:meth:`mean_scores` of the attribute's human scores)."""
        if human is None or not human.height:
            return None
        part = human.filter(pl.col("attribute") == attribute).select(
            "context_id", "candidate_id", score=pl.col("human_score"), template_id=pl.lit(template_id)
        )
        return self.mean_scores(part, template_id, system_of)

    def rows(self, group: dict[str, str], metric: str, interval) -> list[dict]:
        """LEADERBOARD rows of one metric: every model's estimate, interval (none for a model of fewer than
        :data:`MIN_UNITS` units: its estimate alone, tied with every model), statistical rank and ties."""
        few = (self.played > 0).sum(axis=0) < MIN_UNITS  # its inputs, or in a pool its own items
        lower, upper = np.where(few, np.nan, interval.lower), np.where(few, np.nan, interval.upper)
        unknown = few & np.isfinite(interval.estimate)  # no interval: it may lie anywhere
        ranks = statistical_ranks(np.where(unknown, -np.inf, lower), np.where(unknown, np.inf, upper))
        tied = tied_groups(self.models, np.where(unknown, -np.inf, lower), np.where(unknown, np.inf, upper))
        return [
            {
                **group,
                "metric": metric,
                "model": model,
                # null: not defined (a model without games, a rating the data cannot tell from length)
                "estimate": _defined(interval.estimate[m]),
                "lower": _defined(lower[m]),
                "upper": _defined(upper[m]),
                "rank": int(ranks[m]),
                "tied_with": ", ".join(tied[m]),
                "unit": self.unit,
                "n_inputs": int((self.played[:, m] > 0).sum()),
                "n_games": int(self.played[:, m].sum()),
            }
            for m, model in enumerate(self.models)
        ]
