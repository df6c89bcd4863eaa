"""Bad input: malformed tables, duplicates, disconnected graphs, the registry."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.methods import ComparisonError, check_comparisons, scorer, scorers
from pipeline.methods.scorers.comparison_checks import as_comparisons, check_connected, connected_components

ALL = sorted(scorers())
NEEDS_CONNECTED = ["bradley_terry", "poe_bt", "poe_gaussian", "poe_gaussian_hard", "poe_laplace"]
NEEDS_COVERED = ["avg_prob", "ml_ranking", "win_ratio"]

I_ = np.array([0, 1, 2, 3])
J_ = np.array([1, 2, 3, 0])
P_ = np.array([0.6, 0.7, 0.2, 0.5])


@pytest.mark.parametrize("method", ALL)
@pytest.mark.parametrize("bad", [np.nan, -0.1, 1.5, np.inf])
def test_bad_probability_names_comparison_and_field(method, bad):
    p = P_.copy()
    p[2] = bad
    with pytest.raises(
        ComparisonError,
        match=r"comparison 2 \(i=2, j=3\): p=(nan|-0.1|1.5|inf) is not a probability in \[0, 1\]",
    ):
        scorer(method).score(4, I_, J_, p)


@pytest.mark.parametrize("method", ALL)
def test_self_comparison(method):
    with pytest.raises(
        ComparisonError, match=r"comparison 1 \(i=1, j=1\): an item cannot be compared with itself"
    ):
        scorer(method).score(4, I_, np.array([1, 1, 3, 0]), P_)


@pytest.mark.parametrize("method", ALL)
def test_index_out_of_range(method):
    with pytest.raises(
        ComparisonError, match=r"comparison 3 \(i=3, j=4\): j=4 is out of range for n_items=4"
    ):
        scorer(method).score(4, I_, np.array([1, 2, 3, 4]), P_)
    with pytest.raises(ComparisonError, match=r"comparison 0 \(i=-1, j=1\): i=-1 is out of range"):
        scorer(method).score(4, np.array([-1, 1, 2, 3]), J_, P_)


def test_shapes_and_dtypes():
    with pytest.raises(ComparisonError, match="same length"):
        check_comparisons(4, I_, J_, P_[:3])
    with pytest.raises(ComparisonError, match="integer array"):
        check_comparisons(4, I_.astype(float), J_, P_)
    with pytest.raises(ComparisonError, match="1-D"):
        check_comparisons(4, I_[:, None], J_, P_)
    with pytest.raises(ComparisonError, match="real"):
        check_comparisons(4, I_, J_, P_.astype(complex))
    with pytest.raises(ComparisonError, match="n_items must be an int"):
        check_comparisons(4.0, I_, J_, P_)  # type: ignore[arg-type]
    check_comparisons(4, I_.astype(np.int32), J_.astype(np.uint8), P_.astype(np.float32))


def test_as_comparisons_converts():
    n, i, j, p = as_comparisons(np.int64(4), [0, 1], [1, 2], [1, 0])
    assert n == 4 and i.dtype == np.int64 and j.dtype == np.int64 and p.dtype == np.float64


def test_duplicates_allowed_by_default_and_rejectable():
    i = np.array([0, 1, 0, 2, 1])
    j = np.array([1, 2, 1, 0, 0])
    p = np.array([0.6, 0.7, 0.8, 0.5, 0.4])
    check_comparisons(3, i, j, p)  # (0,1) twice: allowed; (1,0) is the other ordering, not a duplicate
    with pytest.raises(ComparisonError, match=r"comparison 2 \(i=0, j=1\): duplicates comparison 0"):
        check_comparisons(3, i, j, p, allow_duplicates=False)
    check_comparisons(3, i[[0, 1, 3, 4]], j[[0, 1, 3, 4]], p[[0, 1, 3, 4]], allow_duplicates=False)


@pytest.mark.parametrize("method", NEEDS_CONNECTED)
def test_isolated_item_is_named(method):
    # item 4 is in no comparison
    with pytest.raises(
        ComparisonError, match=r"item 4 is in no comparison: the comparison graph is disconnected"
    ):
        scorer(method).score(5, I_, J_, P_)


@pytest.mark.parametrize("method", NEEDS_CONNECTED)
def test_disconnected_components_are_listed(method):
    i = np.array([0, 1, 3, 4])
    j = np.array([1, 2, 4, 5])
    with pytest.raises(
        ComparisonError, match=r"disconnected: 2 components, smallest: \{0, 1, 2\} \(3 items\); \{3, 4, 5\}"
    ):
        scorer(method).score(6, i, j, np.full(4, 0.6))


@pytest.mark.parametrize("method", NEEDS_COVERED)
def test_coverage_scorers_accept_disconnected_but_not_uncovered(method):
    i = np.array([0, 2])
    j = np.array([1, 3])
    s = scorer(method).score(4, i, j, np.array([0.8, 0.3]))
    assert s.shape == (4,)
    with pytest.raises(ComparisonError, match=r"item 4 is in no comparison"):
        scorer(method).score(5, i, j, np.array([0.8, 0.3]))


def test_connected_components_helper():
    n_comp, labels = connected_components(6, np.array([0, 1, 3]), np.array([1, 2, 4]))
    assert n_comp == 3
    assert labels[0] == labels[1] == labels[2] != labels[3] == labels[4] != labels[5]
    check_connected(3, np.array([0, 1]), np.array([1, 2]))


def test_unknown_method_lists_valid_names():
    with pytest.raises(ValueError, match=r"unknown scoring method 'elo'; valid: avg_prob, bradley_terry"):
        scorer("elo").score(2, [0], [1], [0.5])


def test_registry_signature_and_options():
    for name, f in ((n, e.score) for n, e in scorers().items()):
        s = f(3, np.array([0, 1, 0]), np.array([1, 2, 2]), np.array([0.7, 0.6, 0.8]))
        assert s.shape == (3,) and np.all(np.isfinite(s)), name
        assert s[0] > s[2], name  # item 0 beats item 2 directly and through item 1
    np.testing.assert_array_equal(scorer("win_ratio").score(2, [0], [1], [0.55], threshold=0.6), [0.0, 1.0])


def test_graph_errors_carry_the_items_at_fault():
    # item 3 in no comparison
    with pytest.raises(ComparisonError) as err:
        check_connected(4, np.array([0, 1]), np.array([1, 2]))
    assert err.value.items == (3,)
    # two components, {0, 1, 2} and {3, 4}: the smallest is named
    with pytest.raises(ComparisonError) as err:
        check_connected(5, np.array([0, 1, 3]), np.array([1, 2, 4]))
    assert err.value.items == (3, 4)
