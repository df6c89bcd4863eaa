"""The Polars reduce: p(A wins), coverage checks, debiased probabilities and position bias."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest

from pipeline.reduce import CoverageError, reduce_judgments


def judgments(n: int = 5, bias: float = 1.0, seed: int = 0, orderings: str = "both") -> pl.DataFrame:
    """Judgments from a known model: logit(p(A wins)) = s_a - s_b + bias."""
    rng = np.random.default_rng(seed)
    s = rng.normal(size=n)
    rows = []
    pairs = (
        itertools.permutations(range(n), 2) if orderings == "both" else itertools.combinations(range(n), 2)
    )
    for a, b in pairs:
        logit = s[a] - s[b] + bias
        # two label words per side; log-probs with some mass outside the labels
        la, lb = -np.log1p(np.exp(-logit)) - 0.2, -np.log1p(np.exp(logit)) - 0.2
        rows.append(
            {
                "context_id": "c",
                "attribute": "coherence",
                "template_id": "c1",
                "cand_a": f"k{a}",
                "cand_b": f"k{b}",
                "judge": "j",
                "label_logprobs": [la, la - 5, lb, lb - 5],
                "logprob_a": la,
                "logprob_b": lb,
                "top_token": " A",
                "prompt_tokens": 100,
                "cached_tokens": 60,
            }
        )
    return pl.DataFrame(rows)


def test_p_a_is_the_renormalised_label_probability():
    j = judgments()
    out = reduce_judgments(j, "average", "both").judgments
    expected = np.exp(j["logprob_a"]) / (np.exp(j["logprob_a"]) + np.exp(j["logprob_b"]))
    np.testing.assert_allclose(out["p_a"].to_numpy(), expected, rtol=1e-12)
    assert ((out["p_a"] > 0) & (out["p_a"] < 1)).all()


def test_average_debiasing_identity_and_bias():
    reduced = reduce_judgments(judgments(bias=1.0), "average", "both")
    comp = reduced.comparisons
    assert comp.height == 10
    np.testing.assert_allclose(comp["p"], (comp["p_ij"] + 1 - comp["p_ji"]) / 2, rtol=1e-12)
    # P(i beats j) + P(j beats i) = 1 after debiasing, for every pair
    p_ji_debiased = (comp["p_ji"] + 1 - comp["p_ij"]) / 2
    np.testing.assert_allclose(comp["p"] + p_ji_debiased, 1.0, rtol=1e-12)
    bias = reduced.position_bias.row(0, named=True)
    assert bias["p_a"] > 0.6  # the simulated judge prefers slot A
    assert bias["p_a_debiased"] == pytest.approx(0.5, abs=1e-12)
    assert bias["cache_share"] == pytest.approx(0.6)


def test_alpha_debiasing_balances_one_ordering():
    reduced = reduce_judgments(judgments(bias=1.0, orderings="one"), "alpha", "one")
    assert reduced.position_bias["p_a_debiased"][0] == pytest.approx(0.5, abs=1e-9)
    assert reduced.alphas[("j", "coherence", "c1")] < 1.0
    assert reduced.comparisons["p_ji"].is_null().all()


def test_duplicates_and_missing_orderings_are_errors():
    j = judgments()
    with pytest.raises(CoverageError, match="more than once"):
        reduce_judgments(pl.concat([j, j.head(1)]), "average", "both")
    with pytest.raises(CoverageError, match="one ordering only"):
        reduce_judgments(j.tail(-1), "average", "both")
