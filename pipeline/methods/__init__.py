"""The maths, pure numpy/scipy (it imports nothing else of the package): selection, debiasing, scorers, rounds.

Implements the methods of "LLM Comparative Assessment" (Liusie, Manakul & Gales, EACL 2024) and
"Efficient LLM Comparative Assessment: a Product of Experts Framework" (Liusie, Raina, Fathullah &
Gales, 2024), with the data convention of ``choix``: ``n_items``, and per comparison ``i[k]``, ``j[k]``
(int64) and ``p[k]`` (float64), the probability that ``i[k]`` beats ``j[k]`` (``i[k]`` in slot A when the
judge is position-aware). Higher score = better.

The package attributes named after a scorer are its *modules* (``from pipeline.methods import
poe_gaussian; poe_gaussian.fit(...)``); the scorers are registered, each with what it can do, in
:mod:`.registry` (:func:`scorer`, :func:`scorers`; plugins by entry points), and their functions are in
:data:`SCORERS` and in their modules (``poe_gaussian.poe_gaussian``). The efficiency curves live in :mod:`pipeline.methods.efficiency`
(imported on demand).

Modules: :mod:`.selection` (which pairs to judge), :mod:`.debias` (positional bias), one module per
scorer (:mod:`.win_ratio`, :mod:`.average_probability`, :mod:`.bradley_terry`, :mod:`.poe_gaussian`,
:mod:`.poe_bt`, :mod:`.poe_laplace`, :mod:`.poe_logit`, :mod:`.ml_ranking`), :mod:`.metrics`,
:mod:`.efficiency` (with the batched scorers of :mod:`.batched`), :mod:`.simulate` and :mod:`.validate` (with
:class:`ComparisonError`). Adaptive rounds (imported on demand): :mod:`.posterior` (the PoE-Gaussian posterior at any
N), the round strategies :mod:`.reorder` and :mod:`.windowed`, the sorting baselines :mod:`.sorting`,
:mod:`.stopping` and the round loop :mod:`.rounds`.

Importing this package imports numpy only; scipy is imported inside the functions that use it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from . import (
    average_probability,
    bradley_terry,
    davidson,
    debias,
    metrics,
    ml_ranking,
    poe_bt,
    poe_gaussian,
    poe_laplace,
    poe_logit,
    selection,
    simulate,
    validate,
    win_ratio,
)
from .poe_gaussian import GaussianFit
from .registry import SCORERS, ScorerEntry, scorer, scorers
from .validate import ComparisonError, check_comparisons

__all__ = [
    "SCORERS",
    "ComparisonError",
    "ScorerEntry",
    "GaussianFit",
    "average_probability",
    "bradley_terry",
    "check_comparisons",
    "davidson",
    "debias",
    "metrics",
    "ml_ranking",
    "poe_bt",
    "poe_gaussian",
    "poe_laplace",
    "poe_logit",
    "score",
    "scorer",
    "scorers",
    "selection",
    "simulate",
    "validate",
    "win_ratio",
]


def score(
    method: str, n_items: int, i: ArrayLike, j: ArrayLike, p: ArrayLike, **options: Any
) -> NDArray[np.float64]:
    """Scores of ``n_items`` items from comparisons with the registered scorer ``method``.

    ``options`` are passed to the scorer (e.g. ``threshold`` for ``"win_ratio"``, ``beta`` for
    ``"poe_gaussian"``).

    Raises
    ------
    ValueError
        Unknown ``method`` (the message lists the valid names).
    ComparisonError
        Invalid comparisons (see :mod:`.validate`).
    """
    return scorer(method).score(n_items, i, j, p, **options)
