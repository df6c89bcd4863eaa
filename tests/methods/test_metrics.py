"""Metrics against scipy.stats and brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from pipeline.methods.agreement import metrics


def tau_b_brute(x, y):
    n0 = c = d = tx = ty = 0
    for a, b in itertools.combinations(range(len(x)), 2):
        n0 += 1
        sx, sy = np.sign(x[a] - x[b]), np.sign(y[a] - y[b])
        tx += sx == 0
        ty += sy == 0
        c += sx * sy > 0
        d += sx * sy < 0
    return (c - d) / np.sqrt((n0 - tx) * (n0 - ty))


def accuracy_brute(ctx, pred, human):
    score = count = 0
    for a, b in itertools.combinations(range(len(ctx)), 2):
        if ctx[a] != ctx[b] or human[a] == human[b]:
            continue
        count += 1
        dp = np.sign(pred[a] - pred[b])
        score += 0.5 if dp == 0 else float(dp == np.sign(human[a] - human[b]))
    return score / count, count


@pytest.mark.parametrize("seed", range(6))
def test_kendall_tau_b_is_tau_b(seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 4, 30).astype(float)  # many ties
    y = rng.integers(0, 3, 30).astype(float)
    assert metrics.kendall_tau_b(x, y) == pytest.approx(tau_b_brute(x, y), abs=1e-12)


def make_contexts(rng, n_ctx=40, size=16):
    ctx = np.repeat(np.arange(n_ctx), size)
    rng.shuffle(ctx)
    pred = rng.normal(size=ctx.size).round(1)  # some ties
    human = rng.integers(1, 6, ctx.size).astype(float)
    human[ctx == 3] = 2.0  # constant human: skipped
    pred[ctx == 4] = 0.7  # constant prediction: correlation 0
    return ctx, pred, human


@pytest.mark.parametrize(
    ("method", "ref"),
    [("spearman", stats.spearmanr), ("pearson", stats.pearsonr), ("kendall", stats.kendalltau)],
)
def test_per_context_correlation_matches_scipy(method, ref, rng):
    ctx, pred, human = make_contexts(rng)
    got = metrics.per_context_correlation(ctx, pred, human, method)
    expected = []
    for c in range(40):
        x, y = pred[ctx == c], human[ctx == c]
        if np.all(y == y[0]):
            continue
        expected.append(0.0 if np.all(x == x[0]) else ref(x, y)[0])
    assert got.n_skipped == 1 and got.n_contexts == 39 and got.n_constant_pred == 1
    assert np.isnan(got.values[3]) and got.values[4] == 0.0
    assert got.mean == pytest.approx(np.mean(expected), abs=1e-12)
    np.testing.assert_allclose(got.values[~np.isnan(got.values)], expected, atol=1e-12)


def test_contexts_of_unequal_size_and_labels(rng):
    ctx = np.array(["b", "b", "b", "a", "a", "c", "c", "c", "c", "d"])
    pred = rng.normal(size=10)
    human = np.array([1, 2, 3, 2, 1, 4, 3, 2, 1, 5.0])
    got = metrics.per_context_correlation(ctx, pred, human)
    assert list(got.contexts) == ["a", "b", "c", "d"]
    assert got.n_skipped == 1  # "d" has one candidate
    assert got.values[0] == pytest.approx(np.sign(pred[3] - pred[4]))
    assert got.values[2] == pytest.approx(stats.spearmanr(pred[5:9], human[5:9])[0])


def test_pooled_correlation(rng):
    x, y = rng.normal(size=200), rng.normal(size=200)
    assert metrics.pooled_correlation(x, y) == pytest.approx(stats.spearmanr(x, y)[0])
    assert metrics.pooled_correlation(x, y, "pearson") == pytest.approx(stats.pearsonr(x, y)[0])
    assert metrics.pooled_correlation(x, y, "kendall") == pytest.approx(stats.kendalltau(x, y)[0])
    assert np.isnan(metrics.pooled_correlation(np.ones(5), y[:5]))


def test_grouped_ranks_match_rankdata(rng):
    codes = rng.integers(0, 7, 300)
    values = rng.integers(0, 10, 300).astype(float)
    ranks = metrics.grouped_ranks(codes, values)
    for c in range(7):
        np.testing.assert_allclose(ranks[codes == c], stats.rankdata(values[codes == c]))


@pytest.mark.parametrize("max_pairs", [metrics.MAX_ENUMERATED_PAIRS, 5])
def test_pairwise_accuracy_brute_force(max_pairs, rng):
    ctx = rng.integers(0, 5, 60)
    pred = rng.integers(0, 6, 60).astype(float)  # ties in pred count half
    human = rng.integers(0, 4, 60).astype(float)  # ties in human are excluded
    got = metrics.pairwise_accuracy(ctx, pred, human, max_enumerated_pairs=max_pairs)
    acc, count = accuracy_brute(ctx, pred, human)
    assert got[1] == count
    assert got[0] == pytest.approx(acc, abs=1e-12)


def test_pairwise_accuracy_edge_cases():
    assert metrics.pairwise_accuracy([0, 0, 1, 1], [1, 2, 3, 3], [2, 1, 5, 6]) == (0.25, 2)
    acc, count = metrics.pairwise_accuracy([0, 0], [1, 2], [3, 3])
    assert np.isnan(acc) and count == 0


def test_bad_inputs():
    with pytest.raises(ValueError, match="same length"):
        metrics.per_context_correlation([0, 0], [1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match=r"pred\[1\]=nan is not finite"):
        metrics.per_context_correlation([0, 0], [1.0, np.nan], [1.0, 2.0])
    with pytest.raises(ValueError, match="method must be one of"):
        metrics.per_context_correlation([0, 0], [1.0, 2.0], [1.0, 2.0], "cosine")  # type: ignore[arg-type]


def test_pearson_survives_huge_scores():
    # human scores of +-1e300 are finite numbers: their squares are not, so the maths must scale first
    human = np.array([1e300, -1e300, 3.0, 5e299, -2e299])
    pred = np.array([1.0, 0.0, 0.5, 0.8, 0.2])
    expected = np.corrcoef(pred, human / 1e300)[0, 1]
    with np.errstate(over="raise", invalid="raise"):  # underflow of tiny terms to 0 is harmless
        assert metrics.pooled_correlation(pred, human, "pearson") == pytest.approx(expected, rel=1e-12)
        summary = metrics.per_context_correlation(np.array([0, 0, 0, 1, 1]), pred, human, "pearson")
    assert summary.values[0] == pytest.approx(np.corrcoef(pred[:3], human[:3] / 1e300)[0, 1], rel=1e-12)
    assert summary.values[1] == pytest.approx(1.0)
    tiny = human / 1e300 * 1e-300  # scores near the smallest normal double: squares underflow to 0
    assert metrics.pooled_correlation(pred, tiny, "pearson") == pytest.approx(expected, rel=1e-9)


def test_scores_a_few_ulps_apart_rank_as_the_ties_they_are():
    # PoE-Gaussian on hard decisions: 0.125 in one context and 0.12499999999999997 in another are the same value in
    # exact arithmetic; which of the two a solver returns depends on the order of its sums
    human = np.array([5.0, 3.0, 2.0, 1.0, 5.0, 3.0, 2.0, 1.0])
    exact = np.array([0.125, -0.125, -0.375, 0.375, 0.375, 0.125, -0.375, -0.125])
    noisy = exact + np.array([0, 1, 0, 0, 0, -1, 2, -3]) * np.spacing(0.375)
    for method in ("spearman", "kendall", "pearson"):
        assert metrics.pooled_correlation(noisy, human, method) == pytest.approx(
            metrics.pooled_correlation(exact, human, method), abs=1e-12
        )
    ctx = np.repeat([0, 1], 4)
    assert metrics.pairwise_accuracy(ctx, noisy, human) == metrics.pairwise_accuracy(ctx, exact, human)
    # exactly tied, the two contexts' 0.125 share a rank: the pooled Spearman is scipy's on the exact values
    assert metrics.pooled_correlation(noisy, human) == pytest.approx(stats.spearmanr(exact, human).statistic)


def test_merging_near_ties_keeps_every_real_difference(rng):
    x = rng.normal(size=500) * 1e-3
    assert np.array_equal(metrics.merge_near_ties(x), x)
    y = np.array([1.0, 1.0 + 1e-13, 2.0, 2.0 - 1e-13, 3.0, 1e-9])
    assert metrics.merge_near_ties(y).tolist() == [1.0, 1.0, 2.0 - 1e-13, 2.0 - 1e-13, 3.0, 1e-9]
