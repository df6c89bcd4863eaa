"""Sorting with a judge as the comparator: repeated quicksort (Maystre & Grossglauser, ICML 2017) and merge sort
(PairS-greedy, Liu et al. 2024), as baselines for adaptive rounds.

Both ask the judge in batches (every comparison of one quicksort level, or the heads of every merge of one merge
step, at once), through ``compare(i, j) -> p``, the probability that ``i`` beats ``j`` (a pair judged in both
orderings, debiased). A pair already compared is not asked again: its answer is reused, as the pipeline's
judgement store does, and only new pairs count against ``budget`` (in pairs). When one sort is done and budget is
left, another starts from a new random order; the comparisons of all of them are returned, to be scored together
(Maystre & Grossglauser's "repeated quicksort" estimator). The last sort stops where the budget runs out.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

__all__ = ["Comparisons", "merge_sort", "repeated_quicksort"]

Compare = Callable[[NDArray[np.int64], NDArray[np.int64]], NDArray[np.float64]]


class Comparisons:
    """The answers so far (``i``, ``j``, ``p``), each unordered pair once, with a budget in new pairs."""

    def __init__(self, compare: Compare, budget: int):
        self.compare = compare
        self.budget = int(budget)
        self.known: dict[tuple[int, int], float] = {}
        self.i: list[int] = []
        self.j: list[int] = []
        self.p: list[float] = []

    @property
    def spent(self) -> int:
        return len(self.p)

    def ask(self, a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.float64] | None:
        """P(a beats b) for each row; None when the budget cannot pay for the new pairs among them (nothing is
        asked then: a sort step is all or nothing)."""
        rows = list(zip(a.tolist(), b.tolist(), strict=True))
        new = list(
            dict.fromkeys((x, y) for x, y in rows if (x, y) not in self.known and (y, x) not in self.known)
        )
        if len(new) > self.budget - self.spent:
            new = new[: self.budget - self.spent]
            if not new:
                return None
            # spend what is left on a prefix of the step, then stop
            answers = self.compare(np.array([x for x, _ in new]), np.array([y for _, y in new]))
            self._keep(new, answers)
            return None
        if new:
            answers = self.compare(np.array([x for x, _ in new]), np.array([y for _, y in new]))
            self._keep(new, answers)
        out = np.empty(len(rows))
        for t, (x, y) in enumerate(rows):
            out[t] = self.known[(x, y)] if (x, y) in self.known else 1.0 - self.known[(y, x)]
        return out

    def _keep(self, new: list[tuple[int, int]], answers: NDArray[np.float64]) -> None:
        for (x, y), q in zip(new, np.asarray(answers, dtype=np.float64).tolist(), strict=True):
            self.known[(x, y)] = q
            self.i.append(x)
            self.j.append(y)
            self.p.append(q)

    def arrays(self) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
        return np.array(self.i, dtype=np.int64), np.array(self.j, dtype=np.int64), np.array(self.p)


def repeated_quicksort(
    n: int, compare: Compare, budget: int, rng: np.random.Generator
) -> tuple[Comparisons, list[NDArray[np.int64]]]:
    """Quicksorts from random orders until ``budget`` new pairs are spent (module docstring). Each level compares
    every item of every open segment with its segment's pivot (drawn uniformly) in one batch. Returns the
    comparisons and the orders (best first) of the sorts that finished."""
    asked = Comparisons(compare, budget)
    finished: list[NDArray[np.int64]] = []
    while asked.spent < budget:
        before = asked.spent
        # the order so far, best first: blocks of one item are placed, longer ones still to sort
        blocks: list[NDArray[np.int64]] = [rng.permutation(n)]
        stopped = False
        while any(b.shape[0] > 1 for b in blocks):
            open_ = [t for t, b in enumerate(blocks) if b.shape[0] > 1]
            pivots = {t: blocks[t][rng.integers(blocks[t].shape[0])] for t in open_}
            rests = {t: blocks[t][blocks[t] != pivots[t]] for t in open_}
            a = np.concatenate([rests[t] for t in open_])
            b = np.concatenate([np.full(rests[t].shape[0], pivots[t]) for t in open_])
            p = asked.ask(a, b)
            if p is None:
                stopped = True
                break
            answers = dict(zip(a.tolist(), p.tolist(), strict=True))  # each item is in one block
            nxt: list[NDArray[np.int64]] = []
            for t, block in enumerate(blocks):
                if t not in pivots:
                    nxt.append(block)
                    continue
                beat = np.array([answers[x] > 0.5 for x in rests[t].tolist()], dtype=bool)
                for part in (rests[t][beat], np.array([pivots[t]]), rests[t][~beat]):
                    if part.shape[0]:
                        nxt.append(part)
            blocks = nxt
        if not stopped:
            finished.append(np.concatenate(blocks))
        if asked.spent == before:  # every pair of a sort already known: nothing more to learn
            break
    return asked, finished


def merge_sort(
    n: int, compare: Compare, budget: int, rng: np.random.Generator
) -> tuple[Comparisons, list[NDArray[np.int64]]]:
    """Bottom-up merge sorts (PairS-greedy) from random orders until ``budget`` new pairs are spent. Every merge of
    a level advances by one comparison per step, all merges' head comparisons in one batch. Returns the
    comparisons and the orders (best first) of the sorts that finished."""
    asked = Comparisons(compare, budget)
    finished: list[NDArray[np.int64]] = []
    while asked.spent < budget:
        before = asked.spent
        runs = [[int(x)] for x in rng.permutation(n)]
        stopped = False
        while len(runs) > 1 and not stopped:
            merges = [(runs[t], runs[t + 1]) for t in range(0, len(runs) - 1, 2)]
            leftover = [runs[-1]] if len(runs) % 2 else []
            heads = [[0, 0] for _ in merges]
            outs: list[list[int]] = [[] for _ in merges]
            while True:
                active = [
                    m
                    for m, (left, right) in enumerate(merges)
                    if heads[m][0] < len(left) and heads[m][1] < len(right)
                ]
                if not active:
                    break
                a = np.array([merges[m][0][heads[m][0]] for m in active])
                b = np.array([merges[m][1][heads[m][1]] for m in active])
                p = asked.ask(a, b)
                if p is None:
                    stopped = True
                    break
                for m, x, y, q in zip(active, a.tolist(), b.tolist(), p.tolist(), strict=True):
                    if q > 0.5:  # best first
                        outs[m].append(x)
                        heads[m][0] += 1
                    else:
                        outs[m].append(y)
                        heads[m][1] += 1
            if stopped:
                break
            runs = [
                out + left[h[0] :] + right[h[1] :]
                for out, (left, right), h in zip(outs, merges, heads, strict=True)
            ] + leftover
        if not stopped:
            finished.append(np.array(runs[0], dtype=np.int64))
        if asked.spent == before:
            break
    return asked, finished
