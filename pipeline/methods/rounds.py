"""Adaptive rounds: fit the posterior from everything judged so far, choose the next batch of pairs, judge them,
until a budget is spent or a stopping rule is met. Pure: the judge is a function, the state is arrays; the
pipeline's rounds workflow (:mod:`pipeline.adaptive`) and the benchmark (``make bench-adaptive``) drive it.

Strategies (:data:`ROUND_STRATEGIES`): ``"reorder"`` (:mod:`pipeline.methods.reorder`), ``"locate"``
(:mod:`pipeline.methods.locate`: every item placed by a graded answer, then reorder), ``"windowed"``
(:mod:`pipeline.methods.windowed`) and ``"random"`` (uniform among the unjudged pairs: windowed with
``explore=1``, the balanced-random baseline in rounds). The first round, with nothing judged, is a random cycle
through every item (``N`` pairs, every item in two, the graph connected) or, below ``N`` pairs, a random
matching and then a prefix of the cycle; ``"locate"`` starts with its own sample instead.

A warm start (:func:`warm_start`) turns absolute scores (one prompt per item) into the prior of the first
round's fit: the scale between absolute and comparative scores is fitted by least squares on the comparisons as
they come in, so the prior is on the comparisons' scale.

Every round's fit reads the comparisons through a :class:`Model` (:func:`pipeline.methods.posterior.fit_posterior`):
the link from a probability to a score difference, the Huber threshold of the robust fit, and whether a pair
whose two orderings contradict each other (:mod:`pipeline.methods.contradiction`) is left out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from .contradiction import read_orderings
from .locate import sample_pairs, select_locate
from .posterior import LOGIT_CLIP, Posterior, expert_values, fit_posterior
from .reorder import select_reorder
from .selection import PairSet
from .stopping import StopRule
from .windowed import select_windowed

__all__ = [
    "ROUND_STRATEGIES",
    "Model",
    "Prior",
    "RoundRecord",
    "first_pairs",
    "fit_round",
    "round_schedule",
    "run_rounds",
    "select_round",
    "warm_start",
]

ROUND_STRATEGIES: tuple[str, ...] = ("reorder", "locate", "windowed", "random")


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
    slope of the comparisons' score differences ``f`` (:func:`pipeline.methods.posterior.expert_values`) on
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


def first_pairs(n: int, k: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """The first round's pairs (module docstring), rows ``(lo, hi)``."""
    order = rng.permutation(n)
    if n == 2:
        cycle = np.array([[order[0], order[1]]])
    else:
        cycle = np.stack([order, np.roll(order, -1)], axis=1)
    if k < n:  # a matching first (every item once), then the cycle's remaining edges
        matching = cycle[0::2][: n // 2]
        rest = cycle[1::2]
        cycle = np.concatenate([matching, rest])
    cycle = cycle[:k]
    return np.sort(cycle, axis=1)


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


def select_round(
    strategy: str,
    post: Posterior,
    k: int,
    judged: PairSet,
    rng: np.random.Generator,
    *,
    window: int = 8,
    explore: float = 0.1,
    answers: tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]] | None = None,
    budget: int | None = None,
    clip: float = LOGIT_CLIP,
    contradicted: NDArray[np.bool_] | None = None,
) -> NDArray[np.int64]:
    """The next ``k`` pairs ``(lo, hi)`` by ``strategy`` (:data:`ROUND_STRATEGIES`). ``"locate"`` also reads the
    comparisons so far (``answers``: ``i, j, p``, and which of them are ``contradicted``) and may take up to
    ``budget`` pairs (default ``k``) in its star and fix rounds (:mod:`pipeline.methods.locate`)."""
    if strategy == "reorder":
        return select_reorder(post, k, judged, window=window)
    if strategy == "locate":
        if answers is None:
            raise ValueError("the locate strategy needs the comparisons so far (answers=(i, j, p))")
        i, j, p = answers
        return select_locate(
            post,
            k,
            judged,
            i,
            j,
            p,
            rng,
            budget=k if budget is None else budget,
            clip=clip,
            window=window,
            contradicted=contradicted,
        )
    if strategy == "windowed":
        return select_windowed(post.mean, k, judged, rng, window=window, explore=explore)
    if strategy == "random":
        return select_windowed(post.mean, k, judged, rng, window=1, explore=1.0)
    raise ValueError(f"unknown round strategy {strategy!r}; valid: {ROUND_STRATEGIES}")


def round_schedule(
    first: int, growth: float, checkpoints: tuple[int, ...] = (), least: int | None = None
) -> Callable[[int], int]:
    """Round sizes that start at ``first`` pairs and grow with what is known (each later round at least ``least``,
    default ``first``, and ``growth`` times the pairs judged so far), cut so that a round ends at every checkpoint
    (in pairs)."""
    marks = sorted(set(checkpoints))
    floor = first if least is None else least

    def size(done: int) -> int:
        k = max(first if done == 0 else floor, int(growth * done), 1)
        for mark in marks:
            if done < mark < done + k:
                return mark - done
        return k

    return size


@dataclass
class RoundRecord:
    """One round: its number, the pairs judged so far (after it), the stopping criterion, the posterior, and how
    many of the pairs so far have contradicting orderings (0 when the judge gives only their average)."""

    round: int
    pairs: int
    criterion: float
    post: Posterior = field(repr=False)
    contradicted: int = 0


def run_rounds(
    n: int,
    judge: Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.float64]],
    *,
    strategy: str,
    budget_pairs: int,
    pairs_per_round: int | Callable[[int], int],
    rng: np.random.Generator,
    prior: Prior | None = None,
    model: Model | None = None,
    stop: StopRule | None = None,
    ridge: float = 1e-2,
    window: int = 8,
    explore: float = 0.1,
    variance: str = "auto",
    on_round: Callable[[RoundRecord], None] | None = None,
    checkpoints: tuple[int, ...] = (),
) -> tuple[list[RoundRecord], NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """Rounds until ``budget_pairs`` pairs are judged or ``stop`` is met (checked after each round's fit).

    ``judge(i, j)`` gives the debiased probability that ``i`` beats ``j`` (a pair judged in both orderings), shape
    ``(k,)``, or both orderings' answers, shape ``(k, 2)``: P(slot A wins) with ``i`` in slot A, then with ``j``.
    With both, the pairs whose orderings contradict each other are found (:mod:`pipeline.methods.contradiction`,
    over everything judged, every round), left out of the fit under ``model.drop_contradicted`` and shown to the
    strategy; the returned ``p`` is the debiased average either way.
    ``pairs_per_round``: a round's size, or a function of the pairs judged so far giving it (a schedule).
    ``checkpoints`` (pairs): no round crosses one, the star and fix rounds of ``"locate"`` included (a round
    ends at each, as a schedule cut at them does).
    Returns the records of every round and the comparisons ``(i, j, p)``.
    """
    if strategy not in ROUND_STRATEGIES:
        raise ValueError(f"unknown round strategy {strategy!r}; valid: {ROUND_STRATEGIES}")
    size = pairs_per_round if callable(pairs_per_round) else (lambda _done: pairs_per_round)
    if budget_pairs < 1 or size(0) < 1:
        raise ValueError("budget_pairs and pairs_per_round must be positive")
    judged = PairSet(n)
    ii = np.zeros(0, dtype=np.int64)
    jj = np.zeros(0, dtype=np.int64)
    pp = np.zeros(0)
    both = np.zeros((0, 2))
    bad: NDArray[np.bool_] | None = None
    clip = (model or Model()).clip
    records: list[RoundRecord] = []
    post: Posterior | None = None
    previous = None
    r = 0
    while len(judged) < budget_pairs:
        k = min(max(1, int(size(len(judged)))), budget_pairs - len(judged))
        if post is None:
            pairs = sample_pairs(n, rng)[:k] if strategy == "locate" else first_pairs(n, k, rng)
        else:
            pairs = select_round(
                strategy,
                post,
                k,
                judged,
                rng,
                window=window,
                explore=explore,
                answers=(ii, jj, pp),
                budget=min([budget_pairs, *(c for c in checkpoints if c > len(judged))]) - len(judged),
                clip=clip,
                contradicted=bad,
            )
        if not pairs.shape[0]:
            break  # every pair judged
        answers = np.asarray(judge(pairs[:, 0], pairs[:, 1]), dtype=np.float64)
        if answers.ndim == 2:  # both orderings: the rule reads everything judged (its position bias included)
            both = np.concatenate([both, answers])
            debiased, bad = read_orderings(both, clip=clip)
            answers = debiased[-pairs.shape[0] :]
        judged.add(pairs)
        ii = np.concatenate([ii, pairs[:, 0]])
        jj = np.concatenate([jj, pairs[:, 1]])
        pp = np.concatenate([pp, answers])
        post = fit_round(
            n,
            ii,
            jj,
            pp,
            prior=prior,
            model=model,
            ridge=ridge,
            x0=None if post is None else post.mean,
            variance=variance,
            contradicted=bad,
        )
        value = stop.value(post, previous) if stop is not None else float("nan")
        record = RoundRecord(r, len(judged), value, post, 0 if bad is None else int(bad.sum()))
        records.append(record)
        if on_round is not None:
            on_round(record)
        previous = post.mean
        r += 1
        if stop is not None and stop.met(value):
            break
    return records, ii, jj, pp
