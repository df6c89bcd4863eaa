"""Which comparisons get people's labels, each with its known inclusion probability (what lets the labels certify
a threshold, :mod:`pipeline.methods.agreement.selective`, and power an unbiased estimate,
:mod:`pipeline.methods.agreement.ppi`).

- **random**: ``n`` of the ``M`` items uniformly without replacement (a seeded permutation of the items in the order
  given: the caller orders them by content), each with probability ``n / M``; an i.i.d.-like sample, as certification
  needs.
- **active** (Confidence-Driven Inference, Gligoric et al. 2024): Poisson sampling, item ``k`` drawn independently
  with probability ``pi_k = min(1, c (u_k + floor))``, ``u_k`` the judge's uncertainty on it (1 where it cannot
  tell, 0 where it is sure) and ``c`` set so that the expected number drawn is ``n``; the floor (a share of the mean
  uncertainty) keeps every ``pi_k`` positive, so that weights ``1 / pi_k`` make every estimate unbiased.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

# The floor of active sampling, as a share of the mean uncertainty (every item keeps a chance to be drawn).
FLOOR_SHARE = 0.2


def uniform_inclusion(m: int, n: int) -> NDArray[np.float64]:
    """Every item's probability under a uniform draw of ``n`` of ``m``."""
    return np.full(m, min(n, m) / m if m else 0.0)


def active_inclusion(
    uncertainty: NDArray[np.float64], n: int, floor_share: float = FLOOR_SHARE
) -> NDArray[np.float64]:
    """``pi_k = min(1, c (u_k + floor))`` summing to ``min(n, M)`` (module docstring)."""
    u = np.clip(np.asarray(uncertainty, dtype=np.float64), 0.0, None)
    m = len(u)
    if m == 0:
        return u
    target = min(n, m)
    base = u + floor_share * (float(u.mean()) if u.mean() > 0 else 1.0)
    lo, hi = 0.0, 1.0
    while np.minimum(1.0, hi * base).sum() < target:
        hi *= 2
    for _ in range(200):  # the expected count grows with c: bisect
        mid = (lo + hi) / 2
        if np.minimum(1.0, mid * base).sum() < target:
            lo = mid
        else:
            hi = mid
    return np.minimum(1.0, hi * base)


def draw(
    inclusion: NDArray[np.float64], n: int, uniform: bool, rng: np.random.Generator
) -> NDArray[np.bool_]:
    """Which items are drawn: ``n`` uniformly without replacement, or each independently with its probability."""
    m = len(inclusion)
    if uniform:
        chosen = np.zeros(m, dtype=bool)
        chosen[rng.permutation(m)[: min(n, m)]] = True
        return chosen
    return rng.random(m) < np.asarray(inclusion, dtype=np.float64)


def uncertainty(confidence: NDArray[np.float64]) -> NDArray[np.float64]:
    """A verdict's uncertainty from its confidence (the probability of the verdict, at least 1/2 without a tie
    option): 1 at 1/2, 0 at 1."""
    return np.clip(2.0 * (1.0 - np.asarray(confidence, dtype=np.float64)), 0.0, 1.0)
