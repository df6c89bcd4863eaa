"""A jury's tables from the judgments of several judges on the same prompts (:mod:`pipeline.methods.scorers.jury_poe`).

A juror is a ``(judge, template_id)``: the same model with two prompt templates is two jurors. Per attribute:

- ``jury_scores``: the jury's scores per context and candidate by three methods, in the columns of the scores
  table (``judge`` is ``"jury"``, ``template_id`` the jurors' templates joined by ``:`` (a name MLflow accepts in metric names)): ``jury_poe`` (each juror's
  log-odds an expert with its own scale, bias and noise, fitted together), ``jury_majority`` (the jurors' majority
  per pair, scored by win ratio) and ``jury_mean`` (every juror's answer of equal weight: PoE-Gaussian on their
  average probability);
- ``jurors``: each juror's line (scale, bias, noise), its share of the jury's information, its answers, and its
  raw P(A) (position bias);
- ``juror_agreement``: for every two jurors, over the pairs both judged, Cohen's kappa and raw agreement of their
  verdicts (each juror's orderings averaged; "i", "tie" at 1/2, "j"; each pair read both ways round, so that kappa
  does not depend on which candidate a pair calls i) and the mean per-context Spearman of their PoE-Gaussian scores.

Every juror must have judged the same prompts (the jury compares judges on the same evidence): a prompt one juror
judged and another did not is an error naming the juror, the context and the candidates. An attribute whose jurors
answered fewer than :data:`pipeline.methods.scorers.jury_poe.MIN_ANSWERS` prompts each has no jury (a juror's line cannot be
estimated): it is listed in ``skipped`` with the reason, and the stage warns and counts it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import polars as pl
from scipy.stats import ConstantInputWarning, spearmanr

from pipeline.contracts.jury_schema import JUROR_AGREEMENT, JURORS
from pipeline.methods.agreement.metrics import merge_near_ties
from pipeline.methods.agreement.raters import both_ways, cohen_kappa, raw_agreement
from pipeline.methods.scorers import poe_gaussian
from pipeline.methods.scorers.jury_poe import MIN_ANSWERS, fit_jury, majority_vote, plain_average
from pipeline.methods.scorers.win_ratio import hard_outcomes
from pipeline.scoring.comparative import SCORE_ROWS

JUROR = ["judge", "template_id"]
PROMPT = ["context_id", "cand_a", "cand_b"]
JURY_METHODS = ("jury_poe", "jury_majority", "jury_mean")


class JuryError(ValueError):
    """The judgments cannot form a jury (one juror, or jurors that judged different prompts)."""


@dataclass(frozen=True)
class JuryTables:
    scores: pl.DataFrame
    jurors: pl.DataFrame
    agreement: pl.DataFrame
    # (attribute, why) of every attribute that has no jury
    skipped: tuple[tuple[str, str], ...] = ()


def juror_name(judge: str, template_id: str) -> str:
    return f"{judge}/{template_id}"


def check_same_prompts(judgments: pl.DataFrame, attribute: str) -> list[tuple[str, str]]:
    """The jurors of one attribute, after checking that every juror judged every prompt any juror judged."""
    jurors = judgments.select(JUROR).unique().sort(JUROR).rows()
    if len(jurors) < 2:
        raise JuryError(
            f"attribute {attribute!r}: a jury needs at least two jurors (judge, template), got {jurors}"
        )
    prompts = judgments.select(PROMPT).unique()
    for judge, template in jurors:
        own = judgments.filter((pl.col("judge") == judge) & (pl.col("template_id") == template)).select(
            PROMPT
        )
        missing = prompts.join(own, on=PROMPT, how="anti")
        if missing.height:
            ctx, a, b = missing.row(0)
            raise JuryError(
                f"attribute {attribute!r}: juror {juror_name(judge, template)} did not judge context {ctx!r}, "
                f"A={a!r}, B={b!r} (and {missing.height - 1} more prompts) that other jurors judged; a jury "
                "compares its jurors on the same prompts: rerun that juror to judge them"
            )
    return jurors


def jury_tables(judgments: pl.DataFrame) -> JuryTables:
    """The jury's scores, its jurors' lines and their agreement (module docstring), per attribute."""
    scores, jurors, agreement, skipped = [], [], [], []
    for (attribute,), frame in judgments.group_by(["attribute"], maintain_order=True):
        juror_list = check_same_prompts(frame, str(attribute))
        answers = frame.height // len(juror_list)
        if answers < MIN_ANSWERS:
            skipped.append(
                (
                    str(attribute),
                    f"each juror answered {answers} prompt(s); a juror's line needs at least {MIN_ANSWERS}",
                )
            )
            continue
        part = _attribute_tables(str(attribute), frame)
        scores.append(part.scores)
        jurors.append(part.jurors)
        agreement.append(part.agreement)
    if not scores:
        return JuryTables(
            pl.DataFrame(schema=SCORE_ROWS),
            pl.from_arrow(JURORS.empty_table()),
            pl.from_arrow(JUROR_AGREEMENT.empty_table()),
            tuple(skipped),
        )
    return JuryTables(pl.concat(scores), pl.concat(jurors), pl.concat(agreement), tuple(skipped))


def _attribute_tables(attribute: str, frame: pl.DataFrame) -> JuryTables:
    juror_list = check_same_prompts(frame, attribute)
    items = pl.concat(
        [frame.select("context_id", cand="cand_a"), frame.select("context_id", cand="cand_b")]
    ).unique()
    items = items.sort(["context_id", "cand"]).with_row_index("item")
    coded = (
        frame.join(items, left_on=["context_id", "cand_a"], right_on=["context_id", "cand"])
        .rename({"item": "i"})
        .join(items, left_on=["context_id", "cand_b"], right_on=["context_id", "cand"])
        .rename({"item": "j"})
        .with_columns(
            juror=pl.struct(JUROR).rank("dense").cast(pl.Int64) - 1,
        )
    )
    n = items.height
    judge, i, j, p = (coded[c].to_numpy() for c in ("juror", "i", "j", "p_a"))
    fit = fit_jury(n, judge, i, j, p)
    majority = majority_vote(n, judge, i, j, p)[0]  # a pair's vote stays in its context: no need to split
    mean = _per_context(coded, n, plain_average)
    templates = ":".join(sorted({t for _, t in juror_list}))
    scores = pl.concat(
        [
            items.select(
                judge=pl.lit("jury"),
                attribute=pl.lit(attribute),
                template_id=pl.lit(templates),
                method=pl.lit(method),
                context_id="context_id",
                candidate_id="cand",
                score=pl.Series(values, dtype=pl.Float64),
                stderr=pl.lit(None, dtype=pl.Float64),
            )
            for method, values in zip(JURY_METHODS, (fit.scores, majority, mean), strict=True)
        ]
    )
    raw_pa = coded.group_by("juror").agg(p_a_raw=pl.col("p_a").mean()).sort("juror")["p_a_raw"].to_list()
    jurors = pl.DataFrame(
        [
            {
                "attribute": attribute,
                "judge": jname,
                "template_id": tname,
                "scale": line.scale,
                "bias": line.bias,
                "sigma2": line.sigma2,
                "weight": line.weight,
                "share": line.share,
                "answers": line.n,
                "p_a_raw": raw_pa[k],
            }
            for k, ((jname, tname), line) in enumerate(zip(juror_list, fit.judges, strict=True))
        ]
    )
    return JuryTables(scores, jurors, _agreement(attribute, coded, juror_list, items))


def _per_context(coded: pl.DataFrame, n: int, scorer) -> np.ndarray:
    """``scorer(n_local, judge, i, j, p)`` run on each context apart (scorers that need a connected comparison
    graph), its scores placed back in the jury's item order."""
    out = np.zeros(n)
    for _, rows in coded.group_by(["context_id"], maintain_order=True):
        i, j = rows["i"].to_numpy(), rows["j"].to_numpy()
        local, codes = np.unique(np.concatenate([i, j]), return_inverse=True)
        k = i.shape[0]
        out[local] = scorer(
            local.shape[0], rows["juror"].to_numpy(), codes[:k], codes[k:], rows["p_a"].to_numpy()
        )
    return out


def _verdicts(coded: pl.DataFrame, k: int) -> pl.DataFrame:
    """Juror ``k``'s verdict per unordered pair: 0 (the lower item wins), 1 (tie at exactly 1/2), 2 (the other)."""
    own = coded.filter(pl.col("juror") == k).with_columns(
        lo=pl.min_horizontal("i", "j"),
        hi=pl.max_horizontal("i", "j"),
        p_lo=pl.when(pl.col("i") < pl.col("j")).then(pl.col("p_a")).otherwise(1.0 - pl.col("p_a")),
    )
    pairs = own.group_by(["lo", "hi"]).agg(pl.col("p_lo").mean())
    won = hard_outcomes(pairs["p_lo"].to_numpy())  # the rule of a won game: 1, 1/2 (a tie) or 0
    return pairs.with_columns(verdict=pl.Series((2 - 2 * won).astype(np.int64))).select("lo", "hi", "verdict")


def _context_scores(coded: pl.DataFrame, k: int, contexts: np.ndarray) -> dict[str, np.ndarray]:
    """Juror ``k``'s PoE-Gaussian scores of each context's items."""
    own = coded.filter(pl.col("juror") == k)
    scores = _per_context(own, contexts.shape[0], lambda n, _, i, j, p: poe_gaussian.poe_gaussian(n, i, j, p))
    return {str(c): scores[contexts == c] for c in np.unique(contexts)}


def _agreement(attribute, coded, juror_list, items) -> pl.DataFrame:
    contexts = items["context_id"].to_numpy()
    per_juror = [_context_scores(coded, k, contexts) for k in range(len(juror_list))]
    rows = []
    for a, b in combinations(range(len(juror_list)), 2):
        both = _verdicts(coded, a).join(_verdicts(coded, b), on=["lo", "hi"], suffix="_b")
        # each pair both ways round: kappa's chance agreement must not depend on which item a pair calls first
        va, vb = both_ways(both["verdict"].to_numpy(), both["verdict_b"].to_numpy())
        # scores equal in exact arithmetic (hard verdicts) come out of the solver a few ulps apart: ties; a context
        # whose scores are all tied for a juror has no Spearman (NaN, left out of the mean)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConstantInputWarning)
            rhos = [
                spearmanr(merge_near_ties(per_juror[a][c]), merge_near_ties(per_juror[b][c])).statistic
                for c in per_juror[a]
                if c in per_juror[b]
            ]
        rows.append(
            {
                "attribute": attribute,
                "juror_a": juror_name(*juror_list[a]),
                "juror_b": juror_name(*juror_list[b]),
                "pairs": both.height,
                "raw_agreement": raw_agreement(va, vb),
                "kappa": cohen_kappa(va, vb, 3),
                # null where no context has one (every score tied for a juror): not defined
                "spearman": float(np.mean(defined))
                if (defined := [r for r in rhos if np.isfinite(r)])
                else None,
            }
        )
    return pl.DataFrame(rows)
