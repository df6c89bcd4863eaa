"""Plots of a finished run (matplotlib, no screen needed): predicted vs human scores, correlation per method,
position bias, the leaderboard, and an adaptive run's criterion over rounds and ranking with intervals. Used by
the run (files logged to MLflow) and by the notebook.

A figure is an extra: the run draws each through :func:`draw`, which turns a figure that cannot be drawn into a
warning naming it (and a line of the summary), so that the run still ends with its tables, summary and MLflow run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

log = logging.getLogger("pipeline")


def draw(path: Path, figure: Callable[..., Any], *args: Any) -> str | None:
    """Draw ``figure(*args, path)``; None when it is written, else what went wrong (logged as a warning naming the
    figure; nothing is raised)."""
    try:
        figure(*args, path)
    except Exception as exc:  # noqa: BLE001 (a figure is never worth a finished run)
        _pyplot().close("all")
        problem = f"figure {path.parent.name}/{path.name} could not be drawn ({type(exc).__name__}: {exc})"
        log.warning("%s; the tables and the summary are written without it", problem)
        return problem
    return None


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path | None):
    """Write the figure to ``path`` and close it (the figure is returned either way, for a notebook)."""
    if path is not None:
        fig.savefig(path, dpi=110)
        _pyplot().close(fig)
    return fig


def _first_group(frame: pl.DataFrame, keys: list[str]) -> tuple[dict, pl.DataFrame]:
    """The first row, and the rows that share its ``keys`` (the one group a plot draws)."""
    first = frame.row(0, named=True)
    return first, frame.filter(pl.all_horizontal(pl.col(k) == first[k] for k in keys))


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
    return _save(fig, path)


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
    return _save(fig, path)


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
    return _save(fig, path)


APPROACH_COLOURS = {"comparative": "tab:blue", "absolute": "tab:orange", "combined": "tab:green"}


def spearman_by_mode(assessment: pl.DataFrame, path: Path | None = None):
    """Spearman of every method (absolute modes, comparative methods, combined) per attribute, coloured by
    approach, with the prompts each used per candidate in its label."""
    plt = _pyplot()
    attributes = assessment["attribute"].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(
        1, max(1, len(attributes)), figsize=(max(6, 0.55 * assessment.height + 2), 4), squeeze=False
    )
    for ax, attribute in zip(axes[0], attributes, strict=False):
        part = assessment.filter(pl.col("attribute") == attribute).sort(
            "spearman", descending=True, nulls_last=True
        )
        labels = [
            f"{m}\n{p:.0f}/cand" if p is not None else m
            for m, p in zip(part["method"], part["prompts_per_candidate"], strict=True)
        ]
        values = [v if v is not None else 0.0 for v in part["spearman"].to_list()]
        colours = [APPROACH_COLOURS.get(a, "grey") for a in part["approach"]]
        ax.bar(range(len(labels)), values, color=colours)
        ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=7)
        ax.axhline(0, color="black", linewidth=0.5)
        ax.set_title(attribute)
        ax.set_ylabel("Spearman (mean over contexts)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in APPROACH_COLOURS.values()]
    axes[0][0].legend(handles, list(APPROACH_COLOURS), fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def leaderboard(board: pl.DataFrame, path: Path | None = None):
    """Each model's win rate and mean scores with their bootstrap intervals, one panel per metric (first
    attribute and template)."""
    plt = _pyplot()
    first, part = _first_group(board, ["judge", "attribute", "template_id"])
    metrics = part["metric"].unique(maintain_order=True).to_list()
    order = part.filter(pl.col("metric") == metrics[0]).sort("estimate")["model"].to_list()
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(4.2 * len(metrics), 0.45 * len(order) + 1.6), squeeze=False
    )
    for ax, metric in zip(axes[0], metrics, strict=True):
        rows = {r["model"]: r for r in part.filter(pl.col("metric") == metric).iter_rows(named=True)}
        y = list(range(len(order)))
        est = [
            rows[m]["estimate"] if m in rows and rows[m]["estimate"] is not None else float("nan")
            for m in order
        ]
        low = [_bar(rows[m]["estimate"], rows[m]["lower"]) if m in rows else 0.0 for m in order]
        high = [_bar(rows[m]["upper"], rows[m]["estimate"]) if m in rows else 0.0 for m in order]
        ax.errorbar(est, y, xerr=[low, high], fmt="o", capsize=3)
        ax.set_yticks(y, order if ax is axes[0][0] else [""] * len(order))
        ax.set_title(metric)
        ax.grid(axis="x", alpha=0.3)
    over = "the pool's items" if first.get("unit") == "item" else "inputs"
    fig.suptitle(
        f"{first['attribute']} ({first['template_id']}): estimate and bootstrap interval over {over}"
    )
    fig.tight_layout()
    return _save(fig, path)


def _bar(high: float | None, low: float | None) -> float:
    """An error bar's length ``high - low``: 0 where either is not defined, never below 0."""
    if high is None or low is None or not (high == high and low == low):
        return 0.0
    return max(0.0, high - low)


def rounds_curve(rounds: pl.DataFrame, path: Path | None = None):
    """Adaptive rounds: the stopping criterion's value (expected tau without a criterion) and, where the input has
    human scores, the Spearman with them, against judge calls per item; one line per context (the first 10)."""
    plt = _pyplot()
    data = rounds.sort("round").with_columns(per_item=pl.col("calls") / pl.col("items"))
    criteria = [c for c in data["criterion"].unique(maintain_order=True).to_list() if c]
    value, label = (
        ("value", f"stopping criterion: {criteria[0]}")
        if len(criteria) == 1
        else ("expected_tau", "expected_tau" + ("" if criteria else " (no stopping rule)"))
    )
    human = data["spearman"].is_not_null().any()
    fig, axes = plt.subplots(1, 2 if human else 1, figsize=(9 if human else 5, 3.6), squeeze=False)
    contexts = data["context_id"].unique(maintain_order=True).to_list()
    for cid in contexts[:10]:
        part = data.filter(pl.col("context_id") == cid)
        axes[0][0].plot(part["per_item"].to_numpy(), part[value].to_numpy(), marker="o", label=str(cid)[:20])
        if human:
            axes[0][1].plot(part["per_item"].to_numpy(), part["spearman"].to_numpy(), marker="o")
    axes[0][0].set_ylabel(label)
    axes[0][0].set_title("criterion over rounds")
    if human:
        axes[0][1].set_ylabel("Spearman with the human scores")
        axes[0][1].set_title("agreement over rounds")
    for ax in axes[0]:
        ax.set_xlabel("judge calls per item")
        ax.grid(alpha=0.3)
    if len(contexts) > 1:
        axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def ranking(table: pl.DataFrame, method: str, level: float, path: Path | None = None):
    """The first context's ranking (first attribute and template): each item's score with its interval, best
    first; the human score as the colour where the input has it."""
    plt = _pyplot()
    first, part = _first_group(table, ["judge", "attribute", "template_id", "context_id"])
    part = part.sort("rank")
    fig, ax = plt.subplots(figsize=(8, 3.8))
    x = part["rank"].to_numpy()
    score = part["score"].to_numpy()
    if part["stderr"].is_not_null().any():
        low = (part["score"] - part["lower"]).fill_null(0.0).clip(lower_bound=0.0).to_numpy()
        high = (part["upper"] - part["score"]).fill_null(0.0).clip(lower_bound=0.0).to_numpy()
        ax.errorbar(x, score, yerr=[low, high], fmt="none", ecolor="grey", alpha=0.5, linewidth=0.8)
    if part["human_score"].is_not_null().all():
        dots = ax.scatter(x, score, c=part["human_score"].to_numpy(), s=8, cmap="viridis", zorder=3)
        fig.colorbar(dots, ax=ax, label=f"human {first['attribute']}")
    else:
        ax.scatter(x, score, s=8, zorder=3)
    ax.set_xlabel("rank (1 = best)")
    ax.set_ylabel(f"{method} score")
    ax.set_title(
        f"{first['attribute']} ({first['template_id']}), {first['context_id']}: {part.height:,} items, "
        f"{100 * level:g}% intervals"
    )
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)
