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

import numpy as np
from numpy.typing import NDArray

from pipeline.methods.adaptive.greedy import greedy_optimal
from pipeline.methods.adaptive.pairset import check_k, check_n, n_unordered, pair_index, pairs_from_index

__all__ = [
    "ORDERED_STRATEGIES",
    "STRATEGIES",
    "UNORDERED_STRATEGIES",
    "all_ordered",
    "all_pairs",
    "balanced_random",
    "balanced_random_batch",
    "no_repeat",
    "random_ordered",
    "select_pairs",
    "symmetric",
]


ORDERED_STRATEGIES: frozenset[str] = frozenset({"all_ordered", "random", "no_repeat", "symmetric"})
UNORDERED_STRATEGIES: frozenset[str] = frozenset({"all_pairs", "balanced_random", "greedy_optimal"})
STRATEGIES: frozenset[str] = ORDERED_STRATEGIES | UNORDERED_STRATEGIES


def _ordered_from_index(index: NDArray[np.int64], n: int) -> NDArray[np.int64]:
    a, r = np.divmod(np.asarray(index, dtype=np.int64), n - 1)
    b = r + (r >= a)
    return np.stack([a, b], axis=1)


# --------------------------------------------------------------------------------------------------
# Full and random designs (EACL section 3.4)
# --------------------------------------------------------------------------------------------------
def all_ordered(n_items: int) -> NDArray[np.int64]:
    """All N(N-1) ordered pairs (i, j), i != j, in row-major order (EACL section 3.4, full set)."""
    n = check_n(n_items)
    return _ordered_from_index(np.arange(n * (n - 1), dtype=np.int64), n)


def all_pairs(n_items: int) -> NDArray[np.int64]:
    """All N(N-1)/2 unordered pairs (i, j), i < j, in row-major order (index = :func:`pair_index`)."""
    n = check_n(n_items)
    a, b = np.triu_indices(n, k=1)
    return np.stack([a, b], axis=1).astype(np.int64)


def random_ordered(n_items: int, k: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """K ordered pairs drawn uniformly without replacement from the N(N-1) (EACL "random").

    Both orderings of a pair may be drawn.
    """
    n = check_n(n_items)
    k = check_k(k, 0, n * (n - 1), "random", n)
    idx = rng.choice(n * (n - 1), size=k, replace=False)
    return _ordered_from_index(np.asarray(idx, dtype=np.int64), n)


def no_repeat(n_items: int, k: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """K ordered pairs, never both (i, j) and (j, i) (EACL "no-repeat").

    K unordered pairs drawn uniformly without replacement, each in a uniformly random orientation.
    """
    n = check_n(n_items)
    k = check_k(k, 0, n_unordered(n), "no_repeat", n)
    pairs = pairs_from_index(rng.choice(n_unordered(n), size=k, replace=False), n)
    flip = rng.random(k) < 0.5
    pairs[flip] = pairs[flip][:, ::-1]
    return pairs


def symmetric(n_items: int, k: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """K/2 unordered pairs, each in both orderings: rows 2t and 2t+1 are (a, b) and (b, a) (EACL).

    ``k`` counts rows and must be even.
    """
    n = check_n(n_items)
    k = check_k(k, 0, n * (n - 1), "symmetric", n)
    if k % 2:
        raise ValueError(f"k={k} is impossible for strategy 'symmetric' with n={n}: k must be even")
    pairs = pairs_from_index(rng.choice(n_unordered(n), size=k // 2, replace=False), n)
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
    n = check_n(n_items)
    m0 = _balanced_min_k(n)
    k = check_k(k, m0, n_unordered(n), "balanced_random", n, "every candidate in at least one pair")
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
        cand = np.asarray(rng.choice(n_unordered(n), size=extra + m0, replace=False), dtype=np.int64)
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
    n = check_n(n_items)
    m0 = _balanced_min_k(n)
    m = n_unordered(n)
    k = check_k(k, m0, m, "balanced_random", n, "every candidate in at least one pair")
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
    n = check_n(n_items)
    if strategy in ("all_ordered", "all_pairs"):
        total = n * (n - 1) if strategy == "all_ordered" else n_unordered(n)
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
