"""Agreement between raters: raw agreement, Cohen's kappa (and its linearly weighted form for ordered labels),
Fleiss' kappa, Krippendorff's alpha (nominal and ordinal), and percentile bootstrap intervals over the rated items.

Labels are small non-negative integer codes (``0 .. k-1``); a missing rating is ``-1``. Every statistic returns
``nan`` where it is undefined (no items, one category only, fewer than two raters), never a made-up 0 or 1: the
report says why.

Verdicts on a pair (the first candidate, a tie, the second: ``0, 1, 2``) depend on which candidate a pair calls
first, and chance agreement reads their marginals: :func:`both_ways` reads every item both ways round (each code
and its mirror ``k - 1 - code``), so that kappa and alpha do not move when pairs are turned round (the statistic of
the doubled items equals scikit-learn's and the ``krippendorff`` package's on them).

References
----------
Cohen, J. (1960). A coefficient of agreement for nominal scales. *Educational and Psychological Measurement*
20(1), 37-46: kappa = (p_o - p_e) / (1 - p_e), p_e = sum_k p_k(A) p_k(B).

Fleiss, J. L. (1971). Measuring nominal scale agreement among many raters. *Psychological Bulletin* 76(5),
378-382: kappa = (P_bar - P_e) / (1 - P_e) with P_i = (sum_j n_ij^2 - n) / (n (n - 1)) and
P_e = sum_j p_j^2, for n raters on every item.

Cohen, J. (1968). Weighted kappa. *Psychological Bulletin* 70(4), 213-220: kappa_w = 1 - sum w O / sum w E.

Krippendorff, K. (2011). Computing Krippendorff's alpha-reliability. Annenberg School for Communication,
departmental paper 43: for nominal data, alpha = 1 - (n - 1) sum_{c != k} o_ck / sum_{c != k} n_c n_k, with
the coincidence matrix o_ck = sum_u (pairs of values c, k in unit u) / (m_u - 1) over units with m_u >= 2
values, n_c = sum_k o_ck and n = sum_c n_c. Missing ratings are allowed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

MISSING = -1
# A chance agreement this close to 1 (or an expected disagreement this close to 0) leaves the statistic 0/0:
# ``np.isclose``'s tolerances, without its cost (the bootstraps call these thousands of times).
ISCLOSE = 1e-8


def both_ways(*labels: NDArray[np.int64], n_categories: int = 3) -> list[NDArray[np.int64]]:
    """Every array of ordered verdict codes followed by its mirror ``n_categories - 1 - code`` (a missing rating
    stays missing), along the last axis: the items read both ways round (module docstring)."""
    out = []
    for codes in labels:
        c = np.asarray(codes)
        mirror = np.where(c == MISSING, MISSING, n_categories - 1 - c)
        out.append(np.concatenate([c, mirror], axis=-1))
    return out


def raw_agreement(a: NDArray[np.int64], b: NDArray[np.int64]) -> float:
    """The share of items on which two raters give the same label (``nan`` for no items)."""
    a, b = np.asarray(a), np.asarray(b)
    return float(np.mean(a == b)) if a.size else float("nan")


def cohen_kappa(a: NDArray[np.int64], b: NDArray[np.int64], n_categories: int) -> float:
    """Cohen's kappa of two raters' labels on the same items (Cohen 1960).

    ``nan`` when the chance agreement is 1 (both raters used one and the same category throughout: the
    agreement is perfect but kappa is 0/0) or there are no items.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.size == 0:
        return float("nan")
    p_o = float(np.mean(a == b))
    p_a = np.bincount(a, minlength=n_categories) / a.size
    p_b = np.bincount(b, minlength=n_categories) / b.size
    p_e = float(p_a @ p_b)
    if abs(p_e - 1.0) <= ISCLOSE:
        return float("nan")
    return (p_o - p_e) / (1.0 - p_e)


def category_counts(ratings: NDArray[np.int64], n_categories: int) -> NDArray[np.int64]:
    """Items x categories: how many raters gave each item each label (``ratings`` is raters x items, -1 missing)."""
    ratings = np.asarray(ratings)
    counts = np.zeros((ratings.shape[1], n_categories), dtype=np.int64)
    for row in ratings:
        seen = row != MISSING
        np.add.at(counts, (np.flatnonzero(seen), row[seen]), 1)
    return counts


def fleiss_kappa(counts: NDArray[np.int64]) -> float:
    """Fleiss' kappa from items x categories counts, the same number of raters on every item (Fleiss 1971).

    ``nan`` with fewer than two raters per item, no items, or one category only.
    """
    counts = np.asarray(counts, dtype=np.float64)
    if counts.shape[0] == 0:
        return float("nan")
    per_item = counts.sum(axis=1)
    n = per_item[0]
    if not np.all(per_item == n):
        raise ValueError(
            f"Fleiss' kappa needs the same number of raters on every item; got {sorted(set(per_item))}"
        )
    if n < 2:
        return float("nan")
    p_items = ((counts**2).sum(axis=1) - n) / (n * (n - 1))
    p_bar = float(p_items.mean())
    p_j = counts.sum(axis=0) / counts.sum()
    p_e = float(p_j @ p_j)
    if abs(p_e - 1.0) <= ISCLOSE:
        return float("nan")
    return (p_bar - p_e) / (1.0 - p_e)


def weighted_kappa(a: NDArray[np.int64], b: NDArray[np.int64], n_categories: int) -> float:
    """Cohen's weighted kappa with linear weights (Cohen 1968), for ordered labels ``0 < 1 < ... < k-1``:
    ``1 - sum_ij w_ij O_ij / sum_ij w_ij E_ij`` with ``w_ij = |i - j| / (k - 1)``, ``O`` the observed proportions
    and ``E`` the product of the two raters' margins (``sklearn.metrics.cohen_kappa_score(weights="linear")``). A
    disagreement between neighbouring labels ("i" and "tie") costs half one across the scale ("i" and "j").

    ``nan`` with no items or when the expected disagreement is 0."""
    a, b = np.asarray(a), np.asarray(b)
    if a.size == 0 or n_categories < 2:
        return float("nan")
    observed = confusion(a, b, n_categories) / a.size
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    labels = np.arange(n_categories)
    w = np.abs(labels[:, None] - labels[None, :]) / (n_categories - 1)
    denominator = float((w * expected).sum())
    if abs(denominator) <= ISCLOSE:
        return float("nan")
    return 1.0 - float((w * observed).sum()) / denominator


def krippendorff_alpha(ratings: NDArray[np.int64], n_categories: int, level: str = "nominal") -> float:
    """Krippendorff's alpha; ``ratings`` is raters x items with -1 for missing (Krippendorff 2011). Items with
    fewer than two ratings carry no pairs and are left out, as the method says.

    ``level="nominal"``: every two different labels differ alike (``delta^2 = 1``). ``level="ordinal"``: the labels
    are ordered and ``delta^2_ck = (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2`` over the values' marginal totals
    ``n_g`` (Krippendorff 2011, section on the ordinal metric); then ``alpha = 1 - (n - 1) sum o_ck delta^2_ck /
    sum n_c n_k delta^2_ck``.

    ``nan`` with no pairable values or when every pairable value is the same category.
    """
    counts = category_counts(ratings, n_categories).astype(np.float64)
    m = counts.sum(axis=1)
    pairable = m >= 2
    counts, m = counts[pairable], m[pairable]
    if counts.shape[0] == 0:
        return float("nan")
    # o_ck = sum_u n_uc (n_uk - [c == k]) / (m_u - 1)
    weighted = counts / (m - 1)[:, None]
    coincidence = weighted.T @ counts - np.diag(weighted.sum(axis=0))
    n_c = coincidence.sum(axis=1)
    n = n_c.sum()
    delta = _ordinal_delta(n_c) if level == "ordinal" else (~np.eye(n_categories, dtype=bool)).astype(float)
    if level not in ("nominal", "ordinal"):
        raise ValueError(f"level must be 'nominal' or 'ordinal', got {level!r}")
    expected = (np.outer(n_c, n_c) * delta).sum()
    if expected == 0:
        return float("nan")
    return float(1.0 - (n - 1) * (coincidence * delta).sum() / expected)


def _ordinal_delta(n_c: NDArray[np.float64]) -> NDArray[np.float64]:
    """Krippendorff's ordinal ``delta^2_ck = (sum_{g=min..max} n_g - (n_c + n_k) / 2)^2``."""
    cum = np.concatenate([[0.0], np.cumsum(n_c)])
    lo = np.minimum.outer(np.arange(n_c.size), np.arange(n_c.size))
    hi = np.maximum.outer(np.arange(n_c.size), np.arange(n_c.size))
    between = cum[hi + 1] - cum[lo]
    return (between - (n_c[:, None] + n_c[None, :]) / 2) ** 2


def confusion(a: NDArray[np.int64], b: NDArray[np.int64], n_categories: int) -> NDArray[np.int64]:
    """Counts of (label of a, label of b): rows a, columns b."""
    table = np.zeros((n_categories, n_categories), dtype=np.int64)
    np.add.at(table, (np.asarray(a), np.asarray(b)), 1)
    return table


MIN_ITEMS = 10


def bootstrap_interval(
    statistic: Callable[[NDArray[np.int64]], float],
    n_items: int,
    rng: np.random.Generator,
    rounds: int = 1000,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap over items: ``statistic(index)`` on ``rounds`` resamples of ``range(n_items)`` drawn
    with replacement; the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the defined values.

    ``(nan, nan)`` with fewer than :data:`MIN_ITEMS` items (a percentile bootstrap of a handful of items is narrower
    than its data: five agreeing answers give [1, 1]), where the resamples do not vary (no width: the data cannot
    show how far the statistic may move), or when fewer than half the resamples give a defined value (a statistic
    that is mostly undefined has no interval worth printing).
    """
    if n_items < MIN_ITEMS:
        return float("nan"), float("nan")
    values = np.array([statistic(rng.integers(0, n_items, n_items)) for _ in range(rounds)])
    defined = values[np.isfinite(values)]
    if defined.size < rounds / 2:
        return float("nan"), float("nan")
    lower, upper = np.quantile(defined, [(1 - level) / 2, (1 + level) / 2])
    return (float(lower), float(upper)) if upper > lower else (float("nan"), float("nan"))
