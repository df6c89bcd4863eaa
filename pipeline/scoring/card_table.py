"""A judge's report card: how far to trust each judge, attribute and template (the maths is
:mod:`pipeline.methods.quality.calibration` and :mod:`pipeline.methods.quality.style`).

Per (judge, attribute, template), over its comparisons (one row per pair, the debiased P(i beats j)):

- **agreement and calibration** against people's preferences, on the pairs people scored apart (``y = 1`` where
  they scored ``i`` higher), each pair read both ways round (``(p, y)`` and ``(1 - p, 1 - y)``, so that nothing
  depends on which candidate a pair calls i): the accuracy of the judge's verdict, the expected calibration error,
  Brier score and log loss of its probability; the temperature fitted to people's preferences (what it means in
  words, and whether it hit a bound of its search), and the same measures after the cross-fitted temperature (each
  context calibrated with one fitted on the other contexts, in a single pool each pair with one fitted on other
  pairs: a pair's own preference is never among those its temperature was fitted on); the reliability diagram
  before and after (:data:`JUDGE_RELIABILITY`);
- **position**: the share of pairs whose two orderings choose the same candidate, beside P(A) raw and debiased;
- **length**: over the pairs whose texts differ in length, how often the judge's verdict prefers the longer text and
  how often people's does; and the length coefficient of a logistic model of the judge's verdict on the
  standardised length difference (``(L_i - L_j) / (L_i + L_j)``), with people's score difference (standardised)
  beside it where there are human scores, so that it is the preference for length beyond quality;
- **self-preference** (a judge that is also one of the run's generators): over the pairs of its own output against
  another model's, its mean probability for its own, and how often people preferred its own;
- **agreement with people**: one scoring method's Spearman (per context, averaged) from the correlations;
- **the judge benchmarks' numbers**, where the human scores are an objective label: JudgeBench's accuracy, LLMBar's
  mean accuracy of the two orderings and the positional agreement over the objective pairs (the meta-evaluation,
  :mod:`pipeline.scoring.meta_table`, every category together).

Every measure is NaN where its pairs are none (no human scores, no texts of different length, no own outputs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.contracts.card_schema import JUDGE_CARD, JUDGE_RELIABILITY
from pipeline.contracts.keys import content_key, pair_key
from pipeline.data.contexts import group_by_context
from pipeline.methods.agreement.bootstrap import bootstrap_counts, bootstrap_ratio
from pipeline.methods.agreement.selective import exact_mean_interval
from pipeline.methods.quality import calibration as cal
from pipeline.methods.quality.signal import slot_agreement
from pipeline.methods.quality.style import logistic_fit
from pipeline.methods.scorers.registry import ranked, scorers
from pipeline.methods.scorers.win_ratio import hard_outcomes
from pipeline.scoring.leaderboard import Board, models_agreement

# The contexts a bootstrap of the agreement with people needs (fewer: no interval), and its rounds.
MIN_CONTEXTS, ROUNDS = 10, 1000

GROUP = ["judge", "attribute", "template_id"]


@dataclass(frozen=True)
class CardTables:
    card: pl.DataFrame
    reliability: pl.DataFrame


def with_sides(
    frame: pl.DataFrame,
    per_candidate: pl.DataFrame,
    columns: dict[str, str],
    on: tuple[str, ...] = ("context_id",),
) -> pl.DataFrame:
    """``frame`` (a row per pair) with ``per_candidate``'s ``columns`` (a row per candidate) for both candidates:
    column ``c`` as ``<columns[c]>_i`` and ``<columns[c]>_j``, joined on ``on`` and the candidate (null where
    ``per_candidate`` has no row)."""
    for side in ("i", "j"):
        names = {"candidate_id": f"cand_{side}", **{c: f"{prefix}_{side}" for c, prefix in columns.items()}}
        frame = frame.join(
            per_candidate.select(*on, *names).rename(names), on=[*on, f"cand_{side}"], how="left"
        )
    return frame


def with_preferences(comparisons: pl.DataFrame, candidates: pa.Table, human: pl.DataFrame) -> pl.DataFrame:
    """The comparisons with both candidates' characters (``len_i``, ``len_j``), systems, human scores (``h_i``,
    ``h_j``; null where people scored none) and content keys (``key_i``, ``key_j``), and their context's content key
    (``key_context``: :mod:`pipeline.contracts.keys`)."""
    frame = pl.from_arrow(candidates.select(["context_id", "candidate_id", "system", "text"]))
    contexts = {c.context_id: c.key for c in group_by_context(candidates)}
    texts = frame.select(
        "context_id",
        "candidate_id",
        "system",
        length=pl.col("text").str.len_chars(),
        key=pl.Series([content_key(t) for t in frame["text"].to_list()], dtype=pl.UInt64),
    )
    scored = human.select("context_id", "candidate_id", "attribute", "human_score")
    out = with_sides(comparisons, texts, {"system": "sys", "length": "len", "key": "key"})
    out = with_sides(out, scored, {"human_score": "h"}, on=("context_id", "attribute"))
    return out.with_columns(
        key_context=pl.col("context_id").replace_strict(contexts, default=None, return_dtype=pl.UInt64)
    )


def both_ways(*arrays: np.ndarray) -> list[np.ndarray]:
    """Each pair read both ways round: every array (probabilities of i, people's preferences for i, as 0/1) followed
    by its complement, ``(p, y)`` then ``(1 - p, 1 - y)``, so that no measure depends on which candidate a pair
    calls i."""
    return [np.concatenate([a, 1 - a]) for a in arrays]


def calibrated_probabilities(frame: pl.DataFrame, seed: int = 0) -> np.ndarray:
    """Every pair's P(i beats j) after the temperature cross-fitted on the pairs people scored apart: over contexts,
    or in a single pool over pairs, drawn in the order of their content keys (``frame``: one group's
    :func:`with_preferences` rows). A pair's own preference is never among those its temperature is fitted on (the
    fit reads each pair once: read the other way round it adds the same loss term)."""
    p = frame["p"].to_numpy()
    h_i, h_j, known = _people(frame)
    y = np.where(known, (h_i > h_j).astype(np.float64), 0.0)
    pairs = [pair_key(a, b) for a, b in zip(frame["key_i"].to_list(), frame["key_j"].to_list(), strict=True)]
    groups = frame["key_context"].to_numpy()
    return cal.cross_fit_temperature(
        p, y, groups, seed=seed, known=known, keys=np.array(pairs, dtype=np.uint64)
    )[0]


def calibrate_comparisons(
    comparisons: pl.DataFrame, candidates: pa.Table, human: pl.DataFrame
) -> pl.DataFrame:
    """The comparisons with ``p`` calibrated to people's preferences (``scoring.calibrate=temperature``): per judge,
    attribute and template, the temperature cross-fitted over contexts (:func:`calibrated_probabilities`); a group
    without pairs people scored apart keeps its ``p``."""
    if not comparisons.height:
        return comparisons
    frame = with_preferences(comparisons, candidates, human)
    parts = []
    for _, group in frame.group_by(GROUP, maintain_order=True):
        parts.append(group.with_columns(p=pl.Series(calibrated_probabilities(group), dtype=pl.Float64)))
    return pl.concat(parts).select(comparisons.columns)


def card_tables(
    comparisons: pl.DataFrame,
    position_bias: pl.DataFrame,
    candidates: pa.Table,
    human: pl.DataFrame,
    correlations: pl.DataFrame,
    own_systems: Mapping[str, Sequence[str]],
    bins: int = 10,
    seed: int = 0,
    meta: pl.DataFrame | None = None,
    served: Mapping[str, Sequence[tuple[str, int]]] | None = None,
    alpha: float = 0.05,
    board: Board | None = None,
) -> CardTables:
    """The card (:data:`JUDGE_CARD`) and the reliability diagrams (:data:`JUDGE_RELIABILITY`), per group (module
    docstring). ``own_systems``: per judge, the systems (generators) that run on the judge's own model; ``meta``: the
    meta-evaluation (:mod:`pipeline.scoring.meta_table`), whose numbers over every category the card repeats;
    ``served``: per judge, the models its replies say served them and their answers (behind an API); ``alpha``: the
    false-alarm rate of the test of "no signal" (:func:`signal`); ``board``: the leaderboard's bootstrap, whose rounds
    give the interval of the judge's and people's agreement across models (:func:`models_agreement`)."""
    cards, bins_rows = [], []
    frame = with_preferences(comparisons, candidates, human)
    for key, group in frame.group_by(GROUP, maintain_order=True):
        judge, attribute, template = (str(k) for k in key)
        row: dict = {"judge": judge, "attribute": attribute, "template_id": template, "n_pairs": group.height}
        row |= signal(group, alpha, seed)
        row |= _calibration(
            group, seed, bins, bins_rows, (judge, attribute, template), (board or Board()).level
        )
        row |= _position(group, position_bias.filter(_is(judge, attribute, template)))
        row |= _length(group)
        row |= _self(group, own_systems.get(judge, ()))
        row |= _agreement(correlations.filter(_is(judge, attribute, template)))
        row |= models_agreement(group.select(comparisons.columns), candidates, human, board or Board())
        row |= _benchmark(meta.filter(_is(judge, attribute, template)) if meta is not None else None)
        row |= _served((served or {}).get(judge, ()))
        cards.append(row)
    card = (
        pl.DataFrame(cards, schema=_schema(JUDGE_CARD)) if cards else pl.DataFrame(schema=_schema(JUDGE_CARD))
    )
    table = pl.DataFrame(bins_rows, schema=_schema(JUDGE_RELIABILITY)) if bins_rows else None
    return CardTables(card, table if table is not None else pl.DataFrame(schema=_schema(JUDGE_RELIABILITY)))


def _schema(schema: pa.Schema) -> pl.Schema:
    return pl.from_arrow(schema.empty_table()).schema


def _is(judge: str, attribute: str, template: str) -> pl.Expr:
    return (
        (pl.col("judge") == judge) & (pl.col("attribute") == attribute) & (pl.col("template_id") == template)
    )


def _people(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """People's scores of each pair's two candidates (NaN where they scored none) and the pairs they scored apart
    (those with a preference)."""
    h_i, h_j = frame["h_i"].to_numpy().astype(float), frame["h_j"].to_numpy().astype(float)
    return h_i, h_j, np.isfinite(h_i) & np.isfinite(h_j) & (h_i != h_j)


def _nan_to_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def signal(group: pl.DataFrame, alpha: float, seed: int = 0) -> dict:
    """Whether the judge is informative here (:mod:`pipeline.methods.quality.signal`): its slot-A verdicts against its
    slot-B verdicts, the prompts read in content-key order (contexts by their key, candidates by their text's key), so
    that the test's draws do not move with names, rows or sides."""
    cand = pl.concat(
        [
            group.select("key_context", "context_id", key="key_i", name="cand_i"),
            group.select("key_context", "context_id", key="key_j", name="cand_j"),
        ]
    ).unique()
    cand = cand.sort("key_context", "context_id", "key", "name").with_row_index("code")
    codes = {(r["context_id"], r["name"]): r["code"] for r in cand.iter_rows(named=True)}
    contexts = {c: k for k, c in enumerate(cand["context_id"].unique(maintain_order=True).to_list())}
    prompts = []
    for row in group.select("context_id", "cand_i", "cand_j", "p_ij", "p_ji").iter_rows():
        c, i, j, p_ij, p_ji = row
        for first, second, p in ((i, j, p_ij), (j, i, p_ji)):
            if p is not None:
                prompts.append((contexts[c], codes[(c, first)], codes[(c, second)], p))
    prompts.sort()
    test = (
        slot_agreement(*(np.array(col) for col in zip(*prompts, strict=True)), seed=seed) if prompts else None
    )
    if test is None:
        return {"signal_units": 0, "signal_p_value": 1.0, "informative": False, "signal_alpha": alpha}
    return {
        "signal": test.statistic,
        "signal_units": test.n_units,
        "signal_p_value": test.p_value,
        "informative": test.informative(alpha),
        "signal_alpha": alpha,
    }


def agreement_interval(agree: np.ndarray, contexts: np.ndarray, level: float, seed: int) -> tuple:
    """The interval of the share of pairs the judge agrees with people on, no narrower than its data: Clopper-Pearson's
    exact one where no two pairs share a context (independent pairs: JudgeBench's), else a bootstrap over the contexts
    (pairs of one context share candidates), drawn in the order of their content keys, from :data:`MIN_CONTEXTS`;
    ``(None, None)`` with fewer, or where the rounds do not vary."""
    units, codes = np.unique(contexts, return_inverse=True)
    if units.size == agree.size:
        return exact_mean_interval(agree, level)
    if units.size < MIN_CONTEXTS:
        return None, None
    counts = bootstrap_counts(units.size, ROUNDS, np.random.default_rng(seed))
    right, pairs = np.bincount(codes, weights=agree), np.bincount(codes).astype(float)
    found = bootstrap_ratio(right[:, None], pairs[:, None], counts, level)
    # rounds that do not vary (every verdict a tie) show no spread: none
    if not found.upper[0] > found.lower[0]:
        return None, None
    return _nan_to_none(found.lower[0]), _nan_to_none(found.upper[0])


def _calibration(
    group: pl.DataFrame, seed: int, bins: int, rows: list, key: tuple[str, str, str], level: float
) -> dict:
    h_i, h_j, known = _people(group)
    p = group["p"].to_numpy()[known]
    y = (h_i > h_j)[known].astype(np.float64)
    out: dict = {"n_human_pairs": int(known.sum())}
    if not known.any():
        return out
    agree = np.where(y == 1, hard_outcomes(p), 1 - hard_outcomes(p))
    out["accuracy_lower"], out["accuracy_upper"] = agreement_interval(
        agree, group["key_context"].to_numpy()[known], level, seed
    )
    temperature = cal.fit_temperature(p, y)
    # every pair both ways round: the measures do not depend on which candidate a pair calls i
    p, y, calibrated = both_ways(p, y, calibrated_probabilities(group, seed)[known])
    out |= {
        "accuracy": float(agree.mean()),
        "ece": cal.expected_calibration_error(p, y, bins),
        "brier": cal.brier_score(p, y),
        "log_loss": cal.log_loss(p, y),
        "temperature": _nan_to_none(temperature),
        "temperature_at_bound": cal.temperature_at_bound(temperature) if np.isfinite(temperature) else None,
        "temperature_reading": cal.temperature_reading(temperature),
        "ece_calibrated": cal.expected_calibration_error(calibrated, y, bins),
        "brier_calibrated": cal.brier_score(calibrated, y),
        "log_loss_calibrated": cal.log_loss(calibrated, y),
    }
    judge, attribute, template = key
    for is_calibrated, values in ((False, p), (True, calibrated)):
        r = cal.reliability(values, y, bins)
        for b in range(bins):
            rows.append(
                {
                    "judge": judge,
                    "attribute": attribute,
                    "template_id": template,
                    "calibrated": is_calibrated,
                    "bin": b,
                    "lower": float(r.lower[b]),
                    "upper": float(r.upper[b]),
                    "n": int(r.count[b]),
                    "mean_p": _nan_to_none(r.mean_p[b]),
                    "frequency": _nan_to_none(r.frequency[b]),
                }
            )
    return out


def _position(group: pl.DataFrame, bias: pl.DataFrame) -> dict:
    both = group.filter(pl.col("p_ij").is_not_null() & pl.col("p_ji").is_not_null())
    out: dict = {}
    if both.height:
        p_ij, p_ji = both["p_ij"].to_numpy(), both["p_ji"].to_numpy()
        same = ((p_ij > 0.5) & (p_ji < 0.5)) | ((p_ij < 0.5) & (p_ji > 0.5))
        out["position_consistency"] = float(same.mean())
    if bias.height:
        out |= {"p_a_raw": float(bias["p_a"][0]), "p_a_debiased": float(bias["p_a_debiased"][0])}
    return out


def _length(group: pl.DataFrame) -> dict:
    lengths = group.filter(
        pl.col("len_i").is_not_null() & pl.col("len_j").is_not_null() & (pl.col("len_i") != pl.col("len_j"))
    )
    out: dict = {"n_length_pairs": lengths.height}
    if not lengths.height:
        return out
    l_i, l_j = lengths["len_i"].to_numpy().astype(float), lengths["len_j"].to_numpy().astype(float)
    p = lengths["p"].to_numpy()
    i_longer = l_i > l_j
    p_longer = np.where(i_longer, p, 1 - p)
    out["longer_share_judge"] = float(hard_outcomes(p_longer).mean())
    h_i, h_j, known = _people(lengths)
    if known.any():
        out["longer_share_people"] = float(((h_i > h_j) == i_longer)[known].mean())
    x = (l_i - l_j) / (l_i + l_j)
    columns = [_standardised(x)]
    if (
        np.isfinite(h_i) & np.isfinite(h_j)
    ).all():  # people's score difference beside it: length beyond quality
        columns.append(_standardised(h_i - h_j))
    if np.any(columns[0] != 0):  # no intercept: any length difference identifies the slope, whichever side
        out["length_coef"] = float(logistic_fit(np.stack(columns, axis=1), p)[0])
    return out


def _standardised(x: np.ndarray) -> np.ndarray:
    """Scaled to standard deviation 1 about 0 (not centred: a pair read the other way round flips its sign)."""
    scale = np.sqrt(np.mean(x**2))
    return x / scale if scale > 0 else x


def _self(group: pl.DataFrame, own: Sequence[str]) -> dict:
    if not own:
        return {"n_self_pairs": 0}
    mine_i = group["sys_i"].is_in(list(own)).fill_null(False)
    mine_j = group["sys_j"].is_in(list(own)).fill_null(False)
    pairs = group.filter(mine_i != mine_j)
    out: dict = {"n_self_pairs": pairs.height}
    if not pairs.height:
        return out
    i_mine = pairs["sys_i"].is_in(list(own)).to_numpy()
    p = pairs["p"].to_numpy()
    out["self_preference"] = float(np.where(i_mine, p, 1 - p).mean())
    h_i, h_j, known = _people(pairs)
    if known.any():
        out["self_preference_people"] = float(((h_i > h_j) == i_mine)[known].mean())
    return out


def _benchmark(meta: pl.DataFrame | None) -> dict:
    """The judge benchmarks' numbers over every category (the meta-evaluation's row without a category)."""
    overall = meta.filter(pl.col("category").is_null()) if meta is not None and meta.height else None
    if overall is None or not overall.height:
        return {"n_objective_pairs": 0}
    row = overall.row(0, named=True)
    return {
        "n_objective_pairs": row["n_pairs"],
        "benchmark_accuracy": row["accuracy"],
        "ordering_accuracy": row["accuracy_orderings"],
        "positional_agreement": row["positional_agreement"],
    }


def _served(models: Sequence[tuple[str, int]]) -> dict:
    """The models a judge's replies name, with their answers (more than one: the judge changed within the run)."""
    return {
        "served_models": ", ".join(f"{model} ({n})" for model, n in models) or None,
        "n_served_models": len(models),
    }


def _agreement(correlations: pl.DataFrame) -> dict:
    """The agreement with people of the scored method registered first in ``card_rank``."""
    present = set(correlations["method"].to_list())
    for method in ranked([m for m in scorers() if m in present], lambda entry: entry.card_rank):
        row = correlations.filter(pl.col("method") == method)
        return {"method": method, "spearman": row["spearman"][0]}
    return {}
