"""Trust with a guarantee, as tables: people's labels with their inclusion probabilities (:func:`data_labels`,
:func:`review_labels`), and the judges' certified selective verdicts in a cascade (:func:`certify`; the maths is
:mod:`pipeline.methods.agreement.selective`).

A **pair** (an attribute, a context and two candidates ``i < j``) is what people label: its label serves every judge
and template that compared it. A judge's verdict on a pair and its confidence are read from its debiased
comparison (:mod:`pipeline.methods.verdicts.outcomes`: the probability of the preference averaged over both
orderings); people agree with it where their preference has the same outcome.

The cascade's jurors are (judge, template): ``trust.cascade`` names them (a judge, for every template of it in the
prompt's order, or ``judge/template``), by default every judge in the order the run configures them. Per attribute,
each juror is certified on the labelled pairs the jurors before it left open, at ``delta / k``; a pair is kept by the
first juror whose threshold its confidence reaches, else escalated to people.

Everything is drawn and ordered by content keys (:mod:`pipeline.contracts.keys`), never by names or rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.contracts.errors import UserError
from pipeline.contracts.keys import pair_key, stable_hash
from pipeline.contracts.trust_schema import ACCEPTED, LABELS, RISK_COVERAGE, TRUST
from pipeline.methods.agreement import sampling
from pipeline.methods.agreement.selective import GRID, cascade, upper_bounds
from pipeline.methods.verdicts.outcomes import judge_verdicts, preference_outcomes
from pipeline.scoring.card_table import with_preferences
from pipeline.scoring.reduce import in_pair_order

PAIR = ["attribute", "context_id", "cand_i", "cand_j"]
ESCALATED = "escalated"


def _empty(schema: pa.Schema) -> pl.DataFrame:
    return pl.from_arrow(schema.empty_table())


def oriented(comparisons: pl.DataFrame) -> pl.DataFrame:
    """The comparisons with ``cand_i < cand_j`` (a pair read the other way round turned: ``p`` becomes ``1 - p``)
    and one row per judge, template and pair (``debias=none`` keeps each ordering apart: their mean)."""
    turned = in_pair_order(comparisons)
    return turned.group_by(["judge", "template_id", *PAIR], maintain_order=True).agg(
        pl.col("p").mean(), pl.col("p_tie").mean()
    )


def pairs_of(
    comparisons: pl.DataFrame, candidates: pa.Table, human: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The run's pairs (one row each, every judge and template together) with their content key (``unit``) and,
    given ``human``, people's scores of both candidates (``h_i``, ``h_j``)."""
    base = oriented(comparisons).select(PAIR).unique(maintain_order=True)
    scores = (
        human
        if human is not None
        else pl.DataFrame(
            schema={
                "context_id": pl.String,
                "candidate_id": pl.String,
                "attribute": pl.String,
                "human_score": pl.Float64,
            }
        )
    )
    frame = with_preferences(base.with_columns(p=pl.lit(0.5)), candidates, scores)
    units = [
        stable_hash(f"{c}\x1f{a}\x1f{pair_key(i, j)}")
        for c, a, i, j in zip(
            frame["key_context"].to_list(),
            frame["attribute"].to_list(),
            frame["key_i"].to_list(),
            frame["key_j"].to_list(),
            strict=True,
        )
    ]
    return frame.select(*PAIR, "h_i", "h_j").with_columns(unit=pl.Series(units, dtype=pl.UInt64)).sort("unit")


def data_labels(
    comparisons: pl.DataFrame,
    candidates: pa.Table,
    human: pl.DataFrame,
    n: int,
    active: bool,
    seed: int,
    first: tuple[str, str] | None,
) -> pl.DataFrame:
    """LABELS from the data's human scores: the population is the pairs people scored (both candidates), ``n`` of them
    drawn uniformly or actively (more where the cascade's ``first`` juror is unsure), each with its inclusion
    probability; a drawn pair's label is people's preference (1 for i, 0 for j, 1/2 where they scored the two
    alike), the others' null."""
    pairs = pairs_of(comparisons, candidates, human).filter(
        pl.col("h_i").is_not_null() & pl.col("h_j").is_not_null()
    )
    if not pairs.height:
        return _empty(LABELS)
    if active:
        confidence = _confidence_of(oriented(comparisons), pairs, first)
        inclusion = sampling.active_inclusion(sampling.uncertainty(np.nan_to_num(confidence, nan=0.5)), n)
    else:
        inclusion = sampling.uniform_inclusion(pairs.height, n)
    chosen = sampling.draw(inclusion, n, not active, np.random.default_rng(seed))
    h_i, h_j = pairs["h_i"].to_numpy(), pairs["h_j"].to_numpy()
    preference = np.where(h_i > h_j, 1.0, np.where(h_i < h_j, 0.0, 0.5))
    return pairs.with_columns(
        preference=pl.Series(np.where(chosen, preference, np.nan)).fill_nan(None),
        inclusion=pl.Series(inclusion),
    ).select(
        *PAIR, "preference", "inclusion", source=pl.lit("data"), answers=pl.Series(chosen.astype(np.int64))
    )


def _confidence_of(comps: pl.DataFrame, pairs: pl.DataFrame, juror: tuple[str, str] | None) -> np.ndarray:
    """The juror's confidence on each of ``pairs`` (NaN where it did not compare it)."""
    if juror is None:
        return np.full(pairs.height, np.nan)
    own = comps.filter((pl.col("judge") == juror[0]) & (pl.col("template_id") == juror[1]))
    joined = pairs.select(PAIR).join(own, on=PAIR, how="left")
    p = joined["p"].fill_null(np.nan).to_numpy()
    _, confidence = judge_verdicts(np.nan_to_num(p, nan=0.5), joined["p_tie"].fill_null(0.0).to_numpy())
    return np.where(np.isnan(p), np.nan, confidence)


def review_labels(
    answers: pl.DataFrame, inclusion: pl.DataFrame | None, comparisons: pl.DataFrame
) -> pl.DataFrame:
    """LABELS from the blind review's answers (``labels.csv``: one row per answer, its item's pair and people's
    outcome ``human``) and every item's probability of being drawn (``inclusion.parquet``: the population the review
    drew from): a pair's label is its answers' majority (a tie where they split evenly; null where none answered
    it), its inclusion the probability that any of its items was drawn (independent draws: exact for an active
    sample, close for a uniform one)."""
    if "inclusion" not in answers.columns or answers["inclusion"].null_count():
        raise UserError(
            "trust.labels=review: the review's sample was drawn without known chances of being shown (stratified or "
            "disagreements), so its labels can neither certify a threshold nor power an estimate; review a sample "
            "drawn with --strategy random (or active, for the leaderboards)"
        )
    known = set(oriented(comparisons).select(PAIR).iter_rows())
    strangers = [row for row in answers.select(PAIR).unique().iter_rows() if row not in known]
    if strangers:
        raise UserError(
            f"trust.labels=review: {len(strangers)} labelled pair(s) are not among the run's comparisons, e.g. "
            f"{strangers[0]}: the review belongs to another run"
        )
    if inclusion is None or not inclusion.height:
        raise UserError(
            "trust.labels=review: the review's labels.csv has no inclusion.parquet beside it (every item's chance of "
            "being shown): without it nothing says which of the run's pairs the answers speak for; write the "
            "review's report again (make review-report RUN=<run folder>)"
        )
    coded = answers.with_columns(
        vote=pl.col("human").replace_strict({"i": 1.0, "tie": 0.5, "j": 0.0}, return_dtype=pl.Float64)
    )
    majority = coded.group_by(PAIR).agg(
        answers=pl.len().cast(pl.Int64),
        wins=(pl.col("vote") == 1.0).sum(),
        losses=(pl.col("vote") == 0.0).sum(),
    )
    chance = inclusion.group_by(PAIR).agg(inclusion=1 - (1 - pl.col("inclusion")).product())
    outside = majority.join(chance, on=PAIR, how="anti")
    if outside.height:
        raise UserError(
            f"trust.labels=review: {outside.height} answered pair(s) have no chance of being drawn in the review's "
            f"inclusion.parquet, e.g. {outside.select(PAIR).row(0)}: its sample and its answers do not match"
        )
    return (
        chance.filter(pl.col("inclusion") > 0)
        .join(majority, on=PAIR, how="left")
        .with_columns(
            preference=pl.when(pl.col("answers").is_null())
            .then(None)
            .when(pl.col("wins") > pl.col("losses"))
            .then(1.0)
            .when(pl.col("wins") < pl.col("losses"))
            .then(0.0)
            .otherwise(0.5),
            answers=pl.col("answers").fill_null(0),
            source=pl.lit("review"),
        )
        .select(LABELS.names)
        .sort(PAIR)
    )


def cascade_jurors(
    comparisons: pl.DataFrame, judges: Sequence[str], templates: Sequence[str], names: Sequence[str] | None
) -> list[tuple[str, str]]:
    """The cascade's jurors (judge, template) in order: ``names`` (a judge: its templates in the prompt's order;
    ``judge/template``), else every judge of ``judges`` (the run's, in the order configured)."""
    present = set(comparisons.select("judge", "template_id").unique().iter_rows())
    order = {t: k for k, t in enumerate(templates)}
    out: list[tuple[str, str]] = []
    for name in names if names is not None else judges:
        if (name.rsplit("/", 1)[0], name.rsplit("/", 1)[-1]) in present and "/" in name:
            chosen = [(name.rsplit("/", 1)[0], name.rsplit("/", 1)[-1])]
        else:
            chosen = sorted(
                (j for j in present if j[0] == name), key=lambda j: (order.get(j[1], len(order)), j[1])
            )
        if not chosen:
            raise UserError(
                f"config trust.cascade names {name!r}, which judged nothing in this run (its judges: "
                f"{sorted({j for j, _ in present})})"
            )
        out += [j for j in chosen if j not in out]
    return out


@dataclass(frozen=True)
class Certified:
    trust: pl.DataFrame  # TRUST
    accepted: pl.DataFrame  # ACCEPTED
    curve: pl.DataFrame  # RISK_COVERAGE


def certify(
    comparisons: pl.DataFrame,
    labels: pl.DataFrame,
    candidates: pa.Table,
    jurors: list[tuple[str, str]],
    alpha: float,
    delta: float,
) -> Certified:
    """Per attribute, the cascade of ``jurors`` certified on the labelled pairs (module docstring)."""
    comps = oriented(comparisons)
    several = len({t for _, t in jurors}) > 1
    names = [f"{j}/{t}" if several else j for j, t in jurors]
    trust, accepted, curve = [], [], []
    for (attribute,), _ in comps.group_by(["attribute"], maintain_order=True):
        pairs = pairs_of(comparisons.filter(pl.col("attribute") == attribute), candidates)
        lab = pairs.select(PAIR).join(labels, on=PAIR, how="left")
        labelled = lab["preference"].is_not_null().to_numpy()
        inside = lab["inclusion"].is_not_null().to_numpy()  # the population the labels were drawn from
        people = preference_outcomes(lab["preference"].fill_null(0.5).to_numpy())
        verdicts = [_verdicts(comps, pairs, juror, inside) for juror in jurors]
        confidences = [c for _, c, _, _ in verdicts]
        agrees = [v == people for v, _, _, _ in verdicts]
        steps = cascade(confidences, agrees, labelled, alpha, delta)
        open_ = np.ones(pairs.height, dtype=bool)
        for k, (step, (judge, template)) in enumerate(zip(steps, jurors, strict=True)):
            cal = labelled & open_ & np.isfinite(confidences[k])
            row = _trust_row(judge, attribute, template, k, step, alpha, delta / len(jurors), open_)
            trust.append(row | {"population": int(inside.sum()), "comparisons": pairs.height})
            curve += _curve_rows(
                judge, attribute, template, confidences[k][cal], agrees[k][cal], delta / len(jurors)
            )
            open_ &= ~step.accepts
        accepted.append(_accepted_rows(pairs, lab, steps, verdicts, names, inside))
    return Certified(
        pl.DataFrame(trust, schema=_empty(TRUST).schema) if trust else _empty(TRUST),
        pl.concat(accepted) if accepted else _empty(ACCEPTED),
        pl.DataFrame(curve, schema=_empty(RISK_COVERAGE).schema) if curve else _empty(RISK_COVERAGE),
    )


def _verdicts(comps: pl.DataFrame, pairs: pl.DataFrame, juror: tuple[str, str], inside: np.ndarray):
    """A juror's verdict code, confidence, p and p_tie on each pair; the confidence NaN where it did not compare the
    pair or the pair is outside the population the labels were drawn from (``inside``): nothing is certified there."""
    own = comps.filter((pl.col("judge") == juror[0]) & (pl.col("template_id") == juror[1]))
    joined = pairs.select(PAIR).join(own.select(*PAIR, "p", "p_tie"), on=PAIR, how="left")
    p = joined["p"].fill_null(np.nan).to_numpy()
    p_tie = joined["p_tie"].fill_null(0.0).to_numpy()
    verdict, confidence = judge_verdicts(np.nan_to_num(p, nan=0.5), p_tie)
    return verdict, np.where(np.isnan(p) | ~inside, np.nan, confidence), p, p_tie


def _trust_row(judge, attribute, template, k, step, alpha, delta, open_) -> dict:
    cert = step.certificate
    kept = int(step.accepts.sum())
    return {
        "judge": judge,
        "attribute": attribute,
        "template_id": template,
        "step": k + 1,
        "alpha": alpha,
        "delta": delta,
        "certified": cert.certified,
        "threshold": cert.threshold,
        "n_labels": cert.n_calibration,
        "labels_kept": cert.accepted,
        "disagreements": cert.disagreements,
        "bound": cert.bound,
        "agreement": cert.agreement if cert.accepted else None,
        "coverage": kept / len(open_) if len(open_) else 0.0,
        "coverage_open": kept / int(open_.sum()) if open_.any() else None,
        "labels_needed": cert.needed,
        "observed_disagreement": cert.observed,
    }


def _curve_rows(judge, attribute, template, confidence, agree, delta) -> list[dict]:
    """The juror's risk and bound on its calibration labels at each threshold where the labels kept change."""
    if not len(confidence):
        return []
    order = np.argsort(-confidence, kind="stable")
    wrong = np.concatenate([[0], np.cumsum(~agree[order])])
    kept = np.searchsorted(-confidence[order], -GRID, side="right")
    rows, last = [], -1
    bounds = upper_bounds(wrong[kept], kept, delta)
    for t, n, e, b in zip(GRID, kept, wrong[kept], bounds, strict=True):
        if n == 0 or n == last:
            continue
        last = int(n)
        rows.append(
            {
                "judge": judge,
                "attribute": attribute,
                "template_id": template,
                "threshold": float(t),
                "coverage": n / len(confidence),
                "risk": e / n,
                "bound": float(b),
            }
        )
    return rows


def _accepted_rows(pairs, lab, steps, verdicts, names, inside) -> pl.DataFrame:
    """Each pair's keeper (the first juror that accepts it) and the verdict it keeps; else escalated."""
    n = pairs.height
    by = np.full(n, ESCALATED, dtype=object)
    p, p_tie, confidence = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    for step, (_, conf, pk, tk), name in zip(steps, verdicts, names, strict=True):
        take = step.accepts
        by[take], p[take], p_tie[take], confidence[take] = name, pk[take], tk[take], conf[take]
    frame = pairs.select(PAIR).with_columns(
        accepted_by=pl.Series(by.tolist(), dtype=pl.String),
        p=pl.Series(p).fill_nan(None),
        p_tie=pl.Series(p_tie).fill_nan(None),
        confidence=pl.Series(confidence).fill_nan(None),
        labelled=lab["preference"].is_not_null(),
        preference=lab["preference"],
        population=pl.Series(inside),
    )
    return frame.select(ACCEPTED.names)
