"""The Polars reduce: coverage checks, debiased probabilities and position bias."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.config.enums import Debias, Orderings
from pipeline.scoring.reduce import CoverageError, reduce_judgments
from tests.conftest import judgments_table


def judgments(**kwargs) -> pl.DataFrame:
    return pl.from_arrow(judgments_table(**kwargs))


def test_average_debiasing_identity_and_bias():
    reduced = reduce_judgments(judgments(bias=1.0), Debias.average, Orderings.both)
    comp = reduced.comparisons
    assert comp.height == 10
    np.testing.assert_allclose(comp["p"], (comp["p_ij"] + 1 - comp["p_ji"]) / 2, rtol=1e-12)
    bias = reduced.position_bias.row(0, named=True)
    assert bias["p_a"] > 0.6  # the simulated judge prefers slot A
    assert bias["cache_share"] == pytest.approx(0.6)
    assert bias["n"] == 20 and bias["prompt_tokens"] == 2000


def test_debiased_p_a_is_the_debiased_win_probability_of_slot_a():
    # P(A) after debiasing, recomputed by hand: for each prompt the debiased P(slot A beats slot B)
    j = judgments(bias=0.7, seed=3)
    reduced = reduce_judgments(j, Debias.average, Orderings.both)
    p = {(r["cand_i"], r["cand_j"]): r["p"] for r in reduced.comparisons.iter_rows(named=True)}
    by_hand = [
        p[(a, b)] if (a, b) in p else 1 - p[(b, a)] for a, b in zip(j["cand_a"], j["cand_b"], strict=True)
    ]
    assert reduced.position_bias["p_a_debiased"][0] == pytest.approx(np.mean(by_hand), abs=1e-12)
    assert reduced.position_bias["p_a"][0] == pytest.approx(j["p_a"].mean(), abs=1e-12)


def test_alpha_debiasing_balances_one_ordering():
    reduced = reduce_judgments(judgments(bias=1.0, orderings="one"), Debias.alpha, Orderings.one)
    assert reduced.position_bias["p_a_debiased"][0] == pytest.approx(0.5, abs=1e-9)
    assert reduced.alphas[("j", "coherence", "c1")] < 1.0
    assert reduced.comparisons["p_ji"].is_null().all()


@pytest.mark.parametrize(
    "debias,orderings", [(Debias.none, Orderings.both), (Debias.mean_shift, Orderings.one)]
)
def test_modes_that_score_raw_probabilities_report_the_raw_p_a(debias, orderings):
    # none and mean_shift hand the scorers raw p(A wins): the position-bias table must not claim a correction
    reduced = reduce_judgments(judgments(bias=1.0, orderings=orderings.value), debias, orderings)
    row = reduced.position_bias.row(0, named=True)
    assert row["p_a_debiased"] == pytest.approx(row["p_a"], abs=1e-12) and row["p_a"] > 0.6


def test_duplicates_and_missing_orderings_are_errors():
    j = judgments()
    with pytest.raises(CoverageError, match="more than once"):
        reduce_judgments(pl.concat([j, j.head(1)]), Debias.average, Orderings.both)
    with pytest.raises(CoverageError, match="one ordering only"):
        reduce_judgments(j.tail(-1), Debias.average, Orderings.both)
