"""Evaluation metrics: correlations per context and pooled, Kendall tau-b, pairwise accuracy.

EACL = Liusie, Manakul & Gales, "LLM Comparative Assessment", EACL 2024 (section 5: Spearman and
Pearson correlations computed per context and averaged; section 5.4: pairwise accuracy).

Conventions
-----------
* A context whose human scores are all equal (or that has fewer than 2 candidates) has no defined
  correlation; it is *skipped* and counted in ``n_skipped``.
* A context with varying human scores but constant predictions has correlation 0 (a constant prediction
  carries no ranking information); such contexts are counted in ``n_constant_pred``.
* Spearman uses average ranks for ties (as ``scipy.stats.spearmanr``); Kendall is tau-b (as
  ``scipy.stats.kendalltau``, whose default variant is 'b').
* Predictions that differ by no more than ``TIE_RTOL`` of their largest magnitude are ties
  (:func:`merge_near_ties`): scores that are equal in exact arithmetic (hard decisions, symmetric designs) come out
  of a solver a few ulps apart, or as far apart as the solver's own tolerance (Bradley-Terry's MM stops at changes
  of ``1e-8``: two mirrored candidates land ``2e-9`` apart), in an order that depends on the order of the sums (the
  arrival of a run's batches, the machine's BLAS and instruction set); ranked as they came, such differences would
  move a pooled Spearman by 0.05 and a system-level one from 0.32 to -0.4. System means are merged on the scale of
  the candidates' scores they average (a mean of mirrored scores is a difference of near-equal numbers).

The positional prior P(A) (EACL eq. 8) is :func:`pipeline.methods.verdicts.debias.positional_prior`, re-exported here.

All per-context computations are vectorised over contexts (sorting by context once, then ``bincount``
group sums), with no Python loop over rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.verdicts.debias import positional_prior

__all__ = [
    "CorrelationSummary",
    "grouped_ranks",
    "kendall_tau_b",
    "merge_near_ties",
    "pairwise_accuracy",
    "per_context_correlation",
    "pooled_correlation",
    "positional_prior",
    "system_correlation",
]

Method = Literal["spearman", "pearson", "kendall"]
_METHODS = ("spearman", "pearson", "kendall")
#: Groups with more candidate pairs than this use O(n log n) formulas instead of enumerating pairs.
MAX_ENUMERATED_PAIRS = 2_000_000
#: Predictions closer than this share of their largest magnitude are ties: below the fits' own precision
#: (:data:`pipeline.methods.scorers.bradley_terry.BT_TOL`), so floating-point and solver noise, not a ranking.
TIE_RTOL = 1e-8


def merge_near_ties(
    values: NDArray[np.float64], rtol: float = TIE_RTOL, scale: float | None = None
) -> NDArray[np.float64]:
    """``values`` with every run of near-equal values (consecutive in sorted order, each gap at most ``rtol`` times
    ``scale``, by default their largest magnitude) replaced by the run's smallest value, so that rank statistics
    read them as ties."""
    x = np.asarray(values, dtype=np.float64)
    if x.shape[0] < 2:
        return x
    scale = float(np.abs(x).max()) if scale is None else float(scale)
    if scale == 0.0 or not np.isfinite(scale):
        return x
    order = np.argsort(x, kind="stable")
    xs = x[order]
    new_run = np.ones(xs.shape[0], dtype=bool)
    new_run[1:] = np.diff(xs) > rtol * scale
    out = np.empty_like(x)
    out[order] = xs[np.flatnonzero(new_run)][np.cumsum(new_run) - 1]
    return out


@dataclass(frozen=True)
class CorrelationSummary:
    """Per-context correlations and their mean.

    Attributes
    ----------
    mean : float
        Mean over the used contexts (NaN if none).
    n_contexts : int
        Contexts used (not skipped).
    n_skipped : int
        Contexts skipped because their human scores are constant.
    n_constant_pred : int
        Used contexts whose predictions are constant (correlation 0 by convention).
    contexts : ndarray
        The distinct context labels, sorted.
    values : ndarray of float
        Correlation per context in the order of ``contexts``; NaN for skipped contexts.
    """

    mean: float
    n_contexts: int
    n_skipped: int
    n_constant_pred: int
    contexts: NDArray
    values: NDArray[np.float64]


def _inputs(
    context_index: ArrayLike, pred: ArrayLike, human: ArrayLike
) -> tuple[NDArray, NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    ctx = np.asarray(context_index)
    x = np.asarray(pred, dtype=np.float64)
    y = np.asarray(human, dtype=np.float64)
    if not (ctx.ndim == x.ndim == y.ndim == 1 and ctx.shape == x.shape == y.shape):
        raise ValueError(
            f"context_index, pred and human must be 1-D of the same length, got {ctx.shape}, {x.shape}, {y.shape}"
        )
    for name, arr in (("pred", x), ("human", y)):
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            raise ValueError(f"{name}[{int(bad[0])}]={float(arr[bad[0]])!r} is not finite")
    labels, codes = np.unique(ctx, return_inverse=True)
    return labels, codes.astype(np.int64), merge_near_ties(x), y


def _group_layout(
    codes: NDArray[np.int64], n_groups: int
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    """Stable order by group, the start of each group in that order and the group sizes."""
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes, minlength=n_groups)
    starts = np.zeros(n_groups, dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    return order, starts, sizes


def grouped_ranks(codes: NDArray[np.int64], values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Average ranks (1-based, ties averaged) of ``values`` within each group ``codes``, vectorised."""
    m = values.shape[0]
    if m == 0:
        return np.zeros(0)
    order = np.lexsort((values, codes))
    gs, vs = codes[order], values[order]
    new_group = np.ones(m, dtype=bool)
    new_group[1:] = gs[1:] != gs[:-1]
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(m), 0))
    position = np.arange(m) - group_start  # 0-based position within the group
    new_run = new_group.copy()
    new_run[1:] |= vs[1:] != vs[:-1]
    run_start = np.flatnonzero(new_run)
    run_end = np.append(run_start[1:], m) - 1
    avg = (position[run_start] + position[run_end]) / 2.0 + 1.0
    ranks = np.empty(m)
    ranks[order] = avg[np.cumsum(new_run) - 1]
    return ranks


def _constant_groups(
    codes: NDArray[np.int64], values: NDArray[np.float64], n_groups: int
) -> NDArray[np.bool_]:
    hi = np.full(n_groups, -np.inf)
    lo = np.full(n_groups, np.inf)
    np.maximum.at(hi, codes, values)
    np.minimum.at(lo, codes, values)
    return hi == lo


def _group_scale(codes: NDArray[np.int64], values: NDArray[np.float64], n_groups: int) -> NDArray[np.float64]:
    """The largest |value| of each group (1 where it is 0)."""
    scale = np.zeros(n_groups)
    np.maximum.at(scale, codes, np.abs(values))
    scale[scale == 0] = 1.0
    return scale


def _grouped_pearson(
    codes: NDArray[np.int64], x: NDArray[np.float64], y: NDArray[np.float64], n_groups: int
) -> NDArray[np.float64]:
    n = np.bincount(codes, minlength=n_groups).astype(np.float64)
    # Pearson is scale-invariant: divide each group by its largest |value| first, so that scores like 1e300
    # neither overflow the sums of squares (inf / inf = NaN) nor underflow them.
    x = x / _group_scale(codes, x, n_groups)[codes]
    y = y / _group_scale(codes, y, n_groups)[codes]
    with np.errstate(invalid="ignore", divide="ignore"):
        dx = x - (np.bincount(codes, weights=x, minlength=n_groups) / n)[codes]
        dy = y - (np.bincount(codes, weights=y, minlength=n_groups) / n)[codes]
        sxy = np.bincount(codes, weights=dx * dy, minlength=n_groups)
        sxx = np.bincount(codes, weights=dx * dx, minlength=n_groups)
        syy = np.bincount(codes, weights=dy * dy, minlength=n_groups)
        r = sxy / np.sqrt(sxx * syy)
    return np.clip(r, -1.0, 1.0)


def _pair_blocks(
    sizes: NDArray[np.int64], starts: NDArray[np.int64]
) -> Iterator[tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]]:
    """Yield (group ids, first, second) index arrays of all within-group pairs, one block per group size."""
    for m in np.unique(sizes):
        if m < 2:
            continue
        groups = np.flatnonzero(sizes == m)
        a, b = np.triu_indices(int(m), k=1)
        base = starts[groups][:, None]
        yield groups, base + a[None, :], base + b[None, :]


def _kendall_blocks(
    codes: NDArray[np.int64], x: NDArray[np.float64], y: NDArray[np.float64], n_groups: int
) -> NDArray[np.float64]:
    """Kendall tau-b per group (NaN where undefined)."""
    from scipy.stats import kendalltau

    order, starts, sizes = _group_layout(codes, n_groups)
    xs, ys = x[order], y[order]
    tau = np.full(n_groups, np.nan)
    big = sizes * (sizes - 1) // 2 > MAX_ENUMERATED_PAIRS
    small_sizes = np.where(big, 0, sizes)
    for groups, fa, fb in _pair_blocks(small_sizes, starts):
        dx = np.sign(xs[fa] - xs[fb])
        dy = np.sign(ys[fa] - ys[fb])
        n0 = fa.shape[1]
        s = (dx * dy).sum(axis=1)
        tx = (dx == 0).sum(axis=1)
        ty = (dy == 0).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            tau[groups] = s / np.sqrt((n0 - tx) * (n0 - ty).astype(np.float64))
    for g in np.flatnonzero(big):
        sl = slice(starts[g], starts[g] + sizes[g])
        tau[g] = kendalltau(xs[sl], ys[sl], variant="b").statistic
    return tau


def per_context_correlation(
    context_index: ArrayLike, pred: ArrayLike, human: ArrayLike, method: Method = "spearman"
) -> CorrelationSummary:
    """Correlation between predictions and human scores within each context, averaged over contexts.

    Parameters
    ----------
    context_index : array_like, shape (M,)
        Context label of each candidate (any sortable labels).
    pred, human : array_like of float, shape (M,)
        Predicted and human scores.
    method : {"spearman", "pearson", "kendall"}
        Kendall is tau-b.

    Returns
    -------
    CorrelationSummary
        Skipped contexts (constant human scores) are excluded from the mean and counted.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    labels, codes, x, y = _inputs(context_index, pred, human)
    g = labels.shape[0]
    skipped = _constant_groups(codes, y, g)
    const_pred = _constant_groups(codes, x, g) & ~skipped
    if method == "kendall":
        values = _kendall_blocks(codes, x, y, g)
    else:
        if method == "spearman":
            x, y = grouped_ranks(codes, x), grouped_ranks(codes, y)
        values = _grouped_pearson(codes, x, y, g)
    values = np.where(const_pred, 0.0, values)
    values = np.where(skipped, np.nan, values)
    used = ~skipped
    mean = float(values[used].mean()) if used.any() else float("nan")
    return CorrelationSummary(
        mean, int(used.sum()), int(skipped.sum()), int(const_pred.sum()), labels, values
    )


def pooled_correlation(pred: ArrayLike, human: ArrayLike, method: Method = "spearman") -> float:
    """Correlation over the whole pool (all contexts together); NaN if either side is constant."""
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    x = np.asarray(pred, dtype=np.float64)
    y = np.asarray(human, dtype=np.float64)
    ctx = np.zeros(x.shape[0], dtype=np.int64)
    _, codes, x, y = _inputs(ctx, x, y)
    if method == "kendall":
        return kendall_tau_b(x, y)
    if x.shape[0] < 2 or _constant_groups(codes, x, 1)[0] or _constant_groups(codes, y, 1)[0]:
        return float("nan")
    if method == "spearman":
        x, y = grouped_ranks(codes, x), grouped_ranks(codes, y)
    return float(_grouped_pearson(codes, x, y, 1)[0])


def system_correlation(
    systems: ArrayLike, pred: ArrayLike, human: ArrayLike, method: Method = "spearman"
) -> tuple[float, int]:
    """System-level correlation, as the EACL release and G-Eval report on SummEval
    (``adianliusie/comparative-assessment``, ``src/evaluation/eval_tools.py: calc_system_spearman``): each system's
    mean predicted and mean human score over the contexts, correlated across systems; with the number of systems.
    Means closer than ``TIE_RTOL`` of the largest candidate score are ties. NaN with fewer than 3 systems."""
    codes = np.unique(np.asarray(systems), return_inverse=True)[1].reshape(-1)
    x = np.asarray(pred, dtype=np.float64)
    y = np.asarray(human, dtype=np.float64)
    if codes.shape != x.shape or x.shape != y.shape:
        raise ValueError("systems, pred and human must be 1-D of one length")
    n = int(codes.max(initial=-1)) + 1
    if n < 3:
        return float("nan"), n
    counts = np.bincount(codes, minlength=n)
    mean_x = merge_near_ties(
        np.bincount(codes, weights=x, minlength=n) / counts, scale=np.abs(x).max(initial=0.0)
    )
    mean_y = np.bincount(codes, weights=y, minlength=n) / counts
    return pooled_correlation(mean_x, mean_y, method), n


def kendall_tau_b(x: ArrayLike, y: ArrayLike) -> float:
    """Kendall's tau-b, ``(C - D) / sqrt((n0 - n1)(n0 - n2))`` with ``n1``, ``n2`` the tied pairs in x and y.

    Computed by ``scipy.stats.kendalltau`` (O(n log n)), whose default variant is tau-b.
    """
    from scipy.stats import kendalltau

    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"x and y must be 1-D of the same length, got {a.shape} and {b.shape}")
    return float(kendalltau(a, b, variant="b").statistic)


def pairwise_accuracy(
    context_index: ArrayLike,
    pred: ArrayLike,
    human: ArrayLike,
    *,
    max_enumerated_pairs: int = MAX_ENUMERATED_PAIRS,
) -> tuple[float, int]:
    """Fraction of within-context pairs with different human scores that the predictions order correctly.

    EACL section 5.4. A pair ``(a, b)`` of candidates of the same context with ``human[a] != human[b]``
    counts 1 if ``pred`` orders it the same way, 0 if the opposite way and 1/2 if ``pred`` ties.

    Groups with more than ``max_enumerated_pairs`` pairs are counted in O(n log n) from the Kendall
    decomposition: concordant minus discordant pairs from tau-b and the tie counts.

    Returns
    -------
    accuracy : float
        NaN if there is no pair with different human scores.
    n_pairs : int
        Number of such pairs.
    """
    labels, codes, x, y = _inputs(context_index, pred, human)
    g = labels.shape[0]
    order, starts, sizes = _group_layout(codes, g)
    xs, ys = x[order], y[order]
    big = sizes * (sizes - 1) // 2 > max_enumerated_pairs
    score = 0.0
    n_pairs = 0
    for _, fa, fb in _pair_blocks(np.where(big, 0, sizes), starts):
        dy = np.sign(ys[fa] - ys[fb])
        dx = np.sign(xs[fa] - xs[fb])
        valid = dy != 0
        score += float(np.where(dx == 0, 0.5, (dx == dy).astype(np.float64))[valid].sum())
        n_pairs += int(valid.sum())
    for grp in np.flatnonzero(big):
        sl = slice(starts[grp], starts[grp] + sizes[grp])
        s, n = _accuracy_large(xs[sl], ys[sl])
        score += s
        n_pairs += n
    return (score / n_pairs if n_pairs else float("nan")), n_pairs


def _tied_pairs(*arrays: NDArray[np.float64]) -> int:
    """Number of pairs equal in all the given arrays."""
    if len(arrays) == 1:
        _, counts = np.unique(arrays[0], return_counts=True)
    else:
        _, counts = np.unique(np.stack(arrays, axis=1), axis=0, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


def _accuracy_large(x: NDArray[np.float64], y: NDArray[np.float64]) -> tuple[float, int]:
    n0 = x.shape[0] * (x.shape[0] - 1) // 2
    tx, ty, txy = _tied_pairs(x), _tied_pairs(y), _tied_pairs(x, y)
    valid = n0 - ty
    if valid == 0:
        return 0.0, 0
    if tx == n0:
        return 0.5 * valid, valid
    s = round(kendall_tau_b(x, y) * np.sqrt(float(n0 - tx) * float(n0 - ty)))  # C - D
    pred_ties = tx - txy  # pairs tied in pred but not in human
    c = (s + valid - pred_ties) / 2.0
    return c + 0.5 * pred_ties, valid
