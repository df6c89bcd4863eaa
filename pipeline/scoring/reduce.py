"""Reduce the judgments with Polars into position bias and debiased pair probabilities.

The judgments carry p(A wins) per prompt (``p_a``, computed by the judge stage with
:func:`pipeline.methods.verdicts.win_probability.p_a_wins`; a tie option's probability is split evenly in it and kept as ``p_tie``).

- Position bias per judge, attribute and template: P(A) = mean p(A wins) (EACL eq. 8), before and after
  debiasing, with the share of hard decisions for A, the probability mass on the label words, and how often
  the judge picks the tie option (mean p(tie), and the share of prompts where the tie is its top label).
- Comparisons: the two orderings of each pair joined (``p_tie``: the mean tie probability of the orderings);
  the debiased probability that i beats j is the mean of the available estimates {p_ij, 1 - p_ji}, after alpha reweighting when ``debias=alpha`` (EACL eqs. 9-10).
  With both orderings and ``debias=average`` that is (p_ij + 1 - p_ji) / 2 (PoE section 4.2). With
  ``debias=mean_shift`` (one ordering) the comparisons keep the raw probabilities: the correction happens
  inside the PoE-Gaussian scorers, which shift their expert means by the observed P(A) (PoE appendix A.6), so
  the debiased P(A) reported for mean_shift equals the raw P(A) (the other scorers see the raw probabilities).
  With ``debias=none`` each ordering goes to the scorers as its own comparison, and the debiased P(A) reported
  is the raw one too; the comparisons' ``p`` is still the mean of the two estimates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.config.enums import Debias, Orderings
from pipeline.methods.verdicts.debias import balanced_threshold, balancing_alpha, reweight

GROUP = ["judge", "attribute", "template_id"]
# Debiasing modes that hand the scorers the raw p(A wins) of each judged ordering: their "debiased" P(A) is
# the raw one (mean_shift corrects inside the PoE-Gaussian scorers only).
RAW_TO_SCORERS = (Debias.none, Debias.mean_shift)
PAIR = [*GROUP, "context_id", "cand_i", "cand_j"]


class CoverageError(RuntimeError):
    """The judgments do not cover every pair exactly once per ordering."""


@dataclass(frozen=True)
class Reduced:
    comparisons: pl.DataFrame  # COMPARISONS
    position_bias: pl.DataFrame
    alphas: dict[tuple[str, str, str], float]


def check_coverage(judgments: pl.DataFrame, orderings: Orderings) -> None:
    """Every prompt judged once; with both orderings, every pair judged in both."""
    keys = [*GROUP, "context_id", "cand_a", "cand_b"]
    dup = judgments.group_by(keys).len().filter(pl.col("len") > 1)
    if dup.height:
        first = dup.row(0, named=True)
        raise CoverageError(
            f"{dup.height} comparison(s) judged more than once, e.g. context {first['context_id']!r} "
            f"A={first['cand_a']!r} B={first['cand_b']!r} ({first['attribute']}, {first['template_id']})"
        )
    if orderings == Orderings.both:
        reverse = judgments.select(
            *GROUP, "context_id", pl.col("cand_b").alias("cand_a"), pl.col("cand_a").alias("cand_b")
        )
        lonely = reverse.join(judgments.select(keys), on=keys, how="anti")
        if lonely.height:
            first = lonely.row(0, named=True)
            raise CoverageError(
                f"{lonely.height} pair(s) judged in one ordering only, e.g. context {first['context_id']!r} "
                f"{first['cand_b']!r} vs {first['cand_a']!r} ({first['attribute']}, {first['template_id']})"
            )


def position_bias(judgments: pl.DataFrame, debiased_col: str) -> pl.DataFrame:
    return (
        judgments.group_by(GROUP)
        .agg(
            n=pl.len().cast(pl.Int64),
            p_a=pl.col("p_a").mean(),
            p_a_hard=(pl.col("p_a") > 0.5).mean(),
            p_a_debiased=pl.col(debiased_col).mean(),
            label_mass=pl.col("label_mass").mean(),
            p_tie=pl.col("p_tie").mean(),
            # the tie is the judge's top label: p(tie) above both p(A) = p_a - p_tie/2 and p(B) = 1 - p_a - p_tie/2
            tie_hard=(
                (pl.col("p_tie") > pl.col("p_a") - pl.col("p_tie") / 2)
                & (pl.col("p_tie") > 1.0 - pl.col("p_a") - pl.col("p_tie") / 2)
            ).mean(),
            prompt_tokens=pl.col("prompt_tokens").cast(pl.Int64).sum(),
            cached_tokens=pl.col("cached_tokens").cast(pl.Int64).sum(),
        )
        .with_columns(
            cache_share=pl.when(pl.col("prompt_tokens") > 0).then(
                pl.col("cached_tokens") / pl.col("prompt_tokens")
            )
        )
        .sort(GROUP)
    )


def debias_judgments(
    judgments: pl.DataFrame, debias: Debias
) -> tuple[pl.DataFrame, dict[tuple[str, str, str], float]]:
    """Add ``p_a_w``: p(A wins) after alpha reweighting, or the hard decision at the EACL release's balanced
    threshold (``balanced_threshold``), or unchanged; and each group's alpha (or threshold)."""
    if debias not in (Debias.alpha, Debias.balanced_threshold):
        return judgments.with_columns(p_a_w=pl.col("p_a")), {}
    alphas: dict[tuple[str, str, str], float] = {}
    parts = []
    for key, group in judgments.group_by(GROUP, maintain_order=True):
        p = group["p_a"].to_numpy()
        if debias == Debias.alpha:
            alpha = balancing_alpha(p)
            debiased = reweight(p, alpha)
        else:  # the release's hard decisions: A where p > t
            alpha = balanced_threshold(p)
            debiased = (p > alpha).astype(np.float64)
        alphas[tuple(key)] = alpha  # type: ignore[assignment]
        parts.append(group.with_columns(p_a_w=pl.Series(debiased, dtype=pl.Float64)))
    return pl.concat(parts), alphas


def join_orderings(judgments: pl.DataFrame) -> pl.DataFrame:
    """One row per unordered pair (cand_i < cand_j): p_ij, p_ji (raw) and p, the debiased P(i beats j)."""
    canonical = judgments.with_columns(
        cand_i=pl.min_horizontal("cand_a", "cand_b"),
        cand_j=pl.max_horizontal("cand_a", "cand_b"),
    )
    i_in_a = pl.col("cand_a") == pl.col("cand_i")
    return (
        canonical.group_by(PAIR, maintain_order=True)
        .agg(
            p_ij=pl.col("p_a").filter(i_in_a).first(),
            p_ji=pl.col("p_a").filter(~i_in_a).first(),
            # estimates of P(i beats j): p_ij from the (i, j) ordering, 1 - p_ji from the (j, i) ordering
            p=pl.when(i_in_a).then(pl.col("p_a_w")).otherwise(1.0 - pl.col("p_a_w")).mean(),
            p_tie=pl.col("p_tie").mean(),
        )
        .sort(PAIR)
    )


def reduce_judgments(judgments: pl.DataFrame, debias: Debias, orderings: Orderings) -> Reduced:
    check_coverage(judgments, orderings)
    j, alphas = debias_judgments(judgments, debias)
    comparisons = join_orderings(j)
    # P(A) after debiasing: the debiased probability that the slot-A candidate wins, per ordered prompt.
    per_prompt = j.join(
        comparisons.select(*PAIR, "p"),
        left_on=[
            *GROUP,
            "context_id",
            pl.min_horizontal("cand_a", "cand_b"),
            pl.max_horizontal("cand_a", "cand_b"),
        ],
        right_on=PAIR,
        how="left",
    ).with_columns(
        p_a_debiased=pl.col("p_a")
        if debias in RAW_TO_SCORERS
        else pl.when(pl.col("cand_a") < pl.col("cand_b")).then(pl.col("p")).otherwise(1.0 - pl.col("p"))
    )
    bias = position_bias(per_prompt, "p_a_debiased")
    if np.isnan(comparisons["p"].to_numpy()).any():
        raise CoverageError("a debiased probability is NaN; check the judgments' label log-probabilities")
    return Reduced(comparisons=comparisons, position_bias=bias, alphas=alphas)


def in_pair_order(comparisons: pl.DataFrame) -> pl.DataFrame:
    """COMPARISONS rows with ``cand_i < cand_j``: a pair read the other way round is turned (``p_ij`` and ``p_ji``
    swap places, ``p`` becomes ``1 - p``); the judge, attribute, template, context, pair, probabilities and
    ``p_tie`` kept."""
    flip = pl.col("cand_i") > pl.col("cand_j")
    swapped = {"cand_i": "cand_j", "cand_j": "cand_i", "p_ij": "p_ji", "p_ji": "p_ij"}
    return comparisons.select(
        *GROUP,
        "context_id",
        *(pl.when(flip).then(other).otherwise(c).alias(c) for c, other in swapped.items()),
        pl.when(flip).then(1 - pl.col("p")).otherwise("p").alias("p"),
        "p_tie",
    )
