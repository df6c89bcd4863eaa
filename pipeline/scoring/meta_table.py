"""Meta-evaluation: every judge of the run measured the way the judge benchmarks measure it (the maths is
:mod:`pipeline.methods.quality.benchmark`), wherever the human scores are an objective label.

An attribute is an **objective label** when every human score it has is 0 or 1 (JudgeBench's and LLMBar's
``correct``: 1 for the right candidate); its **objective pairs** are those of one right and one wrong candidate.
Per judge, attribute and template, and per category (the context's, ``dataset.category_field``; null: every
category together), over the objective pairs it judged: JudgeBench's accuracy (the two orderings' votes sum above 0)
with Clopper-Pearson's exact interval (valid for a category of a handful of pairs, where a bootstrap's is too narrow:
five right pairs gave [1, 1]) and the judges' statistical rank (a leaderboard of judges), LLMBar's accuracy of each
ordering (the candidate listed first in the data shown first, then second), their mean, the share right in both and
the positional agreement, the share of orderings that prefer neither candidate, and the product's own debiased
verdict's accuracy beside them.

Nothing depends on which candidate a comparison calls i (the orderings are told apart by the data's listing, the
right candidate by its label), on the names or on the order of rows.
"""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.contracts.card_schema import META_EVALUATION
from pipeline.methods.agreement.bootstrap import statistical_ranks, tied_groups
from pipeline.methods.agreement.selective import exact_mean_interval
from pipeline.methods.quality.benchmark import benchmark_scores, pair_right, votes
from pipeline.methods.scorers.win_ratio import hard_outcomes
from pipeline.scoring.card_table import with_preferences, with_sides

GROUP = ["judge", "attribute", "template_id"]
# The scores' names in the table (BenchmarkScores' fields -> META_EVALUATION's columns).
COLUMNS = {
    "n_pairs": "n_pairs",
    "accuracy": "accuracy",
    "accuracy_first": "accuracy_listed_first",
    "accuracy_second": "accuracy_listed_second",
    "accuracy_orderings": "accuracy_orderings",
    "both_right": "both_right",
    "positional_agreement": "positional_agreement",
    "no_preference": "no_preference",
}


def objective_attributes(human: pl.DataFrame) -> list[str]:
    """The attributes that say which candidate of a pair is right: scores all 0 or 1 (and both), or people's votes
    (every context a pair whose two scores, the shares of the votes each won, sum to 1, some pair not tied: the
    majority is the right one, a tied pair has none)."""
    out = []
    for (attribute,), group in human.group_by(["attribute"], maintain_order=True):
        values = set(group["human_score"].to_list())
        pairs = group.group_by("context_id").agg(n=pl.len(), total=pl.col("human_score").sum())
        votes = bool((pairs["n"] == 2).all() and ((pairs["total"] - 1.0).abs() < 1e-9).all())
        if values == {0.0, 1.0} or (votes and values != {0.5} and min(values) >= 0.0):
            out.append(str(attribute))
    return sorted(out)


def objective_pairs(comparisons: pl.DataFrame, candidates: pa.Table, human: pl.DataFrame) -> pl.DataFrame:
    """The comparisons of objective pairs, each with its votes in the two orderings as the data lists them
    (``v_first``, ``v_second`` and whether each was judged), the right candidate's debiased probability, its
    category."""
    labelled = human.filter(pl.col("attribute").is_in(objective_attributes(human)))
    if not labelled.height or not comparisons.height:
        return pl.DataFrame()
    frame = with_preferences(
        comparisons.filter(pl.col("attribute").is_in(labelled["attribute"].unique())), candidates, labelled
    )
    listing = pl.from_arrow(candidates.select(["context_id", "candidate_id", "candidate_index", "category"]))
    frame = with_sides(frame, listing, {"candidate_index": "index", "category": "category"})
    frame = frame.filter(
        pl.col("h_i").is_not_null() & pl.col("h_j").is_not_null() & (pl.col("h_i") != pl.col("h_j"))
    )
    if not frame.height:
        return pl.DataFrame()
    i_first = (frame["index_i"] < frame["index_j"]).to_numpy()
    i_right = (frame["h_i"] > frame["h_j"]).to_numpy()
    p_ij = frame["p_ij"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    p_ji = frame["p_ji"].cast(pl.Float64).fill_null(np.nan).to_numpy()
    # the ordering that shows the listed-first candidate first, and the other; in each, is the right one in slot A
    p_first, p_second = np.where(i_first, p_ij, p_ji), np.where(i_first, p_ji, p_ij)
    right_first = i_right == i_first  # the right candidate is the one listed first
    p = frame["p"].to_numpy()
    return frame.select(*GROUP, category=pl.col("category_i")).with_columns(
        v_first=pl.Series(votes(p_first, right_first)),
        v_second=pl.Series(votes(p_second, ~right_first)),
        judged_first=pl.Series(~np.isnan(p_first)),
        judged_second=pl.Series(~np.isnan(p_second)),
        debiased_right=pl.Series(hard_outcomes(np.where(i_right, p, 1 - p))),
    )


def meta_evaluation_table(
    comparisons: pl.DataFrame,
    candidates: pa.Table,
    human: pl.DataFrame,
    level: float = 0.90,
) -> pl.DataFrame:
    """META_EVALUATION rows (module docstring); empty where no attribute is an objective label."""
    pairs = objective_pairs(comparisons, candidates, human)
    if not pairs.height:
        return pl.from_arrow(META_EVALUATION.empty_table())
    rows = []
    categories = sorted(c for c in pairs["category"].unique().to_list() if c is not None)
    for (attribute,), of_attribute in pairs.group_by(["attribute"], maintain_order=True):
        for category in [None, *categories]:
            part = of_attribute if category is None else of_attribute.filter(pl.col("category") == category)
            if part.height:
                rows += _ranked_rows(part, str(attribute), category, level)
    table = pl.DataFrame(rows, schema=pl.from_arrow(META_EVALUATION.empty_table()).schema, orient="row")
    return table.sort(
        ["attribute", "category", "rank", "accuracy", "judge", "template_id"],
        descending=[False, False, False, True, False, False],
        nulls_last=False,
    )


def _ranked_rows(part: pl.DataFrame, attribute: str, category: str | None, level: float) -> list[tuple]:
    """One row per judge and template over ``part`` (the objective pairs of one attribute and category), with the
    exact interval of its accuracy and its statistical rank."""
    jurors = part.select("judge", "template_id").unique().sort(["judge", "template_id"])
    keys = list(zip(jurors["judge"].to_list(), jurors["template_id"].to_list(), strict=True))
    several_templates = jurors["template_id"].n_unique() > 1
    names = [f"{j}/{t}" if several_templates else j for j, t in keys]
    scores, bounds = [], []
    for judge, template in keys:
        own = part.filter((pl.col("judge") == judge) & (pl.col("template_id") == template))
        v1, v2 = own["v_first"].to_numpy(), own["v_second"].to_numpy()
        bounds.append(exact_mean_interval(pair_right(v1, v2), level))
        found = benchmark_scores(v1, v2, own["judged_first"].to_numpy(), own["judged_second"].to_numpy())
        scores.append((found, float(own["debiased_right"].mean())))
    lower, upper = (np.array(b) for b in zip(*bounds, strict=True))
    ranks = statistical_ranks(lower, upper)
    tied = tied_groups(names, lower, upper)
    out = []
    for k, ((judge, template), (found, debiased)) in enumerate(zip(keys, scores, strict=True)):
        measured = {COLUMNS[name]: _none(value) for name, value in asdict(found).items()}
        out.append(
            (
                judge,
                attribute,
                template,
                category,
                measured["n_pairs"],
                measured["accuracy"],
                float(lower[k]),
                float(upper[k]),
                int(ranks[k]),
                ", ".join(sorted(tied[k])),
                measured["accuracy_listed_first"],
                measured["accuracy_listed_second"],
                measured["accuracy_orderings"],
                measured["both_right"],
                measured["positional_agreement"],
                measured["no_preference"],
                debiased,
            )
        )
    return out


def _none(value: float | int) -> float | int | None:
    """NaN (not defined) as null."""
    return None if isinstance(value, float) and not np.isfinite(value) else value
