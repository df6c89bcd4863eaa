"""PoE on the capped log-odds: the adaptive rounds' model, as a scorer for any comparison design.

Each comparison is a Gaussian expert on ``s_i - s_j`` centred at ``logit(p)`` capped at ``±clip`` (the Gaussian
approximation of PoE-BT, PoE eq. 3) instead of PoE-Gaussian's ``p - 1/2`` (PoE eq. 9); an answer at the cap reads
as "at least the cap" (``censor``), and Huber's expert (``robust``) down-weights answers that the rest contradict.
The fit is :func:`pipeline.methods.scorers.posterior.fit_posterior` with ``link="logit"``, the one the rounds use
(:class:`pipeline.methods.scorers.model_fit.Model`); this module only fixes its defaults and reads its scores and standard
errors. The scoring stage of an adaptive run fits it with the run's ``adaptive.*`` settings (:class:`Settings`).

Why it exists beside PoE-Gaussian: a confident judge (a strong LLM's first-token probabilities) answers most
pairs within a hair of 0 or 1, where ``p - 1/2`` says only which item is better, and its log-odds still say how
far apart. On sparse designs the difference is large: in ``make bench-adaptive`` greedy-optimal's pairs from a
confident simulated judge reach the all-pairs Spearman within 0.01 at about 3.4 judge calls per item with this
fit and at about 32 with PoE-Gaussian (BENCHMARKS.md, "greedy_poe").

Pairs whose two orderings contradict each other (:mod:`pipeline.methods.scorers.contradiction`: a flipped answer, whose
average with the other ordering reads as a tie) are left out when the caller marks them (``contradicted``), as
the rounds leave them out. The scoring stage marks them when each comparison is a pair judged in both orderings
(``scoring.debias=average`` or ``alpha``) and counts them (``scoring/poe_logit_contradicted``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from pipeline.methods.scorers._common import Pin, apply_pin, check_pin
from pipeline.methods.scorers.comparison_checks import as_comparisons, check_connected

__all__ = ["CLIP", "DEFAULTS", "RIDGE", "ROBUST", "Settings", "fit", "poe_logit"]

#: The log-odds cap (the rounds' ``adaptive.logit_clip``): answers beyond it read as "at least the cap".
CLIP = 10.0
#: Huber's threshold in studentised residuals (the rounds' ``adaptive.robust``).
ROBUST = 1.345
#: The weak prior precision of every score (the rounds' ``adaptive.ridge``): it fixes the common shift, which the
#: pin then sets, and keeps an item that only answers at the cap at a finite score.
RIDGE = 1e-2


@dataclass(frozen=True)
class Settings:
    """How the scoring stage runs the fit: the rounds' defaults, or a run's ``adaptive.*`` settings when the run
    is adaptive (``logit_clip``, ``robust``, ``censor``, ``ridge``, ``drop_contradicted``), so that the scorer and
    the rounds are one model. ``drop_contradicted``: leave out the pairs whose orderings contradict each other
    (the contradiction rule reads log-odds capped at ``clip`` too)."""

    clip: float = CLIP
    robust: float | None = ROBUST
    censor: bool = True
    ridge: float = RIDGE
    drop_contradicted: bool = True

    def fit_options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`fit` these settings fix."""
        return {"clip": self.clip, "robust": self.robust, "censor": self.censor, "ridge": self.ridge}


#: The rounds' defaults (``AdaptiveConfig``'s).
DEFAULTS = Settings()


def fit(
    n_items: int,
    i: ArrayLike,
    j: ArrayLike,
    p: ArrayLike,
    *,
    clip: float = CLIP,
    robust: float | None = ROBUST,
    censor: bool = True,
    ridge: float = RIDGE,
    shift: bool = False,
    contradicted: ArrayLike | None = None,
    pin: Pin = "mean",
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(scores, standard errors) on the log-odds scale, pinned by ``pin``; the standard error of each score about
    the mean of the scores. ``shift``: ``p`` is one ordering's raw answer, and the mean of its capped log-odds (the
    position bias when the design puts each item in slot A as often as in slot B) is taken out first, as
    PoE-Gaussian's ``beta="mean"`` does on its scale (PoE appendix A.6). ``contradicted``: one flag per
    comparison; the flagged ones are left out. Raises :class:`pipeline.methods.scorers.comparison_checks.ComparisonError` on a
    comparison graph (without the flagged comparisons) that is not connected (the components' offsets are not
    identified), as the other PoE scorers do."""
    from scipy.special import expit

    from pipeline.methods.scorers.model_fit import Model, fit_round
    from pipeline.methods.scorers.posterior import expert_values

    n, ii, jj, pp = as_comparisons(n_items, i, j, p)
    check_pin(pin, n)
    if not (clip > 0 and math.isfinite(clip)):
        raise ValueError(f"clip must be positive and finite, got {clip!r}")
    if not (ridge > 0 and math.isfinite(ridge)):
        raise ValueError(f"ridge must be positive and finite, got {ridge!r}")
    flags = np.zeros(ii.shape, dtype=bool) if contradicted is None else np.asarray(contradicted, dtype=bool)
    if flags.shape != ii.shape:
        raise ValueError(f"contradicted has {flags.size} flags for {ii.shape[0]} comparisons")
    check_connected(n, ii[~flags], jj[~flags], method="poe_logit")
    if shift and (~flags).any():
        f = expert_values(pp, "logit", clip)
        pp = expit(f - f[~flags].mean())
    # the rounds' own fit, which leaves the flagged comparisons out
    model = Model("logit", clip, robust, censor, drop_contradicted=True)
    post = fit_round(n, ii, jj, pp, model=model, ridge=ridge, variance="auto", contradicted=flags)
    return apply_pin(post.mean, pin), np.sqrt(np.maximum(post.var, 0.0))


def poe_logit(n_items: int, i: ArrayLike, j: ArrayLike, p: ArrayLike, **options: Any) -> NDArray[np.float64]:
    """The scores of :func:`fit` (its options), without standard errors."""
    return fit(n_items, i, j, p, **options)[0]
