"""Adaptive rounds (pipeline.methods.scorers.posterior, reorder, windowed, sorting, stopping, rounds) against brute force
on small cases and against a known truth on simulated pools."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from pipeline.methods.adaptive.loop import (
    Pool,
    RoundSettings,
    Schedule,
    first_pairs,
    rank_pool,
    round_schedule,
    run_rounds,
)
from pipeline.methods.adaptive.pairset import PairSet, pair_index
from pipeline.methods.adaptive.reorder import (
    neighbour_pairs,
    reorder_probability,
    select_reorder,
    take_diverse,
)
from pipeline.methods.adaptive.sorting import merge_sort, repeated_quicksort
from pipeline.methods.adaptive.stopping import StopRule, criterion, expected_discordant, expected_tau
from pipeline.methods.adaptive.windowed import select_windowed
from pipeline.methods.scorers.model_fit import Model, Prior, warm_start
from pipeline.methods.scorers.poe_gaussian import fit_with_prior
from pipeline.methods.scorers.posterior import (
    DENSE_MAX_ITEMS,
    LOGIT_CLIP,
    expert_values,
    fit_posterior,
    huber_weights,
)
from pipeline.methods.simulation.simulate import PoolJudge, pool_truth


def random_comparisons(n: int, k: int, rng: np.random.Generator):
    i = rng.integers(0, n, k)
    j = rng.integers(0, n, k)
    keep = i != j
    return i[keep], j[keep], rng.random(int(keep.sum()))


# --- the posterior --------------------------------------------------------------------------------------------


def test_the_posterior_is_the_poe_with_priors_and_its_sparse_solver_agrees_with_the_dense_one():
    rng = np.random.default_rng(0)
    i, j, p = random_comparisons(40, 200, rng)
    m, w = rng.standard_normal(40), rng.random(40)
    post = fit_posterior(40, i, j, p, prior_mean=m, prior_weight=w, ridge=0.05, sigma2=0.2)
    # the ridge is a prior of mean 0: the combined prior has weight w + ridge and mean w m / (w + ridge)
    ref = fit_with_prior(40, i, j, p, w * m / (w + 0.05), w + 0.05, sigma2=0.2)
    assert np.allclose(post.mean, ref.scores)
    from pipeline.methods.scorers._common import dense_laplacian

    cov = 0.2 * np.linalg.inv(dense_laplacian(40, i, j) + np.diag(w + 0.05))
    a, b = np.triu_indices(40, k=1)
    assert np.allclose(post.pair_sd(a, b), np.sqrt(cov[a, a] + cov[b, b] - 2 * cov[a, b]))
    centred = np.eye(40) - 1 / 40
    assert np.allclose(post.var, np.diag(centred @ cov @ centred))  # about the mean of the scores
    n = 2100  # above DENSE_MAX_ITEMS: conjugate gradients, warm-started or not
    i, j, p = random_comparisons(n, 20 * n, rng)
    sparse = fit_posterior(n, i, j, p, variance="diagonal")
    warm = fit_posterior(n, i, j, p, variance="diagonal", x0=sparse.mean + 0.01 * rng.standard_normal(n))
    exact = fit_posterior(n, i, j, p, variance="exact")
    assert np.abs(sparse.mean - exact.mean).max() < 1e-6 and np.abs(warm.mean - exact.mean).max() < 1e-6
    assert sparse.cov is None and exact.cov is not None
    # the diagonal variances give a pair's difference variance close to the exact one on a well-mixed graph
    a, b = i[:500], j[:500]
    ratio = sparse.pair_sd(a, b) / exact.pair_sd(a, b)
    assert 0.9 < np.median(ratio) < 1.1 and 0.8 < ratio.min() and ratio.max() < 1.2


@pytest.mark.parametrize("link", ["linear", "logit"])
def test_the_posterior_does_not_depend_on_which_item_of_a_pair_is_called_i(link):
    # a comparison of i and j at p says what the comparison of j and i at 1 - p says: the scores, their variances
    # and the expert variance the fit estimates are the same whichever way round each pair is given (before any
    # comparison is checked by another: the expert variance is still mostly its prior guess, the answers' spread)
    rng = np.random.default_rng(5)
    n, k = 30, 20
    i = rng.integers(0, n, k)
    j = (i + rng.integers(1, n, k)) % n
    p = rng.uniform(0.05, 0.95, k)
    flip = rng.random(k) < 0.5
    a = fit_posterior(n, i, j, p, link=link, robust=1.345)
    b = fit_posterior(
        n, np.where(flip, j, i), np.where(flip, i, j), np.where(flip, 1 - p, p), link=link, robust=1.345
    )
    assert np.allclose(a.mean, b.mean, atol=1e-10) and np.allclose(a.var, b.var, rtol=1e-10)
    assert a.sigma2 == pytest.approx(b.sigma2, rel=1e-10)


def test_the_sketched_variance_estimates_the_exact_one():
    rng = np.random.default_rng(1)
    i, j, p = random_comparisons(60, 400, rng)
    exact = fit_posterior(60, i, j, p, sigma2=0.1)
    sketch = fit_posterior(60, i, j, p, sigma2=0.1, variance="sketch", rng=rng, n_probes=800)
    assert np.abs(sketch.var / exact.var - 1).max() < 4 * math.sqrt(2 / 800)


def test_the_posterior_handles_no_comparisons_and_a_disconnected_graph():
    post = fit_posterior(5, [], [], [])
    assert np.all(post.mean == 0) and np.all(np.isfinite(post.var))
    post = fit_posterior(4, [0, 2], [1, 3], [0.9, 0.2])
    assert post.mean[0] > post.mean[1] and post.mean[3] > post.mean[2]


def test_the_links_read_a_probability_as_a_score_difference():
    p = np.array([0.0, 0.1, 0.5, 0.9, 1.0])
    assert np.allclose(expert_values(p, "linear"), p - 0.5)
    logit = expert_values(p, "logit")
    assert np.allclose(logit[1:4], [math.log(1 / 9), 0.0, math.log(9)])
    assert logit[0] == -LOGIT_CLIP and logit[-1] == LOGIT_CLIP  # a label word never given: capped, finite
    assert np.allclose(expert_values(np.array([0.999999]), "logit", clip=3.0), 3.0)
    with pytest.raises(ValueError, match="unknown link 'probit'"):
        expert_values(p, "probit")


def test_the_logit_link_recovers_bradley_terry_scores_where_the_linear_one_saturates():
    rng = np.random.default_rng(21)
    n = 30
    s = np.linspace(-4.0, 4.0, n)  # a confident judge: far pairs are answered with p near 0 or 1
    a, b = np.triu_indices(n, k=1)
    keep = rng.random(a.shape[0]) < 0.3
    i, j = a[keep], b[keep]
    p = 1.0 / (1.0 + np.exp(-(s[i] - s[j])))
    logit = fit_posterior(n, i, j, p, link="logit", ridge=1e-9)
    assert np.allclose(logit.mean - logit.mean.mean(), s - s.mean(), atol=1e-6) and logit.link == "logit"
    linear = fit_posterior(n, i, j, p, link="linear", ridge=1e-9)
    # p - 1/2 stops at 1/2: a far pair says only "far", and on a sparse design items come out of order
    assert spearmanr(logit.mean, s).statistic == 1.0
    assert spearmanr(linear.mean, s).statistic < 0.995


def test_huber_weights_of_studentised_residuals():
    resid = np.array([0.1, -0.1, 0.2, -0.2, 0.1, -0.1, 0.15, -0.15, 3.0, 0.5])
    leverage = np.array([0.5] * 9 + [0.99])  # the last one is a bridge: nothing else checks it
    w = huber_weights(resid, leverage, 1.345)
    t = resid[:9] / np.sqrt(0.5)
    scale = 1.4826 * np.median(np.abs(t))
    assert w[8] == pytest.approx(1.345 * scale / abs(t[8]))
    assert np.all(w[:8] == 1.0) and w[9] == 1.0
    assert np.all(huber_weights(resid[:5], leverage[:5], 1.345) == 1.0)  # too few checked comparisons


def test_the_robust_fit_down_weights_flipped_answers_and_finds_the_truth_again():
    rng = np.random.default_rng(22)
    n = 200
    s = rng.standard_normal(n) * 1.5
    a, b = np.triu_indices(n, k=1)
    pick = rng.choice(a.shape[0], 6 * n, replace=False)  # 6 comparisons per item
    i, j = a[pick], b[pick]
    z = s[i] - s[j] + 0.2 * rng.standard_normal(i.shape[0])
    flipped = rng.random(i.shape[0]) < 0.03
    z[flipped] = -z[flipped]
    p = 1.0 / (1.0 + np.exp(-z))
    plain = fit_posterior(n, i, j, p, link="logit")
    robust = fit_posterior(n, i, j, p, link="logit", robust=1.345)
    assert plain.weights is None and plain.downweighted == 0
    err = lambda post: float(np.sqrt(np.mean((post.mean - post.mean.mean() - (s - s.mean())) ** 2)))  # noqa: E731
    assert err(robust) < 0.6 * err(plain)
    # the answers far from their pair's truth are the ones down-weighted
    big = flipped & (np.abs(s[i] - s[j]) > 1.0)
    assert big.sum() >= 5
    assert np.all(robust.weights[big] < 0.5)
    assert np.median(robust.weights[~flipped]) == 1.0
    # counted as contradicted: the weights below one half (Gaussian noise alone gives few)
    assert robust.downweighted == int((robust.weights < 0.5).sum()) >= int(big.sum())
    # no flips: the robust fit is about the plain one (Huber's efficiency under Gaussian noise)
    clean = 1.0 / (1.0 + np.exp(-(s[i] - s[j] + 0.2 * rng.standard_normal(i.shape[0]))))
    a_fit = fit_posterior(n, i, j, clean, link="logit", robust=1.345)
    b_fit = fit_posterior(n, i, j, clean, link="logit")
    assert err(a_fit) < 1.05 * err(b_fit) and np.abs(a_fit.mean - b_fit.mean).max() < 0.1
    assert a_fit.downweighted < 0.02 * i.shape[0] < robust.downweighted + int(big.sum())
    # the sparse solver reaches the same robust fit
    sparse = fit_posterior(n, i, j, p, link="logit", robust=1.345, variance="diagonal")
    assert sparse.cov is None
    big_n = 2100
    i2, j2 = rng.integers(0, big_n, 8 * big_n), rng.integers(0, big_n, 8 * big_n)
    ok = i2 != j2
    i2, j2 = i2[ok], j2[ok]
    s2 = rng.standard_normal(big_n)
    z2 = s2[i2] - s2[j2] + 0.2 * rng.standard_normal(i2.shape[0])
    z2[rng.random(i2.shape[0]) < 0.03] *= -1
    p2 = 1.0 / (1.0 + np.exp(-z2))
    cg = fit_posterior(big_n, i2, j2, p2, link="logit", robust=1.345, variance="diagonal")
    dense = fit_posterior(big_n, i2, j2, p2, link="logit", robust=1.345, variance="exact")
    assert np.abs(cg.mean - dense.mean).max() < 1e-4 and cg.iterations > 0
    assert np.abs(cg.weights - dense.weights).max() < 1e-3


def test_the_robust_fit_leaves_a_tree_alone():
    # a path: every comparison is a bridge, nothing checks it, nothing is down-weighted
    n = 12
    i, j = np.arange(n - 1), np.arange(1, n)
    p = np.full(n - 1, 0.8)
    p[5] = 0.01
    post = fit_posterior(n, i, j, p, link="logit", robust=1.345)
    assert post.downweighted == 0


def test_a_long_chain_with_a_small_ridge_is_solved_densely_or_the_error_says_what_to_change():
    # conjugate gradients carries information one comparison per iteration: on a path of 300 items 50 iterations
    # cannot converge, whatever the tolerance
    n = 300
    i, j = np.arange(n - 1), np.arange(1, n)
    p = np.random.default_rng(3).uniform(0.6, 0.9, n - 1)
    direct = fit_posterior(n, i, j, p, link="logit", ridge=1e-6, variance="exact")  # one Cholesky, no refits
    robust = fit_posterior(n, i, j, p, link="logit", robust=1.345, ridge=1e-6, variance="exact", maxiter=50)
    assert robust.downweighted == 0 and np.allclose(robust.mean, direct.mean)
    assert np.all(np.diff(robust.mean) < 0)  # i beats i + 1 every time
    diagonal = fit_posterior(
        n, i, j, p, link="logit", robust=1.345, ridge=1e-6, variance="diagonal", maxiter=50
    )
    assert np.allclose(diagonal.mean, direct.mean)  # up to DENSE_MAX_ITEMS items, whatever the variance mode
    # above DENSE_MAX_ITEMS: an error that says what to change
    n = DENSE_MAX_ITEMS + 1
    i, j = np.arange(n - 1), np.arange(1, n)
    p = np.random.default_rng(4).uniform(0.6, 0.9, n - 1)
    with pytest.raises(
        RuntimeError, match=rf"{n} items from {n - 1} comparisons did not converge.*ridge=1e-06"
    ):
        fit_posterior(n, i, j, p, link="logit", robust=1.345, ridge=1e-6, variance="diagonal", maxiter=50)


def hinge_objective(n, i, j, f, capped, ridge):
    """The censored fit's objective (pipeline.methods.scorers.posterior, "Answers at the cap"), Gaussian experts."""

    def value(s):
        d = s[i] - s[j]
        r = np.where(capped, np.maximum(0.0, np.abs(f) - np.sign(f) * d), f - d)
        return float(r @ r + ridge * s @ s)

    return value


@pytest.mark.parametrize("variance", ["exact", "diagonal"])
def test_the_censored_fit_minimises_the_squared_hinge_on_answers_at_the_cap(variance):
    from scipy.optimize import minimize

    rng = np.random.default_rng(5)
    n = 9
    s = np.sort(rng.uniform(0, 40, n))  # log-odds apart: many pairs beyond the cap of 10
    a, b = np.triu_indices(n, k=1)
    pick = rng.choice(a.shape[0], 20, replace=False)
    i, j = a[pick], b[pick]
    flip = rng.random(i.shape[0]) < 0.5
    i, j = np.where(flip, j, i), np.where(flip, i, j)
    z = s[i] - s[j] + 0.5 * rng.standard_normal(i.shape[0])
    p = 1.0 / (1.0 + np.exp(-z))
    f = expert_values(p, "logit", LOGIT_CLIP)
    capped = np.abs(f) >= LOGIT_CLIP
    assert 5 <= capped.sum() <= 15
    post = fit_posterior(n, i, j, p, link="logit", censor=True, ridge=1e-2, variance=variance)
    objective = hinge_objective(n, i, j, f, capped, 1e-2)
    best = minimize(objective, np.zeros(n), method="BFGS", options={"gtol": 1e-10})
    assert objective(post.mean) <= best.fun + 1e-6
    assert np.abs(post.mean - best.x).max() < 1e-3
    # the answers marked beyond the cap are the capped ones the fit places beyond it
    d = post.mean[i] - post.mean[j]
    assert post.beyond_cap is not None and post.censored > 0
    assert np.array_equal(post.beyond_cap, capped & (np.sign(f) * d > LOGIT_CLIP))
    # an answer the fit places beyond the cap checks nothing: the variances are those of the fit without it
    keep = ~post.beyond_cap
    without = fit_posterior(n, i[keep], j[keep], p[keep], link="logit", censor=True, variance=variance)
    assert np.abs(post.var / post.sigma2 - without.var / without.sigma2).max() < 1e-9
    # without censor the capped answers count as exactly the cap
    plain = fit_posterior(n, i, j, p, link="logit", ridge=1e-2, variance=variance)
    assert plain.beyond_cap is None and plain.censored == 0
    assert objective(plain.mean) > objective(post.mean) + 1.0


def test_a_far_answer_at_the_cap_no_longer_pulls_a_measured_pair_together():
    # 0 and 1 are 8 log-odds apart, measured; 2 is 30 above 1, and both its answers sit at the cap of 10
    i, j = np.array([1, 2, 2]), np.array([0, 1, 0])
    p = 1.0 / (1.0 + np.exp(-np.array([8.0, 30.0, 38.0])))
    plain = fit_posterior(3, i, j, p, link="logit", ridge=1e-6)
    censored = fit_posterior(3, i, j, p, link="logit", ridge=1e-6, censor=True)
    gap = lambda post, a, b: post.mean[a] - post.mean[b]  # noqa: E731
    # read as exactly 10 each, the far answers squeeze the measured 8 to 16/3 (least squares on a triangle)
    assert gap(plain, 1, 0) == pytest.approx(16 / 3, abs=1e-3)
    # read as at least 10, they hold 2 at 10 above 1 and leave the measured pair alone
    assert gap(censored, 1, 0) == pytest.approx(8.0, abs=1e-3)
    assert gap(censored, 2, 1) == pytest.approx(10.0, abs=1e-3)
    assert censored.beyond_cap.tolist() == [False, False, True]  # 2 - 0 = 18: beyond the cap, no pull
    # the linear link has no cap: censor changes nothing
    lin = fit_posterior(3, i, j, p, link="linear", censor=True)
    assert np.array_equal(lin.mean, fit_posterior(3, i, j, p, link="linear").mean) and lin.censored == 0


def test_the_censored_robust_fit_ranks_a_confident_judges_pool_better():
    gains = []
    for seed in range(3):
        rng = np.random.default_rng([seed, 41])
        n = 300
        truth = pool_truth("normal", n, rng)
        judge = PoolJudge(truth, rng, scale=8.0, item_noise=0.2, call_noise=0.5, flip=0.02)
        pairs = np.unique(np.concatenate([first_pairs(n, n, rng), first_pairs(n, n, rng)]), axis=0)
        p = judge(pairs[:, 0], pairs[:, 1])
        rho = {
            censor: spearmanr(
                fit_posterior(n, pairs[:, 0], pairs[:, 1], p, link="logit", robust=1.345, censor=censor).mean,
                truth,
            ).statistic
            for censor in (False, True)
        }
        gains.append(rho[True] - rho[False])
    assert min(gains) > 0 and np.mean(gains) > 0.015


def test_round_schedules_start_and_go_on_at_their_own_sizes():
    size = round_schedule(100, 0.25, (130, 400), least=25)
    assert size(0) == 100 and size(100) == 25 and size(125) == 5 and size(300) == 75 and size(390) == 10
    assert round_schedule(50, 0.25)(50) == 50  # later rounds at least the first by default


# --- reorder ----------------------------------------------------------------------------------------------------


def test_the_reorder_probability_is_the_posterior_probability_of_the_other_order():
    rng = np.random.default_rng(2)
    i, j, p = random_comparisons(8, 20, rng)
    post = fit_posterior(8, i, j, p, sigma2=0.05)
    draws = rng.multivariate_normal(post.mean, post.cov, size=200_000)
    a, b = np.triu_indices(8, k=1)
    said = np.sign(post.mean[a] - post.mean[b])
    monte_carlo = (np.sign(draws[:, a] - draws[:, b]) != said).mean(axis=0)
    assert np.abs(reorder_probability(post, a, b) - monte_carlo).max() < 0.005


def test_neighbour_pairs_are_the_pairs_within_the_window_of_the_ranking():
    rng = np.random.default_rng(3)
    mean = rng.standard_normal(15)
    rank = np.empty(15, dtype=int)
    rank[np.argsort(mean)] = np.arange(15)
    for window in (1, 3, 14, 20):
        got = {tuple(r) for r in neighbour_pairs(mean, window).tolist()}
        want = {(a, b) for a, b in itertools.combinations(range(15), 2) if abs(rank[a] - rank[b]) <= window}
        assert got == want


def brute_force_diverse(pairs, k, cap):
    """Rows in order, each taken while both its items are in fewer than ``cap`` rows taken so far; a pass short of
    ``k`` raises the cap by one and passes the rows not taken again. Returned in their order in ``pairs``."""
    taken: set[int] = set()
    while True:
        for t, (a, b) in enumerate(pairs):
            if len(taken) == k:
                return [pairs[u] for u in sorted(taken)]
            if t in taken:
                continue
            degree_a = sum(1 for u in taken if a in pairs[u])
            degree_b = sum(1 for u in taken if b in pairs[u])
            if degree_a < cap and degree_b < cap:
                taken.add(t)
        if len(taken) == k:
            return [pairs[u] for u in sorted(taken)]
        cap += 1


def test_select_reorder_takes_the_most_probable_unjudged_pairs_under_the_diversity_rule():
    rng = np.random.default_rng(4)
    n = 12
    i, j, p = random_comparisons(n, 30, rng)
    post = fit_posterior(n, i, j, p)
    judged = PairSet(n, np.stack([i, j], axis=1))
    everything = np.array(
        [pr for pr in itertools.combinations(range(n), 2) if not judged.contains(np.array([pr]))[0]]
    )
    prob = reorder_probability(post, everything[:, 0], everything[:, 1])
    keys = pair_index(everything[:, 0], everything[:, 1], n)
    ranked = everything[np.lexsort((keys, -prob))]
    # no diversity rule (a cap above any degree), the whole ranking as the window: the top k by probability
    top = select_reorder(post, 10, judged, window=n, per_item=n)
    assert top.tolist() == ranked[:10].tolist()
    for k, cap in ((6, 1), (9, 2), (30, None)):
        got = select_reorder(post, k, judged, window=n, per_item=cap)
        want = brute_force_diverse(ranked.tolist(), k, cap if cap is not None else math.ceil(2 * k / n))
        assert got.tolist() == [list(r) for r in want]
        assert not judged.contains(got).any()


def test_take_diverse_raises_the_cap_until_k_rows_are_taken():
    pairs = np.array([[0, 1], [0, 2], [0, 3], [1, 2]])
    assert take_diverse(pairs, 2, 4, per_item=1).tolist() == [[0, 1], [0, 2]]  # cap 1 gives one; raised to 2


def test_take_diverse_turns_down_without_starving_tied_items():
    # a prior-only round: every candidate ties, so they come in pair-index order. Turned-down candidates must not
    # count against their items: k = N/2 at one pair per item is a perfect matching
    n = 10
    post = fit_posterior(n, [], [], [])
    got = select_reorder(post, 5, PairSet(n, np.zeros((0, 2), dtype=np.int64)), window=n)
    assert sorted(got.reshape(-1).tolist()) == list(range(n))
    # and in general: items under the cap are not left out while a candidate joining two of them remains
    rng = np.random.default_rng(7)
    for _ in range(20):
        pairs = np.array(list(itertools.combinations(range(9), 2)))[rng.permutation(36)]
        got = take_diverse(pairs, 4, 9, per_item=1)
        degree = np.bincount(got.reshape(-1), minlength=9)
        free = np.flatnonzero(degree == 0)
        assert len(got) == 4 and degree.max() == 1 and len(free) == 1  # a maximal matching: 4 pairs, 8 items


def test_select_reorder_widens_its_window_when_the_neighbours_are_judged():
    n = 6
    post = fit_posterior(n, [], [], [])
    judged = PairSet(n, neighbour_pairs(post.mean, 1))
    got = select_reorder(post, 15 - len(judged), judged, window=1)
    assert len(got) == 15 - len(judged) and not judged.contains(got).any()


# --- windowed -----------------------------------------------------------------------------------------------------


def test_windowed_pairs_are_new_distinct_and_near_each_other_without_exploration():
    rng = np.random.default_rng(5)
    n = 200
    mean = rng.standard_normal(n)
    rank = np.empty(n, dtype=int)
    rank[np.argsort(mean)] = np.arange(n)
    judged = PairSet(n, neighbour_pairs(mean, 1)[::2])
    got = select_windowed(mean, 150, judged, rng, window=4, explore=0.0)
    assert got.shape == (150, 2) and np.all(got[:, 0] < got[:, 1])
    assert len({tuple(r) for r in got.tolist()}) == 150 and not judged.contains(got).any()
    assert np.abs(rank[got[:, 0]] - rank[got[:, 1]]).max() <= 4
    wild = select_windowed(mean, 150, judged, rng, window=4, explore=1.0)
    assert np.abs(rank[wild[:, 0]] - rank[wild[:, 1]]).max() > 4
    # every remaining pair, once the neighbourhoods are exhausted
    small = PairSet(10, np.array(list(itertools.combinations(range(10), 2))[:40]))
    rest = select_windowed(np.arange(10.0), 10, small, rng, window=2)
    assert len(rest) == 5 and not small.contains(rest).any()


def test_pair_sets_answer_as_python_sets():
    rng = np.random.default_rng(6)
    pairs = rng.integers(0, 30, (100, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    s = PairSet(30, pairs[:50])
    ref = {frozenset(r) for r in pairs[:50].tolist()}
    assert len(s) == len(ref)
    assert s.contains(pairs).tolist() == [frozenset(r) in ref for r in pairs.tolist()]
    both = s.union(pairs[50:])
    ref_both = {frozenset(r) for r in pairs.tolist()}
    assert len(both) == len(ref_both) and both.contains(pairs).all()
    assert len(s) == len(ref)  # the union is a new set
    probe = rng.integers(0, 30, (200, 2))
    probe = probe[probe[:, 0] != probe[:, 1]]
    assert both.contains(probe).tolist() == [frozenset(r) in ref_both for r in probe.tolist()]


# --- sorting --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sort", [repeated_quicksort, merge_sort])
def test_sorts_with_a_perfect_judge_find_the_true_order_and_respect_the_budget(sort):
    rng = np.random.default_rng(7)
    truth = rng.standard_normal(50)
    asked_pairs = []

    def judge(a, b):
        asked_pairs.extend(zip(a.tolist(), b.tolist(), strict=True))
        return (truth[a] > truth[b]).astype(float)

    asked, orders = sort(50, judge, 2000, rng)
    assert orders and np.array_equal(orders[0], np.argsort(-truth))
    keys = {frozenset(p) for p in asked_pairs}
    assert len(keys) == len(asked_pairs) == asked.spent <= 2000  # no pair asked twice
    small, _ = sort(50, judge, 100, rng)
    assert small.spent == 100


# --- stopping -----------------------------------------------------------------------------------------------------


def test_the_expected_discordance_is_calibrated_when_the_model_is_true():
    """Scores drawn from the prior, comparisons from the Gaussian PoE model itself: the posterior is exact, so the
    expected number of discordant pairs matches the actual number against the truth, on average over pools."""
    rng = np.random.default_rng(8)
    n, sigma2, ridge = 40, 0.005, 1.0
    expected, actual, taus = [], [], []
    for _ in range(60):
        truth = rng.standard_normal(n) * math.sqrt(sigma2 / ridge)
        i, j, _ = random_comparisons(n, 60, rng)
        p = 0.5 + truth[i] - truth[j] + math.sqrt(sigma2) * rng.standard_normal(i.shape[0])
        post = fit_posterior(n, i, j, p, ridge=ridge, sigma2=sigma2)
        expected.append(expected_discordant(post))
        a, b = np.triu_indices(n, k=1)
        actual.append(int((np.sign(post.mean[a] - post.mean[b]) != np.sign(truth[a] - truth[b])).sum()))
        taus.append((expected_tau(post), kendalltau(post.mean, truth).statistic))
    assert abs(np.mean(actual) / np.mean(expected) - 1) < 0.05
    tau_expected, tau_actual = np.mean(taus, axis=0)
    assert abs(tau_expected - tau_actual) < 0.02


def test_the_stopping_criteria():
    rng = np.random.default_rng(9)
    i, j, p = random_comparisons(20, 100, rng)
    post = fit_posterior(20, i, j, p)
    assert criterion("max_stderr", post) == pytest.approx(post.sd.max())
    assert criterion("change", post, None) == float("inf") and criterion(
        "change", post, post.mean
    ) == pytest.approx(0)
    assert StopRule("expected_tau", 0.5).met(0.6) and not StopRule("max_stderr", 0.1).met(0.2)
    with pytest.raises(ValueError, match="unknown stopping criterion"):
        StopRule("entropy", 1.0)  # type: ignore[arg-type]


# --- rounds ---------------------------------------------------------------------------------------------------------


def test_the_first_round_connects_every_item():
    rng = np.random.default_rng(10)
    pairs = first_pairs(9, 9, rng)
    assert len({tuple(r) for r in pairs.tolist()}) == 9 and set(pairs.ravel()) == set(range(9))
    half = first_pairs(9, 4, rng)  # a matching first
    assert len(set(half.ravel())) == 8


def fixed(pairs: int, n: int) -> Schedule:
    """Rounds of ``pairs`` pairs each (from the first) for a pool of ``n`` items."""
    return Schedule(pairs / n, pairs / n, 0.0)


def test_rounds_spend_the_budget_judge_no_pair_twice_and_beat_random_on_a_sharp_judge():
    results = {}
    for strategy in ("reorder", "windowed", "random"):
        rhos = []
        for seed in range(4):
            rng = np.random.default_rng(seed)
            truth = pool_truth("normal", 300, rng)
            judge = PoolJudge(truth, rng, scale=4.0, item_noise=0.0, call_noise=0.3, flip=0.0)
            settings = RoundSettings(strategy, fixed(150, 300), seed=seed)
            records, pool = rank_pool(300, judge.orderings, settings, 900)
            # six rounds of 150 pairs, each recorded after its fit, and the fit after the last one
            assert len(records) == 7 and records[-1].stopped == "call budget spent"
            assert records[-1].pairs == 900 == pool.pairs == judge.calls // 2
            assert len(PairSet(300, np.stack([pool.i, pool.j], axis=1))) == 900
            rhos.append(spearmanr(records[-1].post.mean, truth).statistic)
        results[strategy] = np.mean(rhos)
    assert results["reorder"] > results["random"] + 0.01 and results["windowed"] > results["random"] + 0.01


def test_rounds_read_by_the_logit_link_with_the_robust_fit_beat_the_linear_fit_on_a_sharp_judge():
    n = 200
    scores: dict[str, list[float]] = {"linear": [], "logit": []}
    for seed in range(3):
        rng = np.random.default_rng([seed, 31])
        truth = pool_truth("normal", n, rng)
        judge = PoolJudge(truth, rng, scale=3.0, item_noise=0.2, call_noise=0.5, flip=0.02)
        for name, model in (("linear", Model()), ("logit", Model("logit", LOGIT_CLIP, 1.345))):
            # 4 calls per item: a first round of N pairs, then rounds of a quarter of what is judged
            settings = RoundSettings("reorder", Schedule(1.0, 0.25, 0.25), model, seed=seed)
            records, _ = rank_pool(n, judge.orderings, settings, 2 * n)
            assert records[-1].post.link == model.link
            scores[name].append(spearmanr(records[-1].post.mean, truth).statistic)
    assert np.mean(scores["logit"]) > np.mean(scores["linear"]) + 0.02


def test_a_stop_rule_ends_the_rounds_early_and_a_warm_start_helps_the_first_rounds():
    rng = np.random.default_rng(11)
    truth = pool_truth("normal", 200, rng)
    judge = PoolJudge(truth, rng, item_noise=0.0)
    rule = StopRule("expected_tau", 0.6)
    records, pool = rank_pool(
        200, judge.orderings, RoundSettings(schedule=fixed(100, 200), seed=11), 4000, stop=rule
    )
    assert (
        records[-1].criterion >= 0.6 and records[-1].stopped.startswith("expected_tau") and pool.pairs < 4000
    )
    assert all(r.criterion < 0.6 and r.stopped is None for r in records[:-1])
    cold, warm = [], []
    for seed in range(5):
        rng = np.random.default_rng(seed)
        truth = pool_truth("normal", 200, rng)
        judge = PoolJudge(truth, rng, item_noise=0.0)
        absolute = judge.absolute(rng, noise=0.5)
        for out, prior in ((cold, None), (warm, Prior(absolute, weight=1.0))):
            settings = RoundSettings(schedule=fixed(100, 200), seed=seed)
            records, _ = rank_pool(200, judge.orderings, settings, 100, prior=prior)
            out.append(spearmanr(records[-1].post.mean, truth).statistic)
    assert np.mean(warm) > np.mean(cold) + 0.05


def test_the_rounds_of_several_pools_share_one_judge_call_per_round_and_stop_on_their_own():
    judged: list[dict[str, int]] = []

    def judge(_r, chosen):
        judged.append({name: pairs.shape[0] for name, pairs in chosen.items()})
        return {name: np.tile([0.7, 0.3], (pairs.shape[0], 1)) for name, pairs in chosen.items()}

    pools = {"small": Pool(10, key=1, budget_pairs=8), "large": Pool(40, key=2, budget_pairs=30)}
    records = run_rounds(pools, judge, RoundSettings(seed=3), should_stop=lambda name, pool: None)
    assert all(set(r) <= {"small", "large"} for r in judged) and judged[0] == {"small": 5, "large": 20}
    assert pools["small"].pairs == 8 and pools["large"].pairs == 30
    assert [r.stopped for r in records if r.stopped] == ["call budget spent", "call budget spent"]
    # a resumed loop goes on from the pools' state and the next round's number
    again = run_rounds({"small": Pool(10, key=1, budget_pairs=12)}, judge, RoundSettings(seed=3), start=5)
    assert again[0].round == 5 and again[0].pairs == 0


def test_a_budget_only_the_caller_knows_stops_a_pool():
    def judge(_r, chosen):
        return {name: np.tile([0.7, 0.3], (pairs.shape[0], 1)) for name, pairs in chosen.items()}

    pools = {"a": Pool(20, budget_pairs=100), "b": Pool(20, budget_pairs=100)}
    records = run_rounds(
        pools,
        judge,
        RoundSettings(),
        should_stop=lambda name, pool: "tokens" if pool.pairs >= 10 and name == "a" else None,
    )
    assert pools["a"].stopped == "tokens" and 10 <= pools["a"].pairs < 100
    assert pools["b"].pairs == 100 and records[-1].pool == "b"


def test_the_warm_start_is_put_on_the_comparisons_scale():
    a = np.array([1.0, 2.0, 3.0, 4.0])
    i, j = np.array([3, 2, 1]), np.array([0, 1, 0])
    f = 0.1 * (a[i] - a[j])  # what the comparisons say of the differences (expert_values)
    mean, weight = warm_start(Prior(a, 2.0), i, j, f)
    assert np.allclose(mean, 0.1 * (a - a.mean())) and np.all(weight == 2.0)
    mean, weight = warm_start(Prior(a, 2.0), i, j, -f)  # the judge disagrees: no prior
    assert np.all(weight == 0)


def test_the_pool_judge_answers_the_same_pair_the_same_way():
    rng = np.random.default_rng(12)
    judge = PoolJudge(pool_truth("clustered", 50, rng), rng)
    a, b = np.array([1, 2, 3]), np.array([4, 5, 6])
    assert np.array_equal(judge(a, b), judge(a, b)) and np.allclose(judge(a, b), 1 - judge(b, a))
    assert judge.calls == 4 * 6  # four times three pairs, both orderings
