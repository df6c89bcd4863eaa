"""Absolute scores as Gaussian priors in the PoE-Gaussian solve of the comparisons (method
``combined:<absolute template>``; the maths is :mod:`pipeline.methods.scorers.poe_combined`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.config.enums import Debias
from pipeline.data.contexts import group_by_context
from pipeline.methods.scorers.comparison_checks import ComparisonError
from pipeline.scoring.comparative import _empty_rows, comparison_arrays, rank_and_join

# Combined methods are named after the absolute template whose scores are the priors.
COMBINED = "combined:"


def combined_method(template_id: str, method: str) -> str:
    """The name of the combined method: ``combined:<absolute template>`` (``:max`` for Chen's implicit max)."""
    from pipeline.scoring.ratings import IMPLICIT_MAX

    return f"{COMBINED}{template_id}" + (":max" if method == IMPLICIT_MAX else "")


@dataclass
class Combined:
    scores: pl.DataFrame  # SCORES rows of the combined methods
    # (judge, attribute, comparative template, combined method) -> the estimate
    estimates: dict[tuple[str, str, str, str], object] = field(default_factory=dict)
    unscored: list[tuple[str, str, str, str, str, str]] = field(default_factory=list)


def combine_scores(
    comparisons: pl.DataFrame,
    absolute: pl.DataFrame,
    candidates: pa.Table,
    human_scores: pl.DataFrame,
    debias: Debias,
    weight: float | None,
) -> Combined:
    """Absolute scores as priors in the PoE-Gaussian solve of the comparisons (:mod:`pipeline.methods.scorers.poe_combined`),
    for every comparative template and absolute (template, method) of each judge and attribute."""
    from pipeline.methods.scorers.poe_combined import ContextData, combine, estimate

    members = {ctx.context_id: list(ctx.candidate_ids) for ctx in group_by_context(candidates)}
    beta = "mean" if debias == Debias.mean_shift else 0.5
    rows: list[pl.DataFrame] = []
    out = Combined(scores=pl.DataFrame())
    if not comparisons.height or not absolute.height:
        out.scores = rank_and_join(_empty_rows(), human_scores)
        return out
    for (judge, attribute, template_id), comps in comparisons.group_by(
        ["judge", "attribute", "template_id"], maintain_order=True
    ):
        rated = absolute.filter((pl.col("judge") == judge) & (pl.col("attribute") == attribute))
        for (abs_template, abs_method), group in rated.group_by(
            ["template_id", "method"], maintain_order=True
        ):
            method = combined_method(abs_template, abs_method)
            absolute_score = {
                (c, k): v for c, k, v in group.select("context_id", "candidate_id", "score").iter_rows()
            }
            contexts, ids = [], []
            for (context_id,), ctx_comps in comps.group_by(["context_id"], maintain_order=True):
                cands = members[context_id]
                index = {c: n for n, c in enumerate(cands)}
                i, j, p, _ = comparison_arrays(ctx_comps, index, debias)
                a = np.array([absolute_score.get((context_id, c), np.nan) for c in cands], dtype=np.float64)
                contexts.append(ContextData(len(cands), i, j, p, a))
                ids.append((context_id, cands))
            try:
                est = estimate(contexts, weight=weight, beta=beta)  # type: ignore[arg-type]
            except ComparisonError as exc:
                for context_id, _ in ids:
                    out.unscored.append((judge, attribute, template_id, method, context_id, str(exc)))
                continue
            out.estimates[(judge, attribute, template_id, method)] = est
            for ctx, (context_id, cands) in zip(contexts, ids, strict=True):
                try:
                    fit = combine(ctx, est, beta=beta)  # type: ignore[arg-type]
                except (ComparisonError, np.linalg.LinAlgError) as exc:
                    out.unscored.append((judge, attribute, template_id, method, context_id, str(exc)))
                    continue
                rows.append(
                    pl.DataFrame(
                        {
                            "judge": judge,
                            "attribute": attribute,
                            "template_id": template_id,
                            "method": method,
                            "context_id": context_id,
                            "candidate_id": cands,
                            "score": fit.scores,
                            "stderr": fit.stderr,
                        }
                    )
                )
    out.scores = rank_and_join(pl.concat(rows) if rows else _empty_rows(), human_scores)
    return out
