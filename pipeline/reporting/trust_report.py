"""Trust with a guarantee in the report: a line in words per judge of the cascade, what is escalated, the
prediction-powered leaderboard beside people's alone, and the risk-coverage figure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from pipeline.reporting.plots import _pyplot, _save

ESCALATED = "escalated"


def _pct(value: float | None, digits: int = 0) -> str:
    return f"{100 * value:.{digits}f}%" if value is not None else "n/a"


def trust_text(trust: pl.DataFrame, accepted: pl.DataFrame, labels: pl.DataFrame) -> str:
    """One line per judge of the cascade (per attribute), then what is escalated to people."""
    if not trust.height:
        labelled = labels["preference"].is_not_null().sum() if labels.height else 0
        if labelled:
            return (
                f"trust: {labelled} pair(s) labelled by people, drawn with unequal chances (an active sample): they "
                "power the leaderboards below but certify no verdict (that needs a uniform sample: trust.sample=random)"
            )
        return ""
    lines = []
    several = trust["template_id"].n_unique() > 1
    steps = trust["step"].max()
    for row in trust.sort(["attribute", "step"]).iter_rows(named=True):
        name = f"{row['judge']}/{row['template_id']}" if several else row["judge"]
        head = f"trust {row['attribute']} ({name}, step {row['step']} of the cascade):"
        level = f"{100 * (1 - row['delta']):g}% confidence" + (
            f" (its share of trust.delta={row['delta'] * steps:g})" if steps > 1 else ""
        )
        if row["certified"]:
            lines.append(
                f"{head} accepts {_pct(row['coverage'])} of comparisons with agreement >= {1 - row['alpha']:.2f} "
                f"guaranteed at {level}, calibrated on {row['n_labels']} labels (it agrees with people on "
                f"{_pct(row['agreement'], 1)} of the {row['labels_kept']} labelled ones it keeps; confidence >= "
                f"{row['threshold']:.3f}; bound {row['bound']:.3f})"
            )
        elif row["labels_needed"] is not None:
            lines.append(
                f"{head} certifies nothing: {row['n_labels']} labels cannot guarantee agreement >= "
                f"{1 - row['alpha']:.2f} at {level}; at the disagreement its most confident verdicts show "
                f"({_pct(row['observed_disagreement'], 1)}) about {row['labels_needed']} labels would be needed"
            )
        else:
            lines.append(
                f"{head} certifies nothing: its verdicts disagree with people on at least "
                f"{_pct(row['observed_disagreement'], 1)} at every confidence, so no number of labels can guarantee "
                f"agreement >= {1 - row['alpha']:.2f} (raise trust.alpha, or put a stronger judge first)"
            )
    for (attribute,), group in accepted.group_by(["attribute"], maintain_order=True):
        escalated = group.filter(pl.col("accepted_by") == ESCALATED).height
        rows = trust.filter(pl.col("attribute") == attribute)
        whole = (
            f" (together, agreement >= {1 - rows['alpha'][0]:.2f} at {100 * (1 - rows['delta'].sum()):g}% "
            "confidence)"
            if rows.height and rows["certified"].any()
            else ""
        )
        outside = group.filter(~pl.col("population")).height
        lines.append(
            f"trust {attribute}: {group.height - escalated} of {group.height} comparisons kept with the "
            f"guarantee{whole}, {escalated} escalated to people (accepted.csv; the review's queue: --strategy "
            "escalated)"
            + (
                f"; the labels were drawn from {group.height - outside} of the {group.height} comparisons only (the "
                f"pairs people scored, or the review's sample frame): the guarantee covers those, and the other "
                f"{outside} are escalated, since the labels say nothing of them"
                if outside
                else "; the labels were drawn from every comparison of the run"
            )
        )
    return "\n".join(lines)


def ppi_text(board: pl.DataFrame, level: float) -> str:
    """Per judge, attribute and template, the models by their prediction-powered win rate, beside people's alone."""
    if not board.height:
        return ""
    lines = []
    lo, hi = round(100 * (1 - level) / 2, 1), round(100 * (1 + level) / 2, 1)
    wins = board.filter(pl.col("metric") == "win_rate")
    for (judge, attribute, template), group in wins.group_by(
        ["judge", "attribute", "template_id"], maintain_order=True
    ):
        ppi = group.filter(pl.col("source") == "ppi").sort("estimate", descending=True, nulls_last=True)
        people = {r["model"]: r for r in group.filter(pl.col("source") == "people").iter_rows(named=True)}
        lams = ppi["lam"].drop_nulls()
        reading = (
            "people alone (lam = 0: the judge's verdicts add nothing here)"
            if lams.len() and float(lams.max()) == 0.0
            else "people's labels and the judge's verdicts together (PPI++)"
        )
        lines.append(
            f"prediction-powered leaderboard {attribute} ({template}, judge {judge}): win rate from {reading}, "
            f"{lo:g}-{hi:g}% intervals valid whatever the judge's bias; beside it people alone"
        )
        for r in ppi.iter_rows(named=True):
            alone = people.get(r["model"])
            cell = _interval(r["estimate"], r["lower"], r["upper"])
            other = _interval(alone["estimate"], alone["lower"], alone["upper"]) if alone else "-"
            gain = (
                f", as narrow as {r['effective_labels']:.0f} labels alone"
                if r["effective_labels"] is not None
                else ""
            )
            how = "" if r["interval"].startswith("PPI++") else f"; {r['interval']}"
            lines.append(
                f"  {r['model'][:28]:<28} {cell:>26}   people alone {other:>26}   ({r['n_labels']} labelled of "
                f"{r['n_games']} games{gain}{how})"
            )
    return "\n".join(lines)


def _interval(estimate: float | None, lower: float | None, upper: float | None) -> str:
    if estimate is None:
        return "n/a (too few labels)"
    return f"{estimate:.3f} [{lower:.3f}, {upper:.3f}]"


def risk_coverage_figure(curve: pl.DataFrame, trust: pl.DataFrame, path: Path | None = None):
    """Each judge of the cascade: its disagreement with people (and the bound) against the share of its labels kept,
    as its threshold falls; alpha, and the threshold certified."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for (judge, attribute, template), group in curve.group_by(
        ["judge", "attribute", "template_id"], maintain_order=True
    ):
        group = group.sort("coverage")
        label = f"{judge} ({attribute}, {template})"
        line = ax.plot(group["coverage"].to_numpy(), group["risk"].to_numpy(), label=label)[0]
        ax.plot(
            group["coverage"].to_numpy(), group["bound"].to_numpy(), linestyle="--", color=line.get_color()
        )
        chosen = trust.filter(
            (pl.col("judge") == judge)
            & (pl.col("attribute") == attribute)
            & (pl.col("template_id") == template)
        )
        if chosen.height and chosen["certified"][0]:
            t = chosen["threshold"][0]
            at = group.filter(pl.col("threshold") >= t - 1e-12).sort("threshold").head(1)
            if at.height:
                ax.scatter(at["coverage"].to_numpy(), at["risk"].to_numpy(), color=line.get_color(), zorder=3)
    alphas = np.unique(trust["alpha"].to_numpy()) if trust.height else []
    for alpha in alphas:
        ax.axhline(alpha, color="grey", linestyle=":", linewidth=1)
    ax.set_xlabel("share of calibration labels kept (coverage)")
    ax.set_ylabel("disagreement with people (dashed: the bound)")
    ax.set_ylim(0, 1)
    ax.set_title("risk against coverage; dot: the threshold certified")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)
