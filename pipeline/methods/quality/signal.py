"""Whether a judge's verdicts carry any information about which candidate is better: a test of "no signal" from the
run's own comparisons, with no labels (one ordering's verdicts against the other's).

Each prompt shows candidate ``a`` in slot A and ``b`` in slot B; ``m = p(A wins) - P(A)``, with ``P(A)`` the mean
p(A wins) of all the prompts (EACL eq. 8). A judge **with signal** prefers the same candidates whichever slot they are
in. A judge **without signal** answers from its position bias, its label words and noise, and perhaps from
something in a text that helps it in one slot and has nothing to do with the other (a text that reads as an "A"):
whatever moves its verdicts in slot A is unrelated to what moves them in slot B.

- **Units.** In a context of three candidates or more, each candidate, with its effect in slot A (``u``) and the
  negated effect in slot B (``v``) of the additive model ``m = mu_context + u_a - v_b + e`` (least squares, centred
  within the context). In contexts of two candidates, where the two effects cannot be told apart, each pair, read in
  the order of its candidates' content keys: ``u = m`` with its first candidate in slot A, ``v = -m`` with its second
  in slot A (each centred over those pairs).
- **Statistic**: ``r = sum u v / sqrt(sum u^2 sum v^2)`` in [-1, 1], the split-half agreement of the slot-A verdicts
  with the slot-B verdicts: about 0 without signal, 1 for a judge that says the same in both orderings beyond its
  bias. A pair read the other way round is the same two prompts: nothing moves.
- **Null distribution**: ``v`` permuted among the units of each context (the two-candidate contexts' pairs among
  themselves). Under "no signal" a unit's ``v`` is unrelated to its ``u`` and the units of a context are exchangeable,
  so the test holds its rate at any position bias, label mass or spread of the probabilities, and when a candidate's
  text moves the judge in one slot only (the candidate is the unit, so one text's pull is counted once, not once per
  pair it is in). One-sided (agreement above chance): ``p = (1 + #{r_perm >= r}) / (1 + PERMUTATIONS)`` from
  :data:`PERMUTATIONS` seeded draws, beyond :data:`EXACT_UNITS` units the normal approximation with the permutation
  distribution's exact variance (Hoeffding's combinatorial central limit theorem). The caller gives the prompts in an
  order that follows content keys, not names or rows, so the draws do not move with them.
- **Not testable**: fewer than :data:`MIN_UNITS` units, or verdicts that do not vary beyond their bias ("always A",
  every p one half): ``r`` is not defined and the judge is not shown to be informative (``p = 1``).

Validated in ``tests/methods/test_signal.py`` on simulated judges with a known truth (false alarms at most the stated
rate, the power stated in docs/card.md) and on the released JudgeBench judges.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["EXACT_UNITS", "MIN_UNITS", "PERMUTATIONS", "Signal", "slot_agreement"]

PERMUTATIONS = 1999
EXACT_UNITS = 20000
MIN_UNITS = 4
CHUNK = 100  # permutations drawn at once (bounds the memory: CHUNK x units indices)


@dataclass(frozen=True)
class Signal:
    """The test's outcome: the statistic (None where not defined), its one-sided p-value and the units it read."""

    statistic: float | None
    p_value: float
    n_units: int

    def informative(self, alpha: float) -> bool:
        return self.statistic is not None and self.p_value <= alpha


def slot_agreement(
    context: ArrayLike, first: ArrayLike, second: ArrayLike, p_first: ArrayLike, seed: int = 0
) -> Signal:
    """The test of "no signal" (module docstring) on prompts: ``context[k]``, the candidates in slot A
    (``first[k]``) and slot B (``second[k]``) as integer codes, and ``p_first[k]`` = p(A wins)."""
    ctx, a, b = (np.asarray(v, dtype=np.int64) for v in (context, first, second))
    m = np.asarray(p_first, dtype=np.float64)
    m = m - m.mean() if m.size else m
    u, v, strata = _units(ctx, a, b, m)
    if u.size < MIN_UNITS or not (u @ u > 1e-24 and v @ v > 1e-24):
        return Signal(None, 1.0, int(u.size))
    scale = float(np.sqrt((u @ u) * (v @ v)))
    observed = float(u @ v)
    if u.size > EXACT_UNITS:
        from scipy.stats import norm

        var = sum(float(u[s] @ u[s]) * float(v[s] @ v[s]) / (s.size - 1) for s in strata if s.size > 1)
        return Signal(
            observed / scale, float(norm.sf(observed / np.sqrt(var))) if var > 0 else 1.0, int(u.size)
        )
    rng = np.random.default_rng(seed)
    above = 0
    for start in range(0, PERMUTATIONS, CHUNK):
        draws = min(CHUNK, PERMUTATIONS - start)
        order = np.broadcast_to(np.arange(u.size), (draws, u.size)).copy()
        for s in strata:
            order[:, s] = rng.permuted(order[:, s], axis=1)
        above += int(np.sum(v[order] @ u >= observed - 1e-12 * scale))
    return Signal(observed / scale, (1 + above) / (1 + PERMUTATIONS), int(u.size))


def _units(ctx: np.ndarray, a: np.ndarray, b: np.ndarray, m: np.ndarray):
    """The units' ``u`` and ``v`` (module docstring), centred within their stratum, and the strata's indices."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.linalg import lsqr

    cands = np.unique(np.concatenate([a, b]))
    code = {int(c): k for k, c in enumerate(cands)}
    owner = np.full(cands.size, -1)
    owner[[code[int(c)] for c in a]] = ctx
    owner[[code[int(c)] for c in b]] = ctx
    sizes = np.bincount(owner, minlength=int(ctx.max()) + 1 if ctx.size else 0)
    wide = sizes[ctx] >= 3
    us, vs, strata, start = [], [], [], 0
    if wide.any():
        ia = np.array([code[int(c)] for c in a[wide]])
        ib = np.array([code[int(c)] for c in b[wide]])
        n, contexts = cands.size, np.unique(ctx[wide])
        rows = np.arange(ia.size)
        cols = np.concatenate([ia, n + ib, 2 * n + np.searchsorted(contexts, ctx[wide])])
        design = coo_matrix(
            (np.ones(3 * ia.size), (np.tile(rows, 3), cols)), (ia.size, 2 * n + contexts.size)
        )
        fit = lsqr(design.tocsr(), m[wide], atol=1e-14, btol=1e-14, iter_lim=10 * (2 * n + contexts.size))[0]
        for c in contexts:
            members = np.flatnonzero(owner == c)
            us.append(fit[members] - fit[members].mean())
            vs.append(-(fit[n + members] - fit[n + members].mean()))
            strata.append(np.arange(start, start + members.size))
            start += members.size
    if (~wide).any():  # two-candidate contexts: a pair each, its first candidate the smaller code
        narrow = np.flatnonzero(~wide)
        lo = np.minimum(a[narrow], b[narrow])
        pairs: dict[tuple[int, int], list[float]] = {}
        for k, low in zip(narrow, lo, strict=True):
            pairs.setdefault((int(ctx[k]), int(low)), [np.nan, np.nan])[int(a[k] != low)] = m[k]
        both = np.array([x for x in pairs.values() if np.isfinite(x).all()]).reshape(-1, 2)
        if both.shape[0]:
            us.append(both[:, 0] - both[:, 0].mean())
            vs.append(-(both[:, 1] - both[:, 1].mean()))
            strata.append(np.arange(start, start + both.shape[0]))
    if not us:
        return np.zeros(0), np.zeros(0), []
    return np.concatenate(us), np.concatenate(vs), strata
