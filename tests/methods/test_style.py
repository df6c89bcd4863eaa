"""Ratings with the texts' length (and style) regressed out: golden features, the fit on a hand-checked case, and on
simulated models where one is better and another only longer, the raw win rate favours the longer one and the
controlled rating ranks them by quality."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from pipeline.methods.style import feature_differences, fit_controlled, text_features, win_rates


def test_text_features_count_characters_headers_lists_and_bold_outside_code():
    text = "# Title\n\n- one\n- two\n1. three\n\n**bold** and __also__\n```\n# not a header\n```"
    [row] = text_features([text])
    assert row.tolist() == [len(text), 1, 3, 2]


def test_feature_differences_are_arena_hard_autos_normalised_differences_standardised():
    fa = np.array([[100, 0, 0, 0], [50, 2, 0, 0], [30, 0, 1, 0]], dtype=float)
    fb = np.array([[50, 0, 0, 0], [50, 0, 0, 0], [90, 0, 0, 0]], dtype=float)
    x = feature_differences(fa, fb, style=True)
    length = np.array([50 / 150, 0.0, -60 / 120])
    np.testing.assert_allclose(x[:, 0], (length - length.mean()) / length.std())
    headers = np.array([0.0, (2 / 51) / (2 / 51 + 1), 0.0])
    np.testing.assert_allclose(x[:, 1], (headers - headers.mean()) / headers.std())
    assert (x[:, 3] == 0).all()  # no bold anywhere: a constant feature stays 0
    assert feature_differences(fa, fb).shape == (3, 1)


def test_without_features_the_fit_is_bradley_terry_and_raw_win_rates_are_the_outcomes():
    a = np.array([0, 0, 1, 2, 2])
    b = np.array([1, 2, 2, 0, 1])
    y = np.array([1.0, 0.7, 0.4, 0.2, 1.0])
    fit = fit_controlled(a, b, y, np.zeros((5, 0)), 3, ridge=1e-9)
    # the Bradley-Terry score equations: each model's observed wins equal its expected wins
    s = expit(fit.theta[a] - fit.theta[b])
    for m in range(3):
        observed = y[a == m].sum() + (1 - y[b == m]).sum()
        expected = s[a == m].sum() + (1 - s[b == m]).sum()
        assert observed == pytest.approx(expected, abs=1e-6)
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
