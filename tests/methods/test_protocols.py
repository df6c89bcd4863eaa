"""The papers' exact protocols, each against its released code's rule restated on hand-worked and random cases: the
EACL release's balanced threshold, system-level correlation, the PoE authors' draws for the efficiency curves,
FastChat's statistical rank, AlpacaEval's length-controlled win rate (against numbers its released code computed),
and where the length control differs from arena-hard-auto's on purpose."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from pipeline.methods.adaptive.selection import all_pairs, balanced_random_batch
from pipeline.methods.agreement.bootstrap import statistical_ranks
from pipeline.methods.agreement.metrics import system_correlation
from pipeline.methods.quality.alpaca_lc import lc_win_rate
from pipeline.methods.quality.style import feature_differences, fit_controlled
from pipeline.methods.simulation.efficiency import covered_uniform_batch
from pipeline.methods.verdicts.debias import balanced_threshold, balancing_alpha, decision_threshold
from tests.methods.conftest import round_robin


def release_threshold(p: np.ndarray) -> float:
    """adianliusie/comparative-assessment, src/evaluation/loader.py: get_balanced_thresholds, as released."""
    for t in np.arange(0, 1, 0.001):
        if np.mean(p < t) >= 0.5:
            break
    return t


def test_the_balanced_threshold_is_the_releases_and_splits_from_the_alpha_rule_on_a_lopsided_judge():
    p = np.array([0.1, 0.3, 0.35, 0.6, 0.62, 0.9])
    # half below t first at the grid point 0.350 (np.arange's 0.35000000000000003, just above the third value, as in
    # the release), where 0.1, 0.3 and 0.35 lie below it
    assert balanced_threshold(p) == np.arange(0, 1, 0.001)[350] and np.mean(p < balanced_threshold(p)) == 0.5
    rng = np.random.default_rng(0)
    for _ in range(50):
        q = rng.beta(rng.uniform(0.3, 3), rng.uniform(0.3, 3), size=rng.integers(2, 200))
        assert balanced_threshold(q) == pytest.approx(release_threshold(q), abs=1e-12)
        assert np.mean(q > balanced_threshold(q)) <= 0.5 + 1e-12
    # a lopsided judge: most answers mildly "A", a few very sure "B" ones
    lopsided = np.concatenate([np.full(60, 0.58), np.full(40, 0.02)])
    by_alpha = decision_threshold(balancing_alpha(lopsided))
    by_median = balanced_threshold(lopsided)
    assert np.mean(lopsided > by_median) <= 0.5 < np.mean(lopsided > by_alpha)


def test_system_level_correlation_is_the_correlation_of_per_system_means():
    systems = np.array(["a", "b", "c", "a", "b", "c"])
    pred = np.array([1.0, 2.0, 3.0, 3.0, 0.0, 5.0])  # means a 2, b 1, c 4
    human = np.array([2.0, 1.0, 5.0, 2.0, 1.0, 3.0])  # means a 2, b 1, c 4
    value, n = system_correlation(systems, pred, human)
    assert n == 3 and value == pytest.approx(1.0)
    rng = np.random.default_rng(1)
    names = rng.integers(0, 6, 120).astype(str)
    x, y = rng.normal(size=120), rng.normal(size=120)
    means = [(x[names == s].mean(), y[names == s].mean()) for s in sorted(set(names))]
    want = spearmanr([m[0] for m in means], [m[1] for m in means]).statistic
    assert system_correlation(names, x, y)[0] == pytest.approx(want, abs=1e-12)
    assert np.isnan(system_correlation(np.array(["a", "b"]), np.array([1.0, 2.0]), np.array([1.0, 2.0]))[0])


def test_system_means_a_solver_leaves_apart_by_its_tolerance_are_ties_in_any_row_order():
    """Mirrored contexts (each system first in one, last in the other): every system's mean is 0 in exact
    arithmetic, and a fit stopped at its tolerance leaves them ~1e-9 apart (the Bradley-Terry scores of the absolute
    reference run, as fitted on one machine). Those differences rank nothing: no correlation, whatever the order of
    the rows and the systems' names, while a real difference of 1e-5 still counts."""
    systems = np.array(["a", "b", "c", "d"] * 2)
    pred = np.array(
        [-1.2264154411913641, 1.2264154388850101, -0.37826377653870696, 0.37826377884506096]
        + [1.2264154388850095, -1.2264154411913641, 0.3782637788450611, -0.37826377653870646]
    )
    human = np.array([2.33, 1.33, 2.33, 1.67, 4.33, 2.0, 4.0, 3.67])
    rng = np.random.default_rng(3)
    for _ in range(20):
        order = rng.permutation(pred.shape[0])
        names = dict(zip("abcd", rng.permutation(["w", "x", "y", "z"]), strict=True))  # renamed systems
        renamed = np.array([names[s] for s in systems[order]])
        for method in ("spearman", "pearson", "kendall"):
            value, n = system_correlation(renamed, pred[order], human[order], method)
            assert n == 4 and np.isnan(value)
    apart = pred + np.tile([0.0, 1e-5, 2e-5, 3e-5], 2)
    assert system_correlation(systems, apart, human)[0] == pytest.approx(
        spearmanr([0.0, 1e-5, 2e-5, 3e-5], [3.33, 1.665, 3.165, 2.67]).statistic
    )


def test_the_poe_authors_draws_are_uniform_over_the_sets_that_cover_every_candidate():
    n, k = 4, 3
    draws = covered_uniform_batch(n, k, 32_000, np.random.default_rng(2))
    pairs = all_pairs(n)
    for row in draws[:200]:
        assert set(pairs[row].ravel()) == set(range(n))  # every candidate in a pair
    counts = Counter(map(tuple, draws))
    assert len(counts) == 16  # C(6, 3) = 20 sets, 4 of them (triangles) leave a candidate out
    frequencies = np.array(list(counts.values())) / len(draws)
    assert np.abs(frequencies - 1 / 16).max() < 0.006
    # ours always hold a perfect matching, theirs not: at k = n (16 of 120 pairs) the degrees spread wider
    m = 16
    theirs = covered_uniform_batch(m, m, 400, np.random.default_rng(3))
    ours = balanced_random_batch(m, m, 400, np.random.default_rng(3))
    spread = {
        name: np.mean([np.bincount(all_pairs(m)[row].ravel(), minlength=m).var() for row in draws])
        for name, draws in (("theirs", theirs), ("ours", ours))
    }
    assert spread["theirs"] > spread["ours"]


REFERENCES = Path(__file__).resolve().parent / "references"


@pytest.mark.parametrize(
    "case", json.loads((REFERENCES / "alpaca_eval_lc.json").read_text())["cases"], ids=lambda c: c["desc"]
)
def test_the_length_controlled_win_rate_is_alpaca_evals_to_machine_precision(case):
    """Given the instructions' difficulty, one model's GLM, its length-controlled win rate and its standard error
    equal what AlpacaEval's released glm_winrate.py computes on the same games (the reference file says how)."""
    got = lc_win_rate(case["preference"], case["length_model"], case["length_baseline"], case["difficulty"])
    assert got.win_rate == pytest.approx(case["win_rate"], abs=1e-9)
    assert got.standard_error == pytest.approx(case["standard_error"], abs=1e-9)
    for name, value in case["weights"].items():
        assert getattr(got, name) == pytest.approx(value, abs=1e-9)


def fastchat_rank(lower: np.ndarray, upper: np.ndarray) -> list[int]:
    """lm-sys/FastChat, fastchat/serve/monitor/monitor.py: recompute_final_ranking, as released."""
    ranking = []
    for a in range(len(lower)):
        rank = 1
        for b in range(len(lower)):
            if a != b and lower[b] > upper[a]:
                rank += 1
        ranking.append(rank)
    return ranking


def test_the_statistical_rank_is_fastchats_rule():
    rng = np.random.default_rng(0)
    for _ in range(200):
        centre = rng.normal(0, 1, 6)
        width = rng.uniform(0, 1, 6)
        lower, upper = np.round(centre - width, 2), np.round(centre + width, 2)  # touching bounds happen
        assert statistical_ranks(lower, upper).tolist() == fastchat_rank(lower, upper)


@pytest.mark.parametrize("names", [("a", "b", "c"), ("c", "b", "a")])
def test_centring_the_length_feature_as_arena_hard_auto_does_would_lift_the_verbose_model(names):
    """arena-hard-auto's show_result.py centres its features (every game there is a model against one baseline on a
    fixed side). On a round robin whose sides follow the names, centring reads "controlled" at the mean length gap
    of however the games are oriented: the verbose model comes out more than 0.5 above the plain model it equals,
    whichever name sorts first; uncentred (ours) it is within 0.25 of it (the noise of 600 inputs), and the better model is first."""
    models, a, b, y, la, lb = round_robin(names)
    zeros = np.zeros((len(a), 3))
    x = feature_differences(np.column_stack([la, zeros]), np.column_stack([lb, zeros]))
    ours = dict(zip(models, fit_controlled(a, b, y, x, 3).theta, strict=True))
    centred = (x - x.mean(axis=0)) / x.std(axis=0)
    theirs = dict(zip(models, fit_controlled(a, b, y, centred, 3).theta, strict=True))
    assert max(ours, key=ours.get) == "good" and abs(ours["verbose"] - ours["plain"]) < 0.25
    assert theirs["verbose"] - theirs["plain"] > 0.5
