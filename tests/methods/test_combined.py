"""Absolute and comparative information combined in one PoE-Gaussian solve, on simulated judges with a known truth."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from pipeline.methods import ComparisonError
from pipeline.methods.scorers import poe_gaussian
from pipeline.methods.scorers.poe_combined import ContextData, combine, estimate
from pipeline.methods.simulation.simulate import simulate_assessment


def contexts(sim):
    return [ContextData(len(c["truth"]), c["i"], c["j"], c["p"], c["absolute"]) for c in sim]


def mean_spearman(sim, scores):
    return float(np.mean([spearmanr(s, c["truth"])[0] for s, c in zip(scores, sim, strict=True)]))


def three_ways(sim, weight=None):
    data = contexts(sim)
    est = estimate(data, weight=weight)
    comparative = [poe_gaussian.poe_gaussian(d.n, d.i, d.j, d.p) for d in data]
    absolute = [d.absolute for d in data]
    combined = [combine(d, est).scores for d in data]
    return (
        mean_spearman(sim, comparative),
        mean_spearman(sim, absolute),
        mean_spearman(sim, combined),
        est,
    )


def test_combined_beats_both_parts_when_both_carry_information():
    sim = simulate_assessment(
        80, 16, 30, np.random.default_rng(0), comparative_accuracy=0.75, absolute_noise=1.0
    )
    comparative, absolute, combined, est = three_ways(sim)
    assert est.estimated and est.slope > 0 and est.weight > 0
    assert combined > comparative + 0.03
    assert combined > absolute + 0.03


def test_uninformative_absolute_scores_get_a_small_weight_and_do_little_harm():
    sim = simulate_assessment(
        80,
        16,
        30,
        np.random.default_rng(1),
        comparative_accuracy=0.8,
        absolute_noise=50.0,
        absolute_scale=None,
    )
    comparative, absolute, combined, est = three_ways(sim)
    assert abs(absolute) < 0.1
    # the absolute scores say nothing about the comparative scores: the prior's mean is flat (a mild shrinkage)
    assert est.slope < 0.005
    assert combined > comparative - 0.01


def test_a_set_weight_is_used_and_a_large_one_follows_the_absolute_order():
    sim = simulate_assessment(
        20, 8, 10, np.random.default_rng(2), comparative_accuracy=0.7, absolute_noise=0.5
    )
    data = contexts(sim)
    est = estimate(data, weight=1e6)
    assert not est.estimated and est.weight == 1e6
    for d in data:
        scores = combine(d, est).scores
        # ties in the rounded absolute scores aside, the order is the absolute one
        a = d.absolute
        strict = a[:, None] > a[None, :]
        assert np.all((scores[:, None] > scores[None, :])[strict])


def test_priors_score_a_context_whose_comparisons_are_disconnected():
    n = 4
    i, j, p = np.array([0, 2]), np.array([1, 3]), np.array([0.8, 0.7])
    data = ContextData(n, i, j, p, np.array([9.0, 3.0, 7.0, 1.0]))
    with pytest.raises(ComparisonError):
        poe_gaussian.fit(n, i, j, p)
    connected = ContextData(
        n,
        np.array([0, 1, 2, 0, 1]),
        np.array([1, 2, 3, 2, 3]),
        np.array([0.7, 0.6, 0.8, 0.9, 0.7]),
        data.absolute,
    )
    est = estimate([data, connected])
    assert est.n_contexts == 1  # the disconnected context cannot inform the estimate, but is scored with it
    fit = combine(data, est)
    assert np.argsort(-fit.scores).tolist() == [0, 2, 1, 3]
    assert np.all(np.isfinite(fit.stderr))
    with pytest.raises(ComparisonError, match="no residual degrees of freedom"):
        estimate(
            [
                ContextData(
                    n, np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([0.7, 0.6, 0.8]), data.absolute
                )
            ]
        )


def test_fit_with_prior_by_hand():
    """One comparison of two items (f = p - 1/2 = 0.3) and priors m = (1, -1) of weight 1 each:
    (L + I) s = W^T f + m with L = [[1, -1], [-1, 1]] gives s = (0.65, -0.65)... solved by hand:
    [[2, -1], [-1, 2]] s = [1.3, -1.3] -> s_0 = -s_1 = 1.3 / 3."""
    fit = poe_gaussian.fit_with_prior(2, [0], [1], [0.8], [1.0, -1.0], [1.0, 1.0], sigma2=1.0)
    np.testing.assert_allclose(fit.scores, [1.3 / 3, -1.3 / 3])
    # covariance (L + I)^-1 = [[2, 1], [1, 2]] / 3
    np.testing.assert_allclose(fit.stderr, np.sqrt([2 / 3, 2 / 3]))
