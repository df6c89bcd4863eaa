"""Adaptive rounds against fixed designs and sorting, on simulated pools with a known truth.

The protocol of the adaptive-comparison literature (Fathullah & Gales 2025; Maystre & Grossglauser 2017):

- true scores of N items: N(0, 1), heavy-tailed (Student t, 3 degrees of freedom) or clustered (five tight
  clusters, many near-ties);
- a judge (:class:`pipeline.methods.simulation.simulate.PoolJudge`) that sees each item through its own fixed error
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
  :mod:`pipeline.methods.adaptive.locate`), repeated quicksort and merge sort (PairS-greedy); an **oracle** design that
  no selection can make, because it knows the judge's own view of every item (:func:`benchmarks.adaptive_arms.oracle_design`): it shows
  what a design could reach at a budget, not what a strategy does; and ``greedy_poe``, greedy-optimal's pairs
  scored as the PoE paper and the fixed-design workflow (``pairs=greedy``, ``poe_gaussian``) score them:
  PoE-Gaussian on the debiased average probability, the baseline as the product offered it before the rounds;
- every arm's comparisons (but ``greedy_poe``'s) scored by one model (``--link``, ``--robust``, ``--no-censor``;
  default the rounds' own: the capped log-odds, an answer at the cap read as "at least the cap", with Huber's
  robust fit, :class:`pipeline.methods.adaptive.loop.Model`), and so is the all-pairs solution
  (the reference is the better of that and the PoE-Gaussian average probability, whichever is closer to the
  truth);
- Spearman and Kendall against the truth and against the all-pairs solution, mean and 95% interval over seeds;
  the calls per item each arm needs to come within 0.01 and within 0.002 of the all-pairs Spearman
  (:data:`TOLERANCES`).

Rounds follow the pipeline's defaults (:class:`pipeline.config.adaptive_rounds.AdaptiveConfig`): a random matching first (N/2
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
import math
import os
import resource
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
from scipy.stats import spearmanr

from benchmarks.adaptive_arms import (
    ARMS,
    FLOOR_POINTS,
    JUDGES,
    TOLERANCES,
    TRUTHS,
    budgets,
    pairs_for,
    run_seed,
    settings,
)
from benchmarks.timing import header
from pipeline.methods.adaptive.locate import select_locate
from pipeline.methods.adaptive.loop import rank_pool
from pipeline.methods.adaptive.pairset import PairSet
from pipeline.methods.adaptive.reorder import select_reorder
from pipeline.methods.adaptive.windowed import select_windowed
from pipeline.methods.scorers.contradiction import read_orderings
from pipeline.methods.scorers.model_fit import Model, fit_round
from pipeline.methods.scorers.posterior import LOGIT_CLIP
from pipeline.methods.simulation.simulate import PoolJudge, pool_truth


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
    print("\n".join(header("adaptive benchmark", "adaptive", argv)))
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
