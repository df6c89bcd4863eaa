"""Maximum-likelihood ranking by approximate greedy search (EACL appendix B).

EACL = Liusie, Manakul & Gales, "LLM Comparative Assessment", EACL 2024.

A ranking (a permutation, best first) is scored by the log-likelihood of the comparisons under it,
each comparison contributing the log probability of the outcome the ranking implies:

    ``L(ranking) = sum_k  log p_k       if i[k] is ranked above j[k]
                          log(1 - p_k)  otherwise.``

Maximising it is the (NP-hard) linear ordering problem, so the search is approximate: start from the
average-probability order and apply *insertion moves* -- remove one item and reinsert it at its best
position, computed for all positions at once from suffix sums; items are visited in the order of the
ranking at the start of each pass -- until a full pass improves nothing.
Every accepted move strictly increases ``L``, so the search terminates at a ranking no single insertion
(and hence no adjacent swap) can improve. Probabilities are clipped to ``[ML_EPS, 1 - ML_EPS]`` so that
a certain-but-contradicted comparison costs a large finite penalty rather than minus infinity.

The pairwise weight matrix is dense, so ``n_items`` is limited to :data:`ML_MAX_ITEMS`.
"""

from __future__ import annotations

import logging

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.scorers.average_probability import average_probability
from pipeline.methods.scorers.comparison_checks import as_comparisons, check_covered

__all__ = ["ML_EPS", "ML_MAX_ITEMS", "ML_MAX_PASSES", "ml_ranking", "ranking_log_likelihood"]

logger = logging.getLogger(__name__)

#: Probabilities are clipped to [ML_EPS, 1 - ML_EPS] before taking logs.
ML_EPS = 1e-6
#: Largest number of items (the search keeps an N x N matrix).
ML_MAX_ITEMS = 5000
#: Cap on full insertion passes; a :class:`RuntimeError` is raised if the search is still improving.
ML_MAX_PASSES = 1000


def _pairwise_weights(
    n: int, i: NDArray[np.int64], j: NDArray[np.int64], p: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``G[a, b]`` = sum of log P(outcome) over comparisons of a and b if a is ranked above b."""
    q = np.clip(p, ML_EPS, 1.0 - ML_EPS)
    flat = np.concatenate([i * n + j, j * n + i])
    w = np.concatenate([np.log(q), np.log1p(-q)])
    return np.bincount(flat, weights=w, minlength=n * n).reshape(n, n)


def ranking_log_likelihood(n_items: int, i: ArrayLike, j: ArrayLike, p: ArrayLike, order: ArrayLike) -> float:
    """Log-likelihood ``L`` of a ranking (``order[0]`` best) with the same clipping as :func:`ml_ranking`."""
    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    order = np.asarray(order, dtype=np.int64)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    q = np.clip(pp, ML_EPS, 1.0 - ML_EPS)
    above = position[ii] < position[jj]
    return float(np.where(above, np.log(q), np.log1p(-q)).sum())


def ml_ranking(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    p: ArrayLike,
    *,
    initial: ArrayLike | None = None,
    max_passes: int = ML_MAX_PASSES,
) -> NDArray[np.float64]:
    """Approximate maximum-likelihood ranking (EACL appendix B) as scores.

    Parameters
    ----------
    n_items, i, j, p
        The comparisons (:func:`.comparison_checks.as_comparisons`); at most :data:`ML_MAX_ITEMS` items.
    initial : array_like of int, optional
        Starting ranking (best first); default: descending average probability (ties by index).
    max_passes : int, optional
        Cap on full insertion passes.

    Returns
    -------
    ndarray, shape (n_items,)
        ``N - 1 - position`` in the ranking: N - 1 for the top item, 0 for the bottom one.

    Raises
    ------
    ComparisonError
        Malformed input or an item in no comparison.
    ValueError
        ``n_items > ML_MAX_ITEMS``.
    RuntimeError
        Still improving after ``max_passes`` passes.
    """
    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    if n > ML_MAX_ITEMS:
        raise ValueError(f"ml_ranking keeps an N x N matrix; n_items={n} exceeds ML_MAX_ITEMS={ML_MAX_ITEMS}")
    check_covered(n, ii, jj, method="ml_ranking")
    if initial is None:
        order = np.argsort(-average_probability(n, ii, jj, pp), kind="stable")
    else:
        order = np.asarray(initial, dtype=np.int64)
        if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
            raise ValueError("initial must be a permutation of range(n_items)")
        order = order.copy()
    g = _pairwise_weights(n, ii, jj, pp)
    d = g - g.T  # gain of placing a above b rather than below
    for n_pass in range(1, max_passes + 1):
        improved = False
        # visit items in ranking order (not label order), so the result does not depend on the labels
        for item in order.tolist():
            pos = int(np.flatnonzero(order == item)[0])
            rest = np.delete(order, pos)
            # inserting `item` before rest[t] gains sum_{u >= t} d[item, rest[u]] (up to a constant)
            gains = np.zeros(n)
            gains[: n - 1] = np.cumsum(d[item, rest][::-1])[::-1]
            best = int(np.argmax(gains))
            if gains[best] > gains[pos] + 1e-12 * (1.0 + abs(gains[pos])):
                order = np.insert(rest, best, item)
                improved = True
        if not improved:
            logger.debug("ml_ranking: converged after %d passes", n_pass)
            scores = np.empty(n)
            scores[order] = np.arange(n - 1, -1, -1, dtype=np.float64)
            return scores
    raise RuntimeError(f"ml_ranking did not converge in {max_passes} passes (still improving)")
