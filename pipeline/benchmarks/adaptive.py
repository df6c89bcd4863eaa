"""Adaptive rounds against fixed designs and sorting, on simulated pools with a known truth.

The protocol of the adaptive-comparison literature (Fathullah & Gales 2025; Maystre & Grossglauser 2017):

- true scores of N items: N(0, 1), heavy-tailed (Student t, 3 degrees of freedom) or clustered (five tight
  clusters, many near-ties);
- a judge (:class:`pipeline.methods.simulate.PoolJudge`) that sees each item through its own fixed error
  (``item_noise``: what the all-pairs solution cannot remove either) and says, for A against B,
  ``P(A) = sigmoid(scale (s'_A - s'_B) + position bias + call noise)``, reversed at a flip rate, the same answer
  for the same prompt; every pair judged in both orderings and debiased, as the pipeline does; four settings
  (:data:`JUDGES`): sharp, noisy, confident (sharp with saturated probabilities, as a strong LLM's), and precise
  (confident, with little error of its own in each item);
- the budget in judge calls per item (two calls per pair), from 2 to 64 (with 2.4 and 2.8 between 2 and 4);
  0.5% of the ordered pairs is ``0.005 (N - 1)`` calls per item (3.3 at N = 658);
- arms: uniformly random pairs in rounds (the balanced-random baseline), greedy-optimal (PoE section 3.6: its
  picks do not depend on the answers, so one greedy run per seed serves every budget as a prefix), the adaptive
  strategies in rounds (reorder probability with the diagonal variance, the same with the exact covariance,
  windowed neighbours with 10% exploration, reorder warm-started from one absolute score per item, which costs
  one call per item of the budget), locate (every item placed by a graded answer first, then reorder:
  :mod:`pipeline.methods.locate`), repeated quicksort and merge sort (PairS-greedy); an **oracle** design that
  no selection can make, because it knows the judge's own view of every item (:func:`oracle_design`): it shows
  what a design could reach at a budget, not what a strategy does; and ``greedy_poe``, greedy-optimal's pairs
  scored as the PoE paper and the fixed-design workflow (``pairs=greedy``, ``poe_gaussian``) score them:
  PoE-Gaussian on the debiased average probability, the baseline as the product offered it before the rounds;
- every arm's comparisons (but ``greedy_poe``'s) scored by one model (``--link``, ``--robust``, ``--no-censor``;
  default the rounds' own: the capped log-odds, an answer at the cap read as "at least the cap", with Huber's
  robust fit, :class:`pipeline.methods.rounds.Model`), and so is the all-pairs solution
  (the reference is the better of that and the PoE-Gaussian average probability, whichever is closer to the
  truth);
- Spearman and Kendall against the truth and against the all-pairs solution, mean and 95% interval over seeds;
  the calls per item each arm needs to come within 0.01 and within 0.002 of the all-pairs Spearman
  (:data:`TOLERANCES`).

Rounds follow the pipeline's defaults (:class:`pipeline.config.AdaptiveConfig`): a random matching first (N/2
pairs, every item once), then rounds of ``max(N/8, 25% of what is judged)`` pairs, ending at every budget point;
locate's sample, star and fix rounds are its own, each cut at the next budget point.
The second part times one round (fit, then selection) at N = 100,000 with 20 calls per item judged, against
uniform random selection in the same process.

    make bench-adaptive                          # N = 658, 20 seeds, then N = 100,000
    make bench-adaptive ARGS="--seeds 5 --skip-large"
    make bench-adaptive ARGS="--judges confident --truths normal --skip-large"
    make bench-adaptive ARGS="--link linear --robust 0"   # PoE-Gaussian on p - 1/2, Gaussian experts
    make bench-adaptive ARGS="--no-censor"                # an answer at the log-odds cap read as the cap
    make bench-adaptive ARGS="--arms locate --judges confident --truths normal --ridge 1e-4 --skip-large"
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import resource
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from scipy.stats import kendalltau, spearmanr

from pipeline.config.rounds import AdaptiveConfig
from pipeline.judge.hardware import read_cpu
from pipeline.methods._common import single_threaded_blas
from pipeline.methods.contradiction import read_orderings
from pipeline.methods.locate import select_locate
from pipeline.methods.poe_gaussian import poe_gaussian
from pipeline.methods.posterior import LOGIT_CLIP
from pipeline.methods.reorder import select_reorder
from pipeline.methods.rounds import Model, Prior, RoundRecord, RoundSettings, fit_round, rank_pool
from pipeline.methods.selection import PairSet, greedy_optimal
from pipeline.methods.simulate import PoolJudge, pool_truth
from pipeline.methods.sorting import merge_sort, repeated_quicksort
from pipeline.methods.windowed import select_windowed


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
    """The pipeline's rounds (:meth:`pipeline.config.rounds.AdaptiveConfig.round_settings`: its round sizes, window
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
    """An adaptive arm: the pipeline's round loop (:func:`pipeline.methods.rounds.run_rounds`, which the rounds stage
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


def interval(values: list[float]) -> tuple[float, float]:
    """Mean and the half-width of its 95% t-interval."""
    from scipy.stats import t

    a = np.asarray(values, dtype=np.float64)
    if a.shape[0] < 2:
        return float(a.mean()), float("nan")
    return float(a.mean()), float(t.ppf(0.975, a.shape[0] - 1) * a.std(ddof=1) / math.sqrt(a.shape[0]))


def report(name: str, n: int, runs: list[dict], arms: tuple[str, ...]) -> None:
    points = budgets(n)
    full = interval([r["all_pairs"][0] for r in runs])
    print(
        f"\n## {name}: N = {n}, {len(runs)} seeds; all-pairs Spearman vs truth {full[0]:.3f} ± {full[1]:.3f}"
    )
    for metric, k, label in (
        (0, 3, "Spearman vs truth"),
        (1, 3, "Kendall vs truth"),
        (2, 3, "Spearman vs all-pairs"),
        (3, 3, "Kendall vs all-pairs"),
    ):
        print(f"\n{label} (mean ± 95% CI) by judge calls per item")
        print("| arm | " + " | ".join(f"{b:g}" for b in points) + " |")
        print("|---|" + "---|" * len(points))
        for arm in arms:
            cells = []
            for b in points:
                vals = [r[arm][b][metric] for r in runs if b in r[arm]]
                if len(vals) < len(runs):
                    cells.append("-")
                else:
                    m, h = interval(vals)
                    cells.append(f"{m:.{k}f} ± {h:.{k}f}")
            print(f"| {arm} | " + " | ".join(cells) + " |")
    for tolerance in TOLERANCES:
        reach_line(full[0] - tolerance, tolerance, n, runs, arms, points)


def reach_line(
    target: float, tolerance: float, n: int, runs: list[dict], arms: tuple[str, ...], points: list[float]
) -> None:
    print(
        f"\nCalls per item to reach the all-pairs Spearman within {tolerance:g} (mean >= {target:.3f}): the first "
        "budget point, and between points by linear interpolation of the mean curve"
    )
    reach = {}
    for arm in arms:
        curve = [
            (b, float(np.mean([r[arm][b][0] for r in runs])))
            for b in points
            if all(b in r[arm] for r in runs)
        ]
        hit, between = calls_to_reach(curve, target)
        reach[arm] = between
        print(
            f"  {arm:>14}: "
            + (
                "not within the budgets"
                if hit is None
                else f"{hit:g} ({hit / (n - 1):.2%} of the ordered pairs); interpolated {between:.2f}"
            )
        )
    for base in ("greedy", "greedy_poe"):
        if reach.get(base):
            for arm in arms:
                if reach.get(arm) and arm not in ("greedy", "greedy_poe"):
                    print(f"  {arm} / {base} calls (interpolated): {reach[arm] / reach[base]:.2f}x")
    if reach.get("greedy"):
        half = reach["greedy"] / 2
        if half < FLOOR_POINTS[-1]:
            floor = float(
                np.interp(half, FLOOR_POINTS, [np.mean([r["floor"][b] for r in runs]) for b in FLOOR_POINTS])
            )
            joined = min(n, pairs_for(half, n) + 1)
            print(
                f"  half of greedy's calls ({half:.2f} per item) joins at most {joined} of the {n} items; those ranked "
                f"by the judge's own view, the rest at the median: {floor:.3f}, {target - floor:.3f} below the line"
            )


def calls_to_reach(curve: list[tuple[float, float]], target: float) -> tuple[float | None, float | None]:
    """The first budget of ``curve`` (budget, mean Spearman) at or above ``target``, and the budget where the curve
    crosses it by linear interpolation from the point before (the first point itself if it is already there)."""
    for k, (b, y) in enumerate(curve):
        if y >= target:
            if k == 0:
                return b, b
            b0, y0 = curve[k - 1]
            return b, b0 + (target - y0) / (y - y0) * (b - b0)
    return None, None


def large_round(n: int, calls_per_item: float, seed: int, model: Model) -> None:
    """One round at N items with ``calls_per_item`` already judged: fit, then select, timed against uniform
    random selection; peak memory of the process."""
    rng = np.random.default_rng(seed)
    truth = pool_truth("normal", n, rng)
    judge = PoolJudge(truth, rng)
    k_round = n // 4
    started = time.perf_counter()
    records, pool = rank_pool(
        n, judge.orderings, settings("reorder", model, 1e-2, seed, "auto"), pairs_for(calls_per_item, n)
    )
    i, j, p = pool.i, pool.j, pool.p
    total = time.perf_counter() - started
    print(
        f"\n## N = {n:,}: {len(records)} rounds of reorder selection to {calls_per_item:g} calls per item "
        f"({len(i):,} pairs) in {total:.1f} s; Spearman vs truth {spearmanr(records[-1].post.mean, truth).statistic:.3f}"
    )
    previous = records[-2].post.mean
    q = np.stack([judge.ordered(i, j), judge.ordered(j, i)], axis=1)  # what was judged, both orderings
    tc = time.perf_counter()
    _, bad = read_orderings(q, clip=model.clip)
    t0 = time.perf_counter()
    post = fit_round(n, i, j, p, model=model, x0=previous, contradicted=bad)
    t1 = time.perf_counter()
    cold = fit_round(n, i, j, p, model=model, contradicted=bad)
    t2 = time.perf_counter()
    judged = PairSet(n, np.stack([i, j], axis=1))
    t3 = time.perf_counter()
    chosen = select_reorder(post, k_round, judged)
    t4 = time.perf_counter()
    windowed = select_windowed(post.mean, k_round, judged, rng)
    t5 = time.perf_counter()
    baseline = select_windowed(post.mean, k_round, judged, rng, window=1, explore=1.0)
    t6 = time.perf_counter()
    located = select_locate(
        post, k_round, judged, i, j, p, rng, budget=k_round, clip=model.clip, contradicted=bad
    )
    t7 = time.perf_counter()
    assert chosen.shape[0] == windowed.shape[0] == baseline.shape[0] == located.shape[0] == k_round
    print(f"one round at {calls_per_item:g} calls per item, selecting {k_round:,} pairs:")
    print(
        f"  contradicting orderings found:            {t0 - tc:.2f} s, {int(bad.sum()):,} pairs "
        f"({'left out of the fit' if model.drop_contradicted else 'averaged'})"
    )
    print(
        f"  fit (CG, warm start from the last round): {t1 - t0:.2f} s, {post.iterations} CG iterations; "
        f"{post.downweighted:,} answers down-weighted"
    )
    print(f"  fit (CG, cold start):                     {t2 - t1:.2f} s, {cold.iterations} CG iterations")
    print(f"  judged-pair set of {len(judged):,} pairs:        {t3 - t2:.2f} s")
    print(
        f"  select reorder:                           {t4 - t3:.2f} s ({(t4 - t3) / (t6 - t5):.1f}x uniform random)"
    )
    print(
        f"  select windowed:                          {t5 - t4:.2f} s ({(t5 - t4) / (t6 - t5):.1f}x uniform random)"
    )
    print(
        f"  select locate (fix pairs, then reorder):  {t7 - t6:.2f} s ({(t7 - t6) / (t6 - t5):.1f}x uniform random)"
    )
    print(f"  select uniform random (baseline):         {t6 - t5:.2f} s")
    print(f"  fit + reorder selection:                  {t1 - t0 + t4 - t3:.2f} s")
    print(f"  the same with the contradiction rule:     {t1 - tc + t4 - t3:.2f} s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"  peak memory of the process: {peak:.0f} MB (an N x N float matrix would be {n * n * 8 / 2**30:.0f} GiB)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=658)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--skip-large", action="store_true")
    parser.add_argument("--skip-simulation", action="store_true")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--judges", default=",".join(j.name for j in JUDGES))
    parser.add_argument("--truths", default=",".join(TRUTHS))
    parser.add_argument("--link", choices=("logit", "linear"), default="logit")
    parser.add_argument("--clip", type=float, default=LOGIT_CLIP)
    parser.add_argument("--robust", type=float, default=1.345, help="Huber threshold; 0: Gaussian experts")
    parser.add_argument(
        "--no-censor",
        action="store_true",
        help="read an answer at the log-odds cap as the cap, not as at least it",
    )
    parser.add_argument(
        "--keep-contradicted",
        action="store_true",
        help="read a pair whose orderings contradict each other as their average (about 1/2), not leave it out",
    )
    parser.add_argument(
        "--ridge",
        type=float,
        default=1e-2,
        help="prior precision of every score (the rounds' adaptive.ridge); not the oracle design's",
    )
    args = parser.parse_args(argv)
    model = Model(
        args.link,
        args.clip,
        args.robust if args.robust > 0 else None,
        not args.no_censor,
        not args.keep_contradicted,
    )
    arms = tuple(a for a in args.arms.split(",") if a)
    unknown = set(arms) - set(ARMS)
    if unknown:
        parser.error(f"unknown arms {sorted(unknown)}; valid: {ARMS}")
    names = [j.name for j in JUDGES]
    judges = [j for j in JUDGES if j.name in args.judges.split(",")]
    truths = [t for t in TRUTHS if t in args.truths.split(",")]
    unknown = (set(args.judges.split(",")) - set(names)) | (set(args.truths.split(",")) - set(TRUTHS))
    if unknown:
        parser.error(f"unknown judges or truths {sorted(unknown)}; valid: {names}, {list(TRUTHS)}")
    print(f"# cpu: {read_cpu().describe()}")
    print(f"# python {os.sys.version.split()[0]}, numpy {np.__version__}; {args.workers} worker process(es)")
    print(
        f"# model: link {model.link} (clip {model.clip:g}), robust {model.robust}, "
        f"censor {model.censor and model.link == 'logit'}, ridge {args.ridge:g}, "
        f"contradicting orderings {'left out' if model.drop_contradicted else 'averaged'}"
    )
    started = time.perf_counter()
    for setting in () if args.skip_simulation else judges:
        for truth in truths:
            tasks = [(seed, args.n, truth, setting, arms, model, args.ridge) for seed in range(args.seeds)]
            with ProcessPoolExecutor(args.workers) as pool:
                runs = list(pool.map(run_seed, tasks))
            judge = (
                f"judge {setting.name} (scale {setting.scale}, item noise {setting.item_noise}, call noise "
                f"{setting.call_noise}, flip {setting.flip}, position bias {setting.bias})"
            )
            report(f"{judge}, truth {truth}", args.n, runs, arms)
    if not args.skip_simulation:
        print(f"\n(simulation: {time.perf_counter() - started:.0f} s)")
    if not args.skip_large:
        large_round(args.large, 20.0, seed=0, model=model)


if __name__ == "__main__":
    main()
