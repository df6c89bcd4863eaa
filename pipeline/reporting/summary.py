"""What a run prints and logs: the summary table, the absolute and leaderboard parts of it, and the metrics for
MLflow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import polars as pl

from pipeline.contracts.schemas import CORRELATION_METHODS as CORRELATIONS
from pipeline.contracts.stats import JudgeStats
from pipeline.scoring.leaderboard import ITEM, MIN_MODELS, MIN_UNITS, PEOPLE, WIN_RATE


def metric_prefix(
    judge: str, attribute: str, template_id: str, multi_judge: bool, multi_template: bool
) -> str:
    """A metric's prefix: the attribute, with the judge before it and the template after it when a run has
    several (so that no two groups write one metric)."""
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
        prefix = metric_prefix(
            row["judge"], row["attribute"], row["template_id"], multi_judge, multi_template
        )
        for name in (*CORRELATIONS, *(f"{m}_pooled" for m in CORRELATIONS), "pairwise_accuracy"):
            if _finite(row[name]):
                out[f"{prefix}/{row['method']}/{name}"] = row[name]
    for row in bias.iter_rows(named=True):
        prefix = metric_prefix(
            row["judge"], row["attribute"], row["template_id"], multi_judge, multi_template
        )
        names = ["p_a", "p_a_hard", "p_a_debiased", "label_mass", "cache_share"]
        if row["p_tie"] > 0:  # a tie option: how often the judge picks it
            names += ["p_tie", "tie_hard"]
        for name in names:
            if _finite(row[name]):
                out[f"{prefix}/{name}"] = row[name]
    out.update({k: v for k, v in extra.items() if _finite(v)})
    return out


def summary_text(correlations: pl.DataFrame, bias: pl.DataFrame, judge_stats: JudgeStats | None) -> str:
    """A short table for the terminal: per attribute and method the correlations (Spearman per context averaged,
    Pearson, Kendall, pairwise accuracy, and the system-level Spearman where the candidates name systems), then
    P(A) per attribute."""
    lines = []
    # with several judges (a jury), each line names its judge
    several = max(correlations["judge"].n_unique(), bias["judge"].n_unique() if bias.height else 0) > 1

    def judge_cell(r: dict) -> str:
        return f"{r['judge'][:28]:<28} " if several else ""

    judge_head = f"{'judge':<28} " if several else ""
    if correlations.height:
        lines.append(
            f"{judge_head}{'attribute':<18} {'template':<14} {'method':<26} {'spearman':>8} {'pearson':>8} "
            f"{'kendall':>8} {'pair-acc':>8} {'contexts':>8} {'system':>8}"
        )
        for r in correlations.iter_rows(named=True):
            system = r.get("spearman_system")
            lines.append(
                f"{judge_cell(r)}{r['attribute']:<18} {r['template_id']:<14} {r['method']:<26} "
                f"{_num(r['spearman']):>8} {_num(r['pearson']):>8} {_num(r['kendall']):>8} "
                f"{_num(r['pairwise_accuracy']):>8} {r['n_contexts'] - r['n_skipped_contexts']:>8d} {_num(system):>8}"
            )
    else:
        lines.append("no human scores: scores and ranks only (no correlation)")
    if bias.height:
        lines.append("")
        lines.append(
            f"{judge_head}{'attribute':<18} {'template':<8} {'P(A) raw':>9} {'hard A':>7} {'P(A) debiased':>14} "
            f"{'label mass':>10}"
        )
    for r in bias.iter_rows(named=True):
        lines.append(
            f"{judge_cell(r)}{r['attribute']:<18} {r['template_id']:<8} {r['p_a']:>9.3f} {r['p_a_hard']:>7.3f} "
            f"{r['p_a_debiased']:>14.3f} {r['label_mass']:>10.3f}"
        )
    if judge_stats is not None:
        lines += ["", *judge_stats_lines(judge_stats)]
        if several and "n" in bias.columns:  # the lines above are the run's judge's; a jury judged more
            judges = bias["judge"].n_unique()
            lines.append(
                f"with its {judges - 1} juror(s): {int(bias['n'].sum())} judged prompts in all, by {judges} judges "
                "(the line above counts the run's judge alone)"
            )
    return "\n".join(lines)


def judge_stats_lines(judge_stats: JudgeStats) -> list[str]:
    """What the judge stage did and cost: prompts, rates, prefix cache, interruptions, what an API was asked."""
    lines: list[str] = []
    if judge_stats.recorded and judge_stats.recorded == judge_stats.judged_now:
        lines.append(
            f"judged {judge_stats.prompts} prompts ({judge_stats.judged_now} this run), every answer read from the "
            "judge's file of verdicts (no engine)"
        )
    else:
        steady = judge_stats.rate
        lines.append(
            f"judged {judge_stats.prompts} prompts ({judge_stats.judged_now} this run"
            + (f", {judge_stats.reused} of them from the judgement store" if judge_stats.reused else "")
            + ") in "
            f"{judge_stats.seconds:.0f} s with engine start-up ({judge_stats.rate_with_startup:.2f}/s); "
            + (f"{steady:.2f}/s after the first batch; " if _finite(steady) else "")
            + f"prefix cache served {judge_stats.cache_share:.1%} of prompt tokens"
        )
        if judge_stats.engine_mode:
            lines.append(f"engine mode (judge.engine.enforce_eager=auto) {judge_stats.engine_mode}")
        if judge_stats.interruptions:
            lines.append(
                "interrupted: "
                + ", ".join(f"{n} {kind}" for kind, n in judge_stats.interruptions)
                + " (nothing that had reached the driver was judged twice)"
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
                + (
                    f"; {judge_stats.usage_unknown} answer(s) whose reply gave no token counts (their billed "
                    "tokens are unknown, counted as 0)"
                    if judge_stats.usage_unknown
                    else ""
                )
            )
            for judge, models in judge_stats.changed_judges().items():
                served = ", ".join(f"{model} ({n})" for model, n in models)
                lines.append(
                    f"judge {judge} changed within the run: its replies name {len(models)} models ({served}), so its "
                    "verdicts mix them; pin the snapshot (judge.endpoint.model) and judge again"
                )
            if judge_stats.batches:
                states = ", ".join(f"{n} {state}" for state, n in judge_stats.batches)
                lines.append(
                    f"Batch jobs: {sum(n for _, n in judge_stats.batches)} ({states}), each recorded in the run "
                    "folder's api_batches.jsonl with its status and counts"
                )
            if judge_stats.failed_attempts:
                kinds = ", ".join(f"{n} {kind}" for kind, n in judge_stats.failed_attempts)
                lines.append(
                    f"API attempts that failed and were retried or reported: {kinds} (a reply that is not an answer "
                    "is never stored or cached)"
                )
    return lines


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
    """A number as printed: ``n/a`` where it is not defined (null or NaN)."""
    return f"{value:.{digits}f}" if _finite(value) else "n/a"


def no_finding(attribute: str, template_id: str, by: str, evidence: str) -> str:
    """A leaderboard's headline where its judge is not informative: no model can be told apart."""
    return (
        f"leaderboard {attribute} ({template_id}{by}): no model can be told apart: the judge is not distinguishable "
        f"from chance here ({evidence}; the judge card), so no place on it is a finding"
    )


def leaderboard_text(
    board: pl.DataFrame, level: float, noise: Mapping[tuple[str, str, str], str] | None = None
) -> str:
    """The printed leaderboard: per attribute (criterion) and template, models by win rate with their intervals
    (headed by :func:`no_finding` where the judge is not informative: ``noise``)."""
    if not board.height:
        return ""
    lines = []
    lo, hi = round(100 * (1 - level) / 2, 1), round(100 * (1 + level) / 2, 1)
    for (judge, attribute, template_id), group in board.group_by(
        ["judge", "attribute", "template_id"], maintain_order=True
    ):
        over = "the pool's items" if group["unit"][0] == ITEM else "inputs"
        evidence = (noise or {}).get((judge, attribute, template_id))
        if evidence is not None:
            lines.append(no_finding(attribute, template_id, f", judge {judge}", evidence))
        lines.append(
            f"leaderboard {attribute} ({template_id}, judge {judge}): from the judge's verdicts alone (its bias inside "
            f"the intervals), {lo:g}-{hi:g}% bootstrap intervals over {over} (expanded for small samples; none for a "
            f"model of fewer than {MIN_UNITS})"
        )
        metrics = group["metric"].unique(maintain_order=True).to_list()
        header = f"  {'rank':>4} {'model':<28}" + "".join(f" {m:>26}" for m in metrics) + "  tied with"
        lines.append(header)
        win = group.filter(pl.col("metric") == WIN_RATE).sort(["rank", "estimate"], descending=[False, True])
        for r in win.iter_rows(named=True):
            cells = []
            for metric in metrics:
                row = group.filter((pl.col("metric") == metric) & (pl.col("model") == r["model"]))
                if row.height and _finite(row["estimate"][0]):
                    e, a, b = row["estimate"][0], row["lower"][0], row["upper"][0]
                    bounds = f"[{a:>7.3f},{b:>7.3f}]" if a is not None else f"{'(too few)':>17}"
                    cells.append(f" {e:>8.3f} {bounds}")
                elif row.height:  # not defined (e.g. length confounded with the model)
                    cells.append(f" {'n/a':>26}")
                else:
                    cells.append(f" {'-':>26}")
            tied = r["tied_with"] or "-"
            if len(tied) > 60:
                tied = f"{len(r['tied_with'].split(', '))} models: {tied[:45]}..."
            lines.append(f"  {r['rank']:>4} {r['model'][:28]:<28}" + "".join(cells) + f"  {tied}")
    return "\n".join(lines)


def beside_people(board: pl.DataFrame, card: pl.DataFrame | None, group: tuple[str, str, str]) -> str:
    """People beside the judge on one leaderboard: their first model by mean score, and how far the judge's board and
    theirs order the models alike (the card's Spearman and Kendall across models with their intervals)."""
    judge, attribute, template_id = group
    mine = board.filter(
        (pl.col("judge") == judge)
        & (pl.col("attribute") == attribute)
        & (pl.col("template_id") == template_id)
    )
    people = mine.filter(pl.col("metric") == PEOPLE).drop_nulls("estimate")
    if not people.height:
        return ""
    top = people.sort(["rank", "estimate"], descending=[False, True]).row(0, named=True)
    said = f"; people's first by their mean score {top['model']} {top['estimate']:.3g}"
    rows = (
        card.filter(
            (pl.col("judge") == judge)
            & (pl.col("attribute") == attribute)
            & (pl.col("template_id") == template_id)
        )
        if card is not None and card.height
        else None
    )
    if rows is not None and rows.height and rows["models_spearman"][0] is not None:
        r = rows.row(0, named=True)
        said += f"; the judge's board and people's across {r['n_models']} models: " + ", ".join(
            f"{name.capitalize()} {r[f'models_{name}']:.2f}"
            + (
                f" [{r[f'models_{name}_lower']:.2f}, {r[f'models_{name}_upper']:.2f}]"
                if r[f"models_{name}_lower"] is not None
                else " (no interval: every bootstrap round agrees)"
            )
            for name in ("spearman", "kendall")
        )
    elif rows is not None and rows.height:
        n = rows["n_models"][0]
        said += (
            f" (no agreement across models: {n} models, {MIN_MODELS} needed)"
            if n < MIN_MODELS
            else " (no agreement across models: one board has every model equal)"
        )
    return said


def leaderboard_line(
    board: pl.DataFrame,
    noise: Mapping[tuple[str, str, str], str] | None = None,
    card: pl.DataFrame | None = None,
) -> str:
    """One line per attribute and template: how many models, the first by win rate with its interval, and how
    many share its rank (the whole table is in leaderboard.csv); where the judge is not informative (``noise``),
    :func:`no_finding` instead of a first."""
    lines = []
    wins = board.filter(pl.col("metric") == WIN_RATE)
    several = wins["judge"].n_unique() > 1
    for (judge, attribute, template_id), group in wins.group_by(
        ["judge", "attribute", "template_id"], maintain_order=True
    ):
        top = group.sort(["rank", "estimate"], descending=[False, True]).row(0, named=True)
        shared = int((group["rank"] == top["rank"]).sum()) - 1
        by = f", judge {judge}" if several else ""
        people = beside_people(board, card, (judge, attribute, template_id))
        evidence = (noise or {}).get((judge, attribute, template_id))
        if evidence is not None:
            lines.append(
                f"{no_finding(attribute, template_id, by, evidence)} ({group.height} models{people}; leaderboard.csv)"
            )
            continue
        lines.append(
            f"leaderboard {attribute} ({template_id}{by}): {group.height} models; first by win rate {top['model']} "
            f"{top['estimate']:.3f} "
            + (
                f"[{top['lower']:.3f}, {top['upper']:.3f}]"
                if top["lower"] is not None
                else f"(no interval: fewer than {MIN_UNITS} {'items' if top['unit'] == ITEM else 'inputs'})"
            )
            + (f", statistically tied with {shared} other(s)" if shared else "")
            + people
            + " (leaderboard.csv)"
        )
    return "\n".join(lines)
