"""Scorers against closed-form identities, brute force and data simulated with known answers."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import check_grad, minimize

from pipeline.methods import ComparisonError, scorer, scorers
from pipeline.methods.scorers import bradley_terry as bt_module
from pipeline.methods.scorers import poe_gaussian as pg
from pipeline.methods.scorers.average_probability import average_probability
from pipeline.methods.scorers.bradley_terry import bradley_terry
from pipeline.methods.scorers.ml_ranking import ml_ranking, ranking_log_likelihood
from pipeline.methods.scorers.poe_bt import poe_bt, poe_bt_value_and_gradient
from pipeline.methods.scorers.poe_gaussian import poe_gaussian, poe_gaussian_hard
from pipeline.methods.scorers.poe_laplace import laplace_objective, poe_laplace
from pipeline.methods.scorers.win_ratio import win_ratio
from pipeline.methods.simulation.simulate import SimulatedJudge, simulate_judge, simulate_outcomes

from .conftest import full_ordered, laplacian, random_connected, random_problem


def incidence(n, i, j):
    w = np.zeros((len(i), n))
    w[np.arange(len(i)), i] = 1.0
    w[np.arange(len(i)), j] = -1.0
    return w


# ------------------------------------------------------------------------------------ PoE-Gaussian
@pytest.mark.parametrize("n", [3, 5, 16])
@pytest.mark.parametrize("design", ["ordered", "unordered"])
def test_gaussian_full_set_is_shifted_average_probability(n, design, rng):
    """PoE appendix A.3: on the full set, s = (N-1)/N * avg_prob + constant, per context."""
    for _ in range(5):  # five contexts
        i, j = full_ordered(n)
        if design == "unordered":
            keep = i < j
            i, j = i[keep], j[keep]
        p = rng.random(i.shape[0])  # raw, biased, inconsistent probabilities: the identity is algebraic
        s = poe_gaussian(n, i, j, p)
        shift = s - (n - 1) / n * average_probability(n, i, j, p)
        np.testing.assert_allclose(shift, shift[0], atol=1e-12)
        assert shift[0] == pytest.approx(-(n - 1) / n * 0.5, abs=1e-12)  # and the constant, with pin="mean"


@pytest.mark.parametrize("solver", ["dense", "cg", "splu"])
def test_gaussian_is_least_squares(solver, rng):
    n = 40
    i, j = random_connected(n, 120, rng)
    p = rng.random(120)
    s = pg.fit(n, i, j, p, solver=solver, stderr="none").scores
    ref = np.linalg.lstsq(incidence(n, i, j), p - 0.5, rcond=None)[0]  # minimum norm = mean zero
    np.testing.assert_allclose(s, ref - ref.mean(), atol=1e-9)


def test_gaussian_large_n_uses_sparse_path(monkeypatch, rng):
    n = 60
    i, j = random_connected(n, 200, rng)
    p = rng.random(200)
    dense = pg.fit(n, i, j, p)
    monkeypatch.setattr(pg, "DENSE_MAX_ITEMS", 10)
    sparse = pg.fit(n, i, j, p)
    assert dense.stderr is not None and sparse.stderr is None and sparse.stderr_method == "none"
    np.testing.assert_allclose(sparse.scores, dense.scores, atol=1e-9)
    assert sparse.sigma2 == pytest.approx(dense.sigma2, rel=1e-9)


def test_gaussian_pin_changes_scores_by_a_constant(rng):
    n = 12
    i, j = random_connected(n, 40, rng)
    p = rng.random(40)
    base = poe_gaussian(n, i, j, p)
    for pin in [0, 5, 11]:
        s = poe_gaussian(n, i, j, p, pin=pin)
        assert s[pin] == 0.0
        np.testing.assert_allclose(s - base, (s - base)[0], atol=1e-12)


def test_gaussian_posterior_covariance_and_stderr(rng):
    """stderr against sigma^2 (W^T W)^+ from numpy's pseudo-inverse, and sigma^2 against lstsq residuals."""
    n, k = 15, 50
    i, j, p = random_problem(n, k, rng)
    w = incidence(n, i, j)
    coef = np.linalg.lstsq(w, p - 0.5, rcond=None)[0]
    sigma2 = float(np.sum((w @ coef - (p - 0.5)) ** 2)) / (k - n + 1)
    cov = np.linalg.pinv(w.T @ w)
    fit = pg.fit(n, i, j, p)
    assert fit.dof == k - n + 1 and fit.stderr_method == "exact"
    assert fit.sigma2 == pytest.approx(sigma2, rel=1e-10)
    np.testing.assert_allclose(fit.stderr, np.sqrt(sigma2 * np.diag(cov)), rtol=1e-9)
    pinned = pg.fit(n, i, j, p, pin=4, sigma2=0.25)
    var = np.diag(cov) + cov[4, 4] - 2 * cov[:, 4]
    np.testing.assert_allclose(pinned.stderr, np.sqrt(0.25 * np.maximum(var, 0)), atol=1e-12)
    assert pinned.stderr[4] == 0.0


def test_gaussian_sketch_stderr_is_close(rng):
    n, k = 30, 150
    i, j, p = random_problem(n, k, rng)
    exact = pg.fit(n, i, j, p)
    sketch = pg.fit(n, i, j, p, stderr="sketch", rng=np.random.default_rng(3), n_probes=800)
    assert sketch.stderr_method == "sketch"
    np.testing.assert_allclose(sketch.stderr, exact.stderr, rtol=0.15)  # ~ sqrt(2/800) = 5% per item
    with pytest.raises(ValueError, match="needs a numpy.random.Generator"):
        pg.fit(n, i, j, p, stderr="sketch")


def test_gaussian_tree_has_no_residual_dof(rng):
    fit = pg.fit(4, np.array([0, 1, 2]), np.array([1, 2, 3]), np.array([0.7, 0.6, 0.2]))
    assert fit.dof == 0 and np.isnan(fit.sigma2) and np.all(np.isnan(fit.stderr[1:]) | (fit.stderr[1:] >= 0))


def test_hard_gaussian_is_gaussian_on_decisions(rng):
    n = 10
    i, j = random_connected(n, 30, rng)
    p = rng.random(30)
    p[:3] = 0.5
    y = (p > 0.5).astype(float)
    y[p == 0.5] = 0.5
    np.testing.assert_allclose(poe_gaussian_hard(n, i, j, p), poe_gaussian(n, i, j, y), atol=1e-12)


# ------------------------------------------------------------------------------ duplicates semantics
DUP_INVARIANT = [
    "win_ratio",
    "avg_prob",
    "poe_gaussian",
    "poe_gaussian_hard",
    "poe_bt",
    "poe_laplace",
    "ml_ranking",
]


@pytest.mark.parametrize("method", DUP_INVARIANT)
def test_duplicating_every_comparison_changes_nothing(method, rng):
    n = 7
    i, j = random_connected(n, 15, rng)
    p = rng.uniform(0.05, 0.95, 15)
    once = scorer(method).score(n, i, j, p)
    twice = scorer(method).score(n, np.tile(i, 2), np.tile(j, 2), np.tile(p, 2))
    np.testing.assert_allclose(twice, once, atol=1e-6)


def test_a_duplicated_comparison_is_an_extra_expert(rng):
    """A repeated row doubles its weight: weighted least squares with weight 2 on that row."""
    n = 6
    i, j = random_connected(n, 10, rng)
    p = rng.random(10)
    s = poe_gaussian(n, np.append(i, i[3]), np.append(j, j[3]), np.append(p, p[3]))
    w = incidence(n, i, j)
    sw = np.ones(10)
    sw[3] = np.sqrt(2.0)
    ref = np.linalg.lstsq(w * sw[:, None], (p - 0.5) * sw, rcond=None)[0]
    np.testing.assert_allclose(s, ref - ref.mean(), atol=1e-10)


# ------------------------------------------------------------------------------ relabelling
def relabel_data(rng, n=9, k=30):
    i, j = random_connected(n, k, rng)
    truth = rng.normal(size=n)
    p = simulate_judge(truth, np.stack([i, j], 1), rng, SimulatedJudge(noise=0.5))
    return n, i, j, p


@pytest.mark.parametrize("method", sorted(set(scorers()) - {"poe_laplace"}))
def test_scores_are_invariant_to_relabelling(method, rng):
    n, i, j, p = relabel_data(rng)
    base = scorer(method).score(n, i, j, p)
    for _ in range(3):
        perm = rng.permutation(n)  # old label x -> new label perm[x]
        relabelled = scorer(method).score(n, perm[i], perm[j], p)
        np.testing.assert_allclose(relabelled[perm], base, atol=1e-6)


def test_laplace_is_invariant_to_relabelling_and_robust(rng):
    """Consistent differences on a complete graph plus a few gross outliers: the LAD optimum is the
    truth (unique), whatever the labels."""
    n = 8
    a, b = np.triu_indices(n, 1)
    t = rng.normal(size=n) * 0.1
    p = 0.5 + t[a] - t[b]
    bad = rng.choice(a.size, 3, replace=False)
    p[bad] = rng.uniform(0, 1, 3)
    base = poe_laplace(n, a, b, p)
    np.testing.assert_allclose(base, t - t.mean(), atol=1e-9)
    perm = rng.permutation(n)
    np.testing.assert_allclose(poe_laplace(n, perm[a], perm[b], p)[perm], base, atol=1e-9)


# ------------------------------------------------------------------------------ PoE-Laplace brute force
def lad_brute_force(n, i, j, f):
    """Minimum of sum |s_i - s_j - f| over the vertices (spanning trees fitted exactly) and whether it is
    attained at a single point."""
    w = incidence(n, i, j)
    best, argbest = np.inf, []
    for rows in itertools.combinations(range(len(i)), n - 1):
        sub = w[list(rows)][:, 1:]
        if abs(np.linalg.det(sub)) < 1e-9:
            continue
        s = np.concatenate([[0.0], np.linalg.solve(sub, f[list(rows)])])
        val = np.abs(w @ s - f).sum()
        if val < best - 1e-12:
            best, argbest = val, [s]
        elif abs(val - best) <= 1e-12:
            argbest.append(s)
    unique = all(np.allclose(s, argbest[0], atol=1e-9) for s in argbest)
    return best, argbest[0], unique


@pytest.mark.parametrize("seed", range(12))
def test_laplace_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, k = 5, 9
    i, j, p = random_problem(n, k, rng)
    f = p - 0.5
    best, vertex, unique = lad_brute_force(n, i, j, f)
    s = poe_laplace(n, i, j, p, pin=0)
    assert laplace_objective(s, i, j, f) == pytest.approx(best, abs=1e-9)
    if unique:
        np.testing.assert_allclose(s, vertex, atol=1e-8)


# ------------------------------------------------------------------------------ Bradley-Terry
def test_bt_recovers_true_scores():
    rng = np.random.default_rng(11)
    n = 30
    truth = rng.normal(size=n)
    a, b = np.triu_indices(n, 1)
    pairs = np.repeat(np.stack([a, b], 1), 40, axis=0)  # each pair 40 times, random slots
    flip = rng.random(len(pairs)) < 0.5
    pairs[flip] = pairs[flip][:, ::-1]
    y = simulate_outcomes(truth, pairs, rng)
    s = bradley_terry(n, pairs[:, 0], pairs[:, 1], y)
    assert np.corrcoef(s, truth)[0, 1] > 0.99
    # and the MLE itself (prior 0) is on the logit scale of the truth
    s0 = bradley_terry(n, pairs[:, 0], pairs[:, 1], y, prior=0.0)
    slope = np.polyfit(truth, s0, 1)[0]
    assert slope == pytest.approx(1.0, abs=0.1)


@pytest.mark.parametrize("prior", [1.0, 0.5, 0.0])
def test_bt_mm_equals_direct_maximisation(prior, rng):
    n = 8
    i, j = full_ordered(n)
    truth = rng.normal(size=n)
    y = simulate_outcomes(truth, np.stack([i, j], 1), rng)
    s = bradley_terry(n, i, j, y, prior=prior)
    s_plain = bradley_terry(n, i, j, y, prior=prior, accelerate=False)
    res = minimize(
        lambda x: -bt_module.bt_log_posterior(x, i, j, y, prior),
        np.zeros(n),
        method="BFGS",
        options={"gtol": 1e-10},
    )
    np.testing.assert_allclose(s, res.x - res.x.mean(), atol=1e-5)
    np.testing.assert_allclose(s_plain, s, atol=1e-6)


def test_bt_is_soft_bt_of_smoothed_decisions_on_the_reference_free_mle(rng):
    """With prior 0 the hard-outcome BT MLE is the PoE-BT fit of the 0/1 decisions (same likelihood)."""
    n = 6
    i, j = full_ordered(n)
    y = simulate_outcomes(rng.normal(size=n), np.stack([i, j], 1), rng)
    np.testing.assert_allclose(bradley_terry(n, i, j, y, prior=0.0), poe_bt(n, i, j, y), atol=1e-5)


def test_bt_non_convergence_raises(rng):
    n = 20
    i, j = random_connected(n, 60, rng)
    y = simulate_outcomes(rng.normal(size=n) * 3, np.stack([i, j], 1), rng)
    with pytest.raises(
        RuntimeError,
        match=r"Bradley-Terry MM did not converge in 3 iterations \(last change .* > tol 1e-08\)",
    ):
        bradley_terry(n, i, j, y, max_iter=3)


def test_bt_mle_existence_is_checked():
    i = np.array([0, 1, 0])
    j = np.array([1, 2, 2])
    with pytest.raises(ComparisonError, match="item 2 never wins"):
        bradley_terry(3, i, j, np.array([0.9, 0.8, 0.7]), prior=0.0)
    s = bradley_terry(3, i, j, np.array([0.9, 0.8, 0.7]))  # the default prior makes it exist
    assert s[0] > s[1] > s[2]


# ------------------------------------------------------------------------------ PoE-BT
@pytest.mark.parametrize("seed", range(4))
def test_poe_bt_gradient(seed):
    rng = np.random.default_rng(seed)
    n, k = 12, 40
    i, j, p = random_problem(n, k, rng)
    p[:4] = [0.0, 1.0, 0.0, 1.0]
    bias, l2 = rng.normal(), rng.uniform(0, 0.5)
    x0 = rng.normal(size=n)

    def value(s):
        return poe_bt_value_and_gradient(s, i, j, p, bias, l2)[0]

    def gradient(s):
        return poe_bt_value_and_gradient(s, i, j, p, bias, l2)[1]

    err = check_grad(value, gradient, x0)
    assert err < 1e-5 * max(1.0, np.linalg.norm(gradient(x0)))


def test_poe_bt_recovers_true_scores():
    rng = np.random.default_rng(5)
    n = 40
    truth = rng.normal(size=n)
    a, b = np.triu_indices(n, 1)
    pairs = np.tile(np.vstack([np.stack([a, b], 1), np.stack([b, a], 1)]), (2, 1))  # 4 judgements per pair
    p = simulate_judge(truth, pairs, rng, SimulatedJudge(noise=1.0))
    s = poe_bt(n, pairs[:, 0], pairs[:, 1], p)
    assert np.corrcoef(s, truth)[0, 1] > 0.99
    exact = simulate_judge(truth, np.stack([a, b], 1), rng)  # noiseless: recovered exactly
    np.testing.assert_allclose(poe_bt(n, a, b, exact), truth - truth.mean(), atol=1e-5)


def test_poe_bt_one_ordering_bias():
    rng = np.random.default_rng(9)
    n = 10
    truth = rng.normal(size=n)
    i, j = full_ordered(n)
    p = simulate_judge(truth, np.stack([i, j], 1), rng, SimulatedJudge(bias=0.8))
    np.testing.assert_allclose(poe_bt(n, i, j, p, bias=0.8), truth - truth.mean(), atol=1e-5)
    keep = i < j  # one ordering only: "mean" estimates the slot-A shift from the data
    s = poe_bt(n, i[keep], j[keep], p[keep], bias="mean")
    assert np.corrcoef(s, truth)[0, 1] > 0.98


def test_poe_bt_existence_and_ridge():
    i, j = np.array([0, 1]), np.array([1, 2])
    p = np.array([1.0, 0.7])
    with pytest.raises(ComparisonError, match="maximum does not exist"):
        poe_bt(3, i, j, p)
    s = poe_bt(3, i, j, p, l2=0.1)
    assert np.all(np.isfinite(s)) and s[0] > s[1] > s[2]


def test_poe_bt_non_convergence_raises(rng):
    n = 30
    i, j = random_connected(n, 90, rng)
    p = rng.random(90)
    with pytest.raises(RuntimeError, match="PoE-BT L-BFGS-B did not converge in 2 iterations"):
        poe_bt(n, i, j, p, max_iter=2)


# ------------------------------------------------------------------------------ win-ratio / ML ranking
def test_win_ratio_equals_average_probability_of_decisions(rng):
    n = 8
    i, j = random_connected(n, 25, rng)
    p = rng.random(25)
    y = (p > 0.5).astype(float)
    np.testing.assert_allclose(win_ratio(n, i, j, p), average_probability(n, i, j, y))


def test_ml_ranking_against_brute_force():
    found_optimum = 0
    trials = 40
    for seed in range(trials):
        rng = np.random.default_rng(100 + seed)
        n = int(rng.integers(3, 7))
        i, j = full_ordered(n)
        keep = rng.random(i.size) < 0.7
        i, j = i[keep], j[keep]
        if np.unique(np.concatenate([i, j])).size < n:
            continue
        p = simulate_judge(rng.normal(size=n), np.stack([i, j], 1), rng, SimulatedJudge(noise=1.5))
        order = np.argsort(-ml_ranking(n, i, j, p))
        value = ranking_log_likelihood(n, i, j, p, order)
        start = ranking_log_likelihood(
            n, i, j, p, np.argsort(-average_probability(n, i, j, p), kind="stable")
        )
        assert value >= start - 1e-12
        # a local optimum: no single reinsertion improves
        for x in range(n):
            rest = [y for y in order if y != x]
            for pos in range(n):
                cand = rest[:pos] + [x] + rest[pos:]
                assert ranking_log_likelihood(n, i, j, p, cand) <= value + 1e-9
        best = max(ranking_log_likelihood(n, i, j, p, perm) for perm in itertools.permutations(range(n)))
        found_optimum += value >= best - 1e-9
    assert found_optimum >= 0.9 * trials  # approximate search: almost always the exact ML ranking


def test_ml_ranking_limits():
    with pytest.raises(ValueError, match="initial must be a permutation"):
        ml_ranking(3, [0, 1], [1, 2], [0.6, 0.7], initial=[0, 0, 1])


def test_identical_items_score_equal(rng):
    """Two items with mirrored comparisons against everyone get equal scores under every smooth scorer."""
    n = 5
    i = np.array([0, 1, 0, 1, 0, 1, 2, 3])
    j = np.array([2, 2, 3, 3, 4, 4, 3, 4])
    p = np.array([0.7, 0.7, 0.6, 0.6, 0.8, 0.8, 0.55, 0.4])
    for name in ["avg_prob", "poe_gaussian", "poe_bt", "bradley_terry", "win_ratio"]:
        s = scorer(name).score(n, i, j, p)
        assert s[0] == pytest.approx(s[1], abs=1e-7), name


def test_dense_laplacian_helper_matches_incidence(rng):
    from pipeline.methods.adaptive.greedy import chain_inverse, log_det_information
    from pipeline.methods.scorers._common import dense_laplacian

    i, j = random_connected(7, 20, rng)
    np.testing.assert_allclose(dense_laplacian(7, i, j), laplacian(7, i, j))
    # the selection maths builds on the same Laplacian
    order = rng.permutation(7)
    chain = laplacian(7, order[:-1], order[1:])
    np.testing.assert_allclose(chain_inverse(order), np.linalg.inv(chain + 1.0), atol=1e-9)
    expected = np.linalg.slogdet(laplacian(7, i, j) + 1.0)[1]
    assert log_det_information(7, np.stack([i, j], 1)) == pytest.approx(expected)
