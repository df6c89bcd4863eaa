"""Shared fixtures and helpers of the methods-library tests."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

GOLDEN_DIR = Path(__file__).parent / "golden"


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240501)


def load_golden(name: str) -> list[dict]:
    data = json.loads((GOLDEN_DIR / f"{name}.json").read_text())
    assert data["scorer"] == name
    return data["cases"]


def full_ordered(n: int) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.nonzero(~np.eye(n, dtype=bool))
    return a.astype(np.int64), b.astype(np.int64)


def random_connected(n: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A chain through a random permutation plus k - (n - 1) random extra comparisons (random slots)."""
    perm = rng.permutation(n)
    i = list(perm[:-1])
    j = list(perm[1:])
    extra = k - (n - 1)
    a = rng.integers(0, n, extra)
    b = (a + rng.integers(1, n, extra)) % n
    i += list(a)
    j += list(b)
    i, j = np.array(i, dtype=np.int64), np.array(j, dtype=np.int64)
    flip = rng.random(k) < 0.5
    i[flip], j[flip] = j[flip], i[flip].copy()
    return i, j


def random_problem(n: int, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`random_connected` comparisons with uniform probabilities."""
    i, j = random_connected(n, k, rng)
    return i, j, rng.random(k)


def laplacian(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Dense W^T W built from an explicit incidence matrix (independent of the library)."""
    w = np.zeros((len(i), n))
    w[np.arange(len(i)), i] = 1.0
    w[np.arange(len(i)), j] = -1.0
    return w.T @ w


def round_robin(names: tuple[str, str, str], seed: int = 5, inputs: int = 600):
    """The issue's round robin with sides by candidate id: a verbose model (as good as the plain one, texts twice as
    long), a better one, a plain one; a judge that likes length. Games (a, b, y) with a < b by name, and lengths."""
    rng = np.random.default_rng(seed)
    quality = {"verbose": 0.0, "good": 0.8, "plain": 0.0}
    base = {"verbose": 2.0, "good": 1.0, "plain": 1.0}
    label = dict(zip(("verbose", "good", "plain"), names, strict=True))
    models = sorted(label, key=label.get)
    a, b, y, la, lb = [], [], [], [], []
    for _ in range(inputs):
        length = {m: 300 * base[m] * rng.uniform(0.5, 1.5) for m in models}
        for i, m in enumerate(models):
            for o in models[i + 1 :]:
                logit = quality[m] - quality[o] + 3.0 * (length[m] - length[o]) / (length[m] + length[o])
                a.append(i)
                b.append(models.index(o))
                y.append(float(rng.random() < 1 / (1 + np.exp(-logit))))
                la.append(length[m])
                lb.append(length[o])
    return models, np.array(a), np.array(b), np.array(y), np.array(la), np.array(lb)
