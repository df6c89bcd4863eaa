"""Turn the debiased comparisons of each context into scores and ranks, per method.

The maths is in :mod:`pipeline.methods`; this module only groups the comparisons by context, maps candidate
ids to indices and back, and records contexts a method cannot score (e.g. a disconnected comparison graph)
so they are counted and reported instead of dropped silently. The PoE-Gaussian methods and ``poe_logit`` also
give each score its posterior standard error; with one ordering per pair and ``debias=mean_shift`` their expert
mean is shifted by the observed P(A) (PoE appendix A.6), ``poe_logit``'s by the mean log-odds.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
from scipy.stats import rankdata

from pipeline.config.enums import Debias
from pipeline.contracts.errors import UserError
from pipeline.contracts.schemas import SCORES, UNSCORED
from pipeline.data.contexts import group_by_context
from pipeline.methods.agreement.metrics import merge_near_ties
from pipeline.methods.scorers import contradiction, poe_logit
from pipeline.methods.scorers.comparison_checks import ComparisonError
from pipeline.methods.scorers.registry import FitInputs, ScorerOutputError, scorer
from pipeline.scoring.reduce import RAW_TO_SCORERS

log = logging.getLogger(__name__)


@dataclass
class Scored:
    scores: pl.DataFrame  # SCORES
    # (judge, attribute, template_id, method, context_id, reason) for every context a method could not score
    unscored: list[tuple[str, str, str, str, str, str]] = field(default_factory=list)
    # pairs whose two orderings contradict each other, left out by the scorers that declare it (contradictions)
    contradicted: int = 0

    def unscored_table(self) -> pl.DataFrame:
        return pl.DataFrame(self.unscored, schema=UNSCORED.names, orient="row").cast(
            dict.fromkeys(UNSCORED.names, pl.String)
        )


# The columns a scorer's rows have before their rank and human score are added.
SCORE_ROWS = {
    "judge": pl.String,
    "attribute": pl.String,
    "template_id": pl.String,
    "method": pl.String,
    "context_id": pl.String,
    "candidate_id": pl.String,
    "score": pl.Float64,
    "stderr": pl.Float64,
}


# The methods that leave out a pair whose two orderings contradict each other (the rest average them).
def method_scores(
    method: str,
    n: int,
    i: np.ndarray,
    j: np.ndarray,
    p: np.ndarray,
    debias: Debias,
    tie: np.ndarray | None = None,
    contradicted: np.ndarray | None = None,
    logit: poe_logit.Settings = poe_logit.DEFAULTS,
    options: Mapping[str, Any] | None = None,
) -> tuple[np.ndarray, np.ndarray | None]:
    """(scores, standard errors or None) of one context by the registered scorer ``method``
    (:mod:`pipeline.methods.scorers.registry`). ``tie``: the tie probability of each comparison, for a scorer that reads it
    (every other scorer uses ``p``, in which the tie is split evenly). ``contradicted``: the comparisons whose two
    orderings contradict each other, for a scorer that leaves them out; ``logit``: how the capped log-odds fit;
    ``options``: the method's own settings (``scoring.options``)."""
    inputs = FitInputs(
        tie=tie,
        contradicted=contradicted,
        shift=debias == Debias.mean_shift,
        logit=logit,
        options=scorer(method).options(options or {}),
    )
    return scorer(method).fit_context(n, i, j, p, inputs)


def leaves_out_contradictions(methods: list[str]) -> list[str]:
    """The ``methods`` that leave out the pairs whose two orderings contradict each other."""
    return [m for m in methods if scorer(m).contradictions]


def ranks(scores: np.ndarray) -> np.ndarray:
    """1 = best; tied scores share the smallest rank, scores within ``TIE_RTOL`` of the largest magnitude tied
    (:func:`pipeline.methods.agreement.metrics.merge_near_ties`: ulps of a solver's sums are not a ranking, and would move
    with the order of the rows)."""
    return rankdata(-merge_near_ties(np.asarray(scores, dtype=np.float64)), method="min").astype(np.int32)


def comparison_arrays(
    group: pl.DataFrame, index: dict[str, int], debias: Debias
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, p, tie) for the scorers. With ``debias=none`` or ``mean_shift`` each judged ordering is its own
    comparison (slot A as i, raw p(A wins); the pair's mean tie probability); otherwise one comparison per pair
    with the debiased p."""
    ci = np.array([index[c] for c in group["cand_i"].to_list()], dtype=np.int64)
    cj = np.array([index[c] for c in group["cand_j"].to_list()], dtype=np.int64)
    tie = group["p_tie"].to_numpy().astype(np.float64)
    if debias not in RAW_TO_SCORERS:
        return ci, cj, group["p"].to_numpy().astype(np.float64), tie
    p_ij = group["p_ij"].to_numpy(allow_copy=True).astype(np.float64)
    p_ji = group["p_ji"].to_numpy(allow_copy=True).astype(np.float64)
    has_ij, has_ji = ~np.isnan(p_ij), ~np.isnan(p_ji)
    i = np.concatenate([ci[has_ij], cj[has_ji]])
    j = np.concatenate([cj[has_ij], ci[has_ji]])
    return i, j, np.concatenate([p_ij[has_ij], p_ji[has_ji]]), np.concatenate([tie[has_ij], tie[has_ji]])


def in_canonical_order(
    i: np.ndarray,
    j: np.ndarray,
    p: np.ndarray,
    tie: np.ndarray,
    flagged: np.ndarray | None,
    orient: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
    """The scorers' comparisons in one order whatever the candidates are called and however the rows came: each
    pair read with its lower item index as i (``orient``: a pair's debiased ``p`` read the other way round is ``1 -
    p``; not for comparisons that are judged orderings, whose i is slot A), then sorted by (i, j, p). The items are
    in content-key order (:func:`pipeline.data.contexts.group_by_context`), so every scorer gets the same arrays, and
    a scorer whose optimum is not unique (PoE-Laplace's linear program) or that stops at a tolerance (Davidson's
    L-BFGS) returns the same scores under any names and any order of rows."""
    if orient:
        turn = i > j
        i, j = np.where(turn, j, i), np.where(turn, i, j)
        p = np.where(turn, 1.0 - p, p)
    order = np.lexsort((p, j, i))
    return i[order], j[order], p[order], tie[order], None if flagged is None else flagged[order]


def contradicted_pairs(
    group: pl.DataFrame, debias: Debias, clip: float = contradiction.LOGIT_CLIP
) -> np.ndarray | None:
    """Which comparisons of :func:`comparison_arrays` are pairs whose two orderings contradict each other
    (:func:`pipeline.methods.scorers.contradiction.contradicted`, on log-odds capped at ``clip``); None when each judged
    ordering is its own comparison."""
    if debias in RAW_TO_SCORERS:
        return None
    return contradiction.contradicted(
        group["p_ij"].to_numpy(allow_copy=True).astype(np.float64),
        group["p_ji"].to_numpy(allow_copy=True).astype(np.float64),
        clip=clip,
    )


def score_comparisons(
    comparisons: pl.DataFrame,
    candidates: pa.Table,
    human_scores: pl.DataFrame,
    methods: list[str],
    debias: Debias,
    logit: poe_logit.Settings = poe_logit.DEFAULTS,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> Scored:
    """SCORES rows for every (judge, attribute, template, context) group and method; ``logit``: how
    ``poe_logit`` fits, and whether it leaves out the pairs whose orderings contradict each other; ``options``: per
    method, its own settings (``scoring.options``)."""
    members = {ctx.context_id: list(ctx.candidate_ids) for ctx in group_by_context(candidates)}
    rows: dict[str, list] = {k: [] for k in ("judge", "attribute", "template_id", "method", "context_id")}
    rows.update(candidate_id=[], score=[], stderr=[], rank=[])
    unscored = []
    n_contradicted = 0
    for (judge, attribute, template_id, context_id), group in comparisons.group_by(
        ["judge", "attribute", "template_id", "context_id"], maintain_order=True
    ):
        cands = members[context_id]
        index = {c: n for n, c in enumerate(cands)}
        i, j, p, tie = comparison_arrays(group, index, debias)
        aware = logit.drop_contradicted and leaves_out_contradictions(methods)
        flagged = contradicted_pairs(group, debias, logit.clip) if aware else None
        if flagged is not None:
            n_contradicted += int(flagged.sum())
        i, j, p, tie, flagged = in_canonical_order(i, j, p, tie, flagged, debias not in RAW_TO_SCORERS)
        for method in methods:
            try:
                s, se = method_scores(
                    method,
                    len(cands),
                    i,
                    j,
                    p,
                    debias,
                    tie,
                    flagged if scorer(method).contradictions else None,
                    logit,
                    (options or {}).get(method),
                )
            except ComparisonError as exc:
                named = f" (candidate(s) {', '.join(cands[k] for k in exc.items)})" if exc.items else ""
                unscored.append((judge, attribute, template_id, method, context_id, f"{exc}{named}"))
                continue
            except ScorerOutputError as exc:
                raise UserError(
                    f"context {context_id!r} (judge {judge}, attribute {attribute}, template {template_id}): {exc}"
                ) from exc
            n = len(cands)
            rows["judge"] += [judge] * n
            rows["attribute"] += [attribute] * n
            rows["template_id"] += [template_id] * n
            rows["method"] += [method] * n
            rows["context_id"] += [context_id] * n
            rows["candidate_id"] += cands
            rows["score"] += s.tolist()
            # null where not defined: no other method gives one, and a context with as many comparisons as free
            # scores leaves no residual to estimate the experts' variance from
            rows["stderr"] += (
                [float(x) if np.isfinite(x) else None for x in se] if se is not None else [None] * n
            )
            rows["rank"] += ranks(s).tolist()
    if n_contradicted:
        log.info(
            "%d pair(s) whose two orderings contradict each other left out of %s (the other methods average them)",
            n_contradicted,
            ", ".join(sorted(leaves_out_contradictions(methods))),
        )
    if unscored:
        log.warning(
            "%d (context, method) group(s) could not be scored and are left out of the scores, e.g. %s / %s: %s",
            len(unscored),
            unscored[0][4],
            unscored[0][3],
            unscored[0][5],
        )
    scores = pl.DataFrame(rows, schema={**SCORE_ROWS, "rank": pl.Int32})
    scores = scores.join(human_scores, on=["context_id", "candidate_id", "attribute"], how="left").select(
        SCORES.names
    )
    return Scored(scores=scores, unscored=unscored, contradicted=n_contradicted)


def rank_and_join(rows: pl.DataFrame, human_scores: pl.DataFrame) -> pl.DataFrame:
    """SCORES from (judge, attribute, template_id, method, context_id, candidate_id, score[, stderr]) rows: the
    rank within each context (1 = best, ties share the smallest rank) and the human score."""
    if "stderr" not in rows.columns:
        rows = rows.with_columns(stderr=pl.lit(None, dtype=pl.Float64))
    group = ["judge", "attribute", "template_id", "method", "context_id"]
    ranked = rows.with_columns(
        rank=pl.col("score")
        .map_batches(lambda s: pl.Series(ranks(s.to_numpy()), dtype=pl.Int32), return_dtype=pl.Int32)
        .over(group)
    )
    return ranked.join(human_scores, on=["context_id", "candidate_id", "attribute"], how="left").select(
        SCORES.names
    )


def _empty_rows() -> pl.DataFrame:
    return pl.DataFrame(schema=SCORE_ROWS)
