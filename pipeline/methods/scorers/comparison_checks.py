"""Validation of comparison tables, shared by every scorer.

Data convention (as in ``choix``): ``n_items`` items labelled ``0 .. n_items - 1`` and ``K`` comparisons
given as three arrays of length ``K``: ``i`` and ``j`` (int64 item indices) and ``p`` (float64), where
``p[k]`` is the probability that item ``i[k]`` beats item ``j[k]``. When the judge is position-aware,
``i[k]`` was in slot A.

Duplicates
----------
A *duplicate* is the same ordered pair ``(i, j)`` appearing in more than one row. The two orderings
``(i, j)`` and ``(j, i)`` of one pair are not duplicates (the symmetric design judges both). By default
duplicates are allowed and every row is one independent comparison: the PoE scorers treat it as one more
expert (a duplicated row counts twice in the product, i.e. gets double weight), win-ratio and average
probability count it twice, Bradley-Terry counts it as two games. Pass ``allow_duplicates=False`` to
reject them instead.

Graph requirements
------------------
Win-ratio, average probability and the ML ranking need every item in at least one comparison
(:func:`check_covered`). PoE-Gaussian, Bradley-Terry, PoE-BT and PoE-Laplace identify scores only up to
one additive constant per connected component of the comparison graph, so they require a connected graph
(:func:`check_connected`) and raise :class:`~pipeline.methods.scorers.comparison_checks.ComparisonError` otherwise, naming
an isolated item or the components.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike, NDArray

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

__all__ = [
    "ComparisonError",
    "as_comparisons",
    "check_comparisons",
    "check_connected",
    "check_covered",
    "connected_components",
]

# How many members of a component to list in an error message.
_MAX_LISTED = 8


class ComparisonError(ValueError):
    """A comparison table that a method cannot use.

    Raised for malformed input (shapes, dtypes, indices out of range, an item compared with itself,
    probabilities that are NaN or outside [0, 1], forbidden duplicates) and for comparison graphs on
    which a score is not identified (an item in no comparison, a disconnected graph). The message names
    the offending comparison index, the items involved and the field, e.g.
    ``"comparison 17 (i=3, j=5): p=nan is not a probability in [0, 1]"``.

    ``items`` holds the indices of the items at fault where there are some (an item in no comparison, the
    smallest component of a disconnected graph), so a caller can name them by their own ids.
    """

    def __init__(self, message: str, items: tuple[int, ...] = ()):
        super().__init__(message)
        self.items = tuple(int(k) for k in items)


def _describe(k: int, i: NDArray[np.int64], j: NDArray[np.int64]) -> str:
    return f"comparison {k} (i={int(i[k])}, j={int(j[k])})"


def _as_index_array(name: str, x: ArrayLike) -> NDArray[np.int64]:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ComparisonError(f"{name} must be a 1-D array of item indices, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ComparisonError(f"{name} must be an integer array of item indices, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def _as_prob_array(x: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(x)
    if arr.ndim != 1:
        raise ComparisonError(f"p must be a 1-D array of probabilities, got shape {arr.shape}")
    if arr.size and not (np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)):
        if arr.dtype != np.bool_:
            raise ComparisonError(f"p must be a real (float) array, got dtype {arr.dtype}")
    return arr.astype(np.float64, copy=False)


def _check_n_items(n_items: int) -> int:
    if isinstance(n_items, bool) or not isinstance(n_items, int | np.integer):
        raise ComparisonError(f"n_items must be an int, got {type(n_items).__name__}")
    if n_items < 1:
        raise ComparisonError(f"n_items must be at least 1, got {n_items}")
    return int(n_items)


def as_comparisons(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    p: ArrayLike,
    *,
    allow_duplicates: bool = True,
) -> tuple[int, NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Validate a comparison table and return it as ``(n_items, i, j, p)`` int64/float64 arrays.

    Parameters
    ----------
    n_items : int
        Number of items.
    i, j : array_like of int, shape (K,)
        Items compared; ``i[k]`` is in slot A when the comparison is position-aware.
    p : array_like of float, shape (K,)
        ``p[k]`` is the probability that ``i[k]`` beats ``j[k]``.
    allow_duplicates : bool, optional
        If False, a repeated ordered pair raises (see the module docstring).

    Returns
    -------
    n_items, i, j, p
        ``int`` and contiguous ``int64``, ``int64``, ``float64`` arrays (no copy when already so).

    Raises
    ------
    ComparisonError
        Naming the first offending comparison and field.
    """
    n = _check_n_items(n_items)
    ii = _as_index_array("i", i)
    jj = _as_index_array("j", j)
    pp = _as_prob_array(p)
    if not (ii.shape == jj.shape == pp.shape):
        raise ComparisonError(
            f"i, j and p must have the same length, got {ii.shape[0]}, {jj.shape[0]} and {pp.shape[0]}"
        )
    if ii.size == 0:
        return n, ii, jj, pp
    for name, arr in (("i", ii), ("j", jj)):
        bad = np.flatnonzero((arr < 0) | (arr >= n))
        if bad.size:
            k = int(bad[0])
            raise ComparisonError(
                f"{_describe(k, ii, jj)}: {name}={int(arr[k])} is out of range for n_items={n}"
            )
    same = np.flatnonzero(ii == jj)
    if same.size:
        k = int(same[0])
        raise ComparisonError(f"{_describe(k, ii, jj)}: an item cannot be compared with itself (i == j)")
    bad = np.flatnonzero(~((pp >= 0.0) & (pp <= 1.0)))  # also catches NaN
    if bad.size:
        k = int(bad[0])
        raise ComparisonError(f"{_describe(k, ii, jj)}: p={float(pp[k])!r} is not a probability in [0, 1]")
    if not allow_duplicates:
        key = ii * np.int64(n) + jj
        order = np.argsort(key, kind="stable")
        sk = key[order]
        rep = np.flatnonzero(sk[1:] == sk[:-1])
        if rep.size:
            # the repeated row with the smallest index among all repeats
            later = order[rep + 1]
            pos = int(np.argmin(later))
            k_later = int(later[pos])
            # the stable sort puts the first occurrence of the key at the start of its run
            k_first = int(order[np.searchsorted(sk, sk[rep[pos]])])
            raise ComparisonError(
                f"{_describe(k_later, ii, jj)}: duplicates comparison {k_first} "
                "(the same ordered pair appears twice; allow_duplicates=False)"
            )
    return n, ii, jj, pp


def check_comparisons(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    p: ArrayLike,
    *,
    allow_duplicates: bool = True,
) -> None:
    """Check a comparison table: shapes, dtypes, index range, ``i != j``, ``p`` finite in [0, 1].

    See :func:`as_comparisons`, which also returns the converted arrays.

    Raises
    ------
    ComparisonError
        E.g. ``"comparison 17 (i=3, j=5): p=nan is not a probability in [0, 1]"``.
    """
    as_comparisons(n_items, i, j, p, allow_duplicates=allow_duplicates)


def check_covered(n_items: int, i: NDArray[np.int64], j: NDArray[np.int64], *, method: str = "") -> None:
    """Raise :class:`ComparisonError` if some item is in no comparison.

    Win-ratio (EACL eq. 6) and average probability divide by the number of comparisons an item is in.
    """
    count = np.bincount(i, minlength=n_items) + np.bincount(j, minlength=n_items)
    missing = np.flatnonzero(count == 0)
    if missing.size:
        who = f"{method} needs" if method else "this method needs"
        raise ComparisonError(
            f"item {int(missing[0])} is in no comparison ({missing.size} such item(s)); "
            f"{who} every item in at least one comparison",
            items=tuple(missing[:_MAX_LISTED]),
        )


def connected_components(
    n_items: int, i: NDArray[np.int64], j: NDArray[np.int64], *, adjacency: csr_matrix | None = None
) -> tuple[int, NDArray[np.int32]]:
    """Connected components of the (undirected) comparison graph.

    Parameters
    ----------
    adjacency : scipy.sparse.csr_matrix, optional
        The symmetric adjacency (``_common.adjacency_csr``) if already built.

    Returns
    -------
    n_components : int
    labels : ndarray of int32, shape (n_items,)
    """
    from scipy.sparse.csgraph import connected_components as _cc

    from pipeline.methods.scorers._common import adjacency_csr

    graph = adjacency if adjacency is not None else adjacency_csr(n_items, i, j)
    # The adjacency is symmetric, so its strongly connected components are the connected components;
    # the 'strong' traversal avoids the transpose that the undirected one builds.
    n_comp, labels = _cc(graph, directed=True, connection="strong")
    return int(n_comp), labels


def check_connected(
    n_items: int,
    i: NDArray[np.int64],
    j: NDArray[np.int64],
    *,
    method: str = "",
    adjacency: csr_matrix | None = None,
) -> None:
    """Raise :class:`ComparisonError` if the comparison graph is not connected.

    The PoE scorers and Bradley-Terry determine scores from score *differences* along comparisons, so
    on a graph with several components the relative offset of the components is not identified.
    The message names an isolated item if there is one, else lists the components (smallest first).
    """
    if n_items <= 1:
        return
    count = np.bincount(i, minlength=n_items) + np.bincount(j, minlength=n_items)
    missing = np.flatnonzero(count == 0)
    who = f" ({method} needs a connected comparison graph)" if method else ""
    if missing.size:
        raise ComparisonError(
            f"item {int(missing[0])} is in no comparison: the comparison graph is disconnected "
            f"({missing.size} isolated item(s)){who}",
            items=tuple(missing[:_MAX_LISTED]),
        )
    n_comp, labels = connected_components(n_items, i, j, adjacency=adjacency)
    if n_comp > 1:
        sizes = np.bincount(labels)
        parts = []
        shown_components = [np.flatnonzero(labels == c) for c in np.argsort(sizes, kind="stable")[:3]]
        for members in shown_components:
            shown = ", ".join(str(int(m)) for m in members[:_MAX_LISTED])
            more = ", ..." if members.size > _MAX_LISTED else ""
            parts.append(f"{{{shown}{more}}} ({members.size} items)")
        raise ComparisonError(
            f"the comparison graph is disconnected: {n_comp} components, smallest: " + "; ".join(parts) + who,
            items=tuple(shown_components[0][:_MAX_LISTED]),
        )


def check_maximum_exists(
    n_items: int,
    i: NDArray[np.int64],
    j: NDArray[np.int64],
    outcome: NDArray[np.float64],
    *,
    method: str,
    remedy: str,
) -> None:
    """Raise :class:`ComparisonError` unless a Bradley-Terry-type likelihood has a finite maximum.

    ``outcome[k]`` in [0, 1] is how much ``i[k]`` won comparison k (a hard decision, a tie 0.5, or a soft
    probability). Ford's condition (1957): the maximum exists iff the directed graph "loser -> winner" is
    strongly connected, where comparison k gives an edge j -> i when ``outcome > 0`` and i -> j when
    ``outcome < 1``. The message names an item that never wins or never loses when there is one.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components as _cc

    i_won, j_won = outcome > 0.0, outcome < 1.0
    src = np.concatenate([j[i_won], i[j_won]])  # loser -> winner
    dst = np.concatenate([i[i_won], j[j_won]])
    graph = coo_matrix((np.ones(src.shape[0]), (src, dst)), shape=(n_items, n_items)).tocsr()
    n_comp, _ = _cc(graph, directed=True, connection="strong")
    if n_comp <= 1:
        return
    wins = np.bincount(i, weights=outcome, minlength=n_items) + np.bincount(
        j, weights=1.0 - outcome, minlength=n_items
    )
    games = np.bincount(i, minlength=n_items) + np.bincount(j, minlength=n_items)
    never_won = np.flatnonzero(wins == 0)
    never_lost = np.flatnonzero(wins == games)
    if never_won.size:
        detail = f"item {int(never_won[0])} never wins"
    elif never_lost.size:
        detail = f"item {int(never_lost[0])} never loses"
    else:
        detail = f"the items split into {n_comp} groups that do not beat each other both ways"
    raise ComparisonError(
        f"the {method} maximum does not exist: {detail} (the win graph is not strongly connected); {remedy}"
    )
