"""Win-ratio scores (EACL eq. 6)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.scorers._common import hard_outcomes, mean_outcome
from pipeline.methods.scorers.comparison_checks import as_comparisons, check_covered

# hard_outcomes: the rule of a won game (1 above the threshold, half at it), for the rest of the package
__all__ = ["hard_outcomes", "win_ratio"]


def win_ratio(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    p: ArrayLike,
    *,
    threshold: float = 0.5,
) -> NDArray[np.float64]:
    """Win-ratio: the fraction of its comparisons each item wins (EACL eq. 6).

    ``s_i = (number of comparisons i wins) / (number of comparisons i is in)`` with hard decisions
    ``p > threshold``; a probability exactly at the threshold is a tie and counts half a win for each
    item. ``threshold = 0.5`` is the plain decision; ``threshold = debias.decision_threshold(alpha)``
    (EACL eq. 10) gives the prior-debiased win-ratio.

    Parameters
    ----------
    n_items, i, j, p
        The comparisons (:func:`.comparison_checks.as_comparisons`); duplicated rows are separate games.
    threshold : float, optional
        Decision threshold tau.

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
    check_covered(n, ii, jj, method="win_ratio")
    return mean_outcome(n, ii, jj, hard_outcomes(pp, threshold))
