"""A jury's tables from a judgments table of three simulated jurors (two informative, one noise) on the same prompts:
the scores of the three jury methods, each juror's line and share, and the jurors' agreement; and the errors for a
jury of one and for jurors that judged different prompts."""

from __future__ import annotations

from itertools import permutations

import numpy as np
import polars as pl
import pytest
from scipy.special import expit
from scipy.stats import spearmanr

from pipeline.scoring.jury_table import JURY_METHODS, JuryError, jury_tables

JURORS = [
    ("smollm", "cmp", 1.5, 0.3, 0.8),
    ("served", "cmp_v2", 1.2, -0.2, 1.0),
    ("coin", "cmp", 0.0, 0.0, 1.5),
]


def judgments(seed: int = 0, contexts: int = 4, candidates: int = 8) -> tuple[pl.DataFrame, dict]:
    rng = np.random.default_rng(seed)
    truth = {
        (f"c{c}", f"s{k}"): float(rng.standard_normal()) for c in range(contexts) for k in range(candidates)
    }
    rows = []
    for judge, template, scale, bias, sigma in JURORS:
        for c in range(contexts):
            for a, b in permutations(range(candidates), 2):
                ctx, ca, cb = f"c{c}", f"s{a}", f"s{b}"
                x = scale * (truth[(ctx, ca)] - truth[(ctx, cb)]) + bias + sigma * rng.standard_normal()
                rows.append(
                    {
                        "context_id": ctx,
                        "attribute": "coherence",
                        "template_id": template,
                        "cand_a": ca,
                        "cand_b": cb,
                        "judge": judge,
                        "p_a": float(expit(x)),
                    }
                )
    return pl.DataFrame(rows), truth


def test_the_jury_scores_its_jurors_lines_and_their_agreement():
    frame, truth = judgments()
    tables = jury_tables(frame)
    scores = tables.scores
    assert set(scores["method"]) == set(JURY_METHODS)
    assert scores.height == 3 * 4 * 8 and set(scores["judge"]) == {"jury"}
    assert scores["template_id"].unique().to_list() == ["cmp:cmp_v2"]
    for method in JURY_METHODS:
        rhos = []
        for (ctx,), group in scores.filter(pl.col("method") == method).group_by(["context_id"]):
            rhos.append(spearmanr(group["score"], [truth[(ctx, c)] for c in group["candidate_id"]]).statistic)
        assert np.mean(rhos) > 0.7, method

    jurors = tables.jurors.sort("share", descending=True)
    assert jurors.height == 3 and jurors["share"].sum() == pytest.approx(1.0)
    assert jurors["judge"][-1] == "coin" and jurors["share"][-1] < 0.05
    assert jurors.filter(pl.col("judge") == "smollm")["bias"][0] == pytest.approx(0.3, abs=0.15)
    assert (
        jurors.filter(pl.col("judge") == "smollm")["p_a_raw"][0] > 0.5
    )  # its position bias, before debiasing

    agreement = tables.agreement
    assert agreement.height == 3 and set(agreement["pairs"]) == {4 * 28}
    good = agreement.filter((pl.col("juror_a") != "coin/cmp") & (pl.col("juror_b") != "coin/cmp"))
    with_coin = agreement.filter((pl.col("juror_a") == "coin/cmp") | (pl.col("juror_b") == "coin/cmp"))
    assert good["kappa"][0] > 0.4 and good["spearman"][0] > 0.7
    assert with_coin["kappa"].max() < good["kappa"][0] - 0.2
    assert with_coin["spearman"].max() < good["spearman"][0] - 0.3


def test_a_jury_of_one_is_refused():
    frame, _ = judgments()
    with pytest.raises(JuryError, match="at least two jurors"):
        jury_tables(frame.filter(pl.col("judge") == "smollm"))


def test_a_juror_that_missed_prompts_is_named():
    frame, _ = judgments()
    gap = (pl.col("judge") == "served") & (pl.col("context_id") == "c2") & (pl.col("cand_a") == "s1")
    with pytest.raises(JuryError, match=r"juror served/cmp_v2 did not judge context 'c2', A='s1'"):
        jury_tables(frame.filter(~gap))
