"""The arms of ``make bench-adaptive`` on one simulated pool (:mod:`benchmarks.adaptive` runs them over
seeds, judges and truths and prints the tables): the simulated judges and truths, the budgets, every arm's design
and its correlations with the truth and with the all-pairs solution.

The adaptive arms run the pipeline's own round loop (:func:`rounds_arm`, :func:`pipeline.methods.adaptive.loop.run_rounds`)
with the pipeline's round settings (:func:`settings`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from scipy.stats import kendalltau, spearmanr

from pipeline.config.adaptive_rounds import AdaptiveConfig
from pipeline.methods.adaptive.greedy import greedy_optimal
from pipeline.methods.adaptive.loop import RoundRecord, RoundSettings, rank_pool
from pipeline.methods.adaptive.sorting import merge_sort, repeated_quicksort
from pipeline.methods.scorers._common import single_threaded_blas
from pipeline.methods.scorers.contradiction import read_orderings
from pipeline.methods.scorers.model_fit import Model, Prior, fit_round
from pipeline.methods.scorers.poe_gaussian import poe_gaussian
from pipeline.methods.simulation.simulate import PoolJudge, pool_truth


@dataclass(frozen=True)
class JudgeSetting:
    name: str
    scale: float
    item_noise: float
    call_noise: float
    flip: float
    bias: float = 0.5


JUDGES = (
    # a judge that mostly agrees with the truth: comparisons near each other in the ranking are informative
    JudgeSetting("sharp", scale=3.0, item_noise=0.2, call_noise=0.5, flip=0.02),
    # a judge far from the truth (all-pairs Spearman about 0.6, as LLM judges on CMCQRD): most of the error is
    # the judge's own view of each item, which no selection removes
    JudgeSetting("noisy", scale=1.0, item_noise=1.0, call_noise=1.0, flip=0.1),
    # a sharp judge that is also confident, as a strong LLM's first-token probabilities are: at scale 8 a pair one
    # standard deviation apart is answered at about 0.9997, and more than a third of all pairs beyond the log-odds
    # cap, so a far pair says which item is better and little of how far apart; the setting where the adaptive
    # literature reports its gain
    JudgeSetting("confident", scale=8.0, item_noise=0.2, call_noise=0.5, flip=0.02),
    # the confident judge with a quarter of its item noise: it ranks as the truth does (all-pairs Spearman about
    # 0.999), so a ranking close to the all-pairs one has to order near neighbours, the comparisons that an
    # outcome-blind design spends least on
    JudgeSetting("precise", scale=8.0, item_noise=0.05, call_noise=0.5, flip=0.02),
)
TRUTHS = ("normal", "heavy", "clustered")
# how close to the all-pairs Spearman "reached" is: the 0.01, and a finer ranking, where selection matters more
TOLERANCES = (0.01, 0.002)
ARMS = (
    "random",
    "greedy",
    "reorder",
    "reorder_exact",
    "locate",
    "windowed",
    "reorder_warm",
    "quicksort",
    "mergesort",
    "oracle",
    "greedy_poe",
)
# the oracle design: hubs every ORACLE_SPACING places of the judge's own ranking; its fit's ridge (the rounds'
# default, 1e-2, shrinks a chain of 40 hubs towards 0)
ORACLE_SPACING = 16
ORACLE_RIDGE = 1e-4


# calls per item below the 2 that connect a pool, where connectivity_floor is computed
FLOOR_POINTS = tuple(round(1.0 + 0.1 * k, 1) for k in range(11))


def connectivity_floor(
    seen: np.ndarray, truth: np.ndarray, calls_per_item: float, rng: np.random.Generator
) -> float:
    """Spearman with the truth of a reference for designs of ``calls_per_item``: ``m`` pairs join at most ``m + 1``
    items into one connected set; rank those by the judge's own view of them (``seen``, what every pair of
    them judged would give) and put the others, which no comparison relates to them, at the median. Below 2 calls
    per item a share of the items is always left out, whatever the design."""
    n = seen.shape[0]
    joined = min(n, pairs_for(calls_per_item, n) + 1)
    est = seen.astype(np.float64).copy()
    est[rng.choice(n, n - joined, replace=False)] = np.median(seen)
    return float(spearmanr(est, truth).statistic)


def budgets(n: int) -> list[float]:
    """Calls per item: 2 to 64, and 0.5% of the ordered pairs; at most ``N - 1`` (every pair, both orderings)."""
    points = {2.0, 2.4, 2.8, round(0.005 * (n - 1), 2), 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0}
    return sorted(b for b in points if 1.0 <= b <= n - 1)


def pairs_for(calls_per_item: float, n: int) -> int:
    return int(round(calls_per_item * n / 2))


def scores_of(n: int, i, j, orderings, model: Model, ridge: float = 1e-2) -> np.ndarray:
    """The model's scores from pairs ``(i, j)`` judged in both orderings (rows ``(p_ij, p_ji)``): their debiased
    average, the contradicting ones left out under ``model.drop_contradicted``, as every round's fit does."""
    p, bad = read_orderings(orderings, clip=model.clip)
    return fit_round(
        n,
        np.asarray(i, dtype=np.int64),
        np.asarray(j, dtype=np.int64),
        p,
        model=model,
        ridge=ridge,
        variance="diagonal",  # the means only (a small ridge: the fit factorises if CG does not converge)
        contradicted=bad,
    ).mean


def oracle_design(seen: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray | None:
    """A design that knows the judge's own view of every item (``seen``), as no real selection can: in that
    order, hubs every :data:`ORACLE_SPACING` places, each compared with the next two hubs; every other item with
    one of its two nearest hubs; the rest of the ``m`` pairs random pairs at most three spacings apart. Short
    comparisons inside the cap, and every score a few comparisons from every other. None when ``m`` is below
    the hubs and spokes (about 1.06 N pairs)."""
    n = seen.shape[0]
    h = ORACLE_SPACING
    order = np.argsort(seen, kind="stable")
    hubs = np.arange(h // 2, n, h)
    rows = [(order[a], order[b]) for a, b in zip(hubs[:-1], hubs[1:], strict=True)]
    rows += [(order[a], order[b]) for a, b in zip(hubs[:-2], hubs[2:], strict=True)]
    is_hub = np.zeros(n, dtype=bool)
    is_hub[hubs] = True
    for r in np.flatnonzero(~is_hub).tolist():
        near = hubs[np.argsort(np.abs(hubs - r), kind="stable")[:2]]
        rows.append((order[r], order[int(rng.choice(near))]))
    if len(rows) > m:
        return None
    taken = {(min(a, b), max(a, b)) for a, b in rows}
    while len(taken) < m:
        r = int(rng.integers(0, n))
        d = int(rng.integers(1, 3 * h + 1))
        if r + d < n:
            a, b = int(order[r]), int(order[r + d])
            taken.add((min(a, b), max(a, b)))
    return np.array(sorted(taken), dtype=np.int64)


def settings(
    strategy: str, model: Model, ridge: float, seed: int, variance: str = "diagonal"
) -> RoundSettings:
    """The pipeline's rounds (:meth:`pipeline.config.adaptive_rounds.AdaptiveConfig.round_settings`: its round sizes, window
    and exploration) with this arm's strategy, the benchmark's model and ridge, and the seed's randomness."""
    base = AdaptiveConfig().round_settings()
    return dataclasses.replace(
        base, strategy=strategy, model=model, ridge=ridge, seed=seed, variance=variance
    )


def rounds_arm(
    n: int,
    judge: PoolJudge,
    arm_settings: RoundSettings,
    budget_pairs: int,
    *,
    checkpoints: tuple[int, ...] = (),
    prior: Prior | None = None,
    extra_calls: int = 0,
    key: int = 0,
) -> list[RoundRecord]:
    """An adaptive arm: the pipeline's round loop (:func:`pipeline.methods.adaptive.loop.run_rounds`, which the rounds stage
    runs) on one simulated pool, every pair judged in both orderings, to ``budget_pairs`` pairs, a round ending at
    every checkpoint."""
    records, _ = rank_pool(
        n,
        judge.orderings,
        arm_settings,
        budget_pairs,
        prior=prior,
        extra_calls=extra_calls,
        checkpoints=checkpoints,
        key=key,
    )
    return records


def evaluate(scores, truth, full) -> tuple[float, float, float, float]:
    """(Spearman vs truth, Kendall vs truth, Spearman vs all-pairs, Kendall vs all-pairs)."""
    return (
        float(spearmanr(scores, truth).statistic),
        float(kendalltau(scores, truth).statistic),
        float(spearmanr(scores, full).statistic),
        float(kendalltau(scores, full).statistic),
    )


def run_seed(task: tuple[int, int, str, JudgeSetting, tuple[str, ...], Model, float]) -> dict:
    """Every arm on one simulated pool: {arm: {budget: :func:`evaluate`'s four correlations}}."""
    seed, n, truth_kind, setting, arms, model, ridge = task
    with single_threaded_blas():  # one BLAS thread per worker process: the workers share the cores
        return _run_seed(seed, n, truth_kind, setting, arms, model, ridge)


def _run_seed(
    seed: int,
    n: int,
    truth_kind: str,
    setting: JudgeSetting,
    arms: tuple[str, ...],
    model: Model,
    ridge: float = 1e-2,
) -> dict:
    rng = np.random.default_rng([seed, n, TRUTHS.index(truth_kind), JUDGES.index(setting)])
    truth = pool_truth(truth_kind, n, rng)
    judge = PoolJudge(
        truth,
        rng,
        scale=setting.scale,
        bias=setting.bias,
        item_noise=setting.item_noise,
        call_noise=setting.call_noise,
        flip=setting.flip,
    )
    # the all-pairs solution: PoE-Gaussian's average probability, or the model on every pair, whichever is closer
    # to the truth (the stricter reference)
    a, b = np.triu_indices(n, k=1)
    candidates = [judge.all_pairs_scores(), scores_of(n, a, b, judge.orderings(a, b), model, ridge)]
    full = max(candidates, key=lambda x: spearmanr(x, truth).statistic)
    points = budgets(n)
    marks = tuple(pairs_for(b, n) for b in points)
    out: dict = {"all_pairs": evaluate(full, truth, full)}
    floor_rng = np.random.default_rng([seed, n, 7])
    out["floor"] = {b: connectivity_floor(judge.seen, truth, b, floor_rng) for b in FLOOR_POINTS}
    picks = None
    for arm in arms:
        arm_rng = np.random.default_rng([seed, n, ARMS.index(arm)])
        results = {}
        if arm in ("random", "reorder", "reorder_exact", "locate", "windowed", "reorder_warm"):
            strategy = {"reorder_exact": "reorder", "reorder_warm": "reorder"}.get(arm, arm)
            prior = None
            offset = 0
            if arm == "reorder_warm":  # one absolute prompt per item, paid from the budget
                prior = Prior(judge.absolute(arm_rng), weight=1.0)
                offset = pairs_for(1.0, n)
            wanted = {m - offset: b for m, b in zip(marks, points, strict=True) if m - offset > 0}
            records = rounds_arm(
                n,
                judge,
                settings(strategy, model, ridge, seed, "exact" if arm == "reorder_exact" else "diagonal"),
                max(wanted),
                checkpoints=tuple(wanted),
                prior=prior,
                extra_calls=n if prior is not None else 0,
                key=n * len(ARMS) + ARMS.index(arm),
            )
            for r in records:
                if r.pairs in wanted:
                    results[wanted[r.pairs]] = evaluate(r.post.mean, truth, full)
        elif arm == "oracle":
            for m, b in zip(marks, points, strict=True):
                sel = oracle_design(judge.seen, m, np.random.default_rng([seed, n, m]))
                if sel is not None:
                    q = judge.orderings(sel[:, 0], sel[:, 1])
                    results[b] = evaluate(
                        scores_of(n, sel[:, 0], sel[:, 1], q, model, ORACLE_RIDGE), truth, full
                    )
        elif arm in ("greedy", "greedy_poe"):
            if picks is None:  # outcome-blind: the same picks serve both arms
                picks = greedy_optimal(n, max(marks), np.random.default_rng([seed, n]))
            for m, b in zip(marks, points, strict=True):
                if m >= n - 1:
                    sel = picks[:m]
                    q = judge.orderings(sel[:, 0], sel[:, 1])
                    if arm == "greedy":
                        scores = scores_of(n, sel[:, 0], sel[:, 1], q, model, ridge)
                    else:  # as the PoE paper and the fixed-design workflow score them
                        scores = poe_gaussian(n, sel[:, 0], sel[:, 1], (q[:, 0] + 1.0 - q[:, 1]) / 2.0)
                    results[b] = evaluate(scores, truth, full)
        else:
            sort = repeated_quicksort if arm == "quicksort" else merge_sort
            asked, _ = sort(n, judge, max(marks), arm_rng)
            i, j, _ = asked.arrays()
            q = np.stack([judge.ordered(i, j), judge.ordered(j, i)], axis=1)  # the answers the sort read
            for m, b in zip(marks, points, strict=True):
                if m <= asked.spent:
                    results[b] = evaluate(scores_of(n, i[:m], j[:m], q[:m], model, ridge), truth, full)
        out[arm] = results
    return out
