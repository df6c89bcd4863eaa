"""Selective verdicts with a guaranteed agreement (pipeline.methods.agreement.selective): the exact Clopper-Pearson bound,
the fixed-sequence threshold against an independent implementation written from the paper, and the guarantee itself
over hundreds of random calibration/test splits of simulated judges, good and poor, at several alphas: the agreement on
the verdicts kept is at least 1 - alpha in at least 1 - delta of the splits (within the binomial noise of the check)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from pipeline.methods.agreement.selective import (
    GRID,
    cascade,
    clopper_pearson_upper,
    fixed_sequence_threshold,
    labels_needed,
)


def independent_upper(errors: int, n: int, delta: float) -> float:
    """The largest p with P(Bin(n, p) <= errors) >= delta, by bisection on the binomial cdf (no Beta quantile)."""
    if n == 0 or errors >= n:
        return 1.0
    lo, hi = errors / n, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        if binom.cdf(errors, n, mid) >= delta:
            lo = mid
        else:
            hi = mid
    return lo


def independent_threshold(confidence, agree, alpha, delta, grid):
    """Fixed-sequence testing as Jung et al. state it, written apart: for each threshold from the highest down, the
    binomial p-value of 'risk > alpha' is P(Bin(n, alpha) <= errors); reject while it is <= delta; the sequence starts
    at the first threshold whose n could reject with no errors at all."""
    c, ok = np.asarray(confidence), np.asarray(agree, dtype=bool)
    start = next(m for m in range(1, 10**6) if binom.cdf(0, m, alpha) <= delta)
    chosen = None
    for t in sorted(grid, reverse=True):
        kept = c >= t
        n = int(kept.sum())
        if n < start:
            continue
        errors = int((~ok[kept]).sum())
        if binom.cdf(errors, n, alpha) > delta:
            break
        chosen = t
    return chosen


@pytest.mark.parametrize(
    "errors,n,delta", [(0, 10, 0.1), (3, 40, 0.05), (17, 200, 0.1), (0, 1, 0.5), (99, 100, 0.1)]
)
def test_the_upper_bound_is_the_exact_clopper_pearson_one(errors, n, delta):
    assert math.isclose(
        clopper_pearson_upper(errors, n, delta), independent_upper(errors, n, delta), abs_tol=1e-9
    )
    assert clopper_pearson_upper(5, 5, 0.1) == 1.0 and clopper_pearson_upper(0, 0, 0.1) == 1.0


def test_labels_needed_is_the_fewest_that_certify():
    # no errors: (1 - alpha)^n <= delta
    assert labels_needed(0.0, 0.1, 0.1) == math.ceil(math.log(0.1) / math.log(0.9))
    need = labels_needed(0.05, 0.1, 0.1)
    assert need is not None
    assert clopper_pearson_upper(round(0.05 * need), need, 0.1) <= 0.1
    assert clopper_pearson_upper(round(0.05 * (need - 1)), need - 1, 0.1) > 0.1
    assert labels_needed(0.1, 0.1, 0.1) is None and labels_needed(0.3, 0.1, 0.1) is None


def test_labels_needed_of_many_rates_at_once_is_the_one_rate_search_of_each():
    # rates of a grid's thresholds, as the fixed sequence asks them when nothing is certified: each the count a
    # plain one-rate search finds (doubled until it certifies, then bisected), which certifies where one fewer
    # does not (the bound falls with n only up to rounding: a luckier smaller n may certify too); none at or above
    # alpha
    from pipeline.methods.agreement.selective import labels_needed_each

    def certifies(rate: float, n: int, alpha: float, delta: float) -> bool:
        return clopper_pearson_upper(round(rate * n), n, delta) <= alpha

    def search(rate: float, alpha: float, delta: float) -> int:
        if rate >= alpha:
            return -1
        hi = 1
        while not certifies(rate, hi, alpha, delta):
            hi *= 2
        lo = 1
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if certifies(rate, mid, alpha, delta) else (mid + 1, hi)
        return hi

    for alpha, delta in ((0.1, 0.1), (0.2, 0.05), (0.3, 0.2)):
        rates = np.concatenate([np.linspace(0.0, 0.35, 36), [1 / 30, alpha]])
        found = labels_needed_each(rates, alpha, delta).tolist()
        assert found == [search(r, alpha, delta) for r in rates]
        for rate, n in zip(rates, found, strict=True):
            assert (n == -1) == (rate >= alpha)
            if n > 0:
                assert certifies(rate, n, alpha, delta) and (
                    n == 1 or not certifies(rate, n - 1, alpha, delta)
                )


def simulated_judge(rng: np.random.Generator, n: int, skill: float):
    """A judge's verdict confidence in [1/2, 1] and whether people agree with it: people agree with probability
    1/2 + skill * (confidence - 1/2) * 2 (a skill of 1: calibrated; 0: its confidence means nothing)."""
    confidence = 0.5 + 0.5 * rng.beta(2.0, 1.2, size=n)
    p_agree = 0.5 + skill * (confidence - 0.5)
    return confidence, rng.random(n) < p_agree, p_agree


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(0, 400),
    alpha=st.sampled_from([0.05, 0.1, 0.2, 0.3]),
    delta=st.sampled_from([0.05, 0.1, 0.2]),
    skill=st.floats(0.0, 1.0),
)
def test_the_threshold_is_an_independent_fixed_sequence_tests(seed, n, alpha, delta, skill):
    rng = np.random.default_rng(seed)
    confidence, agree, _ = simulated_judge(rng, n, skill)
    found = fixed_sequence_threshold(confidence, agree, alpha, delta)
    assert found.threshold == independent_threshold(confidence, agree, alpha, delta, GRID)
    if found.certified:
        kept = confidence >= found.threshold
        assert found.accepted == kept.sum() and found.disagreements == (~agree[kept]).sum()
        assert found.bound <= alpha


@pytest.mark.parametrize("alpha,skill", [(0.1, 1.0), (0.2, 0.7), (0.05, 1.0), (0.3, 0.3), (0.1, 0.0)])
def test_the_guarantee_holds_over_random_calibration_and_test_splits(alpha, skill):
    """The agreement on the verdicts kept is at least 1 - alpha (the true one, from the simulation's own agreement
    probabilities, and the one measured on the test half) in at least 1 - delta of 250 splits, up to the check's own
    binomial noise; where nothing is certified nothing is kept and no coverage is claimed."""
    delta, splits = 0.1, 250
    failures_true = failures_test = certified = 0
    for seed in range(splits):
        rng = np.random.default_rng([seed, int(alpha * 100), int(skill * 100)])
        confidence, agree, p_agree = simulated_judge(rng, 1000, skill)
        calibration = np.zeros(1000, dtype=bool)
        calibration[rng.permutation(1000)[:500]] = True
        found = fixed_sequence_threshold(confidence[calibration], agree[calibration], alpha, delta)
        if not found.certified:
            assert found.accepted == 0 and found.bound == 1.0
            continue
        certified += 1
        kept = ~calibration & (confidence >= found.threshold)
        if kept.any():
            failures_test += (1 - agree[kept].mean()) > alpha
            failures_true += (1 - p_agree[kept].mean()) > alpha
    # the check's own noise: failures beyond delta by three binomial standard deviations
    allowed = splits * delta + 3 * math.sqrt(splits * delta * (1 - delta))
    assert failures_true <= allowed, (failures_true, certified)
    assert failures_test <= allowed + 0.05 * splits, (
        failures_test,
        certified,
    )  # the test half adds its own noise
    if skill == 1.0 and alpha >= 0.1:
        assert certified > 0.5 * splits  # a calibrated judge keeps something on most splits


def test_a_cascade_calibrates_each_judge_on_what_the_judges_before_it_abstained_on():
    rng = np.random.default_rng(3)
    n = 2000
    weak_c, weak_ok, _ = simulated_judge(rng, n, 0.6)
    strong_c, strong_ok, _ = simulated_judge(rng, n, 1.0)
    calibration = rng.random(n) < 0.5
    steps = cascade([weak_c, strong_c], [weak_ok, strong_ok], calibration, 0.15, 0.1)
    first, second = steps
    assert not (first.accepts & second.accepts).any()  # an item is accepted once
    if first.certificate.certified:
        assert first.accepts.sum() == (weak_c >= first.certificate.threshold).sum()
    # the second is calibrated on the calibration items the first did not accept
    assert second.certificate.n_calibration == (calibration & ~first.accepts).sum()


def test_too_few_labels_say_how_many_would_be_needed():
    rng = np.random.default_rng(0)
    confidence, agree, _ = simulated_judge(rng, 15, 1.0)
    found = fixed_sequence_threshold(confidence, agree, 0.05, 0.1)
    assert not found.certified and found.needed is not None and found.needed > 15
    never = fixed_sequence_threshold(np.full(50, 0.9), np.zeros(50, dtype=bool), 0.1, 0.1)
    assert not never.certified and never.needed is None and never.observed == 1.0


def test_alpha_and_delta_outside_zero_one_are_refused():
    for alpha, delta in ((0.0, 0.1), (1.0, 0.1), (0.1, 0.0), (0.1, 1.5)):
        with pytest.raises(ValueError, match="must be in"):
            fixed_sequence_threshold(np.ones(3), np.ones(3, dtype=bool), alpha, delta)
