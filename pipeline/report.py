"""Correlation of the scores with human scores, the summary table and the metrics for MLflow."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from pipeline.methods.metrics import pairwise_accuracy, per_context_correlation, pooled_correlation
from pipeline.progress import JudgeStats
from pipeline.schemas import CORRELATION_METHODS as CORRELATIONS
from pipeline.schemas import CORRELATIONS as CORRELATIONS_SCHEMA

KEYS = ["judge", "attribute", "template_id", "method"]


def correlation_table(scores: pl.DataFrame) -> pl.DataFrame:
    """Per (judge, attribute, template, method): correlations per context averaged over contexts (contexts with
    constant human scores skipped and counted), over the whole pool, and pairwise accuracy."""
    with_human = scores.filter(pl.col("human_score").is_not_null())
    rows = []
    for key, group in with_human.group_by(KEYS, maintain_order=True):
        context_index = group["context_id"].rank("dense").to_numpy().astype(np.int64) - 1
        pred = group["score"].to_numpy()
        human = group["human_score"].to_numpy()
        row = dict(zip(KEYS, key, strict=True))
        for method in CORRELATIONS:
            summary = per_context_correlation(context_index, pred, human, method)
            row[method] = float(summary.mean)
            row["n_contexts"] = int(summary.n_contexts)
            row["n_skipped_contexts"] = int(summary.n_skipped)
            row[f"{method}_pooled"] = float(pooled_correlation(pred, human, method))
        accuracy, n_pairs = pairwise_accuracy(context_index, pred, human)
        row["pairwise_accuracy"] = float(accuracy)
        row["n_pairs"] = int(n_pairs)
        rows.append(row)
    schema = pl.from_arrow(CORRELATIONS_SCHEMA.empty_table()).schema
    return pl.DataFrame(rows, schema=schema).sort(KEYS) if rows else pl.DataFrame(schema=schema)


def _label(judge: str, attribute: str, template_id: str, multi_judge: bool, multi_template: bool) -> str:
    parts = [judge] if multi_judge else []
    parts.append(attribute)
    if multi_template:
        parts.append(template_id)
    return "/".join(parts)


def _finite(value: float) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def mlflow_metrics(
    correlations: pl.DataFrame, bias: pl.DataFrame, extra: dict[str, float]
) -> dict[str, float]:
    """Flat metric names: ``<attribute>/<method>/<metric>`` and ``<attribute>/p_a`` (judge and template added
    to the prefix when a run has several)."""
    multi_judge = bias["judge"].n_unique() > 1
    multi_template = bias["template_id"].n_unique() > 1
    out: dict[str, float] = {}
    for row in correlations.iter_rows(named=True):
        prefix = _label(row["judge"], row["attribute"], row["template_id"], multi_judge, multi_template)
        for name in (*CORRELATIONS, *(f"{m}_pooled" for m in CORRELATIONS), "pairwise_accuracy"):
            if _finite(row[name]):
                out[f"{prefix}/{row['method']}/{name}"] = row[name]
    for row in bias.iter_rows(named=True):
        prefix = _label(row["judge"], row["attribute"], row["template_id"], multi_judge, multi_template)
        names = ["p_a", "p_a_hard", "p_a_debiased", "label_mass", "cache_share"]
        if row["p_tie"] > 0:  # a tie option: how often the judge picks it
            names += ["p_tie", "tie_hard"]
        for name in names:
            if _finite(row[name]):
                out[f"{prefix}/{name}"] = row[name]
    out.update({k: v for k, v in extra.items() if _finite(v)})
    return out


def summary_text(correlations: pl.DataFrame, bias: pl.DataFrame, judge_stats: JudgeStats | None) -> str:
    """A short table for the terminal: per attribute and method the correlations, then P(A) per attribute."""
    lines = []
    if correlations.height:
        lines.append(
            f"{'attribute':<18} {'template':<14} {'method':<26} {'spearman':>8} {'pearson':>8} {'kendall':>8} "
            f"{'pair-acc':>8} {'contexts':>8}"
        )
        for r in correlations.iter_rows(named=True):
            lines.append(
                f"{r['attribute']:<18} {r['template_id']:<14} {r['method']:<26} {r['spearman']:>8.3f} "
                f"{r['pearson']:>8.3f} {r['kendall']:>8.3f} {r['pairwise_accuracy']:>8.3f} "
                f"{r['n_contexts'] - r['n_skipped_contexts']:>8d}"
            )
    else:
        lines.append("no human scores: scores and ranks only (no correlation)")
    if bias.height:
        lines.append("")
        lines.append(
            f"{'attribute':<18} {'template':<8} {'P(A) raw':>9} {'hard A':>7} {'P(A) debiased':>14} "
            f"{'label mass':>10}"
        )
    for r in bias.iter_rows(named=True):
        lines.append(
            f"{r['attribute']:<18} {r['template_id']:<8} {r['p_a']:>9.3f} {r['p_a_hard']:>7.3f} "
            f"{r['p_a_debiased']:>14.3f} {r['label_mass']:>10.3f}"
        )
    if judge_stats is not None:
        steady = judge_stats.rate
        lines.append("")
        lines.append(
            f"judged {judge_stats.prompts} prompts ({judge_stats.judged_now} this run"
            + (f", {judge_stats.reused} of them from the judgement store" if judge_stats.reused else "")
            + ") in "
            f"{judge_stats.seconds:.0f} s with engine start-up ({judge_stats.rate_with_startup:.2f}/s); "
            + (f"{steady:.2f}/s after the first batch; " if _finite(steady) else "")
            + f"prefix cache served {judge_stats.cache_share:.1%} of prompt tokens"
        )
        if judge_stats.requests or judge_stats.cached_replies:
            money = (
                f", {judge_stats.money:.4f} at the configured prices" if judge_stats.money is not None else ""
            )
            paths = "/".join(judge_stats.api_paths) or "none: every reply from the cache"
            lines.append(
                f"API ({paths} path): {judge_stats.requests} request(s) sent (retries included), {judge_stats.cached_replies} "
                f"prompt(s) answered from the reply cache; billed {judge_stats.billed_prompt_tokens} prompt and "
                f"{judge_stats.billed_completion_tokens} completion tokens{money}; "
                f"{judge_stats.missing_logprobs} of {judge_stats.logprobs_read} requested token log-probabilities "
                f"not among the returned alternatives ({judge_stats.missing_share:.1%}, floored at the smallest "
                "returned)"
            )
    return "\n".join(lines)


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
        .with_columns(mode=pl.lit(mode), cache_share=pl.col("cached_tokens") / pl.col("prompt_tokens"))
    )


def cost_table(judgments: pl.DataFrame, ratings: pl.DataFrame) -> pl.DataFrame:
    """COST: per judge, attribute, template and mode, the prompts judged, the candidates they assessed, prompt
    tokens (and the prefix cache's share), generated tokens and engine seconds."""
    from pipeline.absolute import COMPARE
    from pipeline.schemas import COST

    parts = []
    if judgments.height:
        compare = judgments.with_columns(generated_tokens=pl.lit(1, dtype=pl.Int64))
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
        for (mode,), group in ratings.group_by(["mode"], maintain_order=True):
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
    from pipeline.schemas import ASSESSMENT

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
            .rank("min", descending=True)
            .over(["judge", "attribute"])
            .cast(pl.Int32)
        )
        .with_columns(pl.col("rank").fill_null(pl.len().over(["judge", "attribute"]).cast(pl.Int32)))
        .sort(["judge", "attribute", "rank", "method"])
    )


def absolute_text(
    assessment: pl.DataFrame, cost: pl.DataFrame, failures: pl.DataFrame, bias: pl.DataFrame
) -> str:
    """The summary's second half when a run judges absolutely too: approaches side by side per attribute, the
    cost per mode, parse failures per mode with an example, and how often a tie option was picked."""
    lines = []
    if assessment.height:
        lines.append(
            f"{'attribute':<14} {'approach':<11} {'method':<26} {'spearman':>8} {'pair-acc':>8} {'prompts':>8} "
            f"{'per cand':>8} {'seconds':>8}"
        )
        for r in assessment.iter_rows(named=True):
            per = r["prompts_per_candidate"]
            lines.append(
                f"{r['attribute']:<14} {r['approach']:<11} {r['method']:<26} {_num(r['spearman']):>8} "
                f"{_num(r['pairwise_accuracy']):>8} {r['prompts']:>8d} {_num(per, 1):>8} {r['seconds']:>8.1f}"
            )
        lines.append("")
    if cost.height:
        lines.append(
            f"{'mode':<13} {'template':<14} {'prompts':>8} {'prompt tok':>10} {'cached':>7} {'gen tok':>8} {'seconds':>8}"
        )
        totals = cost.group_by(["mode", "template_id"], maintain_order=True).agg(
            pl.col("prompts", "prompt_tokens", "cached_tokens", "generated_tokens", "seconds").sum()
        )
        for r in totals.iter_rows(named=True):
            share = r["cached_tokens"] / r["prompt_tokens"] if r["prompt_tokens"] else float("nan")
            lines.append(
                f"{r['mode']:<13} {r['template_id']:<14} {r['prompts']:>8d} {r['prompt_tokens']:>10d} "
                f"{share:>7.1%} {r['generated_tokens']:>8d} {r['seconds']:>8.1f}"
            )
    if failures.height:
        lines.append("")
        by_mode = failures.group_by("mode", maintain_order=True).agg(
            samples=pl.col("n_failed").sum(),
            unscored=(~pl.col("scored")).sum(),
            example=pl.col("text").first(),
            why=pl.col("failure").first(),
        )
        for r in by_mode.iter_rows(named=True):
            lines.append(
                f"{r['mode']}: {r['samples']} generated sample(s) did not parse ({r['unscored']} candidate rating(s) "
                f"left without a score), e.g. {r['example']!r}: {r['why']} (rating_failures.csv)"
            )
    ties = bias.filter(pl.col("p_tie") > 0) if bias.height else bias
    if ties.height:
        lines.append("")
        for r in ties.iter_rows(named=True):
            lines.append(
                f"tie option ({r['attribute']}, {r['template_id']}): mean p(tie) {r['p_tie']:.3f}, "
                f"top label in {r['tie_hard']:.1%} of prompts"
            )
    return "\n".join(lines)


def _num(value: float | None, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if _finite(value) else "-"
