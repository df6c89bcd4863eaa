"""The report of an adaptive run: the curve of the stopping criterion over rounds, and the ranking with per-item
intervals (pure functions on the ROUNDS and SCORES tables; the plots are :mod:`pipeline.reporting.plots`).

The ranking's interval of an item is its score plus or minus ``z`` standard errors (95%: ``z = 1.96``), from the
method that gives standard errors (``poe_logit``, the rounds' model, or ``poe_gaussian``); a method without them
has no intervals, and the table says so with nulls.
"""

from __future__ import annotations

from collections.abc import Collection

import polars as pl
from scipy.stats import norm

# Contexts listed round by round in the summary; with more, one line per context (the last round), and the
# rounds are in rounds.csv.
ROUND_BY_ROUND = 3
# Items shown at each end of a context's ranking in the summary (every item is in ranking.csv).
SHOWN = 5
# Contexts whose ranking is shown in the summary.
RANKED_CONTEXTS = 3


def z_of(level: float) -> float:
    """The normal quantile that a two-sided interval of coverage ``level`` spans on each side (1.96 at 0.95)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return float(norm.ppf((1 + level) / 2))


def ranking_table(scores: pl.DataFrame, method: str, level: float = 0.95) -> pl.DataFrame:
    """Per (judge, attribute, template, context): the items in rank order by ``method`` with the interval
    ``score ± z stderr`` (:func:`z_of`; null where the method gives no standard error) and the human score."""
    z = z_of(level)
    part = scores.filter(pl.col("method") == method)
    return part.select(
        "judge",
        "attribute",
        "template_id",
        "context_id",
        "rank",
        "candidate_id",
        "score",
        "stderr",
        lower=pl.col("score") - z * pl.col("stderr"),
        upper=pl.col("score") + z * pl.col("stderr"),
        human_score="human_score",
    ).sort(["judge", "attribute", "template_id", "context_id", "rank", "candidate_id"])


def _tail(text: str, width: int) -> str:
    """``text`` in ``width`` characters, keeping its end (a pooled id ``<context>/<candidate>`` differs there)."""
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def _f(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def rounds_text(rounds: pl.DataFrame) -> str:
    """The stopping criterion over rounds: every round of the first contexts (calls per item, the criterion and
    its value, expected tau, largest standard error, Spearman with the human scores), and why each stopped."""
    if not rounds.height:
        return ""
    lines = []
    contexts = rounds["context_id"].unique(maintain_order=True).to_list()
    header = (
        f"  {'round':>5} {'pairs':>8} {'calls':>9} {'per item':>8} {'criterion':>10} {'exp. tau':>8} "
        f"{'max se':>8} {'spearman':>8}  stopped"
    )

    def row(r: dict) -> str:
        return (
            f"  {r['round']:>5} {r['pairs']:>8,} {r['calls']:>9,} {r['calls'] / max(r['items'], 1):>8.2f} "
            f"{_f(r['value']):>10} {_f(r['expected_tau']):>8} {_f(r['max_stderr']):>8} "
            f"{_f(r['spearman']):>8}  {r['stopped'] or ''}"
        ).rstrip()

    if len(contexts) <= ROUND_BY_ROUND:
        for cid in contexts:
            part = rounds.filter(pl.col("context_id") == cid).sort("round")
            first = part.row(0, named=True)
            criterion = first["criterion"] or "none (the budget only)"
            lines.append(f"adaptive rounds, {cid} ({first['items']:,} items): stopping criterion {criterion}")
            lines.append(header)
            lines.extend(row(r) for r in part.iter_rows(named=True))
    else:
        last = rounds.sort("round").group_by("context_id", maintain_order=True).last()
        lines.append(
            f"adaptive rounds: the last round of each of {len(contexts)} contexts (every round: rounds.csv, "
            "plots/rounds.png)"
        )
        lines.append(f"  {'context':<24}" + header[2:])
        for r in last.iter_rows(named=True):
            lines.append(f"  {_tail(str(r['context_id']), 24):<24}" + row(r)[2:])
    return "\n".join(lines)


def ranking_text(
    ranking: pl.DataFrame, method: str, level: float = 0.95, noise: Collection[tuple[str, str, str]] = ()
) -> str:
    """The first and last items of the first contexts' rankings, with their intervals and human scores (each said to
    be no finding where its judge is not informative: ``noise``)."""
    if not ranking.height:
        return ""
    lines = [
        f"ranking by {method} with {100 * level:g}% intervals (score ± {z_of(level):.2f} standard errors; every "
        "item: ranking.csv)"
    ]
    keys = ["judge", "attribute", "template_id", "context_id"]
    total = ranking.select(keys).n_unique()
    for n, ((judge, attribute, template_id, context_id), part) in enumerate(
        ranking.group_by(keys, maintain_order=True)
    ):
        if n == RANKED_CONTEXTS:
            lines.append(f"  ... and {total - n} more ranking(s) in ranking.csv")
            break
        chance = (
            ": not a finding, the judge is not distinguishable from chance here (the judge card)"
            if (judge, attribute, template_id) in noise
            else ""
        )
        lines.append(f"  {attribute} ({template_id}), {context_id}: {part.height:,} items{chance}")
        shown = part if part.height <= 2 * SHOWN else pl.concat([part.head(SHOWN), part.tail(SHOWN)])
        for k, r in enumerate(shown.iter_rows(named=True)):
            if k == SHOWN and part.height > 2 * SHOWN:
                lines.append(f"  {'...':>6}")
            interval = "" if r["lower"] is None else f" [{r['lower']:.3f}, {r['upper']:.3f}]"
            human = "" if r["human_score"] is None else f"  human {r['human_score']:.3g}"
            lines.append(
                f"  {r['rank']:>6} {_tail(str(r['candidate_id']), 40):<40} {r['score']:>8.3f}{interval}{human}"
            )
    return "\n".join(lines)
