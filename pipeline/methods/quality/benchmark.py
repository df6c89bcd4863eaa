"""A judge measured the way the judge benchmarks measure it, on pairs with an objective label (one candidate of the
pair is right, the other wrong), each judged in two orderings.

Each ordering's verdict is a **vote** about the right candidate: ``+1`` where the judge prefers it (its probability
that the candidate in slot A wins is above one half with the right one in slot A, below with it in slot B), ``-1``
where it prefers the wrong one, ``0`` where it prefers neither (a tie, no verdict: a probability of one half, as the
hard decisions of :func:`pipeline.methods.scorers.win_ratio.hard_outcomes` read it) or where that ordering was not
judged.

- **JudgeBench** (Tan et al., ICLR 2025; ``utils/metrics.py: compute_final_metrics`` with ``reverse_order``): a pair
  is judged right when its two votes sum above 0; the accuracy is the share of pairs judged right (chance: 50%).
- **LLMBar** (Zeng et al., ICLR 2024; ``LLMEvaluator/evaluate.py``'s statistics): the accuracy of each ordering (the
  share of pairs whose vote in that ordering is ``+1``: ``correct_False`` with the output listed first shown first,
  ``correct_True`` with it shown second), their mean (``correct_average``), the share right in both orderings
  (``correct_both``) and the **positional agreement** (``equal``): the share of pairs whose two orderings choose the
  same candidate, two that choose neither counting as the same (LLMBar's two unparsed verdicts compare equal).

The functions take arrays over pairs; a pair's votes are given for the ordering with the candidate listed first in
the data shown first (``first``) and for the other ordering (``second``), as LLMBar orders them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pipeline.methods.scorers.win_ratio import hard_outcomes


def votes(p_a: NDArray[np.float64], right_in_a: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Each ordering's vote about the right candidate from the judge's P(slot A wins) (NaN: not judged, 0)."""
    p = np.asarray(p_a, dtype=np.float64)
    prefers_a = np.where(np.isnan(p), 0.0, 2 * hard_outcomes(np.nan_to_num(p, nan=0.5)) - 1)
    return np.where(np.asarray(right_in_a, dtype=bool), prefers_a, -prefers_a).astype(np.int64)


@dataclass(frozen=True)
class BenchmarkScores:
    """A judge's numbers over a set of pairs (NaN where not defined: an ordering never judged)."""

    n_pairs: int
    accuracy: float
    accuracy_first: float
    accuracy_second: float
    accuracy_orderings: float
    both_right: float
    positional_agreement: float
    no_preference: float


def pair_right(first: NDArray[np.int64], second: NDArray[np.int64]) -> NDArray[np.float64]:
    """Per pair, 1 where JudgeBench counts it judged right (its two votes sum above 0), else 0."""
    return ((np.asarray(first) + np.asarray(second)) > 0).astype(np.float64)


def benchmark_scores(
    first: NDArray[np.int64],
    second: NDArray[np.int64],
    judged_first: NDArray[np.bool_],
    judged_second: NDArray[np.bool_],
) -> BenchmarkScores:
    """The benchmarks' numbers (module docstring) from each pair's votes in the two orderings and whether each
    ordering was judged (a vote of an ordering not judged is 0)."""
    v1, v2 = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
    j1, j2 = np.asarray(judged_first, dtype=bool), np.asarray(judged_second, dtype=bool)
    n = len(v1)
    if n == 0:
        nan = float("nan")
        return BenchmarkScores(0, nan, nan, nan, nan, nan, nan, nan)
    acc1 = float((v1[j1] == 1).mean()) if j1.any() else float("nan")
    acc2 = float((v2[j2] == 1).mean()) if j2.any() else float("nan")
    both = j1 & j2
    judged = np.concatenate([v1[j1], v2[j2]])
    return BenchmarkScores(
        n_pairs=n,
        accuracy=float(pair_right(v1, v2).mean()),
        accuracy_first=acc1,
        accuracy_second=acc2,
        accuracy_orderings=float(np.nanmean([acc1, acc2])) if j1.any() or j2.any() else float("nan"),
        both_right=float(((v1 == 1) & (v2 == 1))[both].mean()) if both.any() else float("nan"),
        positional_agreement=float((v1 == v2)[both].mean()) if both.any() else float("nan"),
        no_preference=float((judged == 0).mean()) if judged.size else float("nan"),
    )
