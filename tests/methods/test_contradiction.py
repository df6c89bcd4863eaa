"""Contradicting orderings (pipeline.methods.scorers.contradiction): the rule on small cases worked by hand, against the
simulated judge's known flips, and what leaving them out does to the rounds' fit and to locate's fix pairs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import spearmanr

from pipeline.methods.adaptive.locate import fix_pairs
from pipeline.methods.adaptive.loop import RoundSettings, Schedule, rank_pool
from pipeline.methods.adaptive.pairset import PairSet
from pipeline.methods.scorers.contradiction import MARGIN, contradicted, ordering_bias, read_orderings
from pipeline.methods.scorers.model_fit import Model, fit_round
from pipeline.methods.scorers.posterior import Posterior
from pipeline.methods.simulation.simulate import PoolJudge, pool_truth

MODEL = Model(link="logit", robust=1.345, censor=True)


def test_the_rule_on_pairs_worked_by_hand():
    # position bias 0.5 log-odds (the median half-sum of the pairs inside the cap); the estimates of how much
    # better i is are logit(p_ij) - 0.5 and -(logit(p_ji) - 0.5)
    d = np.array([0.0, 3.0, -4.0, 6.0, 1.0, 12.0])
    p_ij = expit(d + 0.5)
    p_ji = expit(-d + 0.5)
    p_ji[3] = expit(6.0 + 0.5)  # pair 3 flipped in its second ordering: both say "slot A", by 6 each
    p_ji[4] = expit(-0.5 + 0.5)  # pair 4: a near-tie whose second ordering leans the other way, by 0.5
    p_ij[5], p_ji[5] = 1.0, 1.0  # pair 5: saturated, each ordering certain of its slot A
    assert ordering_bias(p_ij, p_ji) == pytest.approx(0.5)
    assert contradicted(p_ij, p_ji).tolist() == [False, False, False, True, False, True]
    # at the margin: both estimates exactly MARGIN away from a tie, of opposite sign
    edge_ij = np.r_[p_ij[:3], expit(MARGIN + 0.5)]
    edge_ji = np.r_[p_ji[:3], expit(MARGIN + 0.5)]
    assert contradicted(edge_ij, edge_ji)[-1]
    assert not contradicted(edge_ij, edge_ji, margin=MARGIN + 0.1)[-1]


def test_a_strong_position_bias_is_not_a_contradiction_but_a_flip_on_top_of_it_is():
    rng = np.random.default_rng(0)
    d = rng.normal(0.0, 3.0, 200)
    p_ij = expit(d + 3.0)  # slot A favoured by 3 log-odds: many pairs answered "A" in both orderings
    p_ji = expit(-d + 3.0)
    assert ((p_ij > 0.5) & (p_ji > 0.5)).mean() > 0.3
    assert ordering_bias(p_ij, p_ji) == pytest.approx(3.0)
    assert not contradicted(p_ij, p_ji).any()
    far = np.flatnonzero(np.abs(d) > MARGIN + 1.0)[:5]
    p_ji[far] = expit(d[far] + 3.0)  # the second ordering's opinion reversed (j better by d), its bias kept
    assert set(np.flatnonzero(contradicted(p_ij, p_ji)).tolist()) == set(far.tolist())


def test_a_missing_ordering_is_never_a_contradiction_and_shapes_must_match():
    assert contradicted([0.99, 0.99, 0.7, 0.3], [0.99, np.nan, 0.3, 0.7]).tolist() == [
        True,
        False,
        False,
        False,
    ]
    assert ordering_bias([0.999999], [0.999999]) == 0.0  # nothing inside the cap: no bias measured
    with pytest.raises(ValueError, match="one value of each per pair"):
        contradicted([0.5, 0.5], [0.5])
    p, bad = read_orderings([[0.9, 0.2], [0.99, 0.99]])
    assert p.tolist() == pytest.approx([0.85, 0.5]) and bad.tolist() == [False, True]


def test_the_rule_finds_the_simulated_judges_flips_and_almost_nothing_else():
    rng = np.random.default_rng(3)
    truth = pool_truth("normal", 300, rng)
    judge = PoolJudge(truth, rng, scale=8.0, item_noise=0.2, call_noise=0.5, flip=0.05)
    a, b = np.triu_indices(300, k=1)
    q = judge.orderings(a, b)
    _, bad = read_orderings(q)
    one_flip = judge.flipped(a, b) ^ judge.flipped(b, a)
    # a flip is visible when the pair is far enough apart that the flipped answer is confidently wrong
    visible = one_flip & (judge.scale * np.abs(judge.seen[a] - judge.seen[b]) > MARGIN + judge.bias + 2.0)
    assert visible.sum() > 500
    assert bad[visible].mean() > 0.99
    assert bad[~one_flip].mean() < 1e-3
    assert bad[one_flip].mean() > 0.8  # the rest: flips of near-ties, which say little either way


def test_rounds_that_leave_contradicted_pairs_out_rank_better_than_rounds_that_average_them():
    gains = []
    for seed in range(10):
        ranked = {}
        for drop in (True, False):
            rng = np.random.default_rng(seed)
            truth = pool_truth("normal", 200, rng)
            judge = PoolJudge(truth, rng, scale=8.0, item_noise=0.2, call_noise=0.5, flip=0.02)
            model = dataclasses.replace(MODEL, drop_contradicted=drop)
            settings = RoundSettings("locate", Schedule(0.2, 0.2, 0.0), model, seed=seed)
            records, pool = rank_pool(200, judge.orderings, settings, 280)
            assert judge.calls == 2 * pool.pairs == 560
            # the count in every record is the rule's over everything judged by then, left out or averaged
            q = np.stack([judge.ordered(pool.i, pool.j), judge.ordered(pool.j, pool.i)], axis=1)
            assert records[-1].contradicted == int(read_orderings(q)[1].sum()) > 0
            assert np.allclose(pool.p, read_orderings(q)[0])
            ranked[drop] = spearmanr(records[-1].post.mean, truth).statistic
        gains.append(ranked[True] - ranked[False])
    assert np.mean(gains) > 0.005 and sum(g > 0 for g in gains) >= 7


def test_the_fit_leaves_a_contradicted_pair_out_only_when_the_model_says_so():
    # item 3 is judged once, against item 0, and that pair's orderings contradict each other (averaged to 1/2)
    i = np.array([0, 1, 0, 0])
    j = np.array([1, 2, 2, 3])
    p = np.array([expit(-2.0), expit(-2.0), expit(-4.0), 0.5])
    bad = np.array([False, False, False, True])
    dropped = fit_round(4, i, j, p, model=MODEL, variance="exact", contradicted=bad)
    averaged = fit_round(
        4, i, j, p, model=Model(link="logit", drop_contradicted=False), variance="exact", contradicted=bad
    )
    # left out, item 3 has only the ridge: its mean is 0 and its variance the prior's; averaged, it sits on item 0
    assert dropped.mean[3] == pytest.approx(0.0, abs=1e-9)
    assert dropped.var[3] > 10 * averaged.var[3]
    assert averaged.mean[3] == pytest.approx(averaged.mean[0], abs=0.05)
    same = fit_round(4, i[:3], j[:3], p[:3], model=MODEL, variance="exact")
    assert np.allclose(dropped.mean[:3], same.mean[:3])


def test_locate_compares_an_item_whose_only_answer_was_contradicted_again_with_a_new_partner():
    n = 12
    mean = np.linspace(-3.0, 3.0, n)
    mean[11] = 0.0  # item 11's only answer (against item 5) is contradicted: the fit knows nothing of it
    post = Posterior(mean, np.ones(n), 1.0, "diagonal", link="logit")
    i = np.array([0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 5])
    j = np.array([5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 11])
    p = expit(mean[i] - mean[j])  # graded answers for items 0-10
    p[-1] = 0.5
    bad = np.zeros(i.shape[0], dtype=bool)
    bad[-1] = True
    judged = PairSet(n, np.stack([i, j], axis=1))
    rng = np.random.default_rng(0)
    fixes = fix_pairs(post, i, j, p, judged, rng, clip=10.0, contradicted=bad)
    # item 11 is fixed with the placed item nearest its mean (0.0) that it has not met: item 5 is taken, so 6
    assert fixes.tolist() == [[6, 11]]
    # read as an answer (a near-tie with item 5), it is ambiguous and fixed a quarter to three quarters away
    fixes = fix_pairs(post, i, j, p, judged, np.random.default_rng(0), clip=10.0)
    assert fixes.shape[0] == 1 and 11 in fixes[0] and abs(mean[fixes[0].min()]) > 0.5
