"""Average-probability scores (EACL section 3, the soft counterpart of the win-ratio)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.scorers._common import mean_outcome
from pipeline.methods.scorers.comparison_checks import as_comparisons, check_covered

__all__ = ["average_probability"]


def average_probability(n_items: int, i: ArrayLike, j: ArrayLike, p: ArrayLike) -> NDArray[np.float64]:
    """Average probability of winning over each item's comparisons.

    ``s_i = mean over comparisons involving i of P(i wins)``, where ``P(i wins) = p[k]`` when
    ``i = i[k]`` and ``1 - p[k]`` when ``i = j[k]``: the win-ratio of EACL eq. 6 with the hard decision
    replaced by the probability. On the full comparison set PoE-Gaussian equals this up to a constant
    shift and the factor ``(N-1)/N`` (PoE appendix A.3).

    The parameters, the result (in [0, 1]) and the errors are those of
    :func:`pipeline.methods.scorers.win_ratio.win_ratio`, without its threshold.
    """
    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    check_covered(n, ii, jj, method="avg_prob")
    return mean_outcome(n, ii, jj, pp)
