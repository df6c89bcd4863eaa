"""The adaptive benchmark's command line on a tiny pool: the chosen judges and truths, every arm's rows, the
calls-to-reach summary; unknown names refused; the connectivity floor. (The numbers are the benchmark's
business, not this test's.)"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from benchmarks import adaptive
from benchmarks import adaptive_arms as arms


def test_tiny_run_reports_the_chosen_judge_and_truth(capsys):
    adaptive.main(
        [
            "--n", "24", "--seeds", "2", "--workers", "1", "--skip-large",
            "--judges", "confident", "--truths", "normal", "--arms", "random,greedy,reorder",
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert out.count("## judge ") == 1
    assert "judge confident (scale 8.0" in out and "truth normal" in out
    for arm in ("random", "greedy", "reorder"):
        assert out.count(f"| {arm} | ") == 4  # Spearman and Kendall, vs truth and vs all-pairs
    for label in ("Spearman vs truth", "Kendall vs truth", "Spearman vs all-pairs", "Kendall vs all-pairs"):
        assert f"\n{label} (mean ± 95% CI)" in out
    assert "windowed" not in out
    assert "Calls per item to reach the all-pairs Spearman within 0.01 " in out
    assert "Calls per item to reach the all-pairs Spearman within 0.002 " in out


def test_evaluate_compares_with_the_truth_and_with_the_all_pairs_solution():
    """Spearman and Kendall against the truth, then against the all-pairs solution: one swap of neighbours among
    five items costs Kendall 2/10 pairs' worth (tau 0.8) and Spearman 1 - 6 * 2 / 120 (0.9)."""
    truth = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    full = np.array([0.0, 1.0, 2.0, 4.0, 3.0])
    rho, tau, rho_full, tau_full = arms.evaluate(truth, truth, full)
    assert (rho, tau) == (pytest.approx(1.0), pytest.approx(1.0))
    assert (rho_full, tau_full) == (pytest.approx(0.9), pytest.approx(0.8))


@pytest.mark.parametrize(
    "flag, value", [("--judges", "lenient"), ("--truths", "uniform"), ("--arms", "bogosort")]
)
def test_unknown_names_are_refused(flag, value, capsys):
    with pytest.raises(SystemExit):
        adaptive.main([flag, value, "--skip-large"])
    assert value in capsys.readouterr().err


def test_calls_to_reach_interpolates_between_budget_points():
    curve = [(2.0, 0.80), (4.0, 0.90), (6.0, 0.96), (8.0, 0.97)]
    assert adaptive.calls_to_reach(curve, 0.93) == (6.0, pytest.approx(5.0))
    assert adaptive.calls_to_reach(curve, 0.96) == (6.0, pytest.approx(6.0))
    assert adaptive.calls_to_reach(curve, 0.75) == (2.0, 2.0)  # already there at the first point
    assert adaptive.calls_to_reach(curve, 0.99) == (None, None)


def test_the_connectivity_floor_leaves_out_what_the_pairs_cannot_join():
    rng = np.random.default_rng(0)
    truth = rng.standard_normal(200)
    seen = truth + 0.2 * rng.standard_normal(200)
    # two calls per item: N pairs join every item, so the floor is the judge's own ranking
    assert arms.connectivity_floor(seen, truth, 2.0, rng) == pytest.approx(spearmanr(seen, truth).statistic)
    floors = [
        np.mean([arms.connectivity_floor(seen, truth, b, np.random.default_rng(s)) for s in range(20)])
        for b in arms.FLOOR_POINTS
    ]
    assert all(a < b for a, b in zip(floors, floors[1:], strict=False))
    # one call per item joins 101 items: the other 99 at the median cost far more than 0.01
    assert floors[0] < spearmanr(seen, truth).statistic - 0.2


def test_the_header_says_how_contradicting_orderings_are_read(capsys):
    common = ["--n", "16", "--seeds", "1", "--workers", "1", "--skip-large", "--judges", "confident"]
    adaptive.main([*common, "--truths", "normal", "--arms", "greedy"])
    assert "contradicting orderings left out" in capsys.readouterr().out
    adaptive.main([*common, "--truths", "normal", "--arms", "greedy", "--keep-contradicted"])
    assert "contradicting orderings averaged" in capsys.readouterr().out


def test_greedy_poe_scores_greedys_pairs_as_poe_gaussian_does():
    """The same greedy-optimal pairs, two fits: at every pair (N - 1 calls per item) PoE-Gaussian's ranking is the
    average probability's (PoE appendix A.3), and on fewer pairs the arm differs from the rounds' model."""
    n, seed = 17, 3  # 16 calls per item, a budget point, is every pair
    setting = next(s for s in arms.JUDGES if s.name == "confident")
    model = arms.Model("logit", 10.0, 1.345, True, True)
    out = arms.run_seed((seed, n, "normal", setting, ("greedy", "greedy_poe"), model, 1e-2))
    assert set(out["greedy"]) == set(out["greedy_poe"])  # the same budget points
    rng = np.random.default_rng([seed, n, arms.TRUTHS.index("normal"), arms.JUDGES.index(setting)])
    truth = arms.pool_truth("normal", n, rng)
    judge = arms.PoolJudge(
        truth, rng, scale=setting.scale, bias=setting.bias, item_noise=setting.item_noise,
        call_noise=setting.call_noise, flip=setting.flip,
    )  # fmt: skip
    every = float(n - 1)
    assert out["greedy_poe"][every][0] == pytest.approx(spearmanr(judge.all_pairs_scores(), truth).statistic)
    assert any(out["greedy"][b] != out["greedy_poe"][b] for b in out["greedy"] if b < every)
