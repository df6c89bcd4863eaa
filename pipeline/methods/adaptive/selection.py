"""Comparison selection: which pairs of candidates the judge compares.

Strategies (EACL = Liusie, Manakul & Gales, "LLM Comparative Assessment", EACL 2024; PoE = Liusie,
Raina, Fathullah & Gales, "Efficient LLM Comparative Assessment: a Product of Experts Framework", 2024):

========================  =========  ===========================================================
strategy                  kind       rows
========================  =========  ===========================================================
``"all_ordered"``         ordered    all N(N-1) ordered pairs (EACL section 3.4, the full set)
``"random"``              ordered    K ordered pairs drawn uniformly without replacement
``"no_repeat"``           ordered    K pairs, never both (i, j) and (j, i); random orientation
``"symmetric"``           ordered    K/2 unordered pairs, each in both orderings (K even)
``"all_pairs"``           unordered  all N(N-1)/2 unordered pairs
``"balanced_random"``     unordered  K unique pairs, every candidate in at least one (PoE 4.2)
``"greedy_optimal"``      unordered  greedy max det(W^T W) (PoE section 3.6, appendix A.5)
========================  =========  ===========================================================

Rows of an *ordered* selection are (slot A, slot B). Rows of an *unordered* selection have
``i < j``; the pipeline judges both orderings of each. ``k`` always counts rows.
"""

from __future__ import annotations

import logging

import numpy as np
from numpy.typing import NDArray

from pipeline.methods.scorers._common import dense_laplacian, single_threaded_blas

__all__ = [
    "ORDERED_STRATEGIES",
    "STRATEGIES",
    "UNORDERED_STRATEGIES",
    "all_ordered",
    "all_pairs",
    "balanced_random",
    "balanced_random_batch",
    "chain_inverse",
    "greedy_optimal",
    "log_det_information",
    "no_repeat",
    "PairSet",
    "pair_index",
    "pairs_from_index",
    "random_ordered",
    "select_pairs",
    "sherman_morrison_update",
    "symmetric",
]

logger = logging.getLogger(__name__)

# Rows recomputed first at each greedy step (then x4 until the lazy bound check passes).
_GREEDY_FIRST_ROWS = 16

ORDERED_STRATEGIES: frozenset[str] = frozenset({"all_ordered", "random", "no_repeat", "symmetric"})
UNORDERED_STRATEGIES: frozenset[str] = frozenset({"all_pairs", "balanced_random", "greedy_optimal"})
STRATEGIES: frozenset[str] = ORDERED_STRATEGIES | UNORDERED_STRATEGIES


# --------------------------------------------------------------------------------------------------
# Pair indexing
# --------------------------------------------------------------------------------------------------
def _n_unordered(n: int) -> int:
    return n * (n - 1) // 2


def _check_n(n_items: int) -> int:
    if isinstance(n_items, bool) or not isinstance(n_items, int | np.integer) or n_items < 2:
        raise ValueError(f"n_items must be an int >= 2, got {n_items!r}")
    return int(n_items)


def _check_k(k: int | None, lo: int, hi: int, strategy: str, n: int, why: str = "") -> int:
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
        self.n = _check_n(n_items)
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


def _ordered_from_index(index: NDArray[np.int64], n: int) -> NDArray[np.int64]:
    a, r = np.divmod(np.asarray(index, dtype=np.int64), n - 1)
    b = r + (r >= a)
    return np.stack([a, b], axis=1)


# --------------------------------------------------------------------------------------------------
# Full and random designs (EACL section 3.4)
# --------------------------------------------------------------------------------------------------
def all_ordered(n_items: int) -> NDArray[np.int64]:
    """All N(N-1) ordered pairs (i, j), i != j, in row-major order (EACL section 3.4, full set)."""
    n = _check_n(n_items)
    return _ordered_from_index(np.arange(n * (n - 1), dtype=np.int64), n)


def all_pairs(n_items: int) -> NDArray[np.int64]:
    """All N(N-1)/2 unordered pairs (i, j), i < j, in row-major order (index = :func:`pair_index`)."""
    n = _check_n(n_items)
    a, b = np.triu_indices(n, k=1)
    return np.stack([a, b], axis=1).astype(np.int64)


def random_ordered(n_items: int, k: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """K ordered pairs drawn uniformly without replacement from the N(N-1) (EACL "random").

    Both orderings of a pair may be drawn.
    """
    n = _check_n(n_items)
    k = _check_k(k, 0, n * (n - 1), "random", n)
    idx = rng.choice(n * (n - 1), size=k, replace=False)
    return _ordered_from_index(np.asarray(idx, dtype=np.int64), n)


def no_repeat(n_items: int, k: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """K ordered pairs, never both (i, j) and (j, i) (EACL "no-repeat").

    K unordered pairs drawn uniformly without replacement, each in a uniformly random orientation.
    """
    n = _check_n(n_items)
    k = _check_k(k, 0, _n_unordered(n), "no_repeat", n)
    pairs = pairs_from_index(rng.choice(_n_unordered(n), size=k, replace=False), n)
    flip = rng.random(k) < 0.5
    pairs[flip] = pairs[flip][:, ::-1]
    return pairs


def symmetric(n_items: int, k: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """K/2 unordered pairs, each in both orderings: rows 2t and 2t+1 are (a, b) and (b, a) (EACL).

    ``k`` counts rows and must be even.
    """
    n = _check_n(n_items)
    k = _check_k(k, 0, n * (n - 1), "symmetric", n)
    if k % 2:
        raise ValueError(f"k={k} is impossible for strategy 'symmetric' with n={n}: k must be even")
    pairs = pairs_from_index(rng.choice(_n_unordered(n), size=k // 2, replace=False), n)
    out = np.empty((k, 2), dtype=np.int64)
    out[0::2] = pairs
    out[1::2] = pairs[:, ::-1]
    return out


# --------------------------------------------------------------------------------------------------
# Balanced random (PoE section 4.2)
# --------------------------------------------------------------------------------------------------
def _balanced_min_k(n: int) -> int:
    return (n + 1) // 2


def balanced_random(n_items: int, k: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """K unique unordered pairs with every candidate in at least one (PoE section 4.2).

    Algorithm: a uniformly random perfect matching of the candidates covers everyone with
    ``ceil(N/2)`` pairs (for odd N the last candidate is paired with a uniformly random other one); the
    remaining ``K - ceil(N/2)`` pairs are drawn uniformly without replacement from the pairs not yet
    chosen. Rows are returned with ``i < j`` in random order. The comparison graph is not guaranteed
    to be connected.

    Raises
    ------
    ValueError
        If ``k < ceil(N/2)`` (not enough pairs to cover every candidate) or ``k > N(N-1)/2``.
    """
    n = _check_n(n_items)
    m0 = _balanced_min_k(n)
    k = _check_k(k, m0, _n_unordered(n), "balanced_random", n, "every candidate in at least one pair")
    perm = rng.permutation(n)
    matched = perm[: 2 * (n // 2)].reshape(-1, 2)
    if n % 2:
        other = perm[rng.integers(0, n - 1)]
        matched = np.vstack([matched, [perm[-1], other]])
    matched = np.sort(matched, axis=1)
    m_idx = pair_index(matched[:, 0], matched[:, 1], n)
    extra = k - m0
    if extra:
        # a uniform random ordered subset of size extra + m0, drop the matched pairs, keep `extra`
        cand = np.asarray(rng.choice(_n_unordered(n), size=extra + m0, replace=False), dtype=np.int64)
        cand = cand[~np.isin(cand, m_idx)][:extra]
        idx = np.concatenate([m_idx, cand])
    else:
        idx = m_idx
    idx = idx[rng.permutation(idx.shape[0])]
    return pairs_from_index(idx, n)


def balanced_random_batch(n_items: int, k: int, n_draws: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """``n_draws`` independent :func:`balanced_random` draws at once, as pair indices.

    Vectorised for the efficiency curves (small N). Same distribution as :func:`balanced_random`.

    Returns
    -------
    ndarray of int64, shape (n_draws, k)
        Indices into :func:`all_pairs` (see :func:`pair_index`), sorted within each draw.
    """
    n = _check_n(n_items)
    m0 = _balanced_min_k(n)
    m = _n_unordered(n)
    k = _check_k(k, m0, m, "balanced_random", n, "every candidate in at least one pair")
    perm = np.argsort(rng.random((n_draws, n)), axis=1)
    a = perm[:, 0 : 2 * (n // 2) : 2]
    b = perm[:, 1 : 2 * (n // 2) : 2]
    if n % 2:
        other = perm[np.arange(n_draws), rng.integers(0, n - 1, size=n_draws)]
        a = np.concatenate([a, perm[:, -1:]], axis=1)
        b = np.concatenate([b, other[:, None]], axis=1)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    forced = pair_index(lo, hi, n)  # (n_draws, m0)
    keys = rng.random((n_draws, m))
    np.put_along_axis(keys, forced, -1.0, axis=1)  # matched pairs always among the k smallest
    if k == m:
        return np.broadcast_to(np.arange(m, dtype=np.int64), (n_draws, m)).copy()
    idx = np.argpartition(keys, k - 1, axis=1)[:, :k]
    return np.sort(idx, axis=1).astype(np.int64)


# --------------------------------------------------------------------------------------------------
# Greedy optimal (PoE section 3.6, appendix A.5)
# --------------------------------------------------------------------------------------------------
def sherman_morrison_update(A: NDArray[np.float64], a: int, b: int) -> NDArray[np.float64]:
    """Inverse after adding the comparison (a, b): ``(M + u u^T)^-1`` from ``A = M^-1``, ``u = e_a - e_b``.

    Sherman-Morrison (PoE appendix A.5): ``A - (A u)(A u)^T / (1 + u^T A u)``, where
    ``u^T A u = A_aa + A_bb - 2 A_ab``. Returns a new array.
    """
    v = A[:, a] - A[:, b]
    c = 1.0 + v[a] - v[b]
    return A - np.outer(v, v / c)


def chain_inverse(order: NDArray[np.int64]) -> NDArray[np.float64]:
    """``(W^T W + 1 1^T)^-1`` for the chain ``order[0]-order[1]-...-order[-1]``.

    ``W^T W`` (the graph Laplacian) is singular (constant vectors); the rank-one pin ``1 1^T`` makes it
    invertible without changing ``u^T A u`` for any comparison vector ``u`` (``u`` is orthogonal to the
    constants), so the greedy criterion and the determinant ratios are those of the pinned problem.
    """
    order = np.asarray(order, dtype=np.int64)
    n = order.shape[0]
    lap = dense_laplacian(n, order[:-1], order[1:])
    import scipy.linalg

    inv = scipy.linalg.solve(lap + 1.0, np.eye(n), assume_a="pos")
    return (inv + inv.T) / 2.0


def log_det_information(n_items: int, pairs: NDArray[np.int64]) -> float:
    """``log det(W^T W + 1 1^T)`` of a selection: ``log(N^2 x number of spanning trees)``, -inf if disconnected.

    The quantity the greedy-optimal selection maximises (PoE eq. 12 / appendix A.5); up to the constant
    ``2 log N`` it equals ``log det`` of ``W^T W`` with one score pinned.
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    lap = dense_laplacian(n_items, pairs[:, 0], pairs[:, 1])
    sign, logdet = np.linalg.slogdet(lap + 1.0)
    return float(logdet) if sign > 0 else float("-inf")


def greedy_optimal(
    n_items: int,
    k: int,
    rng: np.random.Generator | None = None,
    *,
    return_inverse: bool = False,
) -> NDArray[np.int64] | tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Greedy D-optimal comparison selection (PoE section 3.6, appendix A.5).

    Under the Gaussian PoE the posterior covariance of the scores is ``sigma^2 (W^T W)^-1``; the greedy
    design maximises ``det(W^T W)`` (with one degree of freedom pinned) one comparison at a time. It
    starts from a chain through the candidates (in a random order when ``rng`` is given, else
    ``0-1-...-(N-1)``), which makes the pinned information matrix invertible, then repeatedly adds the
    unchosen pair maximising ``S_ij = A_ii + A_jj - 2 A_ij`` where ``A = (W^T W + 1 1^T)^-1``. By the
    matrix determinant lemma adding ``(i, j)`` multiplies the determinant by ``1 + S_ij``, so each pick
    is the best single addition. ``A`` is updated by Sherman-Morrison (:func:`sherman_morrison_update`,
    here as an in-place BLAS rank-one update); it is the one explicit inverse in this library, because
    it is the object the algorithm maintains.

    The argmax is exact but lazy: ``S_ij`` is the effective resistance between ``i`` and ``j`` in the
    comparison graph, which never increases when a comparison is added (Rayleigh monotonicity), so
    per-item maxima computed at earlier steps are upper bounds. Each step recomputes the rows with the
    largest bounds (16, then 64, 256, ... rows) until the best recomputed value is at least every other
    row's bound. Cost per step: one O(N^2) rank-one update plus O(rows x N). Ties are broken
    deterministically but not in any documented order.

    Parameters
    ----------
    n_items : int
        Number of candidates N >= 2.
    k : int
        Total number of comparisons, ``N - 1 <= k <= N(N-1)/2`` (the chain counts).
    rng : numpy.random.Generator, optional
        Randomises the order of the initial chain.
    return_inverse : bool, optional
        Also return the final ``A``.

    Returns
    -------
    pairs : ndarray of int64, shape (k, 2)
        Rows ``(i, j)`` with ``i < j`` in selection order: the N-1 chain pairs, then the greedy picks.
    A : ndarray, shape (N, N)
        ``(W^T W + 1 1^T)^-1`` of the final selection; only with ``return_inverse=True``.
    """
    n = _check_n(n_items)
    k = _check_k(k, n - 1, _n_unordered(n), "greedy_optimal", n, "it starts from a chain of N-1 pairs")
    with single_threaded_blas():
        return _greedy_optimal(n, k, rng, return_inverse)


def _greedy_optimal(
    n: int, k: int, rng: np.random.Generator | None, return_inverse: bool
) -> NDArray[np.int64] | tuple[NDArray[np.int64], NDArray[np.float64]]:
    from scipy.linalg.blas import dger

    order = rng.permutation(n).astype(np.int64) if rng is not None else np.arange(n, dtype=np.int64)
    chain = np.sort(np.stack([order[:-1], order[1:]], axis=1), axis=1)
    A = np.ascontiguousarray(chain_inverse(order))  # symmetric, so A.T is its Fortran-ordered view
    d = A.diagonal().copy()
    chosen = np.zeros((n, n), dtype=bool)
    np.fill_diagonal(chosen, True)
    chosen[chain[:, 0], chain[:, 1]] = True
    chosen[chain[:, 1], chain[:, 0]] = True
    full = d[:, None] + d[None, :] - 2.0 * A
    full[chosen] = -np.inf
    bound = full.max(axis=1)  # upper bounds on each row's max of S over unchosen pairs
    del full
    out = np.empty((k, 2), dtype=np.int64)
    out[: n - 1] = chain
    all_rows = np.arange(n)
    for step in range(n - 1, k):
        rows = _GREEDY_FIRST_ROWS
        while True:
            if rows < n:
                part = np.argpartition(bound, n - rows - 1)
                sel = part[n - rows :]
                next_bound = bound[part[n - rows - 1]]
            else:
                sel, next_bound = all_rows, -np.inf
            s_rows = d[sel, None] + d[None, :] - 2.0 * A[sel]
            np.copyto(s_rows, -np.inf, where=chosen[sel])
            row_max = s_rows.max(axis=1)
            bound[sel] = row_max
            r = int(row_max.argmax())
            if row_max[r] >= next_bound:
                break
            rows *= 4
        a, b = int(sel[r]), int(s_rows[r].argmax())
        if a > b:
            a, b = b, a
        v = A[a] - A[b]
        c = 1.0 + v[a] - v[b]
        dger(-1.0 / c, v, v, a=A.T, overwrite_a=1)  # A <- A - v v^T / c, in place
        d -= v * v / c
        chosen[a, b] = chosen[b, a] = True
        out[step] = (a, b)
    logger.debug("greedy_optimal: n=%d k=%d", n, k)
    if return_inverse:
        return out, A
    return out


# --------------------------------------------------------------------------------------------------
# Dispatcher
# --------------------------------------------------------------------------------------------------
def select_pairs(
    strategy: str, n_items: int, k: int | None, rng: np.random.Generator | None
) -> NDArray[np.int64]:
    """Choose the comparisons for one context.

    Parameters
    ----------
    strategy : str
        One of :data:`STRATEGIES` (see the module docstring).
    n_items : int
        Number of candidates.
    k : int or None
        Number of rows. ``None`` (or the full count) for ``"all_ordered"`` and ``"all_pairs"``; required
        otherwise.
    rng : numpy.random.Generator or None
        Needed by the random strategies; for ``"greedy_optimal"`` it randomises the initial chain.

    Returns
    -------
    ndarray of int64, shape (K, 2)
        Ordered strategies (:data:`ORDERED_STRATEGIES`): rows are (slot A, slot B). Unordered strategies
        (:data:`UNORDERED_STRATEGIES`): rows have ``i < j``.

    Raises
    ------
    ValueError
        Unknown strategy, missing ``rng``, or impossible ``k`` (the message names k and n).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown selection strategy {strategy!r}; valid: {sorted(STRATEGIES)}")
    n = _check_n(n_items)
    if strategy in ("all_ordered", "all_pairs"):
        total = n * (n - 1) if strategy == "all_ordered" else _n_unordered(n)
        if k is not None and k != total:
            raise ValueError(
                f"k={k} is impossible for strategy {strategy!r} with n={n}: it has exactly {total} rows"
            )
        return all_ordered(n) if strategy == "all_ordered" else all_pairs(n)
    if strategy == "greedy_optimal":
        return greedy_optimal(n, k, rng)  # type: ignore[arg-type]
    if rng is None:
        raise ValueError(f"strategy {strategy!r} needs a numpy.random.Generator, got rng=None")
    funcs = {
        "random": random_ordered,
        "no_repeat": no_repeat,
        "symmetric": symmetric,
        "balanced_random": balanced_random,
    }
    return funcs[strategy](n, k, rng)  # type: ignore[arg-type]
