"""The scorer checks (:mod:`pipeline.testing`): a scorer entry's fit on seeded contexts with a known truth, and the
same fit after the candidates are renamed, the comparisons reordered and the pairs' sides swapped (for a scorer whose
fit has one optimum: ``ScorerEntry.unique``; every scorer gives the same scores for the same comparisons)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from pipeline.methods.scorers.registry import FitInputs, ScorerEntry
from pipeline.testing.battery import Check, fail, run_all

# Scores equal up to this (a solver's tolerance); compared after removing their mean (a scale's origin is free).
RTOL, ATOL = 1e-5, 1e-6


def context(n: int = 7, seed: int = 0, strength: float = 3.0) -> tuple[Any, ...]:
    """Every pair of ``n`` candidates of known quality once (``i < j``), ``p = sigmoid(strength (q_i - q_j) + e)``,
    and a small tie probability: (quality, i, j, p, tie)."""
    rng = np.random.default_rng(seed)
    quality = rng.normal(0, 1, n)
    i, j = np.triu_indices(n, 1)
    z = strength * (quality[i] - quality[j]) + rng.normal(0, 0.5, i.size)
    p = np.clip(1 / (1 + np.exp(-z)), 0.02, 0.98)
    return quality, i.astype(np.int64), j.astype(np.int64), p, np.full(i.size, 0.05)


def _fit(entry: ScorerEntry, n: int, i: Any, j: Any, p: Any, tie: Any, options: Mapping[str, Any]) -> Any:
    inputs = FitInputs(tie=tie if entry.ties else None, options=entry.options(options))
    return entry.fit_context(n, np.asarray(i), np.asarray(j), np.asarray(p, dtype=np.float64), inputs)


def _same(entry: ScorerEntry, check: str, a: Any, b: Any) -> None:
    a, b = np.asarray(a) - np.mean(a), np.asarray(b) - np.mean(b)
    if not np.allclose(a, b, rtol=RTOL, atol=ATOL):
        fail(
            f"scorer {entry.name}",
            check,
            f"scores {np.round(b, 6).tolist()} against {np.round(a, 6).tolist()}",
        )


def scorer_checks(entry: ScorerEntry, options: Mapping[str, Any] | None = None) -> list[Check]:
    """The checks of a scorer (module docstring), each ``check(entry)``; ``options``: its settings for every fit."""
    given = dict(options or {})

    def shapes(e: ScorerEntry) -> None:
        quality, i, j, p, tie = context()
        scores, errors = _fit(e, quality.size, i, j, p, tie, given)
        if scores.shape != quality.shape or not np.all(np.isfinite(scores)):
            fail(f"scorer {e.name}", "shapes", f"{scores!r} for {quality.size} candidates")
        if e.stderr and (errors is None or errors.shape != quality.shape):
            fail(
                f"scorer {e.name}",
                "shapes",
                "it says it gives standard errors and gave none for each candidate",
            )

    def names(e: ScorerEntry) -> None:
        quality, i, j, p, tie = context(seed=1)
        base, _ = _fit(e, quality.size, i, j, p, tie, given)
        order = np.random.default_rng(5).permutation(quality.size)  # candidate k is called order[k]
        renamed, _ = _fit(e, quality.size, order[i], order[j], p, tie, given)
        _same(e, "names (the same candidates under other indices)", base, renamed[order])

    def row_order(e: ScorerEntry) -> None:
        quality, i, j, p, tie = context(seed=2)
        base, _ = _fit(e, quality.size, i, j, p, tie, given)
        rows = np.random.default_rng(6).permutation(i.size)
        shuffled, _ = _fit(e, quality.size, i[rows], j[rows], p[rows], tie[rows], given)
        _same(e, "row order (the comparisons in another order)", base, shuffled)

    def sides(e: ScorerEntry) -> None:
        quality, i, j, p, tie = context(seed=3)
        base, _ = _fit(e, quality.size, i, j, p, tie, given)
        swap = np.random.default_rng(7).random(i.size) < 0.5
        i2, j2, p2 = np.where(swap, j, i), np.where(swap, i, j), np.where(swap, 1 - p, p)
        swapped, _ = _fit(e, quality.size, i2, j2, p2, tie, given)
        _same(e, "sides (a pair written the other way round, p as 1 - p)", base, swapped)

    def direction(e: ScorerEntry) -> None:
        quality, i, j, p, tie = context(n=10, seed=4, strength=4.0)
        scores, _ = _fit(e, quality.size, i, j, p, tie, given)
        rho = spearmanr(scores, quality).statistic
        if not rho > 0.7:
            fail(
                f"scorer {e.name}",
                "direction",
                f"Spearman {rho:.3f} with the known quality (higher is better)",
            )

    def deterministic(e: ScorerEntry) -> None:
        quality, i, j, p, tie = context(seed=8)
        first, _ = _fit(e, quality.size, i, j, p, tie, given)
        again, _ = _fit(e, quality.size, i.copy(), j.copy(), p.copy(), tie.copy(), given)
        if not np.array_equal(first, again):
            fail(f"scorer {e.name}", "deterministic (the same comparisons twice)", f"{again} against {first}")

    def two(e: ScorerEntry) -> None:
        scores, _ = _fit(e, 2, [0], [1], [0.8], [0.05], given)
        if scores.shape != (2,) or not scores[0] > scores[1]:
            fail(f"scorer {e.name}", "two candidates", f"{scores!r} for a pair the first won with p 0.8")

    # a scorer with one optimum keeps it under any indices, rows and sides; one of several (entry.unique=False) must
    # at least give the same optimum for the same comparisons: the product gives them in one canonical order
    invariant = [("names", names), ("row_order", row_order), ("sides", sides)] if entry.unique else []
    return [
        ("shapes", shapes),
        *invariant,
        ("deterministic", deterministic),
        ("direction", direction),
        ("two_candidates", two),
    ]


def check_scorer(entry: ScorerEntry, options: Mapping[str, Any] | None = None) -> None:
    """Every scorer check on ``entry``; :class:`pipeline.testing.ConformanceError` naming each that failed."""
    run_all(f"scorer {entry.name}", scorer_checks(entry, options), entry)
