"""The maths by family: scorers, verdicts, adaptive design, agreement, judge quality, simulation (numpy and scipy only).

It imports nothing else of the package; a family imports only the families below it (``pyproject.toml``'s contracts):

- :mod:`.simulation`: seeded simulation with a known truth, the efficiency curves;
- :mod:`.adaptive` (which pairs to judge, the rounds' strategies and loop), :mod:`.agreement` (with people, between
  raters, leaderboards with intervals) and :mod:`.quality` (calibration, length control);
- :mod:`.scorers` (scores from comparisons, their registry, the posterior every round fits) and :mod:`.verdicts`
  (P(A wins) from the label words, position bias, absolute scores);
- the scorers' registry (:mod:`.scorers.registry`) is filled by entry points through :mod:`pipeline.registry`.

Implements the methods of "LLM Comparative Assessment" (Liusie, Manakul & Gales, EACL 2024) and
"Efficient LLM Comparative Assessment: a Product of Experts Framework" (Liusie, Raina, Fathullah &
Gales, 2024), with the data convention of ``choix``: ``n_items``, and per comparison ``i[k]``, ``j[k]``
(int64) and ``p[k]`` (float64), the probability that ``i[k]`` beats ``j[k]`` (``i[k]`` in slot A when the
judge is position-aware). Higher score = better.

This package gives the scorers by name, one way: :func:`scorer` (one, whose ``score`` scores) and :func:`scorers`
(every one), the registry of :mod:`.scorers.registry` (plugins by entry points), and the checks of comparisons (:class:`ComparisonError`,
:func:`check_comparisons`); a scorer's module is in :mod:`.scorers` (``from pipeline.methods.scorers import
poe_gaussian; poe_gaussian.fit(...)``).

Importing this package imports numpy only; scipy is imported inside the functions that use it.
"""

from __future__ import annotations

from pipeline.methods.scorers.comparison_checks import ComparisonError, check_comparisons
from pipeline.methods.scorers.poe_gaussian import GaussianFit
from pipeline.methods.scorers.registry import ScorerEntry, scorer, scorers

__all__ = ["ComparisonError", "GaussianFit", "ScorerEntry", "check_comparisons", "scorer", "scorers"]
