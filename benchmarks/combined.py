"""Absolute, comparative and combined scores side by side on simulated judges with a known truth.

Each setting simulates contexts of 16 candidates whose true scores are N(0, 1): a comparative judge of a given
per-judgement accuracy on K pairs per context (both orderings, averaged) and an absolute judge of a given noise on
a 1-10 scale. It prints, per setting, the mean per-context Spearman of PoE-Gaussian on the comparisons alone, of
the absolute scores alone, and of the combined solve (:mod:`pipeline.methods.scorers.poe_combined`, weight estimated), the
gain of the combination over the better part, and the time of the combined scoring against PoE-Gaussian alone
(the baseline run in the same process).

    make bench-combined                      # the default settings
    make bench-combined ARGS="--contexts 200"
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
from scipy.stats import spearmanr

from benchmarks.timing import header
from pipeline.methods.scorers import poe_gaussian
from pipeline.methods.scorers.poe_combined import ContextData, combine, estimate
from pipeline.methods.simulation.simulate import simulate_assessment


@dataclass(frozen=True)
class Setting:
    name: str
    accuracy: float
    k: int
    absolute_noise: float
    # The absolute judge's integer scale (prompt scoring's 1-10), or None for a continuous score (G-Eval's
    # expected score, the implicit probability).
    scale: tuple[int, int] | None = (1, 10)


SETTINGS = (
    Setting("both informative, 25% of pairs", 0.75, 30, 1.0),
    Setting("both informative, all pairs", 0.75, 120, 1.0),
    Setting("strong comparisons, weak absolute", 0.85, 60, 3.0),
    Setting("weak comparisons, strong absolute", 0.65, 30, 0.5, None),
    Setting("weak comparisons, strong 1-10 absolute", 0.65, 30, 0.5),
    Setting("absolute is noise", 0.75, 30, 100.0, None),
)


def mean_spearman(scores: list[np.ndarray], truths: list[np.ndarray]) -> float:
    values = [spearmanr(s, t)[0] for s, t in zip(scores, truths, strict=True)]
    return float(np.nanmean(values))


def run_setting(setting: Setting, n_contexts: int, n_items: int, seed: int) -> dict[str, float]:
    sim = simulate_assessment(
        n_contexts,
        n_items,
        setting.k,
        np.random.default_rng(seed),
        comparative_accuracy=setting.accuracy,
        absolute_noise=setting.absolute_noise,
        absolute_scale=setting.scale,
    )
    data = [ContextData(n_items, c["i"], c["j"], c["p"], c["absolute"]) for c in sim]
    truths = [c["truth"] for c in sim]
    started = time.perf_counter()
    comparative = [poe_gaussian.poe_gaussian(d.n, d.i, d.j, d.p) for d in data]
    base_seconds = time.perf_counter() - started
    started = time.perf_counter()
    est = estimate(data)
    combined = [combine(d, est).scores for d in data]
    combined_seconds = time.perf_counter() - started
    return {
        "comparative": mean_spearman(comparative, truths),
        "absolute": mean_spearman([d.absolute for d in data], truths),
        "combined": mean_spearman(combined, truths),
        "weight": est.weight,
        "slope": est.slope,
        "time_ratio": combined_seconds / base_seconds,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--contexts", type=int, default=100)
    parser.add_argument("--items", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print("\n".join(header("combined benchmark", "combined", argv)))
    print(f"# {args.contexts} contexts x {args.items} candidates, true scores N(0, 1), seed {args.seed}")
    columns = (
        f"{'setting':<40} {'acc':>5} {'K':>4} {'abs sd':>6} {'scale':>6} | {'comparative':>11} {'absolute':>8} "
        f"{'combined':>8} {'gain':>7} | {'weight':>7} {'time/PoE':>8}"
    )
    print(columns)
    print("-" * len(columns))
    wins = 0
    informative = 0
    # A 1-10 absolute score ties many candidates; Spearman gives tied candidates their average rank, which a weak
    # comparative signal breaking the ties can do worse than: that setting is shown but not counted.
    counted = [s for s in SETTINGS if s.absolute_noise < 10 and not (s.scale and s.accuracy < 0.7)]
    for setting in SETTINGS:
        r = run_setting(setting, args.contexts, args.items, args.seed)
        gain = r["combined"] - max(r["comparative"], r["absolute"])
        if setting in counted:
            informative += 1
            wins += gain > 0
        print(
            f"{setting.name:<40} {setting.accuracy:>5.2f} {setting.k:>4d} {setting.absolute_noise:>6.1f} "
            f"{'1-10' if setting.scale else 'cont.':>6} | "
            f"{r['comparative']:>11.3f} {r['absolute']:>8.3f} {r['combined']:>8.3f} {gain:>+7.4f} | "
            f"{r['weight']:>7.3f} {r['time_ratio']:>7.1f}x"
        )
    print(
        f"# combined beats both parts in {wins} of {informative} settings where both carry information "
        "(the tied 1-10 setting with weak comparisons not counted)"
    )
    return 0 if wins == informative else 1


if __name__ == "__main__":
    raise SystemExit(main())
