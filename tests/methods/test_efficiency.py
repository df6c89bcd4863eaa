"""Batched scorers, the efficiency-curve protocol and the simulated PoE finding."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.methods.adaptive import selection
from pipeline.methods.agreement.metrics import per_context_correlation
from pipeline.methods.scorers import batched
from pipeline.methods.scorers.average_probability import average_probability
from pipeline.methods.scorers.bradley_terry import bradley_terry
from pipeline.methods.scorers.comparison_checks import connected_components
from pipeline.methods.scorers.poe_bt import poe_bt
from pipeline.methods.scorers.poe_gaussian import poe_gaussian, poe_gaussian_hard
from pipeline.methods.scorers.poe_laplace import laplace_objective, poe_laplace
from pipeline.methods.scorers.win_ratio import win_ratio
from pipeline.methods.simulation import efficiency, simulate

from .conftest import full_ordered

N = 9


def draws(k, count, rng, noise=1.0):
    space = batched.pair_space(N)
    idx = selection.balanced_random_batch(N, k, count, rng)
    mask = np.zeros((count, space.m))
    np.put_along_axis(mask, idx, 1.0, axis=1)
    truth = rng.normal(size=(count, N))
    p = np.stack(
        [
            simulate.simulate_judge(
                t, np.stack([space.a, space.b], 1), rng, simulate.SimulatedJudge(noise=noise)
            )
            for t in truth
        ]
    )
    return space, idx, mask, p


LIBRARY = {
    "win_ratio": win_ratio,
    "avg_prob": average_probability,
    "bradley_terry": bradley_terry,
    "poe_gaussian": poe_gaussian,
    "poe_gaussian_hard": poe_gaussian_hard,
    "poe_bt": poe_bt,
}


@pytest.mark.parametrize("method", sorted(LIBRARY))
@pytest.mark.parametrize("k", [9, 14, 36])
def test_batched_scorers_equal_library_scorers(method, k, rng):
    space, idx, mask, p = draws(k, 40, rng)
    got = efficiency.score_draws(method, space, mask, p)
    checked = 0
    for r in range(40):
        i, j, pr = space.a[idx[r]], space.b[idx[r]], p[r, idx[r]]
        if connected_components(N, i, j)[0] > 1:
            continue
        checked += 1
        np.testing.assert_allclose(got[r], LIBRARY[method](N, i, j, pr), atol=2e-6)
    assert checked >= 10


@pytest.mark.parametrize("k", [9, 14, 36])
def test_batched_laplace_irls_reaches_the_lp_optimum(k, rng):
    space, idx, mask, p = draws(k, 40, rng, noise=1.5)
    got = efficiency.score_draws("poe_laplace", space, mask, p)
    for r in range(40):
        i, j, pr = space.a[idx[r]], space.b[idx[r]], p[r, idx[r]]
        if connected_components(N, i, j)[0] > 1:
            continue
        f = pr - 0.5
        exact = laplace_objective(poe_laplace(N, i, j, pr), i, j, f)
        assert laplace_objective(got[r], i, j, f) == pytest.approx(exact, rel=1e-6, abs=1e-9)


def test_disconnected_draws_get_the_minimum_norm_solution(rng):
    space, idx, mask, p = draws(5, 200, rng)  # k = ceil(9/2): always disconnected
    s = efficiency.score_draws("poe_gaussian", space, mask, p)
    s_bt = efficiency.score_draws("poe_bt", space, mask, p)
    for r in range(10):
        a, b, pr = space.a[idx[r]], space.b[idx[r]], p[r, idx[r]]
        w = np.zeros((5, N))
        w[np.arange(5), a] = 1.0
        w[np.arange(5), b] = -1.0
        ref = np.linalg.lstsq(w, pr - 0.5, rcond=None)[0]
        np.testing.assert_allclose(s[r], ref, atol=1e-10)
        # PoE-BT on a forest: each difference is logit(p) and each component has mean 0
        np.testing.assert_allclose(s_bt[r, a] - s_bt[r, b], np.log(pr / (1 - pr)), atol=1e-8)
        n_comp, labels = connected_components(N, a, b)
        assert n_comp >= 4
        np.testing.assert_allclose(np.bincount(labels, weights=s_bt[r]), 0.0, atol=1e-10)


def test_component_pin():
    space = batched.pair_space(5)
    mask = np.zeros((1, space.m))
    mask[0, selection.pair_index(np.array([0, 3]), np.array([1, 4]), 5)] = 1.0
    pin = space.component_pin(mask)[0]
    expected = np.zeros((5, 5))
    expected[np.ix_([0, 1], [0, 1])] = 0.5
    expected[2, 2] = 1.0
    expected[np.ix_([3, 4], [3, 4])] = 0.5
    np.testing.assert_allclose(pin, expected)


def test_pair_matrix_averages_orderings():
    ctx = np.array([0, 0, 0, 1])
    i = np.array([0, 1, 0, 2])
    j = np.array([1, 0, 2, 1])
    p = np.array([0.9, 0.3, 0.6, 0.2])
    m = efficiency.pair_matrix(2, 3, ctx, i, j, p)
    assert m[0, 0, 1] == pytest.approx((0.9 + 1 - 0.3) / 2) and m[0, 1, 0] == pytest.approx(1 - m[0, 0, 1])
    assert m[0, 0, 2] == pytest.approx(0.6) and m[1, 1, 2] == pytest.approx(0.8)
    assert np.isnan(m[0, 1, 2]) and np.isnan(m[0, 0, 0])


def test_default_k_grid():
    np.testing.assert_array_equal(efficiency.default_k_grid(16), [16, 24, 48, 72, 96, 120])
    np.testing.assert_array_equal(efficiency.default_k_grid(4), [4, 5, 6])


def simulated_set(rng, n_ctx, n, accuracy=0.7, prior_a=0.6, scale=0.5):
    noise = simulate.noise_for_accuracy(accuracy, scale=scale)
    bias = simulate.bias_for_prior(prior_a)
    truth, probs = simulate.simulate_context_set(n_ctx, n, rng, simulate.SimulatedJudge(scale, bias, noise))
    a, b = full_ordered(n)
    ctx = np.repeat(np.arange(n_ctx), a.size)
    pm = efficiency.pair_matrix(n_ctx, n, ctx, np.tile(a, n_ctx), np.tile(b, n_ctx), probs[:, a, b].ravel())
    return truth, probs, pm


def test_efficiency_curve_protocol(rng):
    truth, _, pm = simulated_set(rng, 12, 8)
    truth[0] = 1.0  # a context with constant human scores is skipped
    curve = efficiency.efficiency_curve(pm, truth, rng, n_draws=5, k_grid=[8, 14, 28])
    assert curve.methods == efficiency.EFFICIENCY_METHODS
    assert curve.mean.shape == curve.std.shape == (7, 3)
    assert curve.n_contexts == 11 and curve.n_skipped == 1
    np.testing.assert_allclose(curve.std[:, -1], 0.0, atol=1e-14)  # the full set has a single possible draw
    for m, name in enumerate(curve.methods):
        assert curve.per_draw[name].shape == (3, 5)
        np.testing.assert_allclose(curve.mean[m], curve.per_draw[name].mean(axis=1))
    # the full-set value is the library scorer's per-context correlation
    a, b = np.triu_indices(8, 1)
    full = np.concatenate([poe_gaussian(8, a, b, pm[c, a, b]) for c in range(12)])
    ref = per_context_correlation(np.repeat(np.arange(12), 8), full, truth.ravel()).mean
    assert curve.curve("poe_gaussian")[0][-1] == pytest.approx(ref, abs=1e-12)
    assert set(curve.as_dict()) >= {"k", "methods", "mean", "std"}


def test_efficiency_curve_rejects_bad_input(rng):
    truth, probs, pm = simulated_set(rng, 3, 6)
    with pytest.raises(ValueError, match="probs\\[a, b\\] \\+ probs\\[b, a\\] != 1"):
        efficiency.efficiency_curve(probs, truth, rng, n_draws=2)  # raw, not debiased
    bad = pm.copy()
    bad[1, 2, 4] = np.nan
    with pytest.raises(ValueError, match=r"context 1, pair \(2, 4\): probability nan is missing"):
        efficiency.efficiency_curve(bad, truth, rng, n_draws=2)
    with pytest.raises(ValueError, match="unknown efficiency method"):
        efficiency.efficiency_curve(pm, truth, rng, methods=["ml_ranking"])
    with pytest.raises(ValueError, match="k=2 is impossible"):
        efficiency.efficiency_curve(pm, truth, rng, k_grid=[2], n_draws=2)


def test_simulated_judge_accuracy_is_calibrated():
    rng = np.random.default_rng(1)
    n = 400
    truth = rng.normal(size=n)
    pairs = rng.integers(0, n, (200_000, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    for target in (0.6, 0.7, 0.85):
        noise = simulate.noise_for_accuracy(target, score_sd=truth.std())
        p = simulate.simulate_judge(truth, pairs, rng, simulate.SimulatedJudge(noise=noise))
        assert simulate.judge_accuracy(truth, pairs, p) == pytest.approx(target, abs=0.01)


def test_poe_finding_at_20_percent_of_comparisons():
    """PoE paper (Table 1 / Figure 3): with a ~70%-accurate judge, at 20% of the comparisons PoE-Gaussian
    and PoE-BT lose less correlation relative to the full set than the win-ratio. (Judge: logit
    0.5 (s_A - s_B) + slot-A bias + noise, probabilities mostly in (0.25, 0.87), both orderings averaged.)"""
    rng = np.random.default_rng(2024)
    truth, _, pm = simulated_set(rng, 60, 16)
    curve = efficiency.efficiency_curve(
        pm, truth, rng, methods=["win_ratio", "poe_gaussian", "poe_bt"], k_grid=[24, 120], n_draws=20
    )
    loss = {m: curve.curve(m)[0][1] - curve.curve(m)[0][0] for m in curve.methods}
    assert loss["poe_gaussian"] < loss["win_ratio"]
    assert loss["poe_bt"] < loss["win_ratio"]
