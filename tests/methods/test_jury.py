"""The jury (pipeline.methods.scorers.jury_poe) on simulated judges with a known truth: it recovers each judge's line, it is
better than the best single judge when the judges are comparably informative and independent, and it gives a judge
that is pure noise a weight near 0 (staying with the best judge where plain averaging falls behind). Majority vote
and plain averaging on hand-worked cases."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import spearmanr

from pipeline.methods.adaptive.selection import balanced_random
from pipeline.methods.scorers import poe_gaussian
from pipeline.methods.scorers.jury_poe import fit_jury, majority_vote, plain_average


def simulate(seed: int, judges: list[tuple[float, float, float]], n: int = 80, per_item: int = 3):
    """True scores N(0, 1); random pairs (``per_item`` per item), each judged in both orderings by every judge,
    ``logit P(A wins) = scale (s_A - s_B) + bias + N(0, sigma^2)``, independently per judge and per call."""
    rng = np.random.default_rng(seed)
    truth = rng.standard_normal(n)
    pairs = balanced_random(n, per_item * n, rng)
    a = np.concatenate([pairs[:, 0], pairs[:, 1]])
    b = np.concatenate([pairs[:, 1], pairs[:, 0]])
    rows = {"judge": [], "i": [], "j": [], "p": []}
    for k, (scale, bias, sigma) in enumerate(judges):
        x = scale * (truth[a] - truth[b]) + bias + sigma * rng.standard_normal(a.shape[0])
        rows["judge"].append(np.full(a.shape[0], k))
        rows["i"].append(a)
        rows["j"].append(b)
        rows["p"].append(expit(x))
    return truth, {key: np.concatenate(value) for key, value in rows.items()}


def rho(scores, truth) -> float:
    return float(spearmanr(scores, truth).statistic)


def single_judge_rhos(truth, rows, n_judges):
    out = []
    for k in range(n_judges):
        keep = rows["judge"] == k
        fit = fit_jury(
            truth.shape[0], np.zeros(keep.sum(), dtype=int), rows["i"][keep], rows["j"][keep], rows["p"][keep]
        )
        out.append(rho(fit.scores, truth))
    return out


def test_each_judges_line_is_recovered():
    """Scale, bias and noise of three different judges, on a dense design (the scores then barely move)."""
    judges = [(1.0, 0.3, 0.5), (2.0, -0.2, 1.0), (0.5, 0.0, 0.7)]
    truth, rows = simulate(0, judges, n=60, per_item=20)
    fit = fit_jury(60, rows["judge"], rows["i"], rows["j"], rows["p"])
    assert fit.converged
    assert rho(fit.scores, truth) > 0.99
    sd = truth.std()  # the fit's scores have standard deviation 1: its scales are per unit of that
    for line, (scale, bias, sigma) in zip(fit.judges, judges, strict=True):
        assert line.scale == pytest.approx(scale * sd, rel=0.06)
        assert line.bias == pytest.approx(bias, abs=0.05)
        assert np.sqrt(line.sigma2) == pytest.approx(sigma, rel=0.06)
        assert line.weight == pytest.approx(line.scale**2 / line.sigma2)
    assert sum(line.share for line in fit.judges) == pytest.approx(1.0)
    # information per answer scale^2 / sigma^2: 4, 4 and 0.51, so shares of about 0.47, 0.47 and 0.06
    np.testing.assert_allclose(
        [line.share for line in fit.judges], [4 / 8.51, 4 / 8.51, 0.51 / 8.51], atol=0.02
    )


def test_comparable_independent_judges_beat_the_best_single_judge():
    """Three judges of the same quality, independent errors, three pairs per item: over 20 seeds the jury's mean
    Spearman is above the best single judge's, and in most seeds above every single judge."""
    judges = [(1.0, 0.2, 1.0), (1.0, -0.3, 1.0), (1.0, 0.0, 1.0)]
    jury, best, wins = [], [], 0
    for seed in range(20):
        truth, rows = simulate(seed, judges)
        fit = fit_jury(truth.shape[0], rows["judge"], rows["i"], rows["j"], rows["p"])
        singles = single_judge_rhos(truth, rows, len(judges))
        jury.append(rho(fit.scores, truth))
        best.append(max(singles))
        wins += jury[-1] > max(singles)
        assert all(0.2 < line.share < 0.5 for line in fit.judges)  # comparable judges, comparable shares
    assert np.mean(jury) > np.mean(best) + 0.02
    assert wins >= 16


def test_a_judge_that_is_pure_noise_gets_a_weight_near_zero():
    """One informative judge and one that is noise: the jury stays with the informative one (within noise of its
    Spearman), the noise judge's share is near 0, and plain averaging (equal weights) falls behind."""
    judges = [(1.5, 0.0, 1.0), (0.0, 0.0, 2.0)]
    jury, best, plain, shares = [], [], [], []
    for seed in range(20):
        truth, rows = simulate(seed, judges)
        fit = fit_jury(truth.shape[0], rows["judge"], rows["i"], rows["j"], rows["p"])
        jury.append(rho(fit.scores, truth))
        best.append(max(single_judge_rhos(truth, rows, len(judges))))
        plain.append(
            rho(plain_average(truth.shape[0], rows["judge"], rows["i"], rows["j"], rows["p"]), truth)
        )
        shares.append(fit.judges[1].share)
    assert np.mean(jury) > np.mean(best) - 0.01
    assert np.mean(shares) < 0.03 and max(shares) < 0.1
    assert np.mean(jury) > np.mean(plain) + 0.02


def test_the_fit_does_not_depend_on_the_order_of_rows_or_the_judges_numbers():
    """Rows shuffled and the judges renumbered: the same scores, the lines in the new order. (A row is not written
    the other way round: ``i`` is position A, where the judge's bias acts.)"""
    truth, rows = simulate(3, [(1.0, 0.2, 1.0), (0.7, -0.1, 0.8)])
    n = truth.shape[0]
    fit = fit_jury(n, rows["judge"], rows["i"], rows["j"], rows["p"])
    order = np.random.default_rng(0).permutation(rows["p"].shape[0])
    fit2 = fit_jury(n, 1 - rows["judge"][order], rows["i"][order], rows["j"][order], rows["p"][order])
    np.testing.assert_allclose(fit2.scores, fit.scores, atol=1e-7)
    for new, old in ((fit2.judges[1], fit.judges[0]), (fit2.judges[0], fit.judges[1])):
        assert (new.scale, new.bias, new.sigma2) == pytest.approx((old.scale, old.bias, old.sigma2), rel=1e-6)


def test_plain_average_is_poe_gaussian_on_the_judges_mean_probability():
    truth, rows = simulate(4, [(1.0, 0.0, 1.0), (0.5, 0.0, 1.0), (2.0, 0.0, 0.5)], n=30)
    n = truth.shape[0]
    scores = plain_average(n, rows["judge"], rows["i"], rows["j"], rows["p"])
    k = rows["p"].shape[0] // 3
    mean_p = rows["p"].reshape(3, k).mean(axis=0)  # each judge's rows are the same prompts in the same order
    np.testing.assert_allclose(
        scores, poe_gaussian.poe_gaussian(n, rows["i"][:k], rows["j"][:k], mean_p), atol=1e-9
    )


def test_majority_vote_by_hand():
    """Three judges on pairs (0, 1), (1, 2), (0, 2), written either way round:
    (0, 1): judges say 0, 0, 1 -> 0 wins, agreement 2/3; (1, 2): 1, 2, 2 -> 2 wins, 2/3; (0, 2): 2, 2, 2 -> 2, 3/3.
    Win ratios: item 0 1/2, item 1 0/2, item 2 2/2. A judge's two orderings are averaged before its vote."""
    judge = np.array([0, 0, 1, 2, 0, 1, 2, 0, 1, 2])
    i = np.array([0, 1, 1, 0, 1, 2, 1, 2, 0, 0])
    j = np.array([1, 0, 0, 1, 2, 1, 2, 0, 2, 2])
    # judge 0 on (0, 1): P(0 wins) 0.9 as A and 1 - 0.3 = 0.7 as B: votes 0
    p = np.array([0.9, 0.3, 0.2, 0.4, 0.8, 0.9, 0.1, 0.8, 0.3, 0.2])
    scores, agreement = majority_vote(3, judge, i, j, p)
    np.testing.assert_allclose(scores, [0.5, 0.0, 1.0])
    # pairs in np.unique order of lo * n + hi: (0, 1), (0, 2), (1, 2)
    np.testing.assert_allclose(agreement, [2 / 3, 1.0, 2 / 3])


def test_a_tied_majority_counts_half_a_win_each():
    judge = np.array([0, 1, 0, 0, 1, 1])
    i = np.array([0, 0, 0, 1, 0, 1])
    j = np.array([1, 1, 1, 2, 1, 2])
    p = np.array([0.9, 0.2, 0.8, 0.6, 0.1, 0.7])
    scores, agreement = majority_vote(3, judge, i, j, p)
    # (0, 1): judge 0 says 0, judge 1 says 1: half each; (1, 2): both say 1
    np.testing.assert_allclose(scores, [0.5, (0.5 + 1.0) / 2, 0.0])
    np.testing.assert_allclose(agreement, [0.5, 1.0])


def test_a_judge_with_too_few_answers_is_named():
    with pytest.raises(ValueError, match="judge 1 has fewer than 3 answers"):
        fit_jury(3, [0, 0, 0, 1], [0, 1, 0, 1], [1, 2, 2, 2], [0.6, 0.6, 0.6, 0.6])
    with pytest.raises(ValueError, match="one entry per comparison"):
        fit_jury(3, [0, 0], [0, 1, 0], [1, 2, 2], [0.6, 0.6, 0.6])
