"""Small helpers shared by the scorers (private)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

Pin = Literal["mean"] | int


#: A probability this close to the threshold is a tie: a debiased ``(p_ij + 1 - p_ji) / 2`` that is 1/2 in exact
#: arithmetic comes out a few ulps either side of it, depending on which candidate the pair calls i.
TIE_ATOL = 1e-12


def hard_outcomes(p: NDArray[np.float64], threshold: float = 0.5) -> NDArray[np.float64]:
    """Hard decisions ``1[p > threshold]``, with ``0.5`` for a tie ``p == threshold`` (EACL eq. 6), a tie being
    within :data:`TIE_ATOL` of the threshold.

    With the EACL debiasing threshold ``tau = 1 / (1 + alpha)`` (eq. 10) this is the decision on the
    reweighted probability.
    """
    pp = np.asarray(p, dtype=np.float64)
    out = (pp > threshold).astype(np.float64)
    out[np.abs(pp - threshold) <= TIE_ATOL] = 0.5
    return out


def bt_log_likelihood(d: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    """The Bradley-Terry log-likelihood of outcomes ``y`` (hard or soft) at score differences ``d``:
    ``sum_k y_k log sigma(d_k) + (1 - y_k) log sigma(-d_k) = y . d - sum_k softplus(d_k)``."""
    return float(np.dot(y, d) - np.logaddexp(0.0, d).sum())


def reference_prior(s: NDArray[np.float64]) -> float:
    """One virtual win and one virtual loss of every item against a reference item of score 0 (a standard logistic
    density on each score): ``sum_i [log sigma(s_i) + log sigma(-s_i)] = sum_i [s_i - 2 softplus(s_i)]``."""
    return float((s - 2.0 * np.logaddexp(0.0, s)).sum())


def reference_prior_gradient(s: NDArray[np.float64]) -> NDArray[np.float64]:
    """The gradient of :func:`reference_prior`: ``1 - 2 sigma(s)``."""
    from scipy.special import expit

    return 1.0 - 2.0 * expit(s)


def mean_outcome(
    n: int, ii: NDArray[np.int64], jj: NDArray[np.int64], y: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Each item's mean outcome over its comparisons: ``y[k]`` for ``i[k]``, ``1 - y[k]`` for ``j[k]`` (a hard
    outcome's mean is the win-ratio, a probability's the average probability); every item must be in one."""
    won = np.bincount(ii, weights=y, minlength=n) + np.bincount(jj, weights=1.0 - y, minlength=n)
    return won / (np.bincount(ii, minlength=n) + np.bincount(jj, minlength=n))


def apply_pin(scores: NDArray[np.float64], pin: Pin) -> NDArray[np.float64]:
    """Shift ``scores`` so that their mean is 0 (``pin="mean"``) or ``scores[pin] == 0``.

    Valid for every scorer whose solution set is invariant to adding a constant (all PoE scorers and
    Bradley-Terry on a connected graph), where pinning amounts to choosing that constant.
    """
    if isinstance(pin, str):
        if pin != "mean":
            raise ValueError(f"pin must be 'mean' or an item index, got {pin!r}")
        return scores - scores.mean()
    if isinstance(pin, bool) or not isinstance(pin, int | np.integer):
        raise ValueError(f"pin must be 'mean' or an item index, got {pin!r}")
    if not 0 <= pin < scores.shape[0]:
        raise ValueError(f"pin={pin} is out of range for n_items={scores.shape[0]}")
    return scores - scores[int(pin)]


def check_pin(pin: Pin, n_items: int) -> None:
    """Validate ``pin`` without computing anything."""
    apply_pin(np.zeros(max(n_items, 1)), pin)


def incidence_csr(n_items: int, i: NDArray[np.int64], j: NDArray[np.int64]) -> csr_matrix:
    """The K x N comparison (incidence) matrix ``W`` with +1 at ``i[k]`` and -1 at ``j[k]`` in row k.

    Built directly in CSR form (two entries per row), without a COO round trip.
    """
    from scipy.sparse import csr_matrix

    k = i.shape[0]
    indices = np.empty(2 * k, dtype=np.int64)
    indices[0::2] = i
    indices[1::2] = j
    data = np.empty(2 * k, dtype=np.float64)
    data[0::2] = 1.0
    data[1::2] = -1.0
    indptr = np.arange(0, 2 * k + 1, 2, dtype=np.int64)
    return csr_matrix((data, indices, indptr), shape=(k, n_items))


def dense_laplacian(
    n_items: int, i: NDArray[np.int64], j: NDArray[np.int64], weights: NDArray[np.float64] | None = None
) -> NDArray[np.float64]:
    """The N x N graph Laplacian ``W^T W`` as a dense array: degrees on the diagonal, minus the number of
    comparisons between a and b at (a, b) and (b, a). For small N (greedy selection, tiny problems).

    With ``weights`` (one per comparison): ``W^T C W``, ``C = diag(weights)``, the weighted Laplacian."""
    n = int(n_items)
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    c = np.ones(i.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    flat = np.concatenate([i * n + i, j * n + j, i * n + j, j * n + i])
    w = np.concatenate([c, c, -c, -c])
    return np.bincount(flat, weights=w, minlength=n * n).reshape(n, n).astype(np.float64, copy=False)


def adjacency_csr(
    n_items: int, i: NDArray[np.int64], j: NDArray[np.int64], weights: NDArray[np.float64] | None = None
) -> csr_matrix:
    """Symmetric N x N adjacency of the comparison graph in CSR form; entry (a, b) counts the comparisons
    between a and b (both orderings), or sums their ``weights``. 32-bit indices when they fit, which makes
    mat-vecs much faster.

    ``W^T W = diag(degrees) - adjacency`` is the graph Laplacian.
    """
    from scipy.sparse import coo_matrix

    idx_type = np.int32 if n_items < 2**31 - 1 else np.int64
    rows = np.concatenate([i, j]).astype(idx_type)
    cols = np.concatenate([j, i]).astype(idx_type)
    c = np.ones(i.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    return coo_matrix((np.concatenate([c, c]), (rows, cols)), shape=(n_items, n_items)).tocsr()


def scatter_difference(
    n_items: int, i: NDArray[np.int64], j: NDArray[np.int64], v: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``W^T v``: adds ``v[k]`` to item ``i[k]`` and subtracts it from item ``j[k]``."""
    return np.bincount(i, weights=v, minlength=n_items) - np.bincount(j, weights=v, minlength=n_items)


def degrees(
    n_items: int, i: NDArray[np.int64], j: NDArray[np.int64], weights: NDArray[np.float64] | None = None
) -> NDArray[np.float64]:
    """Number of comparisons each item is in (the diagonal of ``W^T W``), or the sum of their ``weights``."""
    return (
        np.bincount(i, weights=weights, minlength=n_items)
        + np.bincount(j, weights=weights, minlength=n_items)
    ).astype(np.float64)


def pcg(
    matvec: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    b: NDArray[np.float64],
    dinv: NDArray[np.float64],
    *,
    rtol: float,
    maxiter: int,
) -> tuple[NDArray[np.float64], int]:
    """Jacobi-preconditioned conjugate gradients for a symmetric positive definite operator.

    The textbook iteration (Hestenes & Stiefel 1952; Saad, *Iterative Methods for Sparse Linear
    Systems*, alg. 9.1) with preconditioner ``diag(dinv)``, stopping when ``||b - A x|| <= rtol ||b||``.
    Same algorithm as ``scipy.sparse.linalg.cg`` without its per-iteration temporaries and BLAS calls,
    which cost more than the sparse mat-vec at N = 100,000 on a 2-core machine (about 3x overall).

    Returns
    -------
    x : ndarray
    iterations : int
        Iterations used, or -1 if ``maxiter`` was reached without convergence.
    """
    x = np.zeros_like(b)
    bnorm = math.sqrt(_dot(b, b))
    if bnorm == 0.0:
        return x, 0
    r = b.copy()
    z = r * dinv
    d = z.copy()
    tmp = np.empty_like(b)
    rz = _dot(r, z)
    for it in range(1, maxiter + 1):
        q = matvec(d)
        step = rz / _dot(d, q)
        np.multiply(d, step, out=tmp)
        x += tmp
        np.multiply(q, step, out=tmp)
        r -= tmp
        if math.sqrt(_dot(r, r)) <= rtol * bnorm:
            return x, it
        np.multiply(r, dinv, out=z)
        rz_new = _dot(r, z)
        d *= rz_new / rz
        d += z
        rz = rz_new
    return x, -1


def _dot(a: NDArray[np.float64], b: NDArray[np.float64]) -> float:
    # einsum's own loop: BLAS ddot wakes its thread pool on every call, which costs milliseconds per
    # call on a loaded 2-core machine.
    return float(np.einsum("i,i->", a, b))


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Limit BLAS to one thread inside the block, if ``threadpoolctl`` is installed (else no effect).

    For many small BLAS calls (stacked 16 x 16 solves, rank-one updates of a 658 x 658 matrix) threads
    bring nothing on 2 cores, and on a busy machine each call can wait milliseconds for its worker threads:
    the efficiency curves ran 6x slower with OpenBLAS's default threads while another process kept both
    cores busy.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: the maths is the same without it
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
