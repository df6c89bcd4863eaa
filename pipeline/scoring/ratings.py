"""Absolute scores per mode from the ratings (Chen's max(p(yes), 1 - p(no)) beside the implicit score), and every
generation that did not parse.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from pipeline.config.enums import AbsoluteMode
from pipeline.contracts.keys import ITEM
from pipeline.methods.verdicts.absolute_scores import implicit_max
from pipeline.prompts.absolute import AbsoluteTemplate

# Scores per mode from the ratings; implicit also gives Chen's max(p(yes), 1 - p(no)).
IMPLICIT_MAX = "implicit_max"


def per_template(ratings: pl.DataFrame) -> pl.DataFrame:
    """``ratings`` with each checklist item's template id (``<template>#<k>``) as its template's."""
    return ratings.with_columns(pl.col("template_id").str.split(ITEM).list.first())


def rating_scores(ratings: pl.DataFrame, templates: Sequence[AbsoluteTemplate]) -> pl.DataFrame:
    """(judge, attribute, template_id, method, context_id, candidate_id, score) for every rating with a score;
    method = the mode (and ``implicit_max`` beside ``implicit``); a checklist's the mean over its items of p(yes),
    under its template's id. Ratings without a score (no sample parsed) are not here: they are in
    :func:`rating_failures`."""
    keys = ["judge", "attribute", "template_id", "context_id", "candidate_id"]
    scored = ratings.filter(pl.col("score").is_not_null())
    items = pl.col("mode") == str(AbsoluteMode.checklist)
    parts = [
        scored.filter(~items).select(*keys, method=pl.col("mode"), score=pl.col("score")),
        per_template(scored.filter(items))
        .group_by(keys, maintain_order=True)
        .agg(method=pl.col("mode").first(), score=pl.col("score").mean()),
    ]
    n_yes = {t.id: t.n_yes for t in templates if t.mode == AbsoluteMode.implicit}
    implicit = ratings.filter(pl.col("template_id").is_in(list(n_yes)))
    if implicit.height:
        rows = []
        for template_id, group in implicit.group_by("template_id", maintain_order=True):
            lp = np.array(group["token_logprobs"].to_list(), dtype=np.float64)
            rows.append(
                group.select(*keys).with_columns(
                    method=pl.lit(IMPLICIT_MAX), score=pl.Series(implicit_max(lp, n_yes[template_id[0]]))
                )
            )
        parts.append(pl.concat(rows).select(*keys, "method", "score"))
    return pl.concat(parts).select(
        "judge", "attribute", "template_id", "method", "context_id", "candidate_id", "score"
    )


def rating_failures(ratings: pl.DataFrame) -> pl.DataFrame:
    """Every rating with at least one sample that did not parse: the texts and the first reason."""
    return ratings.filter(pl.col("n_failed") > 0).select(
        "judge",
        "attribute",
        "template_id",
        "mode",
        "context_id",
        "candidate_id",
        "n_failed",
        n_samples=pl.col("texts").list.len().cast(pl.Int32),
        scored=pl.col("score").is_not_null(),
        failure=pl.col("failure"),
        text=pl.col("texts").list.first(),
    )


def absolute_methods(templates: Sequence[AbsoluteTemplate]) -> set[str]:
    """The method names absolute scores appear under in the scores and correlations tables."""
    methods = {str(t.mode) for t in templates}
    if AbsoluteMode.implicit in methods:
        methods.add(IMPLICIT_MAX)
    return methods
