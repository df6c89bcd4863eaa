"""poe_logit, the rounds' model as a scorer: what it gains on a confident judge, its position-bias shift, its
standard errors in the scoring stage, and the errors it shares with the other PoE scorers. (Its closed-form cases
are in golden/poe_logit.json.)"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import spearmanr

from pipeline.config.enums import Debias
from pipeline.methods import ComparisonError
from pipeline.methods.adaptive.selection import balanced_random
from pipeline.methods.scorers import poe_gaussian, poe_logit
from pipeline.methods.simulation.simulate import PoolJudge
from pipeline.scoring.comparative import method_scores


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_confident_judge_is_ranked_by_its_log_odds(seed):
    """At scale 8 most answers are within a hair of 0 or 1: ``p - 1/2`` keeps only which item won, the log-odds
    keep how far apart the two are. Three comparisons per item."""
    rng = np.random.default_rng(seed)
    n = 120
    truth = rng.standard_normal(n)
    judge = PoolJudge(truth, rng, scale=8.0, bias=0.5, item_noise=0.05, call_noise=0.5, flip=0.0)
    pairs = balanced_random(n, 3 * n, rng)
    p = judge(pairs[:, 0], pairs[:, 1])
    logit_rho = spearmanr(poe_logit.poe_logit(n, pairs[:, 0], pairs[:, 1], p), truth).statistic
    gaussian_rho = spearmanr(poe_gaussian.poe_gaussian(n, pairs[:, 0], pairs[:, 1], p), truth).statistic
    assert logit_rho > 0.98
    assert logit_rho > gaussian_rho + 0.03


def test_shift_takes_out_a_constant_position_bias():
    rng = np.random.default_rng(5)
    n = 12
    i, j = np.triu_indices(n, 1)  # one ordering, the lower index always in slot A
    truth = rng.normal(size=n)
    f = 1.5 * (truth[i] - truth[j]) + 0.3 * rng.standard_normal(i.shape[0])
    clean = poe_logit.poe_logit(n, i, j, expit(f), shift=True)
    biased = poe_logit.poe_logit(n, i, j, expit(f + 0.8), shift=True)
    np.testing.assert_allclose(biased, clean, atol=1e-8)
    # without the shift the bias moves every item by how often it sat in slot A
    assert np.abs(poe_logit.poe_logit(n, i, j, expit(f + 0.8)) - clean).max() > 0.1


def test_the_scoring_stage_gives_standard_errors_and_shifts_one_ordering():
    rng = np.random.default_rng(2)
    n = 10
    i, j = np.triu_indices(n, 1)
    p = expit(2.0 * (rng.normal(size=n)[i] - rng.normal(size=n)[j]))
    scores, stderr = method_scores("poe_logit", n, i, j, p, Debias.average)
    assert stderr is not None and stderr.shape == (n,) and np.all(stderr > 0)
    np.testing.assert_allclose(scores, poe_logit.poe_logit(n, i, j, p))
    shifted, _ = method_scores("poe_logit", n, i, j, p, Debias.mean_shift)
    np.testing.assert_allclose(shifted, poe_logit.poe_logit(n, i, j, p, shift=True))


def test_a_disconnected_graph_and_a_bad_cap_are_refused():
    with pytest.raises(ComparisonError, match="poe_logit"):
        poe_logit.poe_logit(4, np.array([0, 2]), np.array([1, 3]), np.array([0.7, 0.6]))
    with pytest.raises(ValueError, match="clip"):
        poe_logit.poe_logit(2, np.array([0]), np.array([1]), np.array([0.7]), clip=0.0)
