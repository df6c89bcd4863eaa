"""The public conformance battery: the checks a plugin's author runs on a scorer, a judge backend or a stage; a local `vllm serve` for the tests and benchmarks.

As scikit-learn's ``check_estimator`` does for an estimator, and as the project runs it on its own parts: the promises
every part of the product keeps, checked on inputs with a known truth.

- a **scorer** (:class:`pipeline.methods.scorers.registry.ScorerEntry`): one finite score per candidate (and a
  standard error each where it says it gives them); the same scores whatever the candidates are called (their
  indices permuted), whatever the order of the comparisons, and whichever side of a pair is written first (``i, j, p``
  as ``j, i, 1 - p``); higher scores for better candidates where the comparisons say so clearly; a context of two;
  its settings (``scoring.options``) taken as it declares them;
- a **judge backend** (:class:`pipeline.config.backends.BackendEntry`), given a judge spec its resolver made: one
  result per prompt, a finite log-probability of at most 0 for every token asked; the same answer to a prompt
  whatever the other prompts of the call and their order (within ``atol``: a batched engine's numerical noise);
- a **stage** (:class:`pipeline.stages.base.Stage`), given its inputs: it returns exactly what it declares, each table
  with its port's schema; the same tables, row for row once sorted, when its input tables come in another order.

Each ``*_checks`` gives the checks as ``(name, function)``; each ``check_*`` runs them all and raises
:class:`ConformanceError` naming every failed one; :func:`parametrize_with_checks` makes them pytest cases::

    from pipeline.testing import parametrize_with_checks
    from my_scorers import COPELAND

    @parametrize_with_checks([COPELAND])
    def test_my_scorer(entry, check):
        check(entry)
"""

from __future__ import annotations

from pipeline.testing.backends import backend_checks, check_backend
from pipeline.testing.battery import ConformanceError
from pipeline.testing.parametrize import parametrize_with_checks
from pipeline.testing.scorers import check_scorer, scorer_checks
from pipeline.testing.stages import check_stage, stage_checks

__all__ = [
    "ConformanceError",
    "backend_checks",
    "check_backend",
    "check_scorer",
    "check_stage",
    "parametrize_with_checks",
    "scorer_checks",
    "stage_checks",
]
