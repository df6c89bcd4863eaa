"""When to stop judging: criteria on the posterior of the scores (:mod:`pipeline.methods.scorers.posterior`).

- ``expected_tau``: the expected Kendall tau between the current ranking (by posterior mean) and the true one,
  ``1 - 4 E[D] / (N (N - 1))`` with ``E[D] = sum_{i<j} P(reorder_ij)`` the expected number of discordant pairs
  (:func:`pipeline.methods.adaptive.reorder.reorder_probability`). Exactly over every pair up to ``EXACT_MAX_ITEMS``;
  above, over the pairs within ``window`` places in the ranking (farther pairs contribute ``Phi(-gap/sd)``, which
  vanishes with the gap), so the criterion stays O(N x window).
- ``max_stderr``: the largest posterior standard deviation of a score.
- ``change``: ``1 - Spearman(previous round's means, this round's)``: the ranking has settled when it moves less.

A :class:`StopRule` stops when its criterion reaches its threshold (``expected_tau`` at least, the others at
most), or when the budget is spent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from pipeline.methods.adaptive.reorder import neighbour_pairs, reorder_probability
from pipeline.methods.scorers.posterior import Posterior

__all__ = ["CRITERIA", "EXACT_MAX_ITEMS", "StopRule", "criterion", "expected_discordant", "expected_tau"]

#: Largest N whose expected discordance is summed over every pair.
EXACT_MAX_ITEMS = 3000

Criterion = Literal["expected_tau", "max_stderr", "change"]
CRITERIA: tuple[str, ...] = ("expected_tau", "max_stderr", "change")


def expected_discordant(post: Posterior, window: int = 64) -> float:
    """Expected number of pairs the current ranking has in the wrong order (module docstring)."""
    n = post.n
    if n < 2:
        return 0.0
    if n <= EXACT_MAX_ITEMS:
        a, b = np.triu_indices(n, k=1)
    else:
        pairs = neighbour_pairs(post.mean, window)
        a, b = pairs[:, 0], pairs[:, 1]
    return float(reorder_probability(post, a, b).sum())


def expected_tau(post: Posterior, window: int = 64) -> float:
    """Expected Kendall tau between the ranking by the posterior mean and the truth (module docstring)."""
    n = post.n
    return 1.0 - 4.0 * expected_discordant(post, window) / (n * (n - 1))


def criterion(
    name: Criterion, post: Posterior, previous: NDArray[np.float64] | None = None, window: int = 64
) -> float:
    """The value of a stopping criterion for this round's posterior (``previous``: last round's means)."""
    if name == "expected_tau":
        return expected_tau(post, window)
    if name == "max_stderr":
        return float(np.sqrt(post.var.max()))
    if name == "change":
        if previous is None:
            return float("inf")
        from scipy.stats import spearmanr

        rho = spearmanr(previous, post.mean).statistic
        return float(1.0 - rho) if np.isfinite(rho) else float("inf")
    raise ValueError(f"unknown stopping criterion {name!r}; valid: {CRITERIA}")


@dataclass(frozen=True)
class StopRule:
    """Stop when ``criterion`` reaches ``threshold`` (``expected_tau`` >=, the others <=)."""

    criterion: Criterion = "expected_tau"
    threshold: float = 0.9
    window: int = 64

    def __post_init__(self) -> None:
        if self.criterion not in CRITERIA:
            raise ValueError(f"unknown stopping criterion {self.criterion!r}; valid: {CRITERIA}")

    def value(self, post: Posterior, previous: NDArray[np.float64] | None = None) -> float:
        return criterion(self.criterion, post, previous, self.window)

    def met(self, value: float) -> bool:
        if self.criterion == "expected_tau":
            return value >= self.threshold
        return value <= self.threshold
