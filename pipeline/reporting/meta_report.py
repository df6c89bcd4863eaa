"""The meta-evaluation in the report: the judges measured as the judge benchmarks measure them (a leaderboard of
judges with intervals, the numbers of each ordering, the same by category), what a number near one half means, and
the prompts a judge left out."""

from __future__ import annotations

import polars as pl

# Categories shown side by side in the summary (every one is in meta_evaluation.csv).
MAX_CATEGORIES = 8


def _pct(value: float | None, digits: int = 2) -> str:
    return f"{100 * value:.{digits}f}" if value is not None else "n/a"


def meta_text(meta: pl.DataFrame, level: float) -> str:
    """Per attribute with an objective label: the judges ranked by JudgeBench's accuracy with their intervals and
    LLMBar's numbers, then each judge's accuracy by category; a line on chance where a judge's interval holds it."""
    if not meta.height:
        return ""
    lines = []
    lo, hi = round(100 * (1 - level) / 2, 1), round(100 * (1 + level) / 2, 1)
    for (attribute,), group in meta.group_by(["attribute"], maintain_order=True):
        overall = group.filter(pl.col("category").is_null())
        several = overall["template_id"].n_unique() > 1
        lines.append(
            f"meta-evaluation {attribute}: judged right as the judge benchmarks count it, on the pairs with one right "
            f"candidate (percent; accuracy: JudgeBench's, both orderings' votes summed, {lo:g}-{hi:g}% bootstrap "
            "interval over the pairs; first/second: LLMBar's accuracy with the candidate listed first shown first, "
            "then second; agree: both orderings choose the same; none: orderings that prefer neither)"
        )
        lines.append(
            f"  {'rank':>4} {'judge':<34} {'pairs':>6} {'accuracy':>8} {'interval':>15} {'first':>6} {'second':>6} "
            f"{'mean':>6} {'both':>6} {'agree':>6} {'none':>6} {'debiased':>8}"
        )
        for r in overall.iter_rows(named=True):
            name = f"{r['judge']}/{r['template_id']}" if several else r["judge"]
            lines.append(
                f"  {r['rank']:>4} {name[:34]:<34} {r['n_pairs']:>6} {_pct(r['accuracy']):>8} "
                f"{'[' + _pct(r['lower'], 1) + ', ' + _pct(r['upper'], 1) + ']':>15} "
                f"{_pct(r['accuracy_listed_first']):>6} {_pct(r['accuracy_listed_second']):>6} "
                f"{_pct(r['accuracy_orderings']):>6} {_pct(r['both_right']):>6} "
                f"{_pct(r['positional_agreement']):>6} {_pct(r['no_preference']):>6} "
                f"{_pct(r['accuracy_debiased']):>8}"
            )
        lines += _by_category(group, several)
        lines += _chance(overall, level)
    return "\n".join(lines)


def _by_category(group: pl.DataFrame, several: bool) -> list[str]:
    """Each judge's accuracy (and pairs) per category, the categories side by side."""
    split = group.filter(pl.col("category").is_not_null())
    if not split.height:
        return []
    categories = sorted(split["category"].unique().to_list())
    shown = categories[:MAX_CATEGORIES]
    lines = [
        "  by category (accuracy, pairs)"
        + (
            f"; {len(categories) - len(shown)} more in meta_evaluation.csv"
            if len(categories) > len(shown)
            else ""
        )
        + ":",
        f"  {'judge':<34} {'all':>12}" + "".join(f" {c[:20]:>20}" for c in shown),
    ]
    overall = group.filter(pl.col("category").is_null())
    for r in overall.iter_rows(named=True):
        name = f"{r['judge']}/{r['template_id']}" if several else r["judge"]
        cells = [f"{_pct(r['accuracy'])} ({r['n_pairs']})"]
        for category in shown:
            row = split.filter(
                (pl.col("judge") == r["judge"])
                & (pl.col("template_id") == r["template_id"])
                & (pl.col("category") == category)
            )
            cells.append(f"{_pct(row['accuracy'][0])} ({row['n_pairs'][0]})" if row.height else "-")
        lines.append(f"  {name[:34]:<34} {cells[0]:>12}" + "".join(f" {c:>20}" for c in cells[1:]))
    return lines


def _chance(overall: pl.DataFrame, level: float) -> list[str]:
    """What a number near one half means; which judges these pairs cannot tell from chance, and which prefer a side
    (JudgeBench counts their pairs wrong)."""
    lines = [
        "  near 50% is chance: a judge that cannot tell the right candidate from the wrong one is right on half the "
        "pairs by luck in each ordering (first, second, mean) and by the debiased verdict; on JudgeBench's count too if "
        "it picks alike in both orderings, and far less if it prefers a side whatever is on it (its two votes cancel "
        "and the pair counts wrong). Released judges score 50-75% on JudgeBench's GPT-4o pairs (o1-mini 65.71%)"
    ]
    at_chance = overall.filter((pl.col("lower") <= 0.5) & (pl.col("upper") >= 0.5))
    if at_chance.height:
        names = ", ".join(at_chance["judge"].unique(maintain_order=True).to_list()[:4])
        lines.append(
            f"  the {100 * level:g}% interval of {names} holds 50%: these pairs do not show it telling right from wrong"
        )
    sided = overall.filter(
        pl.col("positional_agreement").is_not_null() & (pl.col("positional_agreement") < 0.5)
    )
    if sided.height:
        names = ", ".join(sided["judge"].unique(maintain_order=True).to_list()[:4])
        lines.append(
            f"  {names}: its two orderings choose differently on most pairs (it prefers a side, whichever candidate is "
            "on it), so JudgeBench counts those pairs wrong: its accuracy falls below 50% while each ordering's "
            "accuracy stays near chance"
        )
    return lines


def left_out_text(left_out: pl.DataFrame) -> str:
    """One line per judge that left prompts out (a recorded judge's file lacked their pairs)."""
    if not left_out.height:
        return ""
    counts = left_out.group_by("judge", maintain_order=True).agg(
        prompts=pl.len(), contexts=pl.col("context_id").n_unique()
    )
    parts = [
        f"{r['judge']} {r['prompts']} prompt(s) in {r['contexts']} context(s)"
        for r in counts.iter_rows(named=True)
    ]
    return (
        "left out, their pairs lacking from the judge's file of verdicts (judge.engine.match=partial): "
        + "; ".join(parts)
        + " (left_out.csv)"
    )
