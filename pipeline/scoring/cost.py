"""What each approach cost (prompts, tokens, prefix-cache share, engine seconds), and every method's agreement with people beside its cost."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.methods.agreement.metrics import merge_near_ties


def _sum_cost(frame: pl.DataFrame, mode: str, candidates: pl.Expr) -> pl.DataFrame:
    return (
        frame.group_by(["judge", "attribute", "template_id"])
        .agg(
            prompts=pl.len().cast(pl.Int64),
            candidates=candidates,
            prompt_tokens=pl.col("prompt_tokens").cast(pl.Int64).sum(),
            cached_tokens=pl.col("cached_tokens").cast(pl.Int64).sum(),
            generated_tokens=pl.col("generated_tokens").cast(pl.Int64).sum(),
            seconds=pl.col("seconds").sum(),
        )
        .with_columns(
            mode=pl.lit(mode),
            cache_share=pl.when(pl.col("prompt_tokens") > 0).then(
                pl.col("cached_tokens") / pl.col("prompt_tokens")
            ),
        )
    )


def cost_table(judgments: pl.DataFrame, ratings: pl.DataFrame) -> pl.DataFrame:
    """COST: per judge, attribute, template and mode, the prompts judged, the candidates they assessed, prompt
    tokens (and the prefix cache's share), generated tokens and engine seconds."""
    from pipeline.contracts.keys import COMPARE
    from pipeline.contracts.schemas import COST

    parts = []
    if judgments.height:
        # one generated token per comparison (the label), and the reasoning's tokens where the judge reasoned
        reasoning = pl.col("reasoning_tokens").fill_null(0).cast(pl.Int64)
        compare = judgments.with_columns(generated_tokens=1 + reasoning)
        candidates = (
            pl.concat_list(
                pl.col("context_id") + "\x1f" + pl.col("cand_a"),
                pl.col("context_id") + "\x1f" + pl.col("cand_b"),
            )
            .explode()
            .n_unique()
            .cast(pl.Int64)
        )
        parts.append(_sum_cost(compare, COMPARE, candidates))
    if ratings.height:
        from pipeline.scoring.ratings import per_template

        for (mode,), group in per_template(ratings).group_by(["mode"], maintain_order=True):
            candidates = (pl.col("context_id") + "\x1f" + pl.col("candidate_id")).n_unique().cast(pl.Int64)
            parts.append(_sum_cost(group, str(mode), candidates))
    schema = pl.from_arrow(COST.empty_table()).schema
    if not parts:
        return pl.DataFrame(schema=schema)
    return (
        pl.concat([p.select(COST.names) for p in parts])
        .cast(dict(schema))
        .sort(["judge", "attribute", "mode", "template_id"])
    )


def method_templates(method: str, template_id: str, absolute_methods: set[str]) -> tuple[str, list[str]]:
    """(approach, the templates whose prompts a correlations row's method used)."""
    if method in absolute_methods:
        return "absolute", [template_id]
    if method.startswith("combined:"):
        return "combined", [template_id, method.removeprefix("combined:").removesuffix(":max")]
    return "comparative", [template_id]


def assessment_table(
    correlations: pl.DataFrame, cost: pl.DataFrame, absolute_methods: set[str]
) -> pl.DataFrame:
    """ASSESSMENT: per attribute, each method's agreement with people beside what its prompts cost, ranked by
    Spearman (the comparison at the heart of EACL Table 1 and Chen et al. 2023)."""
    from pipeline.contracts.schemas import ASSESSMENT

    schema = pl.from_arrow(ASSESSMENT.empty_table()).schema
    if not correlations.height:
        return pl.DataFrame(schema=schema)
    costs = {(r["judge"], r["attribute"], r["template_id"]): r for r in cost.iter_rows(named=True)}
    rows = []
    for r in correlations.iter_rows(named=True):
        approach, templates = method_templates(r["method"], r["template_id"], absolute_methods)
        used = [costs[k] for k in ((r["judge"], r["attribute"], t) for t in templates) if k in costs]
        prompts = sum(c["prompts"] for c in used)
        candidates = max((c["candidates"] for c in used), default=0)
        rows.append(
            {
                "judge": r["judge"],
                "attribute": r["attribute"],
                "approach": approach,
                "method": r["method"],
                "templates": "+".join(templates),
                "spearman": r["spearman"],
                "kendall": r["kendall"],
                "pairwise_accuracy": r["pairwise_accuracy"],
                "prompts": prompts,
                "prompts_per_candidate": prompts / candidates if candidates else None,
                "prompt_tokens": sum(c["prompt_tokens"] for c in used),
                "seconds": float(sum(c["seconds"] for c in used)),
                "rank": 0,
            }
        )
    frame = pl.DataFrame(rows, schema={k: v for k, v in schema.items()})
    return (
        frame.with_columns(
            rank=pl.col("spearman")
            .fill_nan(None)
            .map_batches(_near_ties, return_dtype=pl.Float64)
            .rank("min", descending=True)
            .over(["judge", "attribute"])
            .cast(pl.Int32)
        )
        .with_columns(pl.col("rank").fill_null(pl.len().over(["judge", "attribute"]).cast(pl.Int32)))
        .sort(["judge", "attribute", "rank", "method"])
    )


def _near_ties(values: pl.Series) -> pl.Series:
    """Spearman values within ``TIE_RTOL`` of each other read as ties (their ulps are not a ranking); nulls kept."""
    known = values.is_not_null().to_numpy()
    out = values.to_numpy(allow_copy=True).astype(np.float64)
    out[known] = merge_near_ties(out[known])
    return pl.Series(out).fill_nan(None)
