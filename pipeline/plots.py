"""Plots of a finished run (matplotlib, no screen needed): predicted vs human scores, correlation per method,
and position bias. Used by the run (files logged to MLflow) and by the notebook."""

from __future__ import annotations

from pathlib import Path

import polars as pl


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def predicted_vs_human(scores: pl.DataFrame, method: str, path: Path | None = None):
    """One panel per attribute: the method's score (centred per context) against the human score."""
    plt = _pyplot()
    data = scores.filter((pl.col("method") == method) & pl.col("human_score").is_not_null()).with_columns(
        centred=pl.col("score")
        - pl.col("score").mean().over(["judge", "attribute", "template_id", "context_id"])
    )
    attributes = data["attribute"].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(
        1, max(1, len(attributes)), figsize=(4 * max(1, len(attributes)), 3.6), squeeze=False
    )
    for ax, attribute in zip(axes[0], attributes, strict=False):
        part = data.filter(pl.col("attribute") == attribute)
        ax.scatter(part["human_score"].to_numpy(), part["centred"].to_numpy(), s=10, alpha=0.6)
        ax.set_xlabel(f"human {attribute}")
        ax.set_ylabel(f"{method} score (centred per context)")
        ax.set_title(attribute)
    if not attributes:
        axes[0][0].text(0.5, 0.5, "no human scores", ha="center", va="center")
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig


def correlation_by_method(correlations: pl.DataFrame, metric: str = "spearman", path: Path | None = None):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    methods = correlations["method"].unique(maintain_order=True).to_list()
    attributes = correlations["attribute"].unique(maintain_order=True).to_list()
    width = 0.8 / max(1, len(methods))
    for m, method in enumerate(methods):
        part = correlations.filter(pl.col("method") == method)
        values = [
            part.filter(pl.col("attribute") == a)[metric].mean() if a in part["attribute"].to_list() else 0.0
            for a in attributes
        ]
        ax.bar([x + m * width for x in range(len(attributes))], values, width=width, label=method)
    ax.set_xticks([x + width * (len(methods) - 1) / 2 for x in range(len(attributes))], attributes)
    ax.set_ylabel(f"{metric} (mean over contexts)")
    ax.axhline(0, color="black", linewidth=0.5)
    ax.legend(fontsize=8)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig


def position_bias(bias: pl.DataFrame, path: Path | None = None):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    labels = [f"{a}\n{t}" for a, t in zip(bias["attribute"], bias["template_id"], strict=True)]
    x = range(len(labels))
    ax.bar([v - 0.2 for v in x], bias["p_a"].to_list(), width=0.4, label="P(A) raw")
    ax.bar([v + 0.2 for v in x], bias["p_a_debiased"].to_list(), width=0.4, label="P(A) debiased")
    ax.axhline(0.5, color="black", linewidth=0.8, linestyle="--")
    ax.set_xticks(list(x), labels)
    ax.set_ylim(0, 1)
    ax.set_ylabel("P(A)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig
