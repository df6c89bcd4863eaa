"""Average-probability scores (EACL section 3, the soft counterpart of the win-ratio)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.scorers.comparison_checks import as_comparisons, check_covered

__all__ = ["average_probability"]


def average_probability(n_items: int, i: ArrayLike, j: ArrayLike, p: ArrayLike) -> NDArray[np.float64]:
    """Average probability of winning over each item's comparisons.

    ``s_i = mean over comparisons involving i of P(i wins)``, where ``P(i wins) = p[k]`` when
    ``i = i[k]`` and ``1 - p[k]`` when ``i = j[k]``: the win-ratio of EACL eq. 6 with the hard decision
    replaced by the probability. On the full comparison set PoE-Gaussian equals this up to a constant
    shift and the factor ``(N-1)/N`` (PoE appendix A.3).

    Parameters
    ----------
    n_items : int
        Number of items.
    i, j : array_like of int, shape (K,)
        Compared items.
    p : array_like of float, shape (K,)
        Probability that ``i[k]`` beats ``j[k]``.

    Returns
    -------
    ndarray, shape (n_items,)
        Scores in [0, 1]; duplicated rows count as separate comparisons.

    Raises
    ------
    ComparisonError
        Malformed input, or an item in no comparison.
    """
    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    check_covered(n, ii, jj, method="avg_prob")
    total = np.bincount(ii, weights=pp, minlength=n) + np.bincount(jj, weights=1.0 - pp, minlength=n)
    games = np.bincount(ii, minlength=n) + np.bincount(jj, minlength=n)
    return total / games
