"""Adaptive selection by neighbours in the current ranking, with exploration (the scheme of GABRIEL's ``rank``
and of nanojudge: pair items near each other in the current ranking, plus some random pairs).

Each proposal takes an item and pairs it, with probability ``explore``, with an item drawn uniformly from the
pool; otherwise with the item ``d`` places above or below it in the ranking by the posterior mean, ``d`` uniform
on ``1..window``. Items are visited in a random order, a fresh one for every pass over the pool; proposals that
repeat a pair, pair an item with itself or were judged before are dropped, until ``k`` pairs are found. Sparse:
O(N) per pass, no N x N matrix. If a pass adds nothing new (the neighbourhoods are exhausted), the rest are drawn
uniformly among the unjudged pairs.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from pipeline.methods.adaptive.pairset import PairSet, pair_index, pairs_from_index

__all__ = ["select_windowed"]


def select_windowed(
    mean: NDArray[np.float64],
    k: int,
    judged: PairSet,
    rng: np.random.Generator,
    *,
    window: int = 8,
    explore: float = 0.1,
) -> NDArray[np.int64]:
    """``k`` unjudged pairs ``(lo, hi)`` by windowed neighbours with exploration (module docstring); fewer only
    when fewer than ``k`` unjudged pairs exist."""
    n = mean.shape[0]
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    if not 0.0 <= explore <= 1.0:
        raise ValueError(f"explore must be in [0, 1], got {explore}")
    total = n * (n - 1) // 2
    k = min(k, total - len(judged))
    if k < 1:
        return np.zeros((0, 2), dtype=np.int64)
    order = np.lexsort((np.arange(n), mean))
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    taken = np.zeros(0, dtype=np.int64)
    for _ in range(64):
        items = rng.permutation(n)
        d = rng.integers(1, window + 1, size=n) * np.where(rng.random(n) < 0.5, -1, 1)
        at = np.clip(position[items] + d, 0, n - 1)
        partner = order[at]
        wild = rng.random(n) < explore
        partner[wild] = rng.integers(0, n, size=int(wild.sum()))
        keep = partner != items
        lo = np.minimum(items[keep], partner[keep])
        hi = np.maximum(items[keep], partner[keep])
        keys = pair_index(lo, hi, n)
        keys = keys[~judged.contains(np.stack([lo, hi], axis=1))]
        # new keys in proposal order, first occurrence only
        _, first = np.unique(keys, return_index=True)
        keys = keys[np.sort(first)]
        keys = keys[~np.isin(keys, taken)]
        if not keys.shape[0]:
            break
        taken = np.concatenate([taken, keys[: k - taken.shape[0]]])
        if taken.shape[0] >= k:
            return pairs_from_index(taken, n)
    # neighbourhoods exhausted: the rest uniformly among the unjudged pairs
    need = k - taken.shape[0]
    avoid = np.union1d(judged.index, taken)
    pool = np.setdiff1d(np.arange(total, dtype=np.int64), avoid) if total <= 2_000_000 else None
    if pool is not None:
        extra = rng.choice(pool, size=need, replace=False)
    else:  # rejection sampling without a list of every pair
        extra = np.zeros(0, dtype=np.int64)
        while extra.shape[0] < need:
            draw = np.unique(rng.integers(0, total, size=2 * need))
            draw = draw[~np.isin(draw, avoid) & ~np.isin(draw, extra)]
            extra = np.concatenate([extra, draw[: need - extra.shape[0]]])
    return pairs_from_index(np.concatenate([taken, extra]), n)
