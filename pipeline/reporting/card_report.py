"""The judge's report card in the report: its lines in the summary, its figure, and where a leaderboard's order
changes once the texts' length is regressed out."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl

from pipeline.methods.quality.signal import MIN_UNITS
from pipeline.reporting.plots import _first_group, _pyplot, _save

CONTROLLED_SUFFIX = ":length_controlled"


def _pct(value: float | None) -> str:
    return f"{100 * value:.0f}%" if value is not None else "n/a"


def _pct2(value: float | None) -> str:
    return f"{100 * value:.2f}%" if value is not None else "n/a"


def _num(value: float | None, digits: int = 3, sign: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _evidence(row: dict) -> str:
    """The test of "no signal" in words (:mod:`pipeline.methods.quality.signal`)."""
    if row["signal"] is None and row["signal_units"] < MIN_UNITS:
        return f"too few to test: {row['signal_units']} unit(s) judged both ways round, {MIN_UNITS} needed"
    if row["signal"] is None:
        return "its verdicts do not vary beyond its position bias"
    p = row["signal_p_value"]
    return (
        f"slot-A against slot-B verdicts r {row['signal']:+.2f}, p {p:.3g} over {row['signal_units']} units, "
        f"tested at {row['signal_alpha']:g}"
    )


def not_informative(row: dict) -> str:
    """What a judge that is not informative here means for every conclusion drawn from it."""
    return (
        f"NOT INFORMATIVE: judge {row['judge']}, {row['attribute']} ({row['template_id']}) is not distinguishable from "
        f"chance here ({_evidence(row)}): no ranking, leaderboard, place or calibration from it below is a finding"
    )


def signal_lines(card: pl.DataFrame) -> list[str]:
    """The summary's first lines: per judge, attribute and template, whether the judge is informative here and why."""
    lines = []
    for row in card.iter_rows(named=True):
        if row["informative"]:
            lines.append(
                f"informative: judge {row['judge']}, {row['attribute']} ({row['template_id']}): its verdicts prefer the "
                f"same candidates in both orderings beyond chance ({_evidence(row)})"
            )
        else:
            lines.append(not_informative(row))
    return lines


def uninformative(card: pl.DataFrame) -> dict[tuple[str, str, str], str]:
    """The (judge, attribute, template) groups whose judge is not informative here, with the test in words."""
    if not card.height:
        return {}
    rows = card.filter(~pl.col("informative")).iter_rows(named=True)
    return {(r["judge"], r["attribute"], r["template_id"]): _evidence(r) for r in rows}


def _chance(row: dict) -> str:
    """The agreement's interval, and where it stands against chance (one half)."""
    low, high = row["accuracy_lower"], row["accuracy_upper"]
    if low is None:
        return " (no interval: too few contexts, or rounds that do not vary)"
    side = (
        "above chance" if low > 0.5 else "below chance" if high < 0.5 else "not distinguishable from chance"
    )
    return f" [{_pct(low)}, {_pct(high)}], {side},"


def card_text(card: pl.DataFrame, limit: int = 6) -> str:
    """One line per judge, attribute and template (the first ``limit``; every one is in judge_card.csv)."""
    lines = []
    for row in card.head(limit).iter_rows(named=True):
        parts = [f"judge card {row['attribute']} ({row['template_id']}, judge {row['judge']}):"]
        if not row["informative"]:
            parts.append(f"not informative here ({_evidence(row)});")
        if row["n_human_pairs"] and not row["informative"]:
            parts.append(
                f"agrees with people on {_pct(row['accuracy'])} of {row['n_human_pairs']} pairs, as a judge at chance "
                "may; no calibration (a temperature fitted to noise is not a calibration);"
            )
        elif row["n_human_pairs"]:
            parts.append(
                f"agrees with people on {_pct(row['accuracy'])}{_chance(row)} of {row['n_human_pairs']} pairs; calibration ECE "
                f"{_num(row['ece'])} (Brier {_num(row['brier'])}) -> {_num(row['ece_calibrated'])} "
                f"({_num(row['brier_calibrated'])}) after a cross-fitted temperature; {row['temperature_reading']};"
            )
        else:
            parts.append("no human preferences (no calibration);")
        parts.append(
            f"its two orderings agree on {_pct(row['position_consistency'])} of pairs (P(A) {_num(row['p_a_raw'])} "
            f"raw, {_num(row['p_a_debiased'])} debiased);"
        )
        if row["n_length_pairs"]:
            people = (
                f", people {_pct(row['longer_share_people'])}"
                if row["longer_share_people"] is not None
                else ""
            )
            parts.append(
                f"prefers the longer text {_pct(row['longer_share_judge'])}{people}, length coefficient "
                f"{_num(row['length_coef'], 2, sign=True)};"
            )
        if row["n_self_pairs"]:
            parts.append(
                f"prefers its own outputs with p {_num(row['self_preference'], 2)} over {row['n_self_pairs']} pairs;"
            )
        if row["n_objective_pairs"]:
            parts.append(
                f"judged right on {_pct2(row['benchmark_accuracy'])} of {row['n_objective_pairs']} pairs with one right "
                f"candidate as JudgeBench counts it ({_pct2(row['ordering_accuracy'])} per ordering as LLMBar does, "
                f"its orderings choosing alike on {_pct2(row['positional_agreement'])});"
            )
        if row["n_served_models"] > 1:
            parts.append(
                f"changed within the run: its replies name {row['n_served_models']} models ({row['served_models']});"
            )
        if row["spearman"] is not None:
            parts.append(f"Spearman with people {_num(row['spearman'])} ({row['method']})")
        lines.append(" ".join(parts).rstrip(";"))
    if card.height > limit:
        lines.append(f"... and {card.height - limit} more in judge_card.csv")
    elif lines:
        lines[-1] += " (judge_card.csv)"
    return "\n".join(lines)


def rank_changes(board: pl.DataFrame, noise: Mapping[tuple[str, str, str], str] | None = None) -> str:
    """Where a model's place by win rate changes once the texts' length is regressed out (per judge, attribute and
    template; nothing where no place changes, or where the judge is not informative: ``noise``)."""
    lines = []
    for (judge, attribute, template), group in board.group_by(
        ["judge", "attribute", "template_id"], maintain_order=True
    ):
        if (judge, attribute, template) in (noise or {}):
            continue
        raw = (
            group.filter(pl.col("metric") == "win_rate").sort("estimate", descending=True)["model"].to_list()
        )
        controlled = (
            group.filter(pl.col("metric") == "win_rate" + CONTROLLED_SUFFIX)
            .drop_nulls("estimate")
            .sort("estimate", descending=True)["model"]
            .to_list()
        )
        if not controlled or raw == controlled:
            continue
        place = {m: k + 1 for k, m in enumerate(controlled)}
        moved = [f"{m} {k + 1} -> {place[m]}" for k, m in enumerate(raw) if place.get(m) != k + 1]
        lines.append(
            f"length-controlled leaderboard {attribute} ({template}, judge {judge}): places by win rate change once "
            f"the texts' length is regressed out: {', '.join(moved[:8])}" + (" ..." if len(moved) > 8 else "")
        )
    return "\n".join(lines)


def card_figure(card: pl.DataFrame, reliability: pl.DataFrame, path: Path | None = None):
    """The first judge's card: its reliability diagram before and after the cross-fitted temperature, and its
    agreement, position consistency and preference for the longer text beside people's."""
    plt = _pyplot()
    first, _ = _first_group(card, ["judge", "attribute", "template_id"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
    bins = reliability.filter(
        (pl.col("judge") == first["judge"])
        & (pl.col("attribute") == first["attribute"])
        & (pl.col("template_id") == first["template_id"])
    )
    left.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
    for calibrated, label in ((False, "as given"), (True, "cross-fitted temperature")):
        part = bins.filter(pl.col("calibrated") == calibrated).drop_nulls("mean_p")
        left.plot(part["mean_p"].to_numpy(), part["frequency"].to_numpy(), marker="o", label=label)
    left.set_xlabel("judge's P(i beats j)")
    left.set_ylabel("people preferred i")
    left.set_title(f"calibration (ECE {_num(first['ece'])} -> {_num(first['ece_calibrated'])})")
    left.legend(fontsize=8)
    measures = {
        "agrees with people": first["accuracy"],
        "orderings agree": first["position_consistency"],
        "prefers longer (judge)": first["longer_share_judge"],
        "prefers longer (people)": first["longer_share_people"],
    }
    names = [k for k, v in measures.items() if v is not None]
    right.barh(names, [measures[k] for k in names])
    right.axvline(0.5, color="grey", linestyle=":", linewidth=1)
    right.set_xlim(0, 1)
    right.set_title("share of pairs")
    chance = "" if first["informative"] else " - not informative here: not distinguishable from chance"
    fig.suptitle(f"judge card: {first['judge']}, {first['attribute']} ({first['template_id']}){chance}")
    fig.tight_layout()
    return _save(fig, path)
