"""Writes the golden JSON cases of the scorers (run: python tests/methods/golden/make_golden.py).

Every expected value is derived here by hand arithmetic or a closed form stated in the case's ``desc``;
nothing imports ``pipeline.methods``. Each file: ``{"scorer": name, "cases": [{"desc", "n_items", "i",
"j", "p", "kwargs", "expected", "atol"}]}``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

HERE = Path(__file__).parent


def logit(x: float) -> float:
    return math.log(x / (1.0 - x))


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def centre(v: list[float]) -> list[float]:
    m = sum(v) / len(v)
    return [x - m for x in v]


def case(desc, n, comps, expected, atol=1e-9, **kwargs):
    return {
        "desc": desc,
        "n_items": n,
        "i": [c[0] for c in comps],
        "j": [c[1] for c in comps],
        "p": [c[2] for c in comps],
        "kwargs": kwargs,
        "expected": list(expected),
        "atol": atol,
    }


def win_ratio_cases():
    return [
        case(
            "hand count: 0 beats 1 (0.9) and 2 (0.7); 1 beats 2 (0.8) -> wins/games = 2/2, 1/2, 0/2",
            3,
            [(0, 1, 0.9), (1, 2, 0.8), (0, 2, 0.7)],
            [1.0, 0.5, 0.0],
        ),
        case(
            "p exactly 0.5 is a tie worth half a win each: item0 0.5/2, item1 0.5/2, item2 2/2",
            3,
            [(0, 1, 0.5), (1, 2, 0.2), (2, 0, 0.6)],
            [0.25, 0.25, 1.0],
        ),
        case(
            "duplicated rows count as separate games: 0 wins rows 1-2, loses row 3 (1 in slot A, p=0.7)",
            2,
            [(0, 1, 0.9), (0, 1, 0.9), (1, 0, 0.7)],
            [2 / 3, 1 / 3],
        ),
        case(
            "threshold 0.6 (EACL eq. 10 decision threshold): p=0.55 < 0.6 so slot B (item 1) wins; p=0.65 > 0.6",
            3,
            [(0, 1, 0.55), (1, 2, 0.65), (2, 0, 0.62)],
            [0.0, 1.0, 0.5],
            threshold=0.6,
        ),
    ]


def avg_prob_cases():
    return [
        case(
            "hand: item0 (0.9+0.7)/2, item1 (0.1+0.8)/2, item2 (0.2+0.3)/2",
            3,
            [(0, 1, 0.9), (1, 2, 0.8), (0, 2, 0.7)],
            [0.8, 0.45, 0.25],
        ),
        case(
            "both orderings and a duplicate: item0 (0.9 + 0.6 + (1-0.3))/3, item1 (0.1 + 0.4 + 0.3)/3",
            2,
            [(0, 1, 0.9), (0, 1, 0.6), (1, 0, 0.3)],
            [(0.9 + 0.6 + 0.7) / 3, (0.1 + 0.4 + 0.3) / 3],
        ),
    ]


def gaussian_cases():
    # triangle least squares: x = s0-s1, y = s1-s2, f01 = a, f12 = b, f02 = c -> the residual
    # e = (a + b - c)/3 is spread equally: x = a - e, y = b - e.
    def triangle(a, b, c):
        e = (a + b - c) / 3.0
        x, y = a - e, b - e
        return centre([0.0, -x, -x - y])

    full_n = 3
    p01, p02, p12 = 0.9, 0.6, 0.7
    avg = [(p01 + p02) / 2, (1 - p01 + p12) / 2, (1 - p02 + 1 - p12) / 2]
    a3 = [(full_n - 1) / full_n * (x - 0.5) for x in avg]
    tri = triangle(0.3, 0.1, 0.1)
    return [
        case("one comparison p=0.8: s0 - s1 = f = 0.3, mean 0", 2, [(0, 1, 0.8)], [0.15, -0.15]),
        case(
            "tree: s0-s1 = mean f on edge 0-1 = (0.4+0.2)/2 = 0.3, s1-s2 = -0.1; mean 0 -> (1/6, -2/15, -1/30)",
            3,
            [(0, 1, 0.9), (0, 1, 0.7), (1, 2, 0.4)],
            [1 / 6, 1 / 6 - 0.3, 1 / 6 - 0.2],
        ),
        case(
            "triangle f01=0.3, f12=0.1, f02=0.1: residual e=(a+b-c)/3=0.1 spread equally -> s0-s1=0.2, s1-s2=0",
            3,
            [(0, 1, 0.8), (1, 2, 0.6), (0, 2, 0.6)],
            tri,
        ),
        case(
            "same triangle pinned at item 1: s - s[1]",
            3,
            [(0, 1, 0.8), (1, 2, 0.6), (0, 2, 0.6)],
            [x - tri[1] for x in tri],
            pin=1,
        ),
        case(
            "PoE appendix A.3 full set (N=3, all unordered pairs): s = (N-1)/N (avg prob - 1/2), avg prob by hand",
            3,
            [(0, 1, p01), (0, 2, p02), (1, 2, p12)],
            a3,
        ),
        case(
            "one biased ordering, beta = mean p = 0.7 (PoE A.6): f = (0.2, 0.0, -0.2) on a tree -> "
            "s0-s1 = 0.2, s1-s2 = mean(0.0, -0.2) = -0.1",
            3,
            [(0, 1, 0.9), (1, 2, 0.7), (1, 2, 0.5)],
            centre([0.0, -0.2, -0.1]),
            beta="mean",
        ),
        case(
            "scale 2 doubles the triangle solution",
            3,
            [(0, 1, 0.8), (1, 2, 0.6), (0, 2, 0.6)],
            [2 * x for x in tri],
            scale=2.0,
        ),
    ]


def gaussian_hard_cases():
    return [
        case(
            "hard decisions 1,1,0 on the cycle 0>1>2>0 give f=(.5,.5,-.5): residual e=(.5+.5+.5)/3 -> all equal",
            3,
            [(0, 1, 0.8), (1, 2, 0.6), (0, 2, 0.3)],
            [0.0, 0.0, 0.0],
        ),
        case(
            "hard 1,1,1 (transitive): f=.5 each, e=(.5+.5-.5)/3=1/6 -> s0-s1=s1-s2=1/3",
            3,
            [(0, 1, 0.8), (1, 2, 0.6), (0, 2, 0.9)],
            [1 / 3, 0.0, -1 / 3],
        ),
        case(
            "a tie p=0.5 is the decision 0.5, f=0: the two items are equal",
            2,
            [(0, 1, 0.5)],
            [0.0, 0.0],
        ),
    ]


def bradley_terry_cases():
    # two items, one win, prior 1 against the reference: by symmetry s1 = -s0 = -x and the stationarity
    # condition sigma(-2x) = sigma(x) - sigma(-x) gives u = e^x as the real root of u^3 - u^2 - 2 = 0
    # (Cardano): u = (1 + cbrt(28 + sqrt(783)) + cbrt(28 - sqrt(783))) / 3.
    r = math.sqrt(783.0)
    u = (1.0 + (28.0 + r) ** (1 / 3) + math.copysign(abs(28.0 - r) ** (1 / 3), 28.0 - r)) / 3.0
    x = math.log(u)
    chain = centre([0.0, -math.log(2.0), -math.log(2.0) + math.log(3.0)])
    return [
        case(
            "prior 1 (reference item), one win of 0 over 1: s0 = -s1 = ln u, u real root of u^3 - u^2 - 2 (Cardano)",
            2,
            [(0, 1, 0.9)],
            [x, -x],
            atol=1e-7,
        ),
        case(
            "prior 0 on a tree: each edge's MLE is s_a - s_b = ln(wins_ab / wins_ba): ln(2/1) and ln(1/3)",
            3,
            [(0, 1, 0.8), (0, 1, 0.7), (1, 0, 0.9), (1, 2, 0.6), (2, 1, 0.8), (2, 1, 0.9), (1, 2, 0.2)],
            chain,
            atol=1e-7,
            prior=0.0,
        ),
        case(
            "cycle 0>1>2>0 with the default prior: symmetric under rotation -> all scores 0",
            3,
            [(0, 1, 0.7), (1, 2, 0.7), (2, 0, 0.7)],
            [0.0, 0.0, 0.0],
            atol=1e-7,
        ),
        case(
            "prior 0, a tie (p=0.5) is half a win each: equal strengths",
            2,
            [(0, 1, 0.5)],
            [0.0, 0.0],
            atol=1e-7,
            prior=0.0,
        ),
    ]


def poe_bt_cases():
    t = [1.0, 0.0, -1.0]
    return [
        case(
            "p = sigmoid(t_i - t_j) exactly, t = (1, 0, -1): every expert is maximised at s = t (PoE eq. 3)",
            3,
            [(0, 1, sigmoid(1.0)), (1, 2, sigmoid(1.0)), (0, 2, sigmoid(2.0))],
            centre(t),
            atol=1e-6,
        ),
        case(
            "tree: s_a - s_b = logit(mean p on the edge): logit(0.8) = ln 4 on 0-1, s2 - s1 = logit(0.25) = -ln 3",
            3,
            [(0, 1, 0.9), (0, 1, 0.7), (2, 1, 0.25)],
            centre([0.0, -math.log(4.0), -math.log(4.0) - math.log(3.0)]),
            atol=1e-6,
        ),
        case(
            "slot-A bias ln 2: sigmoid(s0 - s1 + ln 2) = 0.8 -> s0 - s1 = ln 4 - ln 2 = ln 2",
            2,
            [(0, 1, 0.8)],
            [math.log(2.0) / 2, -math.log(2.0) / 2],
            atol=1e-6,
            bias=math.log(2.0),
        ),
    ]


def poe_laplace_cases():
    return [
        case(
            "two items, f = (0.4, 0.3, -0.4): LAD of a constant is the median 0.3",
            2,
            [(0, 1, 0.9), (0, 1, 0.8), (0, 1, 0.1)],
            [0.15, -0.15],
            atol=1e-8,
        ),
        case(
            "tree, odd counts per edge: each difference is its edge's median: s0-s1 = median(.4,.1,.3) = .3, s1-s2 = -.3",
            3,
            [(0, 1, 0.9), (0, 1, 0.6), (0, 1, 0.8), (1, 2, 0.2)],
            [0.1, -0.2, 0.1],
            atol=1e-8,
        ),
        case(
            "consistent triangle t=(.2,0,-.1) plus an outlier f=-.4 on (0,2): objective >= 0.7 + |x+y-.3| "
            "(triangle inequality), so s = t is the unique optimum",
            3,
            [(0, 1, 0.7), (1, 2, 0.6), (0, 2, 0.8), (0, 2, 0.1)],
            centre([0.2, 0.0, -0.1]),
            atol=1e-8,
        ),
    ]


def davidson_cases():
    # Davidson: P(i) = pi_i / D, P(j) = pi_j / D, P(tie) = nu sqrt(pi_i pi_j) / D. With two items and no prior the
    # model is saturated: pi_0 / pi_1 = w / l exactly, so s = +-log(w / l) / 2.
    half_log = 0.5 * math.log(0.5 / 0.2)
    return [
        case(
            "two items, one comparison: win 0.5, loss 0.2, tie 0.3 (p = 0.5 + 0.3/2) -> s = +-log(0.5/0.2)/2",
            2,
            [(0, 1, 0.65)],
            [half_log, -half_log],
            atol=1e-6,
            tie=[0.3],
            prior=0,
        ),
        case(
            "both orderings of that pair (the second seen from item 1: p = 0.2 + 0.15) give the same scores",
            2,
            [(0, 1, 0.65), (1, 0, 0.35)],
            [half_log, -half_log],
            atol=1e-6,
            tie=[0.3, 0.3],
            prior=0,
        ),
        case(
            "a split-tie p of 0.65 read as 0.65 wins without the tie: Bradley-Terry on soft outcomes, "
            "s = +-log(0.65/0.35)/2 -- the tie model differs from splitting the tie",
            2,
            [(0, 1, 0.65)],
            [0.5 * math.log(0.65 / 0.35), -0.5 * math.log(0.65 / 0.35)],
            atol=1e-6,
            prior=0,
        ),
        case(
            "every comparison a sure tie: equal scores (mean 0)",
            3,
            [(0, 1, 0.5), (1, 2, 0.5), (0, 2, 0.5)],
            [0.0, 0.0, 0.0],
            atol=1e-6,
            tie=[1.0, 1.0, 1.0],
            prior=0,
        ),
    ]


def ml_ranking_cases():
    return [
        case(
            "transitive: 0>1>2>3 with every p > 0.5 -> ranking 0,1,2,3 (scores N-1-position)",
            4,
            [(0, 1, 0.8), (1, 2, 0.7), (2, 3, 0.9), (0, 3, 0.6), (1, 3, 0.8)],
            [3.0, 2.0, 1.0, 0.0],
        ),
        case(
            "cycle with unequal confidence: p01=.9, p12=.9, p20=.6; the 6 rankings by hand: 0>1>2 has "
            "log-lik 2 ln .9 + ln .4 = -1.13, every other ranking contradicts a 0.9 (<= ln .1 + ...) or is lower",
            3,
            [(0, 1, 0.9), (1, 2, 0.9), (2, 0, 0.6)],
            [2.0, 1.0, 0.0],
        ),
    ]


def poe_logit_cases():
    """The rounds' model: least squares on capped log-odds with a ridge r = 0.01 on every score (mean pinned).
    Fewer than 8 comparisons are checked by others in each case, so Huber's weights are all 1."""
    r = 0.01
    f9 = logit(0.999)
    return [
        case(
            "two items, p=0.8: the ridge shrinks the difference, s0 - s1 = logit(0.8) / (1 + r/2)",
            2,
            [(0, 1, 0.8)],
            [logit(0.8) / (2 + r), -logit(0.8) / (2 + r)],
        ),
        case(
            "an answer beyond the cap (p = 1 - 1e-9) reads as at least 10: the hinge and the ridge meet at "
            "s0 - s1 = 10 / (1 + r/2)",
            2,
            [(0, 1, 1 - 1e-9)],
            [10 / (2 + r), -10 / (2 + r)],
        ),
        case(
            "a path 0-1-2 at p=0.999 each puts 0 and 2 2 logit(0.999) = 13.8 apart, beyond their capped answer: "
            "that answer pulls on nothing, s = (f, 0, -f) / (1 + r)",
            3,
            [(0, 1, 0.999), (1, 2, 0.999), (0, 2, 1 - 1e-9)],
            [f9 / (1 + r), 0.0, -f9 / (1 + r)],
        ),
        case(
            "the same read as the cap itself (censor=False): a triangle, centred s = W^T f / (3 + r) with "
            "W^T f = (f + 10, 0, -f - 10)",
            3,
            [(0, 1, 0.999), (1, 2, 0.999), (0, 2, 1 - 1e-9)],
            [(f9 + 10) / (3 + r), 0.0, -(f9 + 10) / (3 + r)],
            censor=False,
        ),
        case(
            "the pair in two rows, the second reversed: (0, 1, 0.8) and (1, 0, 0.2) are two measurements of "
            "logit(0.8), s0 - s1 = logit(0.8) / (1 + r/4)",
            2,
            [(0, 1, 0.8), (1, 0, 0.2)],
            [logit(0.8) / (2 + r / 2), -logit(0.8) / (2 + r / 2)],
        ),
    ]


def main() -> None:
    files = {
        "win_ratio": win_ratio_cases(),
        "avg_prob": avg_prob_cases(),
        "poe_gaussian": gaussian_cases(),
        "poe_gaussian_hard": gaussian_hard_cases(),
        "bradley_terry": bradley_terry_cases(),
        "poe_bt": poe_bt_cases(),
        "poe_laplace": poe_laplace_cases(),
        "davidson": davidson_cases(),
        "ml_ranking": ml_ranking_cases(),
        "poe_logit": poe_logit_cases(),
    }
    for name, cases in files.items():
        (HERE / f"{name}.json").write_text(json.dumps({"scorer": name, "cases": cases}, indent=1) + "\n")


if __name__ == "__main__":
    main()
