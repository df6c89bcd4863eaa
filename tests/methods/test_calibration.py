"""Calibration of P(i beats j) against people's preferences: golden cases of each measure, and on simulated judges
with a known temperature the fit recovers it and the calibration error falls."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from pipeline.methods.quality.calibration import (
    T_MAX,
    T_MIN,
    apply_temperature,
    brier_score,
    cross_fit_temperature,
    expected_calibration_error,
    fit_temperature,
    log_loss,
    reliability,
    temperature_at_bound,
    temperature_reading,
)


def test_golden_reliability_ece_brier_and_log_loss():
    p = np.array([0.05, 0.15, 0.55, 0.65, 0.95, 1.0])
    y = np.array([0, 0, 1, 0, 1, 1])
    r = reliability(p, y, bins=2)  # [0, 0.5) and [0.5, 1]
    assert r.count.tolist() == [2, 4]
    assert r.mean_p.tolist() == pytest.approx([0.1, (0.55 + 0.65 + 0.95 + 1.0) / 4])
    assert r.frequency.tolist() == pytest.approx([0.0, 0.75])
    # ECE = 2/6 |0.1 - 0| + 4/6 |0.7875 - 0.75|
    assert expected_calibration_error(p, y, bins=2) == pytest.approx(2 / 6 * 0.1 + 4 / 6 * 0.0375)
    assert brier_score(p, y) == pytest.approx(np.mean((p - y) ** 2))
    q = np.clip(p, 1e-9, 1 - 1e-9)
    assert log_loss(p, y) == pytest.approx(-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q)))
    assert np.isnan(expected_calibration_error([], []))
    with pytest.raises(ValueError, match="preferences in"):
        brier_score([0.5], [2])


def test_temperature_one_leaves_probabilities_and_scaling_is_the_logit_divided():
    p = np.array([0.1, 0.5, 0.9])
    np.testing.assert_allclose(apply_temperature(p, 1.0), p)
    np.testing.assert_allclose(apply_temperature(p, 2.0), expit(np.log(p / (1 - p)) / 2))


@pytest.mark.parametrize("true_temperature", [0.5, 2.0, 4.0])
def test_a_known_temperature_is_recovered_within_5_percent_and_calibration_removes_the_error(
    true_temperature,
):
    rng = np.random.default_rng(7)
    n = 40_000
    margin = rng.normal(0, 1.5, n)  # people's log-odds that i beats j
    y = (rng.random(n) < expit(margin)).astype(float)  # what people preferred
    p = expit(margin * true_temperature)  # a judge T times too sure (or too unsure)
    fitted = fit_temperature(p, y)
    assert fitted == pytest.approx(true_temperature, rel=0.05)
    groups = rng.integers(0, 50, n)  # contexts
    calibrated, used = cross_fit_temperature(p, y, groups, folds=5, seed=0)
    assert np.all(np.isfinite(used)) and np.allclose(used, true_temperature, rtol=0.05)
    before = expected_calibration_error(p, y)
    after = expected_calibration_error(calibrated, y)
    assert after < before / 3 and after < 0.02
    assert log_loss(calibrated, y) < log_loss(p, y)


def test_cross_fitting_never_calibrates_a_pair_with_a_temperature_fitted_on_its_own_group():
    rng = np.random.default_rng(1)
    n = 600
    groups = np.repeat(np.arange(6), 100)
    margin = rng.normal(0, 1, n)
    y = (rng.random(n) < expit(margin)).astype(float)
    p = expit(2 * margin)
    p[groups == 0] = expit(8 * margin[groups == 0])  # one context far more confident
    _, used = cross_fit_temperature(p, y, groups, folds=6, seed=0)
    # each group is its own fold: its temperature comes from the five others only
    for g in range(6):
        others = groups != g
        assert used[groups == g] == pytest.approx(fit_temperature(p[others], y[others]))
    # a single group (a pool) is split by pairs
    _, pooled = cross_fit_temperature(p, y, np.zeros(n), folds=4, seed=0)
    assert len(np.unique(pooled)) == 4


def test_a_temperature_at_a_bound_of_its_search_is_marked_and_said_in_words():
    # the judge's surest answers are wrong: its probabilities carry no information, flattened at T_MAX
    flat = fit_temperature([0.2, 0.7], [1, 1])
    assert temperature_at_bound(flat) and flat == pytest.approx(T_MAX, rel=1e-3)
    assert "carry no information" in temperature_reading(flat)
    # every verdict right: nothing bounds the sharpening
    sharp = fit_temperature([0.6, 0.3, 0.8], [1, 0, 1])
    assert temperature_at_bound(sharp) and sharp == pytest.approx(T_MIN, rel=1e-3)
    assert "every pair" in temperature_reading(sharp)
    assert "over-confident" in temperature_reading(2.5) and not temperature_at_bound(2.5)
    assert "under-confident" in temperature_reading(0.4)
    assert "about as sure" in temperature_reading(1.02)
    assert np.isnan(fit_temperature([0.5, 0.5], [1, 0])) and "no temperature" in temperature_reading(
        float("nan")
    )
    # read the other way round, a pair adds the same loss term: the fit does not move
    p, y = np.array([0.2, 0.7, 0.9, 0.4]), np.array([1, 1, 0, 0])
    assert fit_temperature(1 - p, 1 - y) == pytest.approx(fit_temperature(p, y), rel=1e-9)


@pytest.mark.parametrize("edge", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9])
def test_a_probability_on_a_bin_edge_lands_in_the_bin_that_starts_there(edge):
    r = reliability([edge], [1], bins=10)
    assert r.count[round(edge * 10)] == 1
    assert r.lower[round(edge * 10)] == edge
    assert reliability([1.0], [1], bins=10).count[9] == 1  # the last bin is closed


def test_cross_fitting_a_pool_by_pairs_never_uses_the_pairs_own_label():
    """In a single pool the units are the pairs: flipping one pair's preference moves no temperature that pair is
    calibrated with (the issue's finding: the reversed copy of each pair sat in its fitting folds)."""
    rng = np.random.default_rng(3)
    n = 60
    margin = rng.normal(0, 1.5, n)
    y = (rng.random(n) < expit(margin)).astype(float)
    p = expit(2 * margin)
    keys = rng.permutation(10_000)[:n]
    calibrated, used = cross_fit_temperature(p, y, np.zeros(n), folds=5, seed=0, keys=keys)
    for k in range(n):
        flipped = y.copy()
        flipped[k] = 1 - flipped[k]
        again, used_again = cross_fit_temperature(p, flipped, np.zeros(n), folds=5, seed=0, keys=keys)
        assert used_again[k] == used[k] and again[k] == calibrated[k]
    # the folds follow the keys, not the rows' order
    order = rng.permutation(n)
    shuffled, _ = cross_fit_temperature(p[order], y[order], np.zeros(n), folds=5, seed=0, keys=keys[order])
    np.testing.assert_allclose(shuffled, calibrated[order], rtol=1e-12, atol=1e-12)
