"""The score stage: per-context scores, ranks, standard errors, and unscorable contexts counted."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.config.enums import Debias, Orderings
from pipeline.methods.scorers import poe_gaussian, poe_logit
from pipeline.scoring.comparative import ranks, score_comparisons
from pipeline.scoring.reduce import reduce_judgments
from tests.conftest import candidates_table, judgment_rows, judgments_table


def human(n: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "context_id": ["c"] * n,
            "candidate_id": [f"k{m}" for m in range(n)],
            "attribute": ["coherence"] * n,
            "human_score": [float(m) for m in range(n)],
        }
    )


def comparisons(debias=Debias.average, orderings=Orderings.both, **kwargs) -> pl.DataFrame:
    return reduce_judgments(
        pl.from_arrow(judgments_table(orderings=orderings.value, **kwargs)), debias, orderings
    ).comparisons


def test_ranks_best_is_one_and_ties_share():
    assert ranks(np.array([0.1, 0.9, 0.5, 0.9])).tolist() == [4, 1, 3, 1]


def test_scores_ranks_and_standard_errors():
    comp = comparisons(n=6)
    out = score_comparisons(
        comp, candidates_table({"c": 6}, "k{k}"), human(6), ["win_ratio", "poe_gaussian"], Debias.average
    )
    assert out.unscored == []
    assert out.scores.height == 12
    gauss = out.scores.filter(pl.col("method") == "poe_gaussian").sort("candidate_id")
    assert gauss["stderr"].null_count() == 0 and (gauss["stderr"] > 0).all()
    assert out.scores.filter(pl.col("method") == "win_ratio")["stderr"].null_count() == 6
    assert gauss["human_score"].to_list() == [float(m) for m in range(6)]
    # rank 1 is the highest score, and the ranks order the candidates as the scores do
    assert gauss.sort("score", descending=True)["rank"].to_list() == list(range(1, 7))
    # the Gaussian scores are the library's, with the candidate order of the context
    index = {f"k{m}": m for m in range(6)}
    i = np.array([index[c] for c in comp["cand_i"]])
    j = np.array([index[c] for c in comp["cand_j"]])
    expected = poe_gaussian.fit(6, i, j, comp["p"].to_numpy())
    np.testing.assert_allclose(gauss["score"].to_numpy(), expected.scores, atol=1e-12)
    np.testing.assert_allclose(gauss["stderr"].to_numpy(), expected.stderr, atol=1e-12)


def test_scores_recover_the_simulated_judge_order():
    rows, truth = judgment_rows(n=8, bias=0.8, seed=5)
    comp = reduce_judgments(pl.DataFrame(rows), Debias.average, Orderings.both).comparisons
    out = score_comparisons(
        comp, candidates_table({"c": 8}, "k{k}"), human(8), ["poe_gaussian", "bradley_terry"], Debias.average
    )
    for method in ("poe_gaussian", "bradley_terry"):
        got = out.scores.filter(pl.col("method") == method).sort("candidate_id")["score"].to_numpy()
        assert np.corrcoef(np.argsort(np.argsort(got)), np.argsort(np.argsort(truth)))[0, 1] > 0.95


def test_mean_shift_uses_the_observed_prior_with_one_ordering():
    rows, _ = judgment_rows(n=6, bias=1.0, orderings="one")
    j = pl.DataFrame(rows)
    comp = reduce_judgments(j, Debias.mean_shift, Orderings.one).comparisons
    out = score_comparisons(
        comp, candidates_table({"c": 6}, "k{k}"), human(6), ["poe_gaussian"], Debias.mean_shift
    )
    index = {f"k{m}": m for m in range(6)}
    a = np.array([index[c] for c in j["cand_a"]])
    b = np.array([index[c] for c in j["cand_b"]])
    expected = poe_gaussian.fit(6, a, b, j["p_a"].to_numpy(), beta="mean").scores
    got = out.scores.sort("candidate_id")["score"].to_numpy()
    np.testing.assert_allclose(got, expected, atol=1e-12)
    # beta = 0.5 would give different scores for this biased judge (every item's score shifts by its slot-A share)
    assert not np.allclose(got, poe_gaussian.fit(6, a, b, j["p_a"].to_numpy(), beta=0.5).scores)


def test_an_unscorable_context_is_counted_not_dropped():
    comp = comparisons(n=4)
    # a fifth candidate in no comparison: the comparison graph is disconnected
    out = score_comparisons(
        comp, candidates_table({"c": 5}, "k{k}"), human(5), ["avg_prob", "poe_gaussian"], Debias.average
    )
    assert {(u[3], u[4]) for u in out.unscored} == {("avg_prob", "c"), ("poe_gaussian", "c")}
    # the reason names the candidate by its id, not only by its index
    assert all(u[5].endswith("(candidate(s) k4)") for u in out.unscored)
    assert out.scores.height == 0
    table = out.unscored_table()
    assert table.columns == ["judge", "attribute", "template_id", "method", "context_id", "reason"]
    assert table.height == 2


@pytest.mark.parametrize("debias", [Debias.average, Debias.alpha, Debias.none])
def test_every_debias_mode_scores_every_candidate(debias):
    comp = comparisons(debias=debias, n=5)
    out = score_comparisons(
        comp, candidates_table({"c": 5}, "k{k}"), human(5), ["avg_prob", "bradley_terry", "poe_bt"], debias
    )
    assert out.scores.height == 15 and not out.unscored


def test_poe_logit_leaves_out_a_pair_whose_orderings_contradict_each_other():
    """One ordering of the farthest pair answers the opposite of what the judge means (a flipped label): averaged,
    the pair reads as a tie; poe_logit leaves it out and counts it, and the other methods still average it."""
    rows, truth = judgment_rows(n=7, bias=0.3, seed=4)
    top, bottom = f"k{int(np.argmax(truth))}", f"k{int(np.argmin(truth))}"
    assert truth.max() - truth.min() > 3.0  # far enough apart for both orderings to be confident
    for row in rows:
        if (row["cand_a"], row["cand_b"]) == (bottom, top):
            row["p_a"] = 1.0 - row["p_a"]
    comp = reduce_judgments(pl.DataFrame(rows), Debias.average, Orderings.both).comparisons
    out = score_comparisons(
        comp, candidates_table({"c": 7}, "k{k}"), human(7), ["poe_logit", "poe_gaussian"], Debias.average
    )
    assert out.contradicted == 1 and not out.unscored
    index = {f"k{m}": m for m in range(7)}
    i = np.array([index[c] for c in comp["cand_i"]])
    j = np.array([index[c] for c in comp["cand_j"]])
    flipped = ((comp["cand_i"] == bottom) & (comp["cand_j"] == top)) | (
        (comp["cand_i"] == top) & (comp["cand_j"] == bottom)
    )
    keep = ~flipped.to_numpy()
    got = out.scores.filter(pl.col("method") == "poe_logit").sort("candidate_id")["score"].to_numpy()
    np.testing.assert_allclose(got, poe_logit.fit(7, i[keep], j[keep], comp["p"].to_numpy()[keep])[0])
    assert not np.allclose(got, poe_logit.fit(7, i, j, comp["p"].to_numpy())[0])
    # without poe_logit nothing is looked for, and nothing is counted
    plain = score_comparisons(
        comp, candidates_table({"c": 7}, "k{k}"), human(7), ["poe_gaussian"], Debias.average
    )
    assert plain.contradicted == 0


def test_poe_logit_fits_with_the_settings_it_is_given():
    """The scoring stage fits poe_logit with its settings (the adaptive workflow passes the rounds'): a tighter
    cap, another ridge and Gaussian experts change the scores exactly as the scorer's own options do, and with
    ``drop_contradicted`` off the flipped pair is averaged like the other methods average it, and not counted."""
    rows, truth = judgment_rows(n=7, bias=0.3, seed=4)
    top, bottom = f"k{int(np.argmax(truth))}", f"k{int(np.argmin(truth))}"
    for row in rows:
        if (row["cand_a"], row["cand_b"]) == (bottom, top):
            row["p_a"] = 1.0 - row["p_a"]
    comp = reduce_judgments(pl.DataFrame(rows), Debias.average, Orderings.both).comparisons
    index = {f"k{m}": m for m in range(7)}
    i = np.array([index[c] for c in comp["cand_i"]])
    j = np.array([index[c] for c in comp["cand_j"]])
    p = comp["p"].to_numpy()

    def scored(settings):
        out = score_comparisons(
            comp, candidates_table({"c": 7}, "k{k}"), human(7), ["poe_logit"], Debias.average, settings
        )
        return out, out.scores.sort("candidate_id")["score"].to_numpy()

    default, s_default = scored(poe_logit.DEFAULTS)
    settings = poe_logit.Settings(clip=3.0, robust=None, censor=False, ridge=0.5, drop_contradicted=False)
    other, s_other = scored(settings)
    assert default.contradicted == 1 and other.contradicted == 0
    np.testing.assert_allclose(
        s_other, poe_logit.fit(7, i, j, p, clip=3.0, robust=None, censor=False, ridge=0.5)[0]
    )
    assert not np.allclose(s_other, s_default)


def test_poe_logit_defaults_are_the_rounds_defaults():
    """One definition: the scorer's defaults are AdaptiveConfig's, so a run that changes nothing scores every
    workflow's poe_logit with the model its rounds fit."""
    from pipeline.config.adaptive_rounds import AdaptiveConfig

    a = AdaptiveConfig()
    assert poe_logit.DEFAULTS == poe_logit.Settings(
        a.logit_clip, a.robust, a.censor, a.ridge, a.drop_contradicted
    )
