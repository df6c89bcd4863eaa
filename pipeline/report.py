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
        for name in ("p_a", "p_a_hard", "p_a_debiased", "label_mass", "cache_share"):
            if _finite(row[name]):
                out[f"{prefix}/{name}"] = row[name]
    out.update({k: v for k, v in extra.items() if _finite(v)})
    return out


def summary_text(correlations: pl.DataFrame, bias: pl.DataFrame, judge_stats: JudgeStats | None) -> str:
    """A short table for the terminal: per attribute and method the correlations, then P(A) per attribute."""
    lines = []
    if correlations.height:
        lines.append(
            f"{'attribute':<18} {'template':<8} {'method':<18} {'spearman':>8} {'pearson':>8} {'kendall':>8} "
            f"{'pair-acc':>8} {'contexts':>8}"
        )
        for r in correlations.iter_rows(named=True):
            lines.append(
                f"{r['attribute']:<18} {r['template_id']:<8} {r['method']:<18} {r['spearman']:>8.3f} "
                f"{r['pearson']:>8.3f} {r['kendall']:>8.3f} {r['pairwise_accuracy']:>8.3f} "
                f"{r['n_contexts'] - r['n_skipped_contexts']:>8d}"
            )
    else:
        lines.append("no human scores: scores and ranks only (no correlation)")
    lines.append("")
    lines.append(
        f"{'attribute':<18} {'template':<8} {'P(A) raw':>9} {'hard A':>7} {'P(A) debiased':>14} {'label mass':>10}"
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
            f"judged {judge_stats.prompts} prompts ({judge_stats.judged_now} this run) in "
            f"{judge_stats.seconds:.0f} s with engine start-up ({judge_stats.rate_with_startup:.2f}/s); "
            + (f"{steady:.2f}/s after the first batch; " if _finite(steady) else "")
            + f"prefix cache served {judge_stats.cache_share:.1%} of prompt tokens"
        )
    return "\n".join(lines)
