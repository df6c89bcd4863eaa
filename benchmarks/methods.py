"""Speed, memory and the simulated-data check of the methods library (``pipeline.methods``).

Prints one table:

1. PoE-Gaussian on N = 100,000 items and K = 1,000,000 comparisons: wall time (min and median of
   ``--repeats`` runs) and peak memory. Peak memory is the ``tracemalloc`` peak of one extra run (numpy and
   scipy allocate through the traced allocator; the input arrays, 24 MB, are excluded), with the process's
   ``ru_maxrss`` growth over that run alongside. Targets: 2 s and 2 GB.
2. Greedy-optimal selection for N = 658 (the CMCQRD question pool) and K = 2,000 comparisons. Target: 2 s.
3. Bradley-Terry (hard decisions) on the same 100k / 1M data; ``choix.ilsr_pairwise`` beside it where choix can
   run: it builds a dense N x N Markov chain (80 GB at N = 100,000), so the side-by-side comparison is made at
   the largest sizes it fits (same comparisons per item, K = 10 N), printing the time ratio and the
   correlation of the two solutions.
4. The efficiency curve of one SummEval-sized set (100 contexts x 16 candidates, 100 draws per K, all seven
   methods, default K grid). Target: under a minute.
5. The simulated check of the PoE paper's finding, from run 4: with a judge of ~70% pairwise accuracy
   (logit ``0.5 (s_A - s_B) + bias + noise``, true scores N(0, 1), P(A) about 0.6, both orderings judged and
   averaged), the Spearman correlation lost at 20% of the comparisons (K = 24 of 120) relative to the full
   set, per method; PoE-Gaussian and PoE-BT must lose less than the win-ratio.

    python -m benchmarks.methods [--quick] [--repeats 3] [--seed 0] [--no-choix]

The machine may be shared: the load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

from benchmarks.timing import header
from pipeline.methods.adaptive import greedy
from pipeline.methods.scorers.bradley_terry import bradley_terry
from pipeline.methods.scorers.poe_gaussian import fit as gaussian_fit
from pipeline.methods.simulation import efficiency, simulate

TARGETS = {"gaussian_s": 2.0, "gaussian_gb": 2.0, "greedy_s": 2.0, "efficiency_s": 60.0, "bootstrap_s": 3.0}


def timed(f: Callable[[], object], repeats: int) -> tuple[list[float], object]:
    times, out = [], None
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t0)
    return times, out


def peak_memory(f: Callable[[], object]) -> tuple[float, float]:
    """(tracemalloc peak in MB, ru_maxrss growth in MB) of one call."""
    gc.collect()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    f()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e6, (rss1 - rss0) / 1e3  # ru_maxrss is in kB on Linux


def random_comparisons(n: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    truth = rng.normal(size=n)
    i = rng.integers(0, n, k)
    j = (i + rng.integers(1, n, k)) % n
    p = simulate.simulate_judge(truth, np.stack([i, j], 1), rng, simulate.SimulatedJudge(noise=1.0))
    return truth, np.stack([i, j], 1), p


def fmt_times(times: list[float]) -> str:
    return f"{min(times):.3f} s (median {statistics.median(times):.3f})"


def status(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


Row = tuple[str, str, str]


def gaussian_rows(
    truth: np.ndarray, pairs: np.ndarray, p: np.ndarray, repeats: int
) -> tuple[list[Row], bool]:
    """1. PoE-Gaussian on N items and K comparisons: time, peak memory, agreement with the truth."""
    n, k = truth.shape[0], pairs.shape[0]
    i, j = pairs[:, 0], pairs[:, 1]

    def run_gaussian():
        return gaussian_fit(n, i, j, p, stderr="none")

    times, fit = timed(run_gaussian, repeats)
    traced_mb, rss_mb = peak_memory(run_gaussian)
    corr = float(np.corrcoef(fit.scores, truth)[0, 1])
    ok = min(times) <= TARGETS["gaussian_s"] and traced_mb / 1e3 <= TARGETS["gaussian_gb"]
    rows = [
        (f"PoE-Gaussian N={n:,} K={k:,}", fmt_times(times), f"<= 2 s: {status(min(times) <= 2)}"),
        (
            "  peak memory (tracemalloc; ru_maxrss growth)",
            f"{traced_mb:.0f} MB ({rss_mb:.0f} MB)",
            f"<= 2 GB: {status(traced_mb <= 2000)}",
        ),
        ("  corr(scores, true scores)", f"{corr:.4f}", ""),
    ]
    return rows, ok


def bradley_terry_rows(
    pairs: np.ndarray,
    p: np.ndarray,
    n: int,
    repeats: int,
    rng: np.random.Generator,
    choix_sizes: list[int],
    with_choix: bool,
) -> list[Row]:
    """3. Bradley-Terry on the same comparisons (hard decisions), and choix beside it where choix can run."""
    k = pairs.shape[0]
    i, j = pairs[:, 0], pairs[:, 1]
    y = (rng.random(k) < p).astype(np.float64)  # hard outcomes drawn from the judge's probabilities
    times, _ = timed(lambda: bradley_terry(n, i, j, y), repeats)
    rows = [
        (f"Bradley-Terry (MM) N={n:,} K={k:,}", fmt_times(times), ""),
        (f"  choix.ilsr_pairwise N={n:,}", "not run", f"dense {n}x{n} chain = {n**2 * 8 / 1e9:.0f} GB"),
    ]
    if not with_choix:
        return rows
    try:
        import choix
    except ImportError:
        return [*rows, ("  choix", "not installed", "pip install choix==0.4.1")]
    for n_small in choix_sizes:
        k_small = 10 * n_small
        _, pr_small, p_small = random_comparisons(n_small, k_small, rng)
        y_small = (rng.random(k_small) < p_small).astype(np.float64)
        a_s, b_s = pr_small[:, 0], pr_small[:, 1]
        winners = np.where(y_small == 1.0, a_s, b_s)
        losers = np.where(y_small == 1.0, b_s, a_s)
        data = [(int(w), int(lo)) for w, lo in zip(winners, losers, strict=True)]
        ours_t, ours = timed(lambda a=a_s, b=b_s, ys=y_small, m=n_small: bradley_terry(m, a, b, ys), 1)
        # choix's regulariser: alpha on every entry of the chain (virtual comparisons with every item)
        ch_t, theirs = timed(lambda m=n_small, d=data: choix.ilsr_pairwise(m, d, alpha=1.0 / m), 1)
        c = float(np.corrcoef(ours, theirs)[0, 1])
        rows.append(
            (
                f"  N={n_small:,} K={k_small:,}: ours vs choix.ilsr_pairwise",
                f"{ours_t[0]:.3f} s vs {ch_t[0]:.3f} s",
                f"choix/ours = {ch_t[0] / ours_t[0]:.1f}x; corr {c:.4f}",
            )
        )
    return rows


def efficiency_rows(draws: int, rng: np.random.Generator) -> tuple[list[Row], bool, bool]:
    """4-5. The efficiency curve of a SummEval-sized set, and the PoE paper's finding on it."""
    n_ctx, n_cand, scale = 100, 16, 0.5
    noise = simulate.noise_for_accuracy(0.7, scale=scale)
    judge = simulate.SimulatedJudge(scale, simulate.bias_for_prior(0.6), noise)
    true_scores, probs = simulate.simulate_context_set(n_ctx, n_cand, rng, judge)
    a, b = np.nonzero(~np.eye(n_cand, dtype=bool))
    acc = np.mean(
        [simulate.judge_accuracy(true_scores[c], np.stack([a, b], 1), probs[c, a, b]) for c in range(n_ctx)]
    )
    ctx = np.repeat(np.arange(n_ctx), a.size)
    pm = efficiency.pair_matrix(
        n_ctx, n_cand, ctx, np.tile(a, n_ctx), np.tile(b, n_ctx), probs[:, a, b].ravel()
    )
    times, curve = timed(lambda: efficiency.efficiency_curve(pm, true_scores, rng, n_draws=draws), 1)
    ok_eff = times[0] <= TARGETS["efficiency_s"]
    q10, q90 = np.nanquantile(probs, [0.1, 0.9])
    rows = [
        (
            f"efficiency curve {n_ctx}x{n_cand}, {draws} draws, K={curve.k.tolist()}, 7 methods",
            f"{times[0]:.2f} s",
            f"< 60 s: {status(ok_eff)}",
        ),
        (
            "  simulated judge: pairwise accuracy, P(A), p 10-90% range",
            f"{acc:.3f}, {float(np.nanmean(probs)):.3f}, {q10:.2f}-{q90:.2f}",
            f"logit {scale} (s_A - s_B) + bias + N(0, {noise:.2f}^2); orderings averaged",
        ),
    ]
    k20 = int(np.flatnonzero(curve.k == round(0.2 * curve.k[-1]))[0])
    loss = {}
    for m in curve.methods:
        mean, std = curve.curve(m)
        loss[m] = mean[-1] - mean[k20]
        rows.append(
            (
                f"  {m}: Spearman full / at K={curve.k[k20]} (+-std over draws)",
                f"{mean[-1]:.3f} / {mean[k20]:.3f} (+-{std[k20]:.3f})",
                f"loss {loss[m]:.3f} ({loss[m] / mean[-1]:.1%} of full)",
            )
        )
    finding = loss["poe_gaussian"] < loss["win_ratio"] and loss["poe_bt"] < loss["win_ratio"]
    rows.append(("  PoE finding: loss(PoE-Gaussian), loss(PoE-BT) < loss(win-ratio)", "", status(finding)))
    rows += sampling_rows(pm, true_scores, curve, draws, rng)
    return rows, ok_eff, finding


def sampling_rows(pm, true_scores, curve, draws: int, rng: np.random.Generator) -> list[Row]:
    """The smallest budgets again with the PoE authors' draws (uniform, drawn again while a candidate is left out)
    beside ours (a perfect matching first): where the two curves part."""
    small = curve.k[:3].tolist()
    authors = efficiency.efficiency_curve(
        pm, true_scores, rng, n_draws=draws, k_grid=small, methods=("win_ratio", "poe_gaussian"),
        sampling="poe_authors",
    )  # fmt: skip
    rows = []
    for m in authors.methods:
        ours = curve.curve(m)[0][: len(small)]
        theirs = authors.curve(m)[0]
        rows.append(
            (
                f"  {m} at K={small}: balanced draws / the PoE authors' draws",
                " / ".join(f"{x:.3f}" for x in ours) + "  vs  " + " / ".join(f"{x:.3f}" for x in theirs),
                "difference " + ", ".join(f"{x - y:+.3f}" for x, y in zip(ours, theirs, strict=True)),
            )
        )
    return rows


def bootstrap_rows(repeats: int, rng: np.random.Generator) -> tuple[list[Row], bool]:
    """6. The leaderboard's bootstrap, against a Python loop over rounds run in this process."""
    from pipeline.methods.agreement.bootstrap import bootstrap_counts, bootstrap_means, bootstrap_ratio

    n_models, n_inputs, n_rounds = 10, 10_000, 1_000
    scores = rng.standard_normal((n_inputs, n_models)) + np.linspace(0, 0.1, n_models)
    games = np.full((n_inputs, n_models), 9.0)
    wins = rng.uniform(0, 9, size=(n_inputs, n_models))

    def run_bootstrap():
        counts = bootstrap_counts(n_inputs, n_rounds, np.random.default_rng(0))
        return bootstrap_ratio(wins, games, counts, 0.9), bootstrap_means(scores, counts, 0.9)

    times, _ = timed(run_bootstrap, repeats)
    # the baseline in this process: the same bootstrap as a Python loop over rounds (100 rounds, scaled to 1,000)
    started = time.perf_counter()
    loop_rng = np.random.default_rng(0)
    for _ in range(100):
        draw = loop_rng.integers(0, n_inputs, n_inputs)
        _ = wins[draw].sum(axis=0) / games[draw].sum(axis=0), scores[draw].mean(axis=0)
    loop_s = (time.perf_counter() - started) * n_rounds / 100
    ok = min(times) <= TARGETS["bootstrap_s"]
    row = (
        f"leaderboard bootstrap {n_models} models x {n_inputs:,} inputs x {n_rounds:,} rounds",
        fmt_times(times),
        f"<= {TARGETS['bootstrap_s']:g} s: {status(ok)}; Python loop over rounds {loop_s:.2f} s "
        f"({loop_s / min(times):.1f}x)",
    )
    return [row], ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="small sizes (N=20k/K=200k, 20 draws) for a smoke run"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed runs per measurement (min and median shown)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-choix", action="store_true", help="skip the choix comparison")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    n_big, k_big = (20_000, 200_000) if args.quick else (100_000, 1_000_000)
    print("\n".join(header("methods benchmark", "methods", argv)))
    print(f"# numpy {np.__version__}, scipy {__import__('scipy').__version__}")
    print(f"# load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    truth, pairs, p = random_comparisons(n_big, k_big, rng)
    rows, ok = gaussian_rows(truth, pairs, p, args.repeats)
    times, _ = timed(lambda: greedy.greedy_optimal(658, 2000, np.random.default_rng(args.seed)), args.repeats)
    rows.append(("greedy-optimal N=658 K=2,000", fmt_times(times), f"<= 2 s: {status(min(times) <= 2)}"))
    choix_sizes = [1000] if args.quick else [1000, 2000, 4000]
    rows += bradley_terry_rows(pairs, p, n_big, args.repeats, rng, choix_sizes, not args.no_choix)
    curve_rows, ok_eff, finding = efficiency_rows(20 if args.quick else 100, rng)
    boot_rows, ok_boot = bootstrap_rows(args.repeats, rng)
    rows += curve_rows + boot_rows

    width = max(len(r[0]) for r in rows)
    width2 = max(len(r[1]) for r in rows)
    print()
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:<{width2}}  {note}")
    print(f"\n# load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if (ok and ok_boot and finding) else 1


if __name__ == "__main__":
    raise SystemExit(main())
