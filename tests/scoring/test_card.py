"""The judge's report card on hand-made comparisons with a known truth: calibration against people's preferences
before and after the cross-fitted temperature, position consistency, the preference for the longer text beside
people's, self-preference, and scoring with calibrated probabilities; no engine."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from scipy.special import expit

from pipeline.config.enums import Debias
from pipeline.scoring.card_table import calibrate_comparisons, card_tables
from pipeline.scoring.comparative import score_comparisons

N_CTX, N_CAND = 12, 8


def tables(seed: int = 0, temperature: float = 3.0, length_bias: float = 0.0):
    """Contexts of candidates with human scores and texts of random lengths; the judge's debiased P(i beats j) is
    ``sigmoid(temperature (q_i - q_j + e))`` with ``e ~ N(0, 1)`` (people's preference given the judge's log-odds
    ``s`` is about ``sigmoid(1.33 s / temperature)``: too sure for a large temperature), plus ``length_bias`` per unit
    of normalised length difference; each ordering's raw answer is that with a bias of +1 towards slot A."""
    rng = np.random.default_rng(seed)
    cands, human, comps = [], [], []
    for c in range(N_CTX):
        quality = rng.normal(0, 1, N_CAND)
        length = rng.integers(20, 200, N_CAND)
        for k in range(N_CAND):
            cid = f"k{k}"
            cands.append({"context_id": f"c{c}", "context": "x", "candidate_id": cid, "candidate_index": k,
                          "system": "own" if k == 0 else f"m{k}", "text": "w" * int(length[k])})  # fmt: skip
            human.append(
                {"context_id": f"c{c}", "candidate_id": cid, "attribute": "q", "human_score": quality[k]}
            )
        for i in range(N_CAND):
            for j in range(i + 1, N_CAND):
                lx = (length[i] - length[j]) / (length[i] + length[j])
                z = temperature * (quality[i] - quality[j] + rng.normal()) + length_bias * lx
                p = float(expit(z))
                comps.append({"judge": "jd", "attribute": "q", "template_id": "t", "context_id": f"c{c}",
                              "cand_i": f"k{i}", "cand_j": f"k{j}", "p_ij": float(expit(z + 1.0)),
                              "p_ji": float(expit(-z + 1.0)), "p": p, "p_tie": 0.0})  # fmt: skip
    bias = pl.DataFrame(
        {"judge": ["jd"], "attribute": ["q"], "template_id": ["t"], "p_a": [0.7], "p_a_debiased": [0.5]}
    )
    corr = pl.DataFrame({"judge": ["jd"], "attribute": ["q"], "template_id": ["t"], "method": ["poe_gaussian"],
                         "spearman": [0.8]})  # fmt: skip
    return pl.DataFrame(comps), bias, pa.Table.from_pylist(cands), pl.DataFrame(human), corr


def test_an_overconfident_judge_is_calibrated_by_its_temperature():
    comps, bias, cands, human, corr = tables(temperature=3.0)
    card = card_tables(comps, bias, cands, human, corr, {}).card.row(0, named=True)
    assert card["n_pairs"] == N_CTX * N_CAND * (N_CAND - 1) // 2 == card["n_human_pairs"]
    # the judge is about 3 / 1.33 = 2.25 times too sure: the fitted temperature, and calibration's gain
    assert card["temperature"] == pytest.approx(2.25, rel=0.2)
    assert card["log_loss_calibrated"] < card["log_loss"] and card["ece_calibrated"] < card["ece"]
    assert 0.6 < card["accuracy"] < 0.95
    assert card["p_a_raw"] == 0.7 and card["p_a_debiased"] == 0.5 and card["spearman"] == 0.8


def test_position_consistency_counts_the_pairs_whose_orderings_choose_the_same_candidate():
    comps, bias, cands, human, corr = tables()
    z = np.log(comps["p"] / (1 - comps["p"])).to_numpy()
    want = np.mean(np.abs(z) > 1.0)  # with a bias of +1 to slot A, close pairs go to slot A both times
    card = card_tables(comps, bias, cands, human, corr, {}).card.row(0, named=True)
    assert card["position_consistency"] == pytest.approx(want)


def test_a_judge_that_likes_length_prefers_the_longer_text_more_than_people_and_has_a_positive_coefficient():
    plain = card_tables(*tables(temperature=1.0), {}).card.row(0, named=True)
    long = card_tables(*tables(temperature=1.0, length_bias=6.0), {}).card.row(0, named=True)
    assert long["longer_share_people"] == plain["longer_share_people"]  # people did not change
    assert long["longer_share_judge"] > plain["longer_share_judge"] + 0.1
    assert long["length_coef"] > 0.5 and abs(plain["length_coef"]) < 0.2


def test_self_preference_is_the_judges_mean_probability_for_its_own_systems_outputs():
    comps, bias, cands, human, corr = tables()
    card = card_tables(comps, bias, cands, human, corr, {"jd": ("own",)}).card.row(0, named=True)
    own = comps.filter(pl.col("cand_i") == "k0")  # k0 is always i (the smaller id) and the "own" system
    assert card["n_self_pairs"] == own.height and card["self_preference"] == pytest.approx(own["p"].mean())
    assert card_tables(comps, bias, cands, human, corr, {}).card["n_self_pairs"][0] == 0


def test_scoring_with_calibrated_probabilities_keeps_every_pair_and_moves_p_towards_people():
    comps, _, cands, human, _ = tables(temperature=4.0)
    calibrated = calibrate_comparisons(comps, cands, human)
    assert calibrated.columns == comps.columns and calibrated.height == comps.height
    joined = comps.join(calibrated, on=["context_id", "cand_i", "cand_j"], suffix="_cal")
    # an over-confident judge's probabilities move towards 1/2, on the same side
    assert ((joined["p_cal"] - 0.5).abs() <= (joined["p"] - 0.5).abs() + 1e-12).all()
    assert ((joined["p_cal"] > 0.5) == (joined["p"] > 0.5)).all()
    # so the hard win ratio does not move, and the soft methods do
    for method, moves in (("win_ratio", False), ("avg_prob", True), ("poe_gaussian", True)):
        before = score_comparisons(comps, cands, human, [method], Debias.average).scores["score"].to_numpy()
        after = (
            score_comparisons(calibrated, cands, human, [method], Debias.average).scores["score"].to_numpy()
        )
        assert (not np.allclose(before, after)) == moves, method


def test_the_card_names_the_models_that_served_each_judge_and_a_judge_that_changed():
    comps, bias, cands, human, corr = tables()
    second = comps.with_columns(pl.lit("jd2").alias("judge"))
    both = pl.concat([comps, second])
    bias2 = pl.concat([bias, bias.with_columns(pl.lit("jd2").alias("judge"))])
    corr2 = pl.concat([corr, corr.with_columns(pl.lit("jd2").alias("judge"))])
    served = {
        "jd": (("gpt-x-0513", 300), ("gpt-x-0806", 36))
    }  # jd2 is a local engine: no reply names a model
    card = card_tables(both, bias2, cands, human, corr2, {}, served=served).card
    rows = {r["judge"]: r for r in card.iter_rows(named=True)}
    assert (
        rows["jd"]["served_models"] == "gpt-x-0513 (300), gpt-x-0806 (36)"
        and rows["jd"]["n_served_models"] == 2
    )
    assert rows["jd2"]["served_models"] is None and rows["jd2"]["n_served_models"] == 0
