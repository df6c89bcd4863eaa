"""Two orderings of a pair that contradict each other.

Every pair is judged in both orderings: ``p_ij``, P(slot A wins) with ``i`` in slot A, and ``p_ji`` with ``j`` in
slot A. On the log-odds scale each says how much better ``i`` is than ``j``, after the judge's position bias
``b`` (its log-odds for slot A between equal items):

    ``d_ij = logit(p_ij) - b``  and  ``d_ji = -(logit(p_ji) - b)``.

A judge that answers the opposite of what it means in one ordering (a flipped label; the simulated judges of
``make bench-adaptive`` do it on 2-10% of prompts) gives two estimates of opposite sign, each confidently away
from a tie. Their
average, the debiased probability ``(p_ij + 1 - p_ji) / 2``, is then about 1/2 whatever the two items are: it
reads as a tie, and a fit pulls the pair together (one such answer can move an item judged once by the whole
spread of the scores). A true near-tie gives two estimates near 0, not two far ones of opposite sign.

:func:`contradicted` marks a pair whose two estimates have opposite signs and are both at least ``margin``
log-odds from a tie (:data:`MARGIN`: a probability of about 0.88 against 0.12 after the bias). The bias is the
median of ``(logit p_ij + logit p_ji) / 2`` over the pairs whose orderings are both inside the cap (0 when there
are none), robust to the contradicted pairs themselves. The adaptive rounds' fit leaves such a pair out
(``adaptive.drop_contradicted``, :func:`pipeline.methods.adaptive.loop.fit_round`), counts it (``contradicted`` in
``rounds.parquet``), and the ``locate`` strategy compares its items again (:mod:`pipeline.methods.adaptive.locate`). The
judge is deterministic, so the same pair is never asked again: another partner is.

With a flip rate of 2% per ordering, leaving the contradicted pairs out makes greedy-optimal's design reach the
all-pairs Spearman within 0.01 with 28% fewer calls on the benchmark's confident judge (normal scores), and
``locate`` with 20% fewer (``make bench-adaptive``, BENCHMARKS.md).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.scorers.posterior import LOGIT_CLIP, expert_values

__all__ = ["MARGIN", "contradicted", "ordering_bias", "read_orderings"]

# how far from a tie (log-odds, after the position bias) both orderings must be for their disagreement to count
MARGIN = 2.0


def _logits(p: ArrayLike, clip: float) -> NDArray[np.float64]:
    """Each ordering's log-odds, capped at ``±clip`` as the fit reads them; NaN (an ordering not judged) stays."""
    return expert_values(np.asarray(p, dtype=np.float64), "logit", clip)


def ordering_bias(p_ij: ArrayLike, p_ji: ArrayLike, *, clip: float = LOGIT_CLIP) -> float:
    """The judge's position bias in log-odds: the median of ``(logit p_ij + logit p_ji) / 2`` over the pairs with
    both orderings inside ``±clip`` (0 when there are none)."""
    return _bias(_logits(p_ij, clip), _logits(p_ji, clip), clip)


def _bias(a: NDArray[np.float64], b: NDArray[np.float64], clip: float) -> float:
    inside = (np.abs(a) < clip) & (np.abs(b) < clip)
    return float(np.median((a[inside] + b[inside]) / 2.0)) if inside.any() else 0.0


def contradicted(
    p_ij: ArrayLike, p_ji: ArrayLike, *, margin: float = MARGIN, clip: float = LOGIT_CLIP
) -> NDArray[np.bool_]:
    """Pairs whose two orderings contradict each other (module docstring); False where an ordering is missing
    (NaN)."""
    a, b = _logits(p_ij, clip), _logits(p_ji, clip)
    if a.shape != b.shape:
        raise ValueError(f"p_ij has shape {a.shape} and p_ji {b.shape}: one value of each per pair")
    bias = _bias(a, b, clip)
    d_ij = a - bias
    d_ji = -(b - bias)
    with np.errstate(invalid="ignore"):
        return (np.sign(d_ij) * np.sign(d_ji) < 0) & (np.minimum(np.abs(d_ij), np.abs(d_ji)) >= margin)


def read_orderings(
    orderings: ArrayLike, *, margin: float = MARGIN, clip: float = LOGIT_CLIP
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Rows ``(p_ij, p_ji)`` of judged pairs: the debiased probability that ``i`` beats ``j``,
    ``(p_ij + 1 - p_ji) / 2`` (PoE section 4.2), and which pairs are :func:`contradicted`."""
    q = np.asarray(orderings, dtype=np.float64).reshape(-1, 2)
    return (q[:, 0] + 1.0 - q[:, 1]) / 2.0, contradicted(q[:, 0], q[:, 1], margin=margin, clip=clip)
