"""Seeded simulation of comparison data with known answers (for tests, benchmarks and sanity checks).

Scores follow a Bradley-Terry model: the judge's (:class:`SimulatedJudge`) logit for "slot A beats slot B" is

    ``scale * (s_A - s_B) + bias + noise * eps,    eps ~ N(0, 1) independently per judgement``

and it reports ``p = sigmoid(logit)``. ``bias`` is the positional (slot-A) logit shift; ``noise`` makes the
judge imperfect: with ``noise = 0`` its decisions ``p > 0.5`` are always right.

An absolute judge (:func:`simulate_absolute`) scores each candidate on its own:
``offset + slope * s + noise * eps``, optionally rounded and clipped to an integer scale (prompt scoring's
1-10), so that absolute, comparative and combined scores can be compared against a known truth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "EXACT",
    "TRUTHS",
    "PoolJudge",
    "SimulatedJudge",
    "bias_for_prior",
    "pool_truth",
    "simulate_absolute",
    "simulate_assessment",
    "judge_accuracy",
    "noise_for_accuracy",
    "simulate_context_set",
    "simulate_judge",
    "simulate_outcomes",
]


def _pairs(pairs: ArrayLike, n: int) -> NDArray[np.int64]:
    arr = np.asarray(pairs, dtype=np.int64)
    if arr.ndim != 2 or arr.shape[1] != 2:
        raise ValueError(f"pairs must have shape (K, 2), got {arr.shape}")
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        raise ValueError(f"pairs index items outside range(n_items={n})")
    return arr


@dataclass(frozen=True)
class SimulatedJudge:
    """The module docstring's comparative judge: the logit for "slot A beats slot B" is
    ``scale * (s_A - s_B) + bias + noise * eps``; the default is exact (its decisions always right)."""

    scale: float = 1.0
    bias: float = 0.0
    noise: float = 0.0

    def probabilities(self, diff: NDArray[np.float64], rng: np.random.Generator) -> NDArray[np.float64]:
        """P(slot A wins) for each true score difference ``s_A - s_B`` (any shape; ``eps`` drawn in that shape)."""
        from scipy.special import expit

        logit = self.scale * diff + self.bias
        if self.noise:
            logit = logit + self.noise * rng.standard_normal(diff.shape)
        return expit(logit)


EXACT = SimulatedJudge()


def simulate_judge(
    true_scores: ArrayLike, pairs: ArrayLike, rng: np.random.Generator, judge: SimulatedJudge = EXACT
) -> NDArray[np.float64]:
    """``judge``'s probabilities that ``pairs[:, 0]`` (slot A) beats ``pairs[:, 1]``."""
    s = np.asarray(true_scores, dtype=np.float64)
    pr = _pairs(pairs, s.shape[0])
    return judge.probabilities(s[pr[:, 0]] - s[pr[:, 1]], rng)


def simulate_outcomes(
    true_scores: ArrayLike, pairs: ArrayLike, rng: np.random.Generator, judge: SimulatedJudge = EXACT
) -> NDArray[np.float64]:
    """Hard outcomes (1.0 if slot A wins) drawn from the Bradley-Terry model ``sigmoid(scale (s_A - s_B) + bias)``:
    the noiseless ``judge``'s probabilities, drawn."""
    prob = simulate_judge(true_scores, pairs, rng, replace(judge, noise=0.0))
    return (rng.random(prob.shape[0]) < prob).astype(np.float64)


def judge_accuracy(true_scores: ArrayLike, pairs: ArrayLike, p: ArrayLike) -> float:
    """Fraction of comparisons with different true scores whose decision ``p > 0.5`` is right (ties: 1/2)."""
    s = np.asarray(true_scores, dtype=np.float64)
    pr = _pairs(pairs, s.shape[0])
    pp = np.asarray(p, dtype=np.float64)
    truth = np.sign(s[pr[:, 0]] - s[pr[:, 1]])
    said = np.sign(pp - 0.5)
    valid = truth != 0
    return float(np.where(said == 0, 0.5, (said == truth).astype(np.float64))[valid].mean())


def noise_for_accuracy(accuracy: float, *, scale: float = 1.0, score_sd: float = 1.0) -> float:
    """Judge noise giving the expected per-judgement accuracy when true scores are i.i.d. N(0, score_sd^2).

    The score difference ``x = scale (s_A - s_B)`` is N(0, 2 scale^2 score_sd^2) and the judge's logit
    (no bias) is ``x + noise * eps``; for jointly Gaussian zero-mean variables
    ``P(sign agrees) = 1/2 + arcsin(rho) / pi`` with ``rho = sd(x) / sqrt(var(x) + noise^2)``.
    """
    if not 0.5 < accuracy < 1.0:
        raise ValueError(f"accuracy must be in (0.5, 1), got {accuracy!r}")
    rho = math.sin(math.pi * (accuracy - 0.5))
    sd_x = math.sqrt(2.0) * scale * score_sd
    return sd_x * math.sqrt(1.0 / rho**2 - 1.0)


def bias_for_prior(prior_a: float) -> float:
    """Slot-A logit shift whose judge, on equally good candidates, says A with probability ``prior_a``.

    ``logit(prior_a)``; with varied candidates and both orderings P(A) is close to (slightly below, the
    sigmoid being concave above 0.5) ``prior_a``.
    """
    if not 0.0 < prior_a < 1.0:
        raise ValueError(f"prior_a must be in (0, 1), got {prior_a!r}")
    return math.log(prior_a / (1.0 - prior_a))


def simulate_context_set(
    n_contexts: int, n_items: int, rng: np.random.Generator, judge: SimulatedJudge = EXACT
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """A SummEval-like set: ``n_contexts`` contexts of ``n_items`` candidates, every ordered pair judged by ``judge``.

    Returns
    -------
    true_scores : ndarray, shape (n_contexts, n_items)
        i.i.d. N(0, 1).
    probs : ndarray, shape (n_contexts, n_items, n_items)
        ``probs[c, a, b]`` = judge probability that ``a`` (slot A) beats ``b``; NaN on the diagonal.
    """
    s = rng.standard_normal((n_contexts, n_items))
    probs = judge.probabilities(s[:, :, None] - s[:, None, :], rng)
    idx = np.arange(n_items)
    probs[:, idx, idx] = np.nan
    return s, probs


def simulate_absolute(
    true_scores: ArrayLike,
    rng: np.random.Generator,
    *,
    noise: float,
    slope: float = 1.0,
    offset: float = 0.0,
    scale: tuple[int, int] | None = None,
) -> NDArray[np.float64]:
    """Absolute judge scores ``offset + slope * s + noise * eps`` (eps ~ N(0, 1) per candidate), rounded and
    clipped to the integer ``scale`` (low, high) when given."""
    s = np.asarray(true_scores, dtype=np.float64)
    a = offset + slope * s + noise * rng.standard_normal(s.shape)
    if scale is not None:
        a = np.clip(np.round(a), scale[0], scale[1])
    return a


def simulate_assessment(
    n_contexts: int,
    n_items: int,
    k: int,
    rng: np.random.Generator,
    *,
    comparative_accuracy: float,
    absolute_noise: float,
    absolute_slope: float = 1.5,
    absolute_offset: float = 5.5,
    absolute_scale: tuple[int, int] | None = (1, 10),
) -> list[dict[str, NDArray]]:
    """Contexts judged both ways with a known truth: per context ``k`` distinct pairs (a random chain through
    every candidate, so the comparison graph is connected, then random others) judged in both orderings and
    averaged (a comparative judge of the given per-judgement accuracy), and an absolute judge of the given noise
    on a 1-10 scale (:func:`simulate_absolute`). Each context: ``truth``, ``i``, ``j``, ``p``, ``absolute``."""
    if not n_items - 1 <= k <= n_items * (n_items - 1) // 2:
        raise ValueError(f"k must be between n_items - 1 and n_items (n_items - 1) / 2, got {k}")
    noise = noise_for_accuracy(comparative_accuracy)
    upper = np.array([(a, b) for a in range(n_items) for b in range(a + 1, n_items)], dtype=np.int64)
    out = []
    for _ in range(n_contexts):
        s = rng.standard_normal(n_items)
        order = rng.permutation(n_items)
        chain = np.sort(np.stack([order[:-1], order[1:]], axis=1), axis=1)
        in_chain = {tuple(row) for row in chain.tolist()}
        rest = np.array(
            [row for row in upper.tolist() if tuple(row) not in in_chain], dtype=np.int64
        ).reshape(-1, 2)
        extra = rest[rng.choice(len(rest), size=k - len(chain), replace=False)]
        pairs = np.concatenate([chain, extra])
        judge = SimulatedJudge(noise=noise)
        p_ab = simulate_judge(s, pairs, rng, judge)
        p_ba = simulate_judge(s, pairs[:, ::-1], rng, judge)
        absolute = simulate_absolute(
            s, rng, noise=absolute_noise, slope=absolute_slope, offset=absolute_offset, scale=absolute_scale
        )
        out.append(
            {
                "truth": s,
                "i": pairs[:, 0],
                "j": pairs[:, 1],
                "p": (p_ab + 1.0 - p_ba) / 2.0,
                "absolute": absolute,
            }
        )
    return out


def _splitmix64(x: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """The splitmix64 finaliser (Steele, Lea & Flood 2014), vectorised: a counter-based hash to 64 random bits."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _uniform(keys: NDArray[np.int64], salt: int) -> NDArray[np.float64]:
    """Uniform (0, 1) numbers, a fixed function of (key, salt)."""
    with np.errstate(over="ignore"):
        mixed = _splitmix64(keys.astype(np.uint64) ^ _splitmix64(np.full(keys.shape, salt, dtype=np.uint64)))
    return ((mixed >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)


TRUTHS: tuple[str, ...] = ("normal", "heavy", "clustered")


def pool_truth(kind: str, n: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """True scores of a pool: ``"normal"`` N(0, 1); ``"heavy"`` Student t with 3 degrees of freedom, scaled to unit
    variance; ``"clustered"`` five tight clusters (centres N(0, 1), spread 0.1): many near-ties."""
    if kind == "normal":
        return rng.standard_normal(n)
    if kind == "heavy":
        return rng.standard_t(3, n) / math.sqrt(3.0)
    if kind == "clustered":
        centres = rng.standard_normal(5)
        return centres[rng.integers(0, 5, n)] + 0.1 * rng.standard_normal(n)
    raise ValueError(f"unknown truth {kind!r}; valid: {TRUTHS}")


class PoolJudge:
    """A simulated judge of one pool, answering as a temperature-0 LLM does: the same prompt, the same answer.

    The judge perceives ``s_i + item_noise * e_i`` (its own view of each item, fixed: what no number of
    comparisons removes) and says, for ``a`` in slot A and ``b`` in slot B,
    ``P(A) = sigmoid(scale (s'_a - s'_b) + bias + call_noise * z_ab)``, reversed (``1 - P``) with probability
    ``flip``; ``z_ab`` and the flip are fixed functions of the ordered pair and ``seed``. :meth:`__call__` judges
    each pair in both orderings and returns the debiased probability ``(P(a, b) + 1 - P(b, a)) / 2``, as the
    pipeline does; ``calls`` counts the judge calls (two per pair).
    """

    def __init__(
        self,
        truth: NDArray[np.float64],
        rng: np.random.Generator,
        *,
        scale: float = 2.0,
        bias: float = 0.5,
        item_noise: float = 0.3,
        call_noise: float = 0.5,
        flip: float = 0.05,
    ):
        from scipy.special import ndtri

        self.truth = np.asarray(truth, dtype=np.float64)
        self.n = int(self.truth.shape[0])
        self.seen = self.truth + item_noise * rng.standard_normal(self.n)
        self.scale, self.bias, self.call_noise, self.flip = scale, bias, call_noise, flip
        self.seed = int(rng.integers(0, 2**62))
        self._ndtri = ndtri
        self.calls = 0

    def ordered(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
        """P(slot A wins) for each ordered pair."""
        from scipy.special import expit

        key = np.asarray(a, dtype=np.int64) * self.n + np.asarray(b, dtype=np.int64)
        z = self._ndtri(_uniform(key, self.seed))
        p = expit(self.scale * (self.seen[a] - self.seen[b]) + self.bias + self.call_noise * z)
        return np.where(self.flipped(a, b), 1.0 - p, p)

    def flipped(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Whether the judge reverses its answer to each ordered pair (the known truth a test checks against)."""
        key = np.asarray(a, dtype=np.int64) * self.n + np.asarray(b, dtype=np.int64)
        return _uniform(key, self.seed + 1) < self.flip

    def __call__(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        self.calls += 2 * a.shape[0]
        return (self.ordered(a, b) + 1.0 - self.ordered(b, a)) / 2.0

    def orderings(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64]:
        """Each pair judged in both orderings, undebiased: rows ``(P(a in slot A wins), P(b in slot A wins))``
        (what :func:`pipeline.methods.adaptive.loop.run_rounds` reads to find contradicting orderings)."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        self.calls += 2 * a.shape[0]
        return np.stack([self.ordered(a, b), self.ordered(b, a)], axis=1)

    def all_pairs_scores(self) -> NDArray[np.float64]:
        """The all-pairs solution: PoE-Gaussian on every pair in both orderings, which is the average debiased
        probability of beating the others (PoE appendix A.3). O(N^2): for pools that fit in memory."""
        a, b = np.triu_indices(self.n, k=1)
        p = (self.ordered(a, b) + 1.0 - self.ordered(b, a)) / 2.0
        wins = np.bincount(a, weights=p, minlength=self.n) + np.bincount(b, weights=1.0 - p, minlength=self.n)
        return wins / (self.n - 1)

    def absolute(self, rng: np.random.Generator, noise: float = 1.0) -> NDArray[np.float64]:
        """One absolute score per item (1-10 scale) from the judge's own view (:func:`simulate_absolute`)."""
        return simulate_absolute(self.seen, rng, noise=noise, slope=1.5, offset=5.5, scale=(1, 10))
