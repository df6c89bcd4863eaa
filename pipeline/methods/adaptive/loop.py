"""Adaptive rounds: fit the posterior from everything judged so far, choose the next batch of pairs, judge them,
until a budget is spent or a stopping rule is met. Pure: the judge is a function, the state is arrays.
:func:`run_rounds` is the one loop: the pipeline's rounds stage (:mod:`pipeline.stages.rounds`) runs it with the
judge stage behind the judge function and the run folder's I/O around it, the benchmark (``make bench-adaptive``)
and the tests with a simulated judge.

Strategies (:data:`ROUND_STRATEGIES`): ``"reorder"`` (:mod:`pipeline.methods.adaptive.reorder`), ``"locate"``
(:mod:`pipeline.methods.adaptive.locate`: every item placed by a graded answer, then reorder), ``"windowed"``
(:mod:`pipeline.methods.adaptive.windowed`) and ``"random"`` (uniform among the unjudged pairs: windowed with
``explore=1``, the balanced-random baseline in rounds). The first round, with nothing judged, is a random cycle
through every item (``N`` pairs, every item in two, the graph connected) or, below ``N`` pairs, a random
matching and then a prefix of the cycle; ``"locate"`` starts with its own sample instead.

A warm start (:func:`pipeline.methods.scorers.model_fit.warm_start`) turns absolute scores (one prompt per item) into the prior of the first
round's fit: the scale between absolute and comparative scores is fitted by least squares on the comparisons as
they come in, so the prior is on the comparisons' scale.

Every round's fit reads the comparisons through a :class:`Model` (:func:`pipeline.methods.scorers.posterior.fit_posterior`):
the link from a probability to a score difference, the Huber threshold of the robust fit, and whether a pair
whose two orderings contradict each other (:mod:`pipeline.methods.scorers.contradiction`) is left out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from pipeline.methods.adaptive.locate import sample_pairs, select_locate
from pipeline.methods.adaptive.pairset import PairSet
from pipeline.methods.adaptive.reorder import select_reorder
from pipeline.methods.adaptive.stopping import StopRule
from pipeline.methods.adaptive.windowed import select_windowed
from pipeline.methods.scorers.contradiction import read_orderings
from pipeline.methods.scorers.model_fit import Model, Prior, fit_round
from pipeline.methods.scorers.posterior import LOGIT_CLIP, Posterior

__all__ = [
    "ROUND_STRATEGIES",
    "Pool",
    "RoundRecord",
    "RoundSettings",
    "Schedule",
    "first_pairs",
    "rank_pool",
    "round_schedule",
    "run_rounds",
    "select_round",
]

ROUND_STRATEGIES: tuple[str, ...] = ("reorder", "locate", "windowed", "random")


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
    ``budget`` pairs (default ``k``) in its star and fix rounds (:mod:`pipeline.methods.adaptive.locate`)."""
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


@dataclass(frozen=True)
class Schedule:
    """Round sizes in pairs per item: ``first_round`` first (0.5: a random matching, every item once; 1: a random
    cycle), then ``max(later_round x items, growth x the pairs judged so far)`` (the pipeline's
    ``adaptive.first_round``, ``later_round`` and ``growth``)."""

    first_round: float = 0.5
    later_round: float = 0.125
    growth: float = 0.25

    def sizes(self, n: int, checkpoints: tuple[int, ...] = ()) -> Callable[[int], int]:
        """The size of the next round of ``n`` items as a function of the pairs judged so far, cut so that a round
        ends at every checkpoint (pairs)."""
        return round_schedule(
            max(1, round(self.first_round * n)),
            self.growth,
            checkpoints,
            least=max(1, round(self.later_round * n)),
        )


@dataclass(frozen=True)
class RoundSettings:
    """How the rounds choose and fit: the strategy (:data:`ROUND_STRATEGIES`), the round sizes, the model every
    fit reads the comparisons through, the prior precision (``ridge``), the strategies' window and exploration,
    the seed of every round's randomness and the posterior's variance mode
    (:func:`pipeline.methods.scorers.posterior.fit_posterior`)."""

    strategy: str = "reorder"
    schedule: Schedule = field(default_factory=Schedule)
    model: Model = field(default_factory=Model)
    ridge: float = 1e-2
    window: int = 8
    explore: float = 0.1
    seed: int = 0
    variance: str = "auto"

    def __post_init__(self) -> None:
        if self.strategy not in ROUND_STRATEGIES:
            raise ValueError(f"unknown round strategy {self.strategy!r}; valid: {ROUND_STRATEGIES}")


@dataclass
class Pool:
    """One pool in the rounds: its items, its budget and prior, and what it has judged (the pairs ``(i, j)`` in the
    order they were chosen, with both orderings' answers: P(slot A wins) with ``i`` in slot A, then with ``j``).

    ``key`` seeds the pool's randomness with ``RoundSettings.seed`` and the round (the context's content key, not
    its name: a resumed or renamed run draws what the uninterrupted one drew). ``budget_pairs``: the pairs its call budget leaves (None:
    every pair); ``extra_calls``: calls spent beside the pairs (a warm start's absolute prompts)."""

    n: int
    key: int = 0
    budget_pairs: int | None = None
    prior: Prior | None = None
    extra_calls: int = 0
    i: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    j: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    orderings: NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 2)))
    # the last fit: the debiased answers, the pairs whose orderings contradict each other, the posterior and the
    # one before it (for the "change" criterion); why the pool's rounds ended (None: they go on)
    p: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    contradicted: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    post: Posterior | None = None
    previous: NDArray[np.float64] | None = None
    stopped: str | None = None
    # the pairs judged, as a set (the strategies never choose one again)
    judged: PairSet = field(init=False)

    def __post_init__(self) -> None:
        self.judged = PairSet(self.n, np.stack([self.i, self.j], axis=1))

    @property
    def pairs(self) -> int:
        return int(self.i.shape[0])

    @property
    def calls(self) -> int:
        """Judge calls so far: two per pair, and the calls beside them."""
        return 2 * self.pairs + self.extra_calls

    @property
    def budget(self) -> int:
        """The pairs the budget allows in all (every pair when there is none)."""
        every = self.n * (self.n - 1) // 2
        return every if self.budget_pairs is None else min(every, self.budget_pairs)

    def add(self, pairs: NDArray[np.int64], orderings: NDArray[np.float64]) -> None:
        """Pairs judged, both orderings each (rows ``(p_ij, p_ji)``)."""
        answers = np.asarray(orderings, dtype=np.float64).reshape(-1, 2)
        if answers.shape[0] != pairs.shape[0]:
            raise ValueError(f"{pairs.shape[0]} pairs judged but {answers.shape[0]} answers given")
        self.i = np.concatenate([self.i, pairs[:, 0].astype(np.int64)])
        self.j = np.concatenate([self.j, pairs[:, 1].astype(np.int64)])
        self.orderings = np.concatenate([self.orderings, answers])
        self.judged.add(pairs)


@dataclass
class RoundRecord:
    """One pool's round: after fitting everything judged so far, the pairs and calls, the stopping criterion's
    value, the posterior, the pairs whose orderings contradict each other, the seconds the fit and the selection
    took, why the pool's rounds ended (None: they go on) and the pairs chosen next (none when they ended)."""

    round: int
    pool: str
    pairs: int
    calls: int
    criterion: float | None
    post: Posterior = field(repr=False)
    contradicted: int
    fit_seconds: float
    select_seconds: float
    stopped: str | None
    chosen: NDArray[np.int64] = field(repr=False)


# judge(round, {pool: pairs (k, 2)}) -> {pool: both orderings' answers (k, 2)}
RoundJudge = Callable[[int, Mapping[str, NDArray[np.int64]]], Mapping[str, NDArray[np.float64]]]


def run_rounds(
    pools: Mapping[str, Pool],
    judge: RoundJudge,
    settings: RoundSettings,
    *,
    stop: StopRule | None = None,
    start: int = 0,
    checkpoints: tuple[int, ...] = (),
    on_round: Callable[[RoundRecord], None] | None = None,
    should_stop: Callable[[str, Pool], str | None] | None = None,
) -> list[RoundRecord]:
    """Rounds until every pool has stopped: its budget spent, ``stop`` met, ``should_stop(name, pool)`` giving a
    reason (tokens, money, time), or every pair judged.

    Each round, for every pool still going: fit the posterior to everything judged (both orderings read together:
    the pairs whose orderings contradict each other are found, :mod:`pipeline.methods.scorers.contradiction`, and left out
    under ``settings.model.drop_contradicted``), record the round (``on_round``), decide whether the pool stops,
    and otherwise choose its next pairs. Then ``judge`` answers every pool's chosen pairs at once.

    ``start``: the first round's number (a resumed run goes on from the next round; the pools hold what was
    judged). ``checkpoints`` (pairs): no round crosses one, the star and fix rounds of ``"locate"`` included.
    Returns the records of every pool and round, in order.
    """
    records: list[RoundRecord] = []
    r = start
    while True:
        chosen: dict[str, NDArray[np.int64]] = {}
        for name, pool in pools.items():
            if pool.stopped is not None:
                continue
            record = _round(r, name, pool, settings, stop, checkpoints, should_stop)
            records.append(record)
            if on_round is not None:
                on_round(record)
            if record.stopped is None:
                chosen[name] = record.chosen
        if not chosen:
            return records
        answers = judge(r, chosen)
        for name, pairs in chosen.items():
            pools[name].add(pairs, answers[name])
        r += 1


def _round(
    r: int,
    name: str,
    pool: Pool,
    settings: RoundSettings,
    stop: StopRule | None,
    checkpoints: tuple[int, ...],
    should_stop: Callable[[str, Pool], str | None] | None,
) -> RoundRecord:
    """Fit one pool, decide whether it stops, and choose its next pairs."""
    started = time.perf_counter()
    post = _fit(name, pool, settings)
    fit_seconds = time.perf_counter() - started
    value = stop.value(post, pool.previous) if stop is not None else None
    k = min(settings.schedule.sizes(pool.n, checkpoints)(pool.pairs), pool.budget - pool.pairs)
    why = None
    if stop is not None and value is not None and stop.met(value):
        why = f"{stop.criterion} {value:.4f} reached {stop.threshold}"
    elif k < 1:
        why = "call budget spent"
    elif should_stop is not None:
        why = should_stop(name, pool)
    started = time.perf_counter()
    pairs = np.zeros((0, 2), dtype=np.int64)
    if why is None:
        pairs = _select(r, pool, k, settings, checkpoints)
        if not pairs.shape[0]:
            why = "every pair judged"
    pool.stopped = why
    return RoundRecord(
        r,
        name,
        pool.pairs,
        pool.calls,
        value,
        post,
        int(pool.contradicted.sum()),
        fit_seconds,
        time.perf_counter() - started,
        why,
        pairs,
    )


def _fit(name: str, pool: Pool, settings: RoundSettings) -> Posterior:
    """The posterior after everything the pool has judged (warm-started from the last fit's mean)."""
    model = settings.model
    if pool.pairs:
        pool.p, pool.contradicted = read_orderings(pool.orderings, clip=model.clip)
    pool.previous = None if pool.post is None else pool.post.mean
    try:
        pool.post = fit_round(
            pool.n,
            pool.i,
            pool.j,
            pool.p,
            prior=pool.prior,
            model=model,
            ridge=settings.ridge,
            x0=pool.previous,
            variance=settings.variance,
            contradicted=pool.contradicted,
        )
    except RuntimeError as exc:  # the fit did not converge: which pool, and what it had judged
        raise RuntimeError(f"pool {name!r} ({pool.n} items, {pool.pairs} pairs judged): {exc}") from exc
    return pool.post


def _select(
    r: int, pool: Pool, k: int, settings: RoundSettings, checkpoints: tuple[int, ...]
) -> NDArray[np.int64]:
    """The next ``k`` pairs of a pool: the first round's design, then the strategy's choice."""
    rng = np.random.default_rng([settings.seed, r, pool.key])
    if pool.pairs == 0:
        if settings.strategy == "locate":
            return sample_pairs(pool.n, rng)[:k]
        return first_pairs(pool.n, min(k, pool.n * (pool.n - 1) // 2), rng)
    assert pool.post is not None
    limit = min([pool.budget, *(c for c in checkpoints if c > pool.pairs)])
    return select_round(
        settings.strategy,
        pool.post,
        k,
        pool.judged,
        rng,
        window=settings.window,
        explore=settings.explore,
        answers=(pool.i, pool.j, pool.p),
        budget=limit - pool.pairs,
        clip=settings.model.clip,
        contradicted=pool.contradicted,
    )


def rank_pool(
    n: int,
    judge: Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.float64]],
    settings: RoundSettings,
    budget_pairs: int,
    *,
    prior: Prior | None = None,
    extra_calls: int = 0,
    stop: StopRule | None = None,
    checkpoints: tuple[int, ...] = (),
    key: int = 0,
) -> tuple[list[RoundRecord], Pool]:
    """:func:`run_rounds` on one pool of ``n`` items whose ``judge(i, j)`` answers both orderings of each pair
    (rows ``(P(i in slot A wins), P(j in slot A wins))``, as :meth:`pipeline.methods.simulation.simulate.PoolJudge.orderings`
    does). Returns the records and the pool (what it judged: ``pool.i``, ``pool.j``, ``pool.p``)."""
    if budget_pairs < 1:
        raise ValueError("budget_pairs must be positive")
    pool = Pool(n, key=key, budget_pairs=budget_pairs, prior=prior, extra_calls=extra_calls)
    records = run_rounds(
        {"pool": pool},
        lambda _r, chosen: {"pool": judge(chosen["pool"][:, 0], chosen["pool"][:, 1])},
        settings,
        stop=stop,
        checkpoints=checkpoints,
    )
    return records, pool
