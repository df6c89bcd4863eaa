"""Agreement statistics against published worked examples and the reference implementations (scikit-learn's
Cohen's kappa, statsmodels' Fleiss' kappa, the ``krippendorff`` package), with the edge cases."""

from __future__ import annotations

import math

import krippendorff
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa

from pipeline.methods.agreement.raters import (
    MIN_ITEMS,
    MISSING,
    bootstrap_interval,
    category_counts,
    cohen_kappa,
    confusion,
    fleiss_kappa,
    krippendorff_alpha,
    raw_agreement,
    weighted_kappa,
)

TOL = 1e-12

# Fleiss (1971), as worked on Wikipedia's "Fleiss' kappa" page: 10 subjects, 14 raters, 5 categories; 0.210.
FLEISS_EXAMPLE = np.array(
    [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
)

# Krippendorff (2011), "Computing Krippendorff's alpha-reliability", the nominal example with missing values:
# 4 observers, 12 units, values 1-5; alpha = 0.743.
_ = np.nan
KRIPPENDORFF_EXAMPLE = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, _, _, _],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, _, 3],
        [_, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, _],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, _],
    ]
)


def as_codes(values: np.ndarray) -> np.ndarray:
    """1-based values with nan for missing -> 0-based codes with MISSING."""
    return np.where(np.isnan(values), MISSING, np.nan_to_num(values) - 1).astype(np.int64)


def test_cohen_kappa_textbook_example():
    # Wikipedia's "Cohen's kappa" example: 50 proposals, yes/yes 20, yes/no 5, no/yes 10, no/no 15:
    # p_o = 0.7, p_e = 0.5, kappa = 0.4.
    a = np.array([0] * 25 + [1] * 25)
    b = np.array([0] * 20 + [1] * 5 + [0] * 10 + [1] * 15)
    assert raw_agreement(a, b) == pytest.approx(0.7, abs=TOL)
    assert cohen_kappa(a, b, 2) == pytest.approx(0.4, abs=TOL)


@pytest.mark.parametrize("seed", range(5))
def test_cohen_kappa_matches_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, 60)
    b = np.where(rng.random(60) < 0.6, a, rng.integers(0, 3, 60))
    assert cohen_kappa(a, b, 3) == pytest.approx(cohen_kappa_score(a, b), abs=TOL)


def test_cohen_kappa_edge_cases():
    same = np.zeros(8, dtype=np.int64)
    assert raw_agreement(same, same) == 1.0
    assert math.isnan(cohen_kappa(same, same, 3))  # one category throughout: 0/0, not a made-up 1
    assert math.isnan(cohen_kappa(same[:0], same[:0], 3))
    assert math.isnan(raw_agreement(same[:0], same[:0]))
    # one rater constant, the other not: chance agreement < 1, kappa 0 (agreement no better than chance)
    assert cohen_kappa(same, np.array([0, 1] * 4), 3) == pytest.approx(0.0, abs=TOL)
    # perfect disagreement on two balanced categories: -1
    assert cohen_kappa(np.array([0, 1] * 4), np.array([1, 0] * 4), 2) == pytest.approx(-1.0, abs=TOL)


def test_fleiss_kappa_worked_example_and_statsmodels():
    assert fleiss_kappa(FLEISS_EXAMPLE) == pytest.approx(0.20993, abs=5e-6)
    assert fleiss_kappa(FLEISS_EXAMPLE) == pytest.approx(sm_fleiss_kappa(FLEISS_EXAMPLE), abs=TOL)
    rng = np.random.default_rng(1)
    ratings = rng.integers(0, 3, (4, 30))
    counts = category_counts(ratings, 3)
    assert counts.sum(axis=1).tolist() == [4] * 30
    assert fleiss_kappa(counts) == pytest.approx(sm_fleiss_kappa(counts), abs=TOL)


def test_fleiss_kappa_edge_cases():
    assert math.isnan(fleiss_kappa(np.array([[3, 0], [3, 0]])))  # one category only
    assert math.isnan(fleiss_kappa(np.array([[1, 0], [0, 1]])))  # one rater per item
    assert math.isnan(fleiss_kappa(np.zeros((0, 3))))
    with pytest.raises(ValueError, match="same number of raters"):
        fleiss_kappa(np.array([[2, 0], [1, 0]]))


def test_krippendorff_alpha_worked_example_and_package():
    codes = as_codes(KRIPPENDORFF_EXAMPLE)
    assert krippendorff_alpha(codes, 5) == pytest.approx(0.743, abs=5e-4)
    reference = krippendorff.alpha(reliability_data=KRIPPENDORFF_EXAMPLE, level_of_measurement="nominal")
    assert krippendorff_alpha(codes, 5) == pytest.approx(reference, abs=1e-12)
    rng = np.random.default_rng(2)
    for _ in range(5):
        ratings = rng.integers(0, 3, (3, 25)).astype(np.float64)
        ratings[rng.random(ratings.shape) < 0.2] = np.nan
        expected = krippendorff.alpha(reliability_data=ratings, level_of_measurement="nominal")
        assert krippendorff_alpha(as_codes(ratings + 1), 3) == pytest.approx(expected, abs=1e-12)


def test_two_raters_no_missing_alpha_is_close_to_kappa_and_equals_the_small_sample_formula():
    # With two raters and no missing values alpha = 1 - (n-1)/n * (1 - p_o)/(1 - p_e') (Krippendorff 2011),
    # a small-sample correction of Scott's pi; check against the package rather than restate it.
    rng = np.random.default_rng(3)
    a = rng.integers(0, 3, 40)
    b = np.where(rng.random(40) < 0.7, a, rng.integers(0, 3, 40))
    expected = krippendorff.alpha(
        reliability_data=np.vstack([a, b]).astype(float), level_of_measurement="nominal"
    )
    assert krippendorff_alpha(np.vstack([a, b]), 3) == pytest.approx(expected, abs=1e-12)
    assert krippendorff_alpha(np.vstack([a, b]), 3) == pytest.approx(cohen_kappa(a, b, 3), abs=0.05)


def test_krippendorff_alpha_edge_cases():
    assert math.isnan(krippendorff_alpha(np.zeros((3, 4), dtype=np.int64), 3))  # one value throughout
    assert math.isnan(krippendorff_alpha(np.array([[0, 1, 2, 1]]), 3))  # one rater: nothing pairable
    only_one_each = np.array([[0, MISSING], [MISSING, 1]])
    assert math.isnan(krippendorff_alpha(only_one_each, 3))  # no unit with two values
    assert krippendorff_alpha(np.array([[0, 1, 2, 0], [0, 1, 2, 0]]), 3) == pytest.approx(1.0)


def test_confusion_counts_rows_then_columns():
    table = confusion(np.array([0, 0, 1, 2]), np.array([0, 1, 1, 0]), 3)
    assert table.tolist() == [[1, 1, 0], [0, 1, 0], [1, 0, 0]]


def test_bootstrap_interval_is_seeded_and_brackets_the_value():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, 200)
    b = np.where(rng.random(200) < 0.8, a, 1 - a)

    def stat(k):
        return raw_agreement(a[k], b[k])

    first = bootstrap_interval(stat, 200, np.random.default_rng(5))
    assert first == bootstrap_interval(stat, 200, np.random.default_rng(5))
    low, high = first
    assert low < raw_agreement(a, b) < high
    # a binomial share's 95 % interval is about +-1.96 sqrt(p(1-p)/n)
    half = 1.96 * math.sqrt(0.8 * 0.2 / 200)
    assert high - low == pytest.approx(2 * half, rel=0.25)
    assert all(math.isnan(v) for v in bootstrap_interval(stat, 1, np.random.default_rng(0)))
    # a statistic undefined on most resamples has no interval
    const = np.zeros(50, dtype=np.int64)
    undefined = bootstrap_interval(lambda k: cohen_kappa(const[k], const[k], 2), 50, np.random.default_rng(0))
    assert all(math.isnan(v) for v in undefined)
    rare = np.zeros(50, dtype=np.int64)
    rare[0] = 1
    defined = bootstrap_interval(lambda k: cohen_kappa(rare[k], rare[k], 2), 50, np.random.default_rng(0))
    # defined on ~63 % of resamples, and then perfect: resamples that do not vary show nothing of the statistic's
    # spread, so no interval (never one of no width), as with fewer than MIN_ITEMS items
    assert all(math.isnan(v) for v in defined)
    few = bootstrap_interval(stat, MIN_ITEMS - 1, np.random.default_rng(0))
    assert all(math.isnan(v) for v in few) and not any(
        math.isnan(v) for v in bootstrap_interval(stat, MIN_ITEMS, np.random.default_rng(0))
    )


def test_linearly_weighted_kappa_is_sklearns_and_counts_a_tie_against_a_side_as_half():
    rng = np.random.default_rng(4)
    for _ in range(20):
        a, b = rng.integers(0, 3, 50), rng.integers(0, 3, 50)
        want = cohen_kappa_score(a, b, labels=[0, 1, 2], weights="linear")
        assert weighted_kappa(a, b, 3) == pytest.approx(want, abs=1e-12)
    # i vs tie is half the disagreement of i vs j: weighted kappa is above nominal kappa there
    judge = np.array([0, 0, 2, 2, 0, 2])
    human = np.array([1, 0, 1, 2, 0, 2])
    assert weighted_kappa(judge, human, 3) > cohen_kappa(judge, human, 3)
    assert np.isnan(weighted_kappa(np.array([], dtype=np.int64), np.array([], dtype=np.int64), 3))


def test_ordinal_krippendorff_alpha_worked_example_and_package():
    codes = as_codes(KRIPPENDORFF_EXAMPLE)
    # Krippendorff (2011), the same reliability data: ordinal alpha 0.815
    assert krippendorff_alpha(codes, 5, "ordinal") == pytest.approx(0.815, abs=5e-4)
    reference = krippendorff.alpha(reliability_data=KRIPPENDORFF_EXAMPLE, level_of_measurement="ordinal")
    assert krippendorff_alpha(codes, 5, "ordinal") == pytest.approx(reference, abs=1e-12)
    rng = np.random.default_rng(9)
    for _ in range(10):
        ratings = rng.integers(0, 3, size=(3, 30)).astype(float)
        ratings[rng.random((3, 30)) < 0.2] = np.nan
        expected = krippendorff.alpha(
            reliability_data=ratings, level_of_measurement="ordinal", value_domain=[0, 1, 2]
        )
        assert krippendorff_alpha(as_codes(ratings + 1), 3, "ordinal") == pytest.approx(expected, abs=1e-12)
