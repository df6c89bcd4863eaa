"""How a comparison set is fitted: the model a fit reads the comparisons through (:class:`Model`: the link from a
probability to a score difference, Gaussian or Huber experts, censoring at the cap, contradictions left out), a warm
start from absolute scores (:class:`Prior`, :func:`warm_start`) and the fit itself (:func:`fit_round`, the PoE-Gaussian
posterior of :mod:`pipeline.methods.scorers.posterior`). The capped log-odds scorer (:mod:`pipeline.methods.scorers.poe_logit`) and
every adaptive round (:mod:`pipeline.methods.adaptive.loop`) fit through it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from pipeline.methods.scorers.posterior import LOGIT_CLIP, Posterior, expert_values, fit_posterior


@dataclass(frozen=True)
class Model:
    """How a round's fit reads the comparisons: PoE-Gaussian on ``p - 1/2`` (``link="linear"``, the default) or on
    the capped log-odds (``"logit"``), with Gaussian experts (``robust=None``) or Huber's (``robust=c``); under the
    logit link an answer at the cap reads as "at least the cap" (``censor``, the default) or as the cap. A pair
    whose two orderings contradict each other is left out of the fit (``drop_contradicted``, the default, when
    the caller says which pairs those are) or read as the average of its orderings, about 1/2."""

    link: str = "linear"
    clip: float = LOGIT_CLIP
    robust: float | None = None
    censor: bool = True
    drop_contradicted: bool = True


@dataclass(frozen=True)
class Prior:
    """Absolute scores of every item as a warm start, and their weight relative to one comparison."""

    scores: NDArray[np.float64]
    weight: float = 1.0


def warm_start(prior: Prior, i: NDArray[np.int64], j: NDArray[np.int64], f: NDArray[np.float64]):
    """(prior mean, prior weight) on the comparisons' scale: the centred absolute scores times the least-squares
    slope of the comparisons' score differences ``f`` (:func:`pipeline.methods.scorers.posterior.expert_values`) on
    theirs (0 until there are comparisons, or if the slope is not positive: then the prior says nothing about
    order)."""
    a = prior.scores - prior.scores.mean()
    if not i.shape[0]:
        return np.zeros_like(a), np.zeros_like(a)
    x = a[i] - a[j]
    xx = float(x @ x)
    slope = float(x @ f) / xx if xx > 0 else 0.0
    if slope <= 0:
        return np.zeros_like(a), np.zeros_like(a)
    return slope * a, np.full(a.shape, float(prior.weight))


def fit_round(
    n: int,
    i: NDArray[np.int64],
    j: NDArray[np.int64],
    p: NDArray[np.float64],
    *,
    prior: Prior | None = None,
    model: Model | None = None,
    ridge: float = 1e-2,
    x0: NDArray[np.float64] | None = None,
    variance: str = "auto",
    contradicted: NDArray[np.bool_] | None = None,
) -> Posterior:
    """The posterior after everything judged so far (warm-started by ``prior`` when given). ``contradicted``
    marks the pairs whose orderings contradict each other: left out when ``model.drop_contradicted``."""
    model = model or Model()
    if contradicted is not None and model.drop_contradicted and contradicted.any():
        keep = ~np.asarray(contradicted, dtype=bool)
        i, j, p = i[keep], j[keep], p[keep]
    mean = weight = None
    if prior is not None:
        f = expert_values(np.asarray(p, dtype=np.float64), model.link, model.clip)
        mean, weight = warm_start(prior, i, j, f)
    return fit_posterior(
        n,
        i,
        j,
        p,
        prior_mean=mean,
        prior_weight=weight,
        ridge=ridge,
        x0=x0,
        variance=variance,  # type: ignore[arg-type]
        link=model.link,  # type: ignore[arg-type]
        clip=model.clip,
        robust=model.robust,
        censor=model.censor,
    )
