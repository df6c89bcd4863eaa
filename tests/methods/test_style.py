"""Ratings with the texts' length (and style) regressed out: golden features, the fit on a hand-checked case, and on
simulated models where one is better and another only longer, the raw win rate favours the longer one and the
controlled rating ranks them by quality."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from pipeline.methods.quality.style import feature_differences, fit_controlled, text_features, win_rates
from tests.methods.conftest import round_robin


def test_text_features_count_characters_headers_lists_and_bold_outside_code():
    text = "# Title\n\n- one\n- two\n1. three\n\n**bold** and __also__\n```\n# not a header\n```"
    [row] = text_features([text])
    assert row.tolist() == [len(text), 1, 3, 2]


def test_feature_differences_are_arena_hard_autos_normalised_differences_scaled_about_zero():
    fa = np.array([[100, 0, 0, 0], [50, 2, 0, 0], [30, 0, 1, 0]], dtype=float)
    fb = np.array([[50, 0, 0, 0], [50, 0, 0, 0], [90, 0, 0, 0]], dtype=float)
    x = feature_differences(fa, fb, style=True)
    length = np.array([50 / 150, 0.0, -60 / 120])
    # not centred: equal length stays 0, and the scale is the root mean square about 0
    np.testing.assert_allclose(x[:, 0], length / np.sqrt(np.mean(length**2)))
    headers = np.array([0.0, (2 / 51) / (2 / 51 + 1), 0.0])
    np.testing.assert_allclose(x[:, 1], headers / np.sqrt(np.mean(headers**2)))
    assert (x[:, 3] == 0).all()  # no bold anywhere: a constant-zero feature stays 0
    assert feature_differences(fa, fb).shape == (3, 1)
    # a game read the other way round has the opposite feature, whichever games are turned
    np.testing.assert_allclose(feature_differences(fb, fa, style=True), -x)
    turned = np.array([True, False, True])
    mixed = feature_differences(
        np.where(turned[:, None], fb, fa), np.where(turned[:, None], fa, fb), style=True
    )
    np.testing.assert_allclose(mixed, np.where(turned[:, None], -x, x))


def test_without_features_the_fit_is_bradley_terry_and_raw_win_rates_are_the_outcomes():
    a = np.array([0, 0, 1, 2, 2])
    b = np.array([1, 2, 2, 0, 1])
    y = np.array([1.0, 0.7, 0.4, 0.2, 1.0])
    fit = fit_controlled(a, b, y, np.zeros((5, 0)), 3, prior=0.0)
    # the Bradley-Terry score equations: each model's observed wins equal its expected wins
    s = expit(fit.theta[a] - fit.theta[b])
    for m in range(3):
        observed = y[a == m].sum() + (1 - y[b == m]).sum()
        expected = s[a == m].sum() + (1 - s[b == m]).sum()
        assert observed == pytest.approx(expected, abs=1e-6)
    # with the raw Bradley-Terry's prior: one virtual win and loss against a reference at 0 joins the equations
    fit = fit_controlled(a, b, y, np.zeros((5, 0)), 3)
    level = fit.theta + np.log(fit.theta.size) * 0  # centred ratings; the level is the reference's
    raw = np.linalg.lstsq(np.vstack([np.eye(3) - 1 / 3]), level, rcond=None)[0]
    assert np.isfinite(raw).all() and fit.identified
    assert fit.theta.mean() == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(
        win_rates(a, b, 3, y=y), [(1 + 0.7 + 0.8) / 3, (0 + 0.4 + 0) / 3, (0.3 + 0.6 + 0.2 + 1) / 4]
    )


def test_a_model_that_only_writes_longer_wins_raw_and_loses_controlled():
    rng = np.random.default_rng(3)
    quality = np.array([1.0, 0.0, 0.5])  # model 0 best, model 1 worst but writes twice as long
    length = np.array([100.0, 220.0, 110.0])
    n = 6000
    a = rng.integers(0, 3, n)
    b = (a + rng.integers(1, 3, n)) % 3
    la = length[a] * rng.uniform(0.8, 1.2, n)
    lb = length[b] * rng.uniform(0.8, 1.2, n)
    x = feature_differences(np.column_stack([la, np.zeros((n, 3))]), np.column_stack([lb, np.zeros((n, 3))]))
    # the judge: quality, and a strong liking for the longer text
    y = (rng.random(n) < expit(quality[a] - quality[b] + 2.5 * (la - lb) / (la + lb) * 4)).astype(float)
    raw = win_rates(a, b, 3, y=y)
    assert np.argmax(raw) == 1  # the raw win rate favours the longer model
    fit = fit_controlled(a, b, y, x, 3)
    assert fit.gamma[0] > 0  # the judge likes length
    assert list(np.argsort(-fit.theta)) == [0, 2, 1]  # controlled: by quality
    controlled = win_rates(a, b, 3, theta=fit.theta)
    assert list(np.argsort(-controlled)) == [0, 2, 1]
    plain = fit_controlled(a, b, y, np.zeros((n, 0)), 3)
    assert np.argmax(plain.theta) == 1  # Bradley-Terry without the length term is fooled too


def test_the_controlled_fit_does_not_depend_on_which_model_of_a_game_is_called_a():
    rng = np.random.default_rng(11)
    n = 300
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(1, 4, n)) % 4
    la, lb = rng.uniform(50, 400, n), rng.uniform(50, 400, n)
    y = rng.random(n)
    feats = np.column_stack([la, np.zeros((n, 3))]), np.column_stack([lb, np.zeros((n, 3))])
    fit = fit_controlled(a, b, y, feature_differences(*feats), 4)
    turn = rng.random(n) < 0.5
    fa = np.where(turn[:, None], feats[1], feats[0])
    fb = np.where(turn[:, None], feats[0], feats[1])
    turned = fit_controlled(
        np.where(turn, b, a), np.where(turn, a, b), np.where(turn, 1 - y, y), feature_differences(fa, fb), 4
    )
    np.testing.assert_allclose(turned.theta, fit.theta, atol=1e-9)
    np.testing.assert_allclose(turned.gamma, fit.gamma, atol=1e-9)


def test_the_round_robin_of_the_issue_ranks_the_better_model_first_whatever_the_names():
    """Three generators in a round robin with sides by candidate id: a-verbose (as good as c-plain, texts twice as
    long), b-good (better), c-plain. The judge likes length. Under length control b-good is first and a-verbose no
    better than c-plain, whichever model's name sorts first (its games always on side a, or always on side b)."""
    for names in (("a", "b", "c"), ("c", "b", "a"), ("b", "a", "c")):
        models, a, b, y, la, lb = round_robin(names, inputs=1000)
        zeros = np.zeros((len(a), 3))
        fa, fb = np.column_stack([la, zeros]), np.column_stack([lb, zeros])
        fit = fit_controlled(a, b, y, feature_differences(fa, fb), 3)
        theta = dict(zip(models, fit.theta, strict=True))
        assert max(theta, key=theta.get) == "good", (names, theta)
        assert abs(theta["verbose"] - theta["plain"]) < 0.25, (names, theta)
        raw = dict(zip(models, win_rates(a, b, 3, y=y), strict=True))
        assert raw["verbose"] > raw["plain"] + 0.1  # the raw win rate is fooled by length


def test_a_feature_that_is_a_function_of_the_models_is_not_identified():
    a = np.array([0, 0, 1, 0, 1, 1])
    b = np.array([1, 1, 0, 1, 0, 0])
    lengths = np.where(a == 0, 200.0, 100.0), np.where(b == 0, 200.0, 100.0)  # model 0 always twice as long
    x = feature_differences(
        np.column_stack([lengths[0], np.zeros((6, 3))]), np.column_stack([lengths[1], np.zeros((6, 3))])
    )
    fit = fit_controlled(a, b, np.array([1, 1, 0, 0, 1, 0.0]), x, 2)
    assert not fit.identified and np.isnan(fit.theta).all()


def test_a_bootstrap_round_that_separates_the_models_keeps_finite_ratings():
    a = np.array([0, 0, 0, 1, 1, 2])
    b = np.array([1, 2, 1, 2, 2, 0])
    y = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.0])  # model 0 beats everyone, 1 beats 2: separated
    fit = fit_controlled(a, b, y, np.zeros((6, 0)), 3)
    assert np.isfinite(fit.theta).all() and np.abs(fit.theta).max() < 3
    assert list(np.argsort(-fit.theta)) == [0, 1, 2]
