"""The papers' exact protocols, each against its released code's rule restated on hand-worked and random cases: the
EACL release's balanced threshold, system-level correlation, and the PoE authors' draws for the efficiency curves."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from scipy.stats import spearmanr

from pipeline.methods.debias import balanced_threshold, balancing_alpha, decision_threshold
from pipeline.methods.efficiency import covered_uniform_batch
from pipeline.methods.metrics import system_correlation
from pipeline.methods.selection import all_pairs, balanced_random_batch


def release_threshold(p: np.ndarray) -> float:
    """adianliusie/comparative-assessment, src/evaluation/loader.py: get_balanced_thresholds, as released."""
    for t in np.arange(0, 1, 0.001):
        if np.mean(p < t) >= 0.5:
            break
    return t


def test_the_balanced_threshold_is_the_releases_and_splits_from_the_alpha_rule_on_a_lopsided_judge():
    p = np.array([0.1, 0.3, 0.35, 0.6, 0.62, 0.9])
    # half below t first at the grid point 0.350 (np.arange's 0.35000000000000003, just above the third value, as in
    # the release), where 0.1, 0.3 and 0.35 lie below it
    assert balanced_threshold(p) == np.arange(0, 1, 0.001)[350] and np.mean(p < balanced_threshold(p)) == 0.5
    rng = np.random.default_rng(0)
    for _ in range(50):
        q = rng.beta(rng.uniform(0.3, 3), rng.uniform(0.3, 3), size=rng.integers(2, 200))
        assert balanced_threshold(q) == pytest.approx(release_threshold(q), abs=1e-12)
        assert np.mean(q > balanced_threshold(q)) <= 0.5 + 1e-12
    # a lopsided judge: most answers mildly "A", a few very sure "B" ones
    lopsided = np.concatenate([np.full(60, 0.58), np.full(40, 0.02)])
    by_alpha = decision_threshold(balancing_alpha(lopsided))
    by_median = balanced_threshold(lopsided)
    assert np.mean(lopsided > by_median) <= 0.5 < np.mean(lopsided > by_alpha)


def test_system_level_correlation_is_the_correlation_of_per_system_means():
    systems = np.array(["a", "b", "c", "a", "b", "c"])
    pred = np.array([1.0, 2.0, 3.0, 3.0, 0.0, 5.0])  # means a 2, b 1, c 4
    human = np.array([2.0, 1.0, 5.0, 2.0, 1.0, 3.0])  # means a 2, b 1, c 4
    value, n = system_correlation(systems, pred, human)
    assert n == 3 and value == pytest.approx(1.0)
    rng = np.random.default_rng(1)
    names = rng.integers(0, 6, 120).astype(str)
    x, y = rng.normal(size=120), rng.normal(size=120)
    means = [(x[names == s].mean(), y[names == s].mean()) for s in sorted(set(names))]
    want = spearmanr([m[0] for m in means], [m[1] for m in means]).statistic
    assert system_correlation(names, x, y)[0] == pytest.approx(want, abs=1e-12)
    assert np.isnan(system_correlation(np.array(["a", "b"]), np.array([1.0, 2.0]), np.array([1.0, 2.0]))[0])


def test_the_poe_authors_draws_are_uniform_over_the_sets_that_cover_every_candidate():
    n, k = 4, 3
    draws = covered_uniform_batch(n, k, 32_000, np.random.default_rng(2))
    pairs = all_pairs(n)
    for row in draws[:200]:
        assert set(pairs[row].ravel()) == set(range(n))  # every candidate in a pair
    counts = Counter(map(tuple, draws))
    assert len(counts) == 16  # C(6, 3) = 20 sets, 4 of them (triangles) leave a candidate out
    frequencies = np.array(list(counts.values())) / len(draws)
    assert np.abs(frequencies - 1 / 16).max() < 0.006
    # ours always hold a perfect matching, theirs not: at k = n (16 of 120 pairs) the degrees spread wider
    m = 16
    theirs = covered_uniform_batch(m, m, 400, np.random.default_rng(3))
    ours = balanced_random_batch(m, m, 400, np.random.default_rng(3))
    spread = {
        name: np.mean([np.bincount(all_pairs(m)[row].ravel(), minlength=m).var() for row in draws])
        for name, draws in (("theirs", theirs), ("ours", ours))
    }
    assert spread["theirs"] > spread["ours"]
