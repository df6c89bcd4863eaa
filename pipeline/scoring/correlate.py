"""Agreement of every method's scores with the human scores: per context averaged, pooled, system-level, and
pairwise accuracy."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.contracts.schemas import CORRELATION_METHODS as CORRELATIONS
from pipeline.contracts.schemas import CORRELATIONS as CORRELATIONS_SCHEMA
from pipeline.methods.agreement.metrics import (
    pairwise_accuracy,
    per_context_correlation,
    pooled_correlation,
    system_correlation,
)

KEYS = ["judge", "attribute", "template_id", "method"]


def defined(value: float) -> float | None:
    """A correlation, or null where it is not defined (every human score equal, fewer than two candidates, no
    systems): never NaN, printed n/a."""
    return float(value) if np.isfinite(value) else None


def correlation_table(scores: pl.DataFrame, systems: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per (judge, attribute, template, method): correlations per context averaged over contexts (contexts with
    constant human scores skipped and counted), over the whole pool, pairwise accuracy, and with ``systems``
    (``context_id``, ``candidate_id``, ``system``) the system-level correlations; null where not defined."""
    with_human = scores.filter(pl.col("human_score").is_not_null())
    if systems is not None and systems.height:
        with_human = with_human.join(systems, on=["context_id", "candidate_id"], how="left")
    else:
        with_human = with_human.with_columns(system=pl.lit(None, dtype=pl.String))
    rows = []
    for key, group in with_human.group_by(KEYS, maintain_order=True):
        context_index = group["context_id"].rank("dense").to_numpy().astype(np.int64) - 1
        pred = group["score"].to_numpy()
        human = group["human_score"].to_numpy()
        row = dict(zip(KEYS, key, strict=True))
        for method in CORRELATIONS:
            summary = per_context_correlation(context_index, pred, human, method)
            row[method] = defined(summary.mean)
            row["n_contexts"] = int(summary.n_contexts)
            row["n_skipped_contexts"] = int(summary.n_skipped)
            row[f"{method}_pooled"] = defined(pooled_correlation(pred, human, method))
        accuracy, n_pairs = pairwise_accuracy(context_index, pred, human)
        row["pairwise_accuracy"] = defined(accuracy)
        row["n_pairs"] = int(n_pairs)
        named = group.filter(pl.col("system").is_not_null())
        row["n_systems"] = 0
        for method in CORRELATIONS:
            value, n_systems = (
                system_correlation(
                    named["system"].to_numpy(),
                    named["score"].to_numpy(),
                    named["human_score"].to_numpy(),
                    method,
                )
                if named.height
                else (float("nan"), 0)
            )
            row[f"{method}_system"] = defined(value)
            row["n_systems"] = n_systems
        rows.append(row)
    schema = pl.from_arrow(CORRELATIONS_SCHEMA.empty_table()).schema
    return pl.DataFrame(rows, schema=schema).sort(KEYS) if rows else pl.DataFrame(schema=schema)
