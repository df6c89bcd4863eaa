"""Adaptive selection by the probability that a pair is reordered (Fathullah & Gales, UAI 2025, arXiv 2505.15240).

Under the PoE-Gaussian posterior (:mod:`pipeline.methods.scorers.posterior`) the difference of two scores is Gaussian,
``s_i - s_j ~ N(m_i - m_j, v_ij)``, so the probability that the true order of ``i`` and ``j`` is not the order of
their current means is

    ``P(reorder) = Phi(-|m_i - m_j| / sqrt(v_ij))``.

A judgement is worth most where this is largest: the pair is close in the current ranking and uncertain. Unlike
greedy-optimal (a function of which pairs were judged only) it looks at what the judge said.

Sparse at any N: only pairs within ``window`` places of each other in the current ranking are candidates
(a pair ``w`` places apart has a reorder probability that falls off like ``Phi(-w gap / sd)``), ``N x window``
of them; no N x N matrix. A round takes ``k`` pairs at once (no refit between them), so a diversity rule keeps
the batch from piling onto one uncertain region: candidates are taken in decreasing probability, each only while
both its items are in fewer than ``per_item`` of the pairs taken so far (default ``ceil(2k / N)``: every item in
about as many of the round's pairs as the budget allows). Candidates turned down do not count against their
items, so items whose candidates tie (a prior-only round) are not starved: ten tied items and ``k = 5`` give a
perfect matching. If a pass leaves fewer than ``k``, ``per_item`` is raised by one and the candidates not taken
are passed again; if the window has fewer than ``k`` unjudged candidates it is doubled.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.adaptive.pairset import PairSet
from pipeline.methods.scorers.posterior import Posterior

__all__ = ["neighbour_pairs", "reorder_probability", "select_reorder", "take_diverse"]


def reorder_probability(post: Posterior, i: ArrayLike, j: ArrayLike) -> NDArray[np.float64]:
    """``Phi(-|m_i - m_j| / sd(s_i - s_j))`` for each pair (module docstring)."""
    from scipy.special import ndtr

    ii = np.asarray(i, dtype=np.int64)
    jj = np.asarray(j, dtype=np.int64)
    gap = np.abs(post.mean[ii] - post.mean[jj])
    return ndtr(-gap / post.pair_sd(ii, jj))


def neighbour_pairs(mean: NDArray[np.float64], window: int) -> NDArray[np.int64]:
    """Pairs of items at most ``window`` places apart in the ranking by ``mean`` (ties by item index), as rows
    ``(lo, hi)`` with ``lo < hi``: ``sum_{d=1..window} (N - d)`` rows."""
    n = mean.shape[0]
    order = np.lexsort((np.arange(n), mean))
    rows = []
    for d in range(1, min(window, n - 1) + 1):
        a, b = order[:-d], order[d:]
        rows.append(np.stack([np.minimum(a, b), np.maximum(a, b)], axis=1))
    return np.concatenate(rows) if rows else np.zeros((0, 2), dtype=np.int64)


def take_diverse(pairs: NDArray[np.int64], k: int, n: int, per_item: int | None = None) -> NDArray[np.int64]:
    """The first ``k`` rows of ``pairs`` (already in order of preference) under the diversity rule of the module
    docstring: rows are taken in order, each only while both its items are in fewer than ``per_item`` rows taken
    so far; if a pass ends short of ``k``, the cap is raised by one and the rows not taken are passed again.
    The rows come back in their order in ``pairs``."""
    m = pairs.shape[0]
    if k >= m:
        return pairs
    cap = per_item if per_item is not None else max(1, math.ceil(2 * k / n))
    count = [0] * n
    taken = np.zeros(m, dtype=bool)
    a_col = pairs[:, 0].tolist()
    b_col = pairs[:, 1].tolist()
    got = 0
    while got < k:
        for t in np.flatnonzero(~taken).tolist():
            a, b = a_col[t], b_col[t]
            if count[a] < cap and count[b] < cap:
                count[a] += 1
                count[b] += 1
                taken[t] = True
                got += 1
                if got == k:
                    break
        cap += 1
    return pairs[taken]


def select_reorder(
    post: Posterior,
    k: int,
    judged: PairSet,
    *,
    window: int = 8,
    per_item: int | None = None,
) -> NDArray[np.int64]:
    """The ``k`` unjudged pairs of largest reorder probability under the diversity rule (module docstring), as
    rows ``(lo, hi)``; fewer only when fewer than ``k`` unjudged pairs exist."""
    n = post.n
    if k < 1:
        return np.zeros((0, 2), dtype=np.int64)
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    w = window
    while True:
        cand = neighbour_pairs(post.mean, w)
        cand = cand[~judged.contains(cand)]
        if cand.shape[0] >= k or w >= n - 1:
            break
        w = min(2 * w, n - 1)
    prob = reorder_probability(post, cand[:, 0], cand[:, 1])
    keys = judged.keys(cand)
    order = np.lexsort((keys, -prob))  # most probable first, ties by pair index
    return take_diverse(cand[order], k, n, per_item)
