"""Comparison selection (EACL section 3.4; PoE section 3.6, 4.2, appendix A.5)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from pipeline.methods.adaptive import greedy as design
from pipeline.methods.adaptive import selection as sel

from .conftest import laplacian


def unordered_set(pairs: np.ndarray) -> set[tuple[int, int]]:
    return {(min(a, b), max(a, b)) for a, b in pairs.tolist()}


def test_strategy_sets():
    assert sel.ORDERED_STRATEGIES == {"all_ordered", "random", "no_repeat", "symmetric"}
    assert sel.UNORDERED_STRATEGIES == {"all_pairs", "balanced_random", "greedy_optimal"}
    assert not sel.ORDERED_STRATEGIES & sel.UNORDERED_STRATEGIES


def test_all_ordered_and_all_pairs():
    rows = sel.select_pairs("all_ordered", 5, None, None)
    assert rows.shape == (20, 2) and rows.dtype == np.int64
    assert set(map(tuple, rows.tolist())) == set(itertools.permutations(range(5), 2))
    rows = sel.select_pairs("all_pairs", 5, 10, None)
    assert set(map(tuple, rows.tolist())) == set(itertools.combinations(range(5), 2))
    with pytest.raises(ValueError, match=r"k=7 is impossible for strategy 'all_pairs' with n=5"):
        sel.select_pairs("all_pairs", 5, 7, None)


def test_pair_index_roundtrip_large_n():
    n = 100_000
    m = n * (n - 1) // 2
    idx = np.array([0, 1, n - 2, n - 1, 12_345_678, m // 2, m - 2, m - 1], dtype=np.int64)
    pairs = sel.pairs_from_index(idx, n)
    assert np.all(pairs[:, 0] < pairs[:, 1]) and np.all(pairs < n)
    np.testing.assert_array_equal(sel.pair_index(pairs[:, 0], pairs[:, 1], n), idx)
    small = sel.pairs_from_index(np.arange(45), 10)
    np.testing.assert_array_equal(small, sel.all_pairs(10))


def test_random_ordered(rng):
    rows = sel.select_pairs("random", 6, 25, rng)
    assert rows.shape == (25, 2) and np.all(rows[:, 0] != rows[:, 1])
    assert len(set(map(tuple, rows.tolist()))) == 25  # no repeated ordered pair
    with pytest.raises(ValueError, match=r"k=31 is impossible for strategy 'random' with n=6"):
        sel.select_pairs("random", 6, 31, rng)


def test_no_repeat(rng):
    rows = sel.select_pairs("no_repeat", 7, 21, rng)
    assert len(unordered_set(rows)) == 21  # never both (i, j) and (j, i)
    flipped = np.mean(rows[:, 0] > rows[:, 1])
    assert 0.2 < flipped < 0.8  # both orientations occur
    with pytest.raises(ValueError, match="k=22 is impossible"):
        sel.select_pairs("no_repeat", 7, 22, rng)


def test_symmetric(rng):
    rows = sel.select_pairs("symmetric", 6, 10, rng)
    np.testing.assert_array_equal(rows[0::2], rows[1::2, ::-1])
    assert len(set(map(tuple, rows.tolist()))) == 10
    with pytest.raises(ValueError, match="k must be even"):
        sel.select_pairs("symmetric", 6, 9, rng)


@pytest.mark.parametrize(("n", "k"), [(2, 1), (5, 3), (6, 3), (7, 4), (7, 21), (16, 16), (16, 24), (101, 51)])
def test_balanced_random_covers_everyone(n, k, rng):
    rows = sel.balanced_random(n, k, rng)
    assert rows.shape == (k, 2) and np.all(rows[:, 0] < rows[:, 1])
    assert len(unordered_set(rows)) == k
    assert np.array_equal(np.unique(rows), np.arange(n))


def test_balanced_random_limits_name_k_and_n(rng):
    with pytest.raises(
        ValueError, match=r"k=2 is impossible for strategy 'balanced_random' with n=5: need 3 <= k <= 10"
    ):
        sel.select_pairs("balanced_random", 5, 2, rng)
    with pytest.raises(ValueError, match="k=11 is impossible"):
        sel.balanced_random(5, 11, rng)
    with pytest.raises(ValueError, match="needs a numpy.random.Generator"):
        sel.select_pairs("balanced_random", 5, 3, None)
    with pytest.raises(ValueError, match="unknown selection strategy 'best'"):
        sel.select_pairs("best", 5, 3, rng)


@pytest.mark.parametrize(("n", "k"), [(5, 3), (7, 4), (16, 16), (16, 24), (16, 120)])
def test_balanced_random_batch(n, k, rng):
    idx = sel.balanced_random_batch(n, k, 300, rng)
    assert idx.shape == (300, k)
    for row in idx:
        pairs = sel.pairs_from_index(row, n)
        assert len(np.unique(row)) == k
        assert np.array_equal(np.unique(pairs), np.arange(n))


def test_balanced_random_batch_is_uniform_beyond_the_matching(rng):
    # every pair should be about equally likely to be chosen
    n, k, draws = 6, 7, 20_000
    idx = sel.balanced_random_batch(n, k, draws, rng)
    freq = np.bincount(idx.ravel(), minlength=15) / draws
    np.testing.assert_allclose(freq, k / 15, atol=0.02)


def test_seeded_reproducibility():
    a = sel.select_pairs("balanced_random", 20, 40, np.random.default_rng(1))
    b = sel.select_pairs("balanced_random", 20, 40, np.random.default_rng(1))
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------------- greedy
def logdet(n: int, pairs: np.ndarray) -> float:
    """log det of W^T W with item 0 pinned (the reduced Laplacian), from an explicit incidence matrix."""
    if len(pairs) == 0:
        return -np.inf
    lap = laplacian(n, pairs[:, 0], pairs[:, 1])
    sign, val = np.linalg.slogdet(lap[1:, 1:])
    return val if sign > 0 else -np.inf


@pytest.mark.parametrize(("n", "seed"), [(4, 0), (5, 1), (6, 2), (7, 3)])
def test_greedy_each_step_is_the_brute_force_best_addition(n, seed):
    rng = np.random.default_rng(seed)
    m = n * (n - 1) // 2
    rows = sel.greedy_optimal(n, m, rng)
    assert len(unordered_set(rows)) == m
    chain = rows[: n - 1]
    assert logdet(n, chain) == pytest.approx(0.0, abs=1e-12)  # a spanning tree: det of reduced Laplacian = 1
    for step in range(n - 1, m):
        chosen = unordered_set(rows[:step])
        candidates = [c for c in itertools.combinations(range(n), 2) if c not in chosen]
        best = max(logdet(n, np.vstack([rows[:step], [c]])) for c in candidates)
        got = logdet(n, rows[: step + 1])
        assert got == pytest.approx(best, abs=1e-9), f"step {step}"


def test_greedy_matches_sherman_morrison_and_direct_inverse(rng):
    n, k = 30, 80
    rows, a_final = sel.greedy_optimal(n, k, rng, return_inverse=True)
    direct = np.linalg.inv(laplacian(n, rows[:, 0], rows[:, 1]) + 1.0)
    np.testing.assert_allclose(a_final, direct, atol=1e-10)
    # and the greedy criterion equals the determinant ratio (matrix determinant lemma)
    a_prev = np.linalg.inv(laplacian(n, rows[:-1, 0], rows[:-1, 1]) + 1.0)
    x, y = rows[-1]
    gain = a_prev[x, x] + a_prev[y, y] - 2 * a_prev[x, y]
    assert logdet(n, rows) - logdet(n, rows[:-1]) == pytest.approx(np.log1p(gain), abs=1e-9)


def test_sherman_morrison_update_matches_direct_inverse(rng):
    n = 9
    a = rng.integers(0, n, 30)
    b = (a + rng.integers(1, n, 30)) % n
    m = laplacian(n, a, b) + 1.0
    inv = np.linalg.inv(m)
    got = design.sherman_morrison_update(inv, 2, 7)
    u = np.zeros(n)
    u[2], u[7] = 1.0, -1.0
    np.testing.assert_allclose(got, np.linalg.inv(m + np.outer(u, u)), atol=1e-12)


def test_chain_inverse(rng):
    order = rng.permutation(8)
    lap = laplacian(8, order[:-1], order[1:])
    np.testing.assert_allclose(design.chain_inverse(order), np.linalg.inv(lap + 1.0), atol=1e-12)


@pytest.mark.parametrize(("n", "k"), [(20, 30), (40, 60), (60, 150)])
def test_greedy_beats_random_selection(n, k, rng):
    greedy = logdet(n, sel.greedy_optimal(n, k, rng))
    for _ in range(20):
        random_rows = sel.balanced_random(n, k, rng)
        assert greedy > logdet(n, random_rows)
    assert design.log_det_information(n, sel.greedy_optimal(n, k)) == pytest.approx(
        logdet(n, sel.greedy_optimal(n, k)) + 2 * np.log(n), abs=1e-8
    )


def test_greedy_limits(rng):
    with pytest.raises(ValueError, match=r"k=3 is impossible for strategy 'greedy_optimal' with n=5"):
        sel.select_pairs("greedy_optimal", 5, 3, rng)
    rows = sel.select_pairs("greedy_optimal", 5, 4, None)
    np.testing.assert_array_equal(rows, [[0, 1], [1, 2], [2, 3], [3, 4]])
