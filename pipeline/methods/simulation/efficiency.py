"""Efficiency curves: correlation with human scores as a function of the number of comparisons.

The protocol of the PoE paper's Table 1 and Figure 3 (Liusie, Raina, Fathullah & Gales 2024): for each
number of comparisons K on a grid from N to N(N-1)/2, draw R times (default 100), independently for
every context, K comparisons from the judged set with :func:`~pipeline.methods.adaptive.selection.balanced_random`
(K unique pairs, every candidate in at least one; PoE section 4.2), or with ``sampling="poe_authors"`` as the PoE
authors' code draws them (:func:`covered_uniform_batch`: K pairs uniformly, drawn again
while a candidate is left out); score each draw with every method;
compute the correlation with the human scores per context and average over contexts. The result per
method and K is the mean and the standard deviation (``ddof=0``) over the R draws of that average.

Input is one debiased probability per unordered pair and context, as a (C, N, N) array ``probs`` with
``probs[c, a, b]`` the probability that ``a`` beats ``b`` and ``probs[c, b, a] = 1 - probs[c, a, b]``
(build it from a comparison table with :func:`pair_matrix`, which averages the two orderings). Every pair
must be judged, every context must have the same N.

Speed: all (context, draw) problems of one K are solved together with the pair-space batched scorers of
:mod:`pipeline.methods.scorers.batched` (stacked dense solves, Newton for the Bradley-Terry models, IRLS for
PoE-Laplace). Random draws can leave the comparison graph disconnected; the batched scorers then pin each
component to mean 0 (the minimum-norm least-squares convention, see :mod:`~pipeline.methods.scorers.batched`).
Constant predictions in a context count as correlation 0 and contexts with constant human scores are
skipped (:mod:`~pipeline.methods.agreement.metrics` conventions). BLAS runs single-threaded during the computation
when ``threadpoolctl`` is installed (``_common.single_threaded_blas``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.adaptive.pairset import check_k, check_n, n_unordered
from pipeline.methods.adaptive.selection import all_pairs, balanced_random_batch
from pipeline.methods.agreement.metrics import grouped_ranks
from pipeline.methods.scorers import batched
from pipeline.methods.scorers._common import single_threaded_blas
from pipeline.methods.scorers.registry import scorers

__all__ = [
    "DEFAULT_FRACTIONS",
    "EFFICIENCY_METHODS",
    "EfficiencyCurve",
    "covered_uniform_batch",
    "default_k_grid",
    "efficiency_curve",
    "pair_matrix",
    "score_draws",
]

#: Methods the efficiency curves support: the registered scorers with a batched form (the ML ranking has none).
EFFICIENCY_METHODS: tuple[str, ...] = tuple(name for name, e in scorers().items() if e.batched is not None)
#: How the draws of K pairs are made (:func:`efficiency_curve`).
Sampling = Literal["balanced", "poe_authors"]
SAMPLINGS: tuple[str, ...] = ("balanced", "poe_authors")
#: Fractions of the N(N-1)/2 pairs in the default K grid (besides K = N).
DEFAULT_FRACTIONS: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 1.0)
#: Largest number of (context, draw) problems solved in one batch.
MAX_BATCH = 20_000


@dataclass(frozen=True)
class EfficiencyCurve:
    """Mean and standard deviation over draws of the context-averaged correlation, per method and K.

    Attributes
    ----------
    k : ndarray of int, shape (G,)
    methods : tuple of str, length M
    mean, std : ndarray, shape (M, G)
    n_draws : int
    n_contexts : int
        Contexts used (human scores not constant).
    n_skipped : int
        Contexts skipped (constant human scores).
    correlation : str
    """

    k: NDArray[np.int64]
    methods: tuple[str, ...]
    mean: NDArray[np.float64]
    std: NDArray[np.float64]
    n_draws: int
    n_contexts: int
    n_skipped: int
    correlation: str
    per_draw: dict[str, NDArray[np.float64]] = field(default_factory=dict, repr=False)

    def curve(self, method: str) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``(mean, std)`` over the K grid for one method."""
        m = self.methods.index(method)
        return self.mean[m], self.std[m]

    def as_dict(self) -> dict:
        """Plain-Python form (lists) for JSON / logging."""
        return {
            "k": self.k.tolist(),
            "methods": list(self.methods),
            "mean": {m: self.mean[x].tolist() for x, m in enumerate(self.methods)},
            "std": {m: self.std[x].tolist() for x, m in enumerate(self.methods)},
            "n_draws": self.n_draws,
            "n_contexts": self.n_contexts,
            "n_skipped": self.n_skipped,
            "correlation": self.correlation,
        }


def covered_uniform_batch(
    n_items: int, k: int, n_draws: int, rng: np.random.Generator, max_tries: int = 10_000
) -> NDArray[np.int64]:
    """``n_draws`` draws of ``k`` unordered pairs, each uniform over the sets of ``k`` pairs in which every candidate
    is in at least one pair: the PoE authors' sampling (``adianliusie/PoE-LLM-comparative``,
    ``PoE_analysis/utils.py: generate_symmetric_random_mask``), which draws ``k`` pairs uniformly and draws again
    while a candidate is left out. Draws are rejected and redrawn together, ``max_tries`` rounds at most (a
    ``k`` near ``n/2`` is rarely covered: use :func:`~pipeline.methods.adaptive.selection.balanced_random_batch` there).

    Unlike :func:`~pipeline.methods.adaptive.selection.balanced_random_batch`, whose draws always hold a perfect matching and so spread the pairs more
    evenly over the candidates, these draws give some candidates one pair and others many.

    Returns
    -------
    ndarray of int64, shape (n_draws, k)
        Indices into :func:`~pipeline.methods.adaptive.selection.all_pairs`, sorted within each draw.
    """
    n = check_n(n_items)
    m = n_unordered(n)
    k = check_k(k, -(-n // 2), m, "covered_uniform", n, "every candidate in at least one pair")
    pairs = all_pairs(n)
    lo, hi = pairs[:, 0], pairs[:, 1]
    out = np.zeros((n_draws, k), dtype=np.int64)
    todo = np.arange(n_draws)
    for _ in range(max_tries):
        if not todo.size:
            return out
        idx = np.sort(np.argpartition(rng.random((todo.size, m)), k - 1, axis=1)[:, :k], axis=1)
        degree = np.zeros((todo.size, n), dtype=np.int64)
        rows = np.repeat(np.arange(todo.size), k)
        np.add.at(degree, (rows, lo[idx].ravel()), 1)
        np.add.at(degree, (rows, hi[idx].ravel()), 1)
        ok = degree.min(axis=1) > 0
        out[todo[ok]] = idx[ok]
        todo = todo[~ok]
    raise ValueError(
        f"covered_uniform: {todo.size} of {n_draws} draws of k={k} pairs among {n} candidates left a candidate "
        f"out {max_tries} times; k is too small for rejection sampling"
    )


def default_k_grid(n_items: int, fractions: Sequence[float] = DEFAULT_FRACTIONS) -> NDArray[np.int64]:
    """K = N and K = round(f * N(N-1)/2) for f in ``fractions`` (default 0.2, 0.4, 0.6, 0.8, 1.0),
    clipped to [N, N(N-1)/2], sorted and deduplicated. For N = 16: 16, 24, 48, 72, 96, 120."""
    m = n_items * (n_items - 1) // 2
    ks = [n_items] + [int(round(f * m)) for f in fractions]
    return np.unique(np.clip(ks, min(n_items, m), m)).astype(np.int64)


def pair_matrix(
    n_contexts: int,
    n_items: int,
    context: ArrayLike,
    i: ArrayLike,
    j: ArrayLike,
    p: ArrayLike,
) -> NDArray[np.float64]:
    """Debiased (C, N, N) pair probabilities from a comparison table.

    ``probs[c, a, b]`` is the average over all judgements of the pair {a, b} in context c of the
    probability that ``a`` wins (``p`` when ``a`` was in slot A, ``1 - p`` when in slot B). With one
    judgement in each ordering this is the PoE section 4.2 debiasing ``(p_ab + 1 - p_ba) / 2``.
    Unjudged pairs and the diagonal are NaN.
    """
    ctx = np.asarray(context, dtype=np.int64)
    ii = np.asarray(i, dtype=np.int64)
    jj = np.asarray(j, dtype=np.int64)
    pp = np.asarray(p, dtype=np.float64)
    if not (ctx.shape == ii.shape == jj.shape == pp.shape and ctx.ndim == 1):
        raise ValueError("context, i, j and p must be 1-D arrays of the same length")
    if ctx.size and (ctx.min() < 0 or ctx.max() >= n_contexts):
        raise ValueError(f"context indices must be in range({n_contexts})")
    if ii.size and (min(ii.min(), jj.min()) < 0 or max(ii.max(), jj.max()) >= n_items or np.any(ii == jj)):
        raise ValueError(f"item indices must be distinct and in range({n_items})")
    if np.any(~((pp >= 0.0) & (pp <= 1.0))):
        raise ValueError("p must be probabilities in [0, 1]")
    size = n_contexts * n_items * n_items
    ab = (ctx * n_items + ii) * n_items + jj
    ba = (ctx * n_items + jj) * n_items + ii
    total = np.bincount(ab, weights=pp, minlength=size) + np.bincount(ba, weights=1.0 - pp, minlength=size)
    count = np.bincount(ab, minlength=size) + np.bincount(ba, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = total / count
    return out.reshape(n_contexts, n_items, n_items)


def _check_inputs(probs: NDArray[np.float64], human: NDArray[np.float64]) -> tuple[int, int]:
    if probs.ndim != 3 or probs.shape[1] != probs.shape[2]:
        raise ValueError(f"probs must have shape (C, N, N), got {probs.shape}")
    c, n, _ = probs.shape
    if human.shape != (c, n):
        raise ValueError(f"human must have shape {(c, n)}, got {human.shape}")
    if n < 3:
        raise ValueError(f"need at least 3 candidates per context, got {n}")
    a, b = np.triu_indices(n, k=1)
    upper, lower = probs[:, a, b], probs[:, b, a]
    bad = np.argwhere(~((upper >= 0.0) & (upper <= 1.0)))
    if bad.size:
        ctx, pair = bad[0]
        raise ValueError(
            f"context {int(ctx)}, pair ({int(a[pair])}, {int(b[pair])}): probability {float(upper[ctx, pair])!r} is missing or not in "
            "[0, 1]; the efficiency protocol needs every pair judged"
        )
    if np.any(np.abs(upper + lower - 1.0) > 1e-9):
        ctx, pair = np.argwhere(np.abs(upper + lower - 1.0) > 1e-9)[0]
        raise ValueError(
            f"context {int(ctx)}, pair ({int(a[pair])}, {int(b[pair])}): probs[a, b] + probs[b, a] != 1; debias the two orderings "
            "first (efficiency.pair_matrix averages them)"
        )
    if not np.all(np.isfinite(human)):
        raise ValueError("human scores must be finite")
    return c, n


def score_draws(
    method: str,
    space: batched.PairSpace,
    mask: NDArray[np.float64],
    p: NDArray[np.float64],
    pin: NDArray[np.float64] | None = None,
) -> NDArray[np.float64]:
    """Scores (B, N) of one method for a batch of draws in pair space (``mask``, ``p`` of shape (B, M)), by its
    registered batched form."""
    form = scorers()[method].batched if method in scorers() else None
    if form is None:
        raise ValueError(f"unknown efficiency method {method!r}; valid: {list(EFFICIENCY_METHODS)}")
    return form(space, mask, p, pin)


def _row_correlation(
    scores: NDArray[np.float64], human: NDArray[np.float64], method: str
) -> NDArray[np.float64]:
    """Correlation per row of (B, N) arrays; 0 for a constant prediction, NaN for constant human scores."""
    bsz, n = scores.shape
    x, y = scores, human
    if method == "spearman":
        codes = np.repeat(np.arange(bsz, dtype=np.int64), n)
        x = grouped_ranks(codes, scores.ravel()).reshape(bsz, n)
        y = grouped_ranks(codes, human.ravel()).reshape(bsz, n)
    const_x = np.all(scores == scores[:, :1], axis=1)
    const_y = np.all(human == human[:, :1], axis=1)
    dx = x - x.mean(axis=1, keepdims=True)
    dy = y - y.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (dx * dy).sum(axis=1) / np.sqrt((dx * dx).sum(axis=1) * (dy * dy).sum(axis=1))
    r = np.clip(r, -1.0, 1.0)
    r[const_x] = 0.0
    r[const_y] = np.nan
    return r


def efficiency_curve(
    probs: ArrayLike,
    human: ArrayLike,
    rng: np.random.Generator,
    *,
    methods: Sequence[str] = EFFICIENCY_METHODS,
    k_grid: Sequence[int] | None = None,
    n_draws: int = 100,
    correlation: Literal["spearman", "pearson"] = "spearman",
    sampling: Sampling = "balanced",
) -> EfficiencyCurve:
    """Efficiency curves of several methods (module docstring).

    Parameters
    ----------
    probs : array_like, shape (C, N, N)
        Debiased pair probabilities (``probs[c, a, b] + probs[c, b, a] = 1``), e.g. from :func:`pair_matrix`.
    human : array_like, shape (C, N)
        Human scores.
    rng : numpy.random.Generator
        Source of the random draws.
    methods : sequence of str, optional
        Subset of :data:`EFFICIENCY_METHODS`.
    k_grid : sequence of int, optional
        Numbers of comparisons; default :func:`default_k_grid`. Each K must be in
        ``[ceil(N/2), N(N-1)/2]``.
    n_draws : int, optional
        Draws R per K (the full set K = N(N-1)/2 has a single possible draw: std 0).
    correlation : {"spearman", "pearson"}, optional
    sampling : {"balanced", "poe_authors"}, optional
        How each draw is made: :func:`~pipeline.methods.adaptive.selection.balanced_random_batch` (a random perfect
        matching, then random pairs: every candidate compared, the pairs spread evenly), or the PoE authors'
        :func:`covered_uniform_batch` (uniform draws, drawn again while a candidate is
        left out).

    Returns
    -------
    EfficiencyCurve
        ``per_draw[method]`` holds the (G, R) context-averaged correlations behind mean and std.
    """
    with single_threaded_blas():
        return _efficiency_curve(probs, human, rng, methods, k_grid, n_draws, correlation, sampling)


def _efficiency_curve(
    probs: ArrayLike,
    human: ArrayLike,
    rng: np.random.Generator,
    methods: Sequence[str],
    k_grid: Sequence[int] | None,
    n_draws: int,
    correlation: str,
    sampling: str = "balanced",
) -> EfficiencyCurve:
    probs = np.asarray(probs, dtype=np.float64)
    human = np.asarray(human, dtype=np.float64)
    c, n = _check_inputs(probs, human)
    unknown = [m for m in methods if m not in scorers() or scorers()[m].batched is None]
    if unknown:
        valid = [name for name, e in scorers().items() if e.batched is not None]
        raise ValueError(f"unknown efficiency method(s) {unknown}; valid: {valid}")
    if correlation not in ("spearman", "pearson"):
        raise ValueError(f"correlation must be 'spearman' or 'pearson', got {correlation!r}")
    if n_draws < 1:
        raise ValueError(f"n_draws must be positive, got {n_draws}")
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
    draw = balanced_random_batch if sampling == "balanced" else covered_uniform_batch
    space = batched.pair_space(n)
    m_pairs = space.m
    ks = (
        default_k_grid(n)
        if k_grid is None
        else np.asarray(sorted(set(int(k) for k in k_grid)), dtype=np.int64)
    )
    p_pairs = probs[:, space.a, space.b]  # (C, M)
    skipped = np.all(human == human[:, :1], axis=1)
    methods = tuple(methods)
    per_draw = {m: np.full((ks.shape[0], n_draws), np.nan) for m in methods}
    draws_per_batch = max(1, MAX_BATCH // c)
    for g, k in enumerate(ks):
        full = k == m_pairs
        r_total = 1 if full else n_draws
        for r0 in range(0, r_total, draws_per_batch):
            r1 = min(r_total, r0 + draws_per_batch)
            reps = r1 - r0
            if full:
                mask = np.ones((c, m_pairs))
            else:
                idx = draw(n, int(k), c * reps, rng)  # row = draw * C + context
                mask = np.zeros((c * reps, m_pairs))
                np.put_along_axis(mask, idx, 1.0, axis=1)
            p = np.tile(p_pairs, (reps, 1))
            hum = np.tile(human, (reps, 1))
            pin = space.component_pin(mask)
            for m in methods:
                corr = _row_correlation(score_draws(m, space, mask, p, pin), hum, correlation)
                by_draw = corr.reshape(reps, c)[:, ~skipped]
                per_draw[m][g, r0:r1] = by_draw.mean(axis=1) if by_draw.shape[1] else np.nan
        if full:
            for m in methods:
                per_draw[m][g, :] = per_draw[m][g, 0]
    mean = np.array([per_draw[m].mean(axis=1) for m in methods])
    std = np.array([per_draw[m].std(axis=1) for m in methods])
    return EfficiencyCurve(
        ks, methods, mean, std, n_draws, int((~skipped).sum()), int(skipped.sum()), correlation, per_draw
    )
