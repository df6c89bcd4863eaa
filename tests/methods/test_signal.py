"""The test of "no signal" (pipeline.methods.quality.signal) on simulated judges with a known truth: judges without
signal (any position bias, hard or soft verdicts, a text that pulls in one slot only, a bias that moves from context
to context) are called informative at most at the stated rate; a judge with a modest signal is found with the power
docs/card.md states; a judge that never varies is not testable."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from pipeline.methods.quality.signal import MIN_UNITS, slot_agreement

ALPHA = 0.05
REPEATS = 300
# false alarms allowed: the rate plus 2.5 standard errors of its Monte Carlo estimate over REPEATS judges
SLACK = 2.5 * np.sqrt(ALPHA * (1 - ALPHA) / REPEATS)


def judged(rng, contexts, candidates, signal=0.0, bias=1.0, noise=1.0, slot=0.0, hard=False, moving=0.0):
    """Every ordered pair of every context: the logit of "A wins" is ``bias (+ a context's shift) + signal (q_a - q_b)
    + f_a + g_b + noise e``, with ``q`` the candidates' quality and ``f``, ``g`` unrelated pulls of a text in slot A
    and in slot B (``slot``: their spread); ``hard``: one sampled verdict per prompt."""
    ctx, first, second, p = [], [], [], []
    for c in range(contexts):
        q, f, g = (
            rng.normal(0, 1, candidates),
            rng.normal(0, slot, candidates),
            rng.normal(0, slot, candidates),
        )
        shift = bias + moving * rng.normal()
        for a in range(candidates):
            for b in range(candidates):
                if a != b:
                    value = expit(shift + signal * (q[a] - q[b]) + f[a] + g[b] + noise * rng.normal())
                    ctx.append(c)
                    first.append(c * candidates + a)
                    second.append(c * candidates + b)
                    p.append(float(rng.random() < value) if hard else value)
    return ctx, first, second, p


NULLS = {
    "noise": {},
    "strong position bias": {"bias": 3.0, "noise": 2.0},
    "sampled verdicts": {"hard": True, "bias": 0.5},
    "a text that pulls in one slot": {"slot": 1.5, "noise": 0.3},
    "a bias that moves by context": {"moving": 1.5, "noise": 0.5},
}


@pytest.mark.parametrize("design", [(10, 8), (3, 4), (150, 2)], ids=["10x8", "3x4", "150 pairs"])
@pytest.mark.parametrize("null", list(NULLS))
def test_a_judge_without_signal_is_called_informative_at_most_at_the_stated_rate(null, design):
    rng = np.random.default_rng(7)
    p = np.array(
        [slot_agreement(*judged(rng, *design, **NULLS[null]), seed=k).p_value for k in range(REPEATS)]
    )
    assert np.mean(p <= ALPHA) <= ALPHA + SLACK, null


@pytest.mark.parametrize(
    ("signal", "design", "power"),
    [(0.5, (20, 8), 0.9), (0.5, (150, 2), 0.9), (1.0, (10, 4), 0.9), (1.0, (3, 4), 0.4)],
    ids=["70% right, 20x8", "70% right, 150 pairs", "80% right, 10x4", "80% right, 3x4"],
)
def test_a_judge_with_a_modest_signal_is_found_with_the_stated_power(signal, design, power):
    """``signal`` 0.5 with noise 1 is a judge right on about 70% of single verdicts, 1.0 on about 80%."""
    rng = np.random.default_rng(11)
    p = np.array([slot_agreement(*judged(rng, *design, signal=signal), seed=k).p_value for k in range(100)])
    assert np.mean(p <= ALPHA) >= power


@pytest.mark.parametrize("answer", [1.0, 0.5, 0.93])
def test_a_judge_whose_verdicts_never_vary_is_not_testable(answer):
    ctx, first, second, p = judged(np.random.default_rng(0), 4, 4)
    test = slot_agreement(ctx, first, second, [answer] * len(p))
    assert test.statistic is None and test.p_value == 1.0 and not test.informative(0.5)


def test_a_judge_right_everywhere_agrees_with_itself_and_too_few_units_are_not_testable():
    ctx, first, second, p = judged(np.random.default_rng(0), 5, 4, signal=3.0, noise=0.0)
    test = slot_agreement(ctx, first, second, p)
    assert test.statistic > 0.9 and test.p_value < 0.01 and test.n_units == 20  # 1 but for the sigmoid's bend
    few = slot_agreement([0, 0], [0, 1], [1, 0], [0.9, 0.2])  # one pair: one unit
    assert few.n_units == 1 < MIN_UNITS and few.statistic is None


def test_the_answer_does_not_depend_on_which_slot_is_called_first_for_a_pair():
    """The prompts of a pair are the same two prompts whichever candidate the pair calls i: giving them in the other
    order of a pair, or the candidates' codes in another order within a context, moves nothing but the draws."""
    ctx, first, second, p = judged(np.random.default_rng(3), 40, 2, signal=0.5)
    base = slot_agreement(ctx, first, second, p)
    turned = slot_agreement(ctx[::-1], first[::-1], second[::-1], p[::-1])
    assert turned.statistic == pytest.approx(base.statistic, abs=1e-12)
