"""Greedy D-optimal comparison selection (PoE = Liusie, Raina, Fathullah & Gales, "Efficient LLM Comparative
Assessment: a Product of Experts Framework", 2024, section 3.6 and appendix A.5): the ``"greedy_optimal"`` strategy of
:func:`pipeline.methods.adaptive.selection.select_pairs`."""

from __future__ import annotations

import logging

import numpy as np
from numpy.typing import NDArray

from pipeline.methods.adaptive.pairset import check_k, check_n, n_unordered
from pipeline.methods.scorers._common import dense_laplacian, single_threaded_blas

logger = logging.getLogger(__name__)

# Rows recomputed first at each greedy step (then x4 until the lazy bound check passes).
_GREEDY_FIRST_ROWS = 16


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
    n = check_n(n_items)
    k = check_k(k, n - 1, n_unordered(n), "greedy_optimal", n, "it starts from a chain of N-1 pairs")
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
