"""Unordered pairs of a context's candidates by index: a pair's row-major index among the N(N-1)/2 pairs and back, the
set of pairs judged so far (:class:`PairSet`), and the checks every selection makes of N and K."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def n_unordered(n: int) -> int:
    return n * (n - 1) // 2


def check_n(n_items: int) -> int:
    if isinstance(n_items, bool) or not isinstance(n_items, int | np.integer) or n_items < 2:
        raise ValueError(f"n_items must be an int >= 2, got {n_items!r}")
    return int(n_items)


def check_k(k: int | None, lo: int, hi: int, strategy: str, n: int, why: str = "") -> int:
    if k is None:
        raise ValueError(f"strategy {strategy!r} needs k (the number of comparisons), got None")
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise ValueError(f"k must be an int, got {k!r}")
    if not lo <= k <= hi:
        extra = f" ({why})" if why else ""
        raise ValueError(
            f"k={k} is impossible for strategy {strategy!r} with n={n}: need {lo} <= k <= {hi}{extra}"
        )
    return int(k)


def pair_index(a: NDArray[np.int64], b: NDArray[np.int64], n_items: int) -> NDArray[np.int64]:
    """Row-major index of the unordered pair ``(a, b)``, ``a < b``, among the N(N-1)/2 pairs."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    return a * n_items - a * (a + 1) // 2 + (b - a - 1)


def pairs_from_index(index: NDArray[np.int64], n_items: int) -> NDArray[np.int64]:
    """Inverse of :func:`pair_index`: the (len(index), 2) array of pairs ``(a, b)``, ``a < b``."""
    m = np.asarray(index, dtype=np.int64)
    n = int(n_items)
    # row a is the largest a with offset(a) = a*n - a(a+1)/2 <= m; start from the real root
    disc = (2.0 * n - 1.0) ** 2 - 8.0 * m.astype(np.float64)
    a = np.floor(((2.0 * n - 1.0) - np.sqrt(np.maximum(disc, 0.0))) / 2.0).astype(np.int64)
    a = np.clip(a, 0, n - 2)

    def offset(r: NDArray[np.int64]) -> NDArray[np.int64]:
        return r * n - r * (r + 1) // 2

    for _ in range(3):  # correct floating-point rounding of the root (at most one step either way)
        a = np.where(offset(a) > m, a - 1, a)
        a = np.where((a < n - 2) & (offset(a + 1) <= m), a + 1, a)
    b = m - offset(a) + a + 1
    return np.stack([a, b], axis=1)


class PairSet:
    """The unordered pairs judged so far, as sorted :func:`pair_index` values: O(K) memory at any N (no N x N
    matrix), membership of many pairs at once by binary search."""

    def __init__(self, n_items: int, pairs: NDArray[np.int64] | None = None):
        self.n = check_n(n_items)
        self.index = np.zeros(0, dtype=np.int64)
        if pairs is not None:
            self.add(pairs)

    def __len__(self) -> int:
        return int(self.index.shape[0])

    def keys(self, pairs: NDArray[np.int64]) -> NDArray[np.int64]:
        """The pair index of each row (either orientation)."""
        arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        lo, hi = np.minimum(arr[:, 0], arr[:, 1]), np.maximum(arr[:, 0], arr[:, 1])
        return pair_index(lo, hi, self.n)

    def contains(self, pairs: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Whether each row's unordered pair is in the set."""
        keys = self.keys(pairs)
        if not len(self):
            return np.zeros(keys.shape[0], dtype=bool)
        at = np.searchsorted(self.index, keys)
        at = np.minimum(at, self.index.shape[0] - 1)
        return self.index[at] == keys

    def add(self, pairs: NDArray[np.int64]) -> None:
        self.index = np.union1d(self.index, self.keys(pairs))

    def union(self, pairs: NDArray[np.int64]) -> PairSet:
        """A new set: these pairs and ``pairs`` (this one unchanged)."""
        out = PairSet(self.n)
        out.index = np.union1d(self.index, self.keys(pairs))
        return out
