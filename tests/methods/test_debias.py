"""Positional debiasing (EACL eqs. 8-10; PoE section 4.2, appendix A.6)."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.methods.agreement import metrics
from pipeline.methods.scorers import win_ratio
from pipeline.methods.simulation import simulate
from pipeline.methods.verdicts import debias

from .conftest import full_ordered


def test_positional_prior():
    assert debias.positional_prior([0.9, 0.6, 0.3]) == pytest.approx((0.6, 0.4))
    with pytest.raises(ValueError, match=r"p\[1\]=nan is not a probability"):
        debias.positional_prior([0.5, np.nan])


@pytest.mark.parametrize("seed", range(8))
def test_alpha_balances_prior_to_half(seed):
    rng = np.random.default_rng(seed)
    p = rng.beta(rng.uniform(0.3, 5), rng.uniform(0.3, 5), size=rng.integers(5, 5000))
    p[rng.random(p.size) < 0.05] = 1.0  # some certain judgements (unchanged by reweighting)
    p[rng.random(p.size) < 0.05] = 0.0
    alpha = debias.balancing_alpha(p)
    pa, pb = debias.positional_prior(debias.reweight(p, alpha))
    assert abs(pa - 0.5) < 1e-9 and abs(pb - 0.5) < 1e-9


def test_reweight_formula_and_threshold_equivalence(rng):
    p = rng.random(2000)
    alpha = 0.37
    expected = alpha * p / (alpha * p + 1 - p)  # EACL eq. 9, directly
    got = debias.reweight(p, alpha)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    tau = debias.decision_threshold(alpha)
    assert tau == pytest.approx(1 / (1 + alpha))
    away = np.abs(p - tau) > 1e-12
    np.testing.assert_array_equal((got > 0.5)[away], (p > tau)[away])  # EACL eq. 10
    np.testing.assert_array_equal(debias.reweight([0.0, 1.0], 1e6), [0.0, 1.0])


def test_alpha_of_balanced_set_is_one():
    p = np.array([0.2, 0.8, 0.35, 0.65])
    assert debias.balancing_alpha(p) == pytest.approx(1.0, abs=1e-12)


def test_alpha_impossible():
    with pytest.raises(ValueError, match="no alpha makes P\\(A\\) = 0.5"):
        debias.balancing_alpha([1.0, 1.0, 0.3])
    with pytest.raises(ValueError, match="alpha must be a positive"):
        debias.reweight([0.5], 0.0)
    with pytest.raises(ValueError, match="alpha must be a positive"):
        debias.decision_threshold(-1.0)


def test_average_orderings_and_beta():
    np.testing.assert_allclose(debias.average_orderings([0.9, 0.6], [0.3, 0.6]), [0.8, 0.5])
    assert debias.mean_shift_beta([0.9, 0.6, 0.6]) == pytest.approx(0.7)
    with pytest.raises(ValueError, match="same shape"):
        debias.average_orderings([0.9, 0.6], [0.3])


def test_biased_judge_is_debiased_and_ranks_better():
    """A judge with P(A) = 0.7 on the full ordered set: reweighting gives P(A) = 0.5, both debiasing
    methods remove the positional term and hard-decision ranking accuracy improves."""
    rng = np.random.default_rng(7)
    n_ctx, n = 40, 8
    a, b = full_ordered(n)
    truth, p_all, ctx = [], [], []
    bias = simulate.bias_for_prior(0.82)
    for c in range(n_ctx):
        s = rng.standard_normal(n)
        truth.append(s)
        p_all.append(
            simulate.simulate_judge(s, np.stack([a, b], 1), rng, simulate.SimulatedJudge(1.5, bias, 0.5))
        )
        ctx.append(np.full(n, c))
    p = np.concatenate(p_all)
    pa, _ = debias.positional_prior(p)
    assert pa == pytest.approx(0.7, abs=0.03)  # the simulated judge says "A" 70% of the time

    alpha = debias.balancing_alpha(p)
    assert abs(debias.positional_prior(debias.reweight(p, alpha))[0] - 0.5) < 1e-9
    tau = debias.decision_threshold(alpha)

    human = np.concatenate(truth)
    context = np.concatenate(ctx)
    k = a.shape[0]
    raw = np.concatenate([win_ratio.win_ratio(n, a, b, p[c * k : (c + 1) * k]) for c in range(n_ctx)])
    reweighted = np.concatenate(
        [win_ratio.win_ratio(n, a, b, p[c * k : (c + 1) * k], threshold=tau) for c in range(n_ctx)]
    )
    acc_raw, _ = metrics.pairwise_accuracy(context, raw, human)
    acc_debiased, _ = metrics.pairwise_accuracy(context, reweighted, human)
    assert acc_debiased > acc_raw + 0.02

    # per-comparison decision accuracy of the judge improves too
    pairs = np.stack([a, b], 1)
    dec_raw = np.mean([simulate.judge_accuracy(truth[c], pairs, p_all[c]) for c in range(n_ctx)])
    dec_rw = np.mean(
        [simulate.judge_accuracy(truth[c], pairs, debias.reweight(p_all[c], alpha)) for c in range(n_ctx)]
    )
    assert dec_rw > dec_raw + 0.03

    # averaging both orderings removes the bias exactly in expectation: P(A) of the averaged set is 0.5
    idx = {(x, y): q for q, (x, y) in enumerate(zip(a.tolist(), b.tolist(), strict=True))}
    fwd = [idx[(x, y)] for x, y in zip(a.tolist(), b.tolist(), strict=True) if x < y]
    rev = [idx[(y, x)] for x, y in zip(a.tolist(), b.tolist(), strict=True) if x < y]
    averaged = np.concatenate([debias.average_orderings(pc[fwd], pc[rev]) for pc in p_all])
    both = np.concatenate([averaged, 1 - averaged])
    assert debias.positional_prior(both)[0] == pytest.approx(0.5, abs=1e-12)
