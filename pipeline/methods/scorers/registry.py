"""The scorers, each registered once with what it can do: the one place a scorer's name is looked at.

A :class:`ScorerEntry` holds a scorer's function and its capabilities, which the rest of the package reads instead of
comparing names: whether it gives standard errors, reads the tie probability, leaves out the pairs whose two orderings
contradict each other, has a batched form for the efficiency curves, is the adaptive rounds' own model, and where it
stands among the methods a report or a card shows by default.

Every scorer, the built-in ones defined here included, is registered by the entry point group
``llm_comparative_assessment.scorers`` (the Python packaging convention): each entry point names a
:class:`ScorerEntry`, or a function returning one, e.g. in a plugin's ``pyproject.toml``::

    [project.entry-points."llm_comparative_assessment.scorers"]
    copeland = "my_scorers:COPELAND"

The entry points are loaded once, the first time the registry is read (:func:`scorers`), as every registry's are
(:mod:`pipeline.registry`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from pipeline.methods.scorers import (
    average_probability,
    bradley_terry,
    davidson,
    ml_ranking,
    poe_bt,
    poe_gaussian,
    poe_laplace,
    poe_logit,
    win_ratio,
)
from pipeline.methods.scorers.comparison_checks import ComparisonError
from pipeline.registry import Registry

ENTRY_POINTS = "llm_comparative_assessment.scorers"

Array = NDArray[np.float64]
Scorer = Callable[..., Array]


@dataclass(frozen=True)
class FitInputs:
    """What a context's fit may read besides the comparisons: the tie probability of each comparison, the comparisons
    whose two orderings contradict each other, whether the comparisons are raw orderings whose position shift the
    scorer fits itself (``debias=mean_shift``), and the capped log-odds' settings (``scoring.poe_logit``)."""

    tie: Array | None = None
    contradicted: NDArray[np.bool_] | None = None
    shift: bool = False
    logit: poe_logit.Settings = poe_logit.DEFAULTS
    # the scorer's own settings from the config (``scoring.options.<method>``, read into its ``settings``)
    options: Mapping[str, Any] = field(default_factory=dict)


Fit = Callable[[int, NDArray[np.int64], NDArray[np.int64], Array, FitInputs], "tuple[Array, Array | None]"]
# (pair space, draws' masks (B, M), their p (B, M), the draws' pins or None) -> scores (B, N)
Batched = Callable[[Any, Array, Array, "Array | None"], Array]


@dataclass(frozen=True)
class ScorerEntry:
    """A scorer and what it can do.

    - ``score``: ``f(n_items, i, j, p, **options) -> scores`` (higher is better);
    - ``fit``: one context's ``(scores, standard errors or None)`` from its comparisons and :class:`FitInputs`;
      default: ``score`` with no standard errors, called with the scorer's settings as keyword arguments;
    - ``settings``: the dataclass of the settings it takes from the config (``scoring.options.<name>.<field>``: a
      key that is not one of its fields is refused, naming them); None: it takes none;
    - ``stderr``: ``fit`` gives standard errors; ``ties``: it reads the tie probability (a template needs a tie
      option); ``contradictions``: it leaves out the pairs whose orderings contradict each other;
    - ``batched``: its batched form for the efficiency curves (None: not on the curves);
    - ``leaderboard``: a model leaderboard reports its mean scores by default; ``report_rank`` / ``card_rank``: its
      place among the methods a report draws against people / the judge's card shows (lower first; None: never by
      default); ``round_link``: the adaptive rounds' link whose model it is (its scores rank as the rounds fitted);
    - ``unique``: its fit has one optimum, so its scores are the same under any indices, row order and sides of the
      comparisons (:mod:`pipeline.testing` checks it); False: one optimum of several (a least-absolute-deviation
      program), which the product makes reproducible by giving every scorer the comparisons in one canonical order
      (:func:`pipeline.scoring.comparative.in_canonical_order`).
    """

    name: str
    score: Scorer
    fit: Fit | None = None
    stderr: bool = False
    ties: bool = False
    contradictions: bool = False
    batched: Batched | None = None
    leaderboard: bool = False
    report_rank: int | None = None
    card_rank: int | None = None
    round_link: str | None = None
    summary: str = ""
    settings: type | None = None
    unique: bool = True

    def options(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """``given`` read into :attr:`settings` (its defaults filled in); ValueError naming what it does not take."""
        if self.settings is None:
            if given:
                raise ValueError(f"scoring method {self.name} takes no settings (got {sorted(given)})")
            return {}
        known = [f.name for f in fields(self.settings)]
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise ValueError(
                f"scoring method {self.name} takes {', '.join(known) or 'no settings'}, not {unknown}"
            )
        try:
            value = self.settings(**given)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"scoring method {self.name}: {exc}") from exc
        return {f.name: getattr(value, f.name) for f in fields(self.settings)}

    def fit_context(
        self, n: int, i: NDArray[np.int64], j: NDArray[np.int64], p: Array, inputs: FitInputs
    ) -> tuple[Array, Array | None]:
        """One context's scores and standard errors (or None), checked: a score per candidate (anything else is an
        error naming the scorer: its scores would land on the wrong candidates), every score finite (a candidate
        without one: :class:`ComparisonError` naming it, so the context is left out of this method, counted)."""
        if self.fit is not None:
            scores, errors = self.fit(n, i, j, p, inputs)
        else:
            options = {"tie": inputs.tie} if self.ties else {}
            scores, errors = self.score(n, i, j, p, **options, **inputs.options), None
        try:
            scores = np.asarray(scores, dtype=np.float64)
            errors = None if errors is None else np.asarray(errors, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ScorerOutputError(f"scorer {self.name!r} gave scores that are not numbers: {exc}") from exc
        for what, values in (("scores", scores), ("standard errors", errors)):
            if values is not None and values.shape != (n,):
                raise ScorerOutputError(
                    f"scorer {self.name!r} gave {what} of shape {values.shape} for {n} candidates (one each)"
                )
        bad = np.flatnonzero(~np.isfinite(scores))
        if bad.size:
            raise ComparisonError(
                f"scorer {self.name!r} gave {bad.size} score(s) that are not finite numbers",
                tuple(bad.tolist()),
            )
        return scores, errors


class ScorerOutputError(ValueError):
    """A scorer (a plugin's, most likely) whose output cannot be scores of the context's candidates."""


def _logit(n: int, i: Any, j: Any, p: Array, inputs: FitInputs) -> tuple[Array, Array | None]:
    return poe_logit.fit(
        n, i, j, p, shift=inputs.shift, contradicted=inputs.contradicted, **inputs.logit.fit_options()
    )


def _batched(name: str, centred: bool = False, hard: bool = False, pinned: bool = False) -> Batched:
    """The batched form of a scorer (:mod:`pipeline.methods.scorers.batched`, imported when a curve is drawn)."""

    def run(space: Any, mask: Array, p: Array, pin: Array | None) -> Array:
        from pipeline.methods.scorers import batched
        from pipeline.methods.scorers._common import hard_outcomes

        x = hard_outcomes(p) if hard else p
        x = x - 0.5 if centred else x
        function = getattr(batched, name)
        if not pinned:
            return function(space, mask, x)
        return function(space, mask, x, pin=space.component_pin(mask) if pin is None else pin)

    return run


def _gaussian(hard: bool, summary: str, **shown: Any) -> ScorerEntry:
    """PoE-Gaussian on the probabilities or (``hard``) on the decisions: its score, fit with errors and batched form
    read the one flag."""

    def fit(n: int, i: Any, j: Any, p: Array, inputs: FitInputs) -> tuple[Array, Array | None]:
        result = poe_gaussian.fit(n, i, j, p, hard=hard, beta="mean" if inputs.shift else 0.5)
        return result.scores, result.stderr

    return ScorerEntry(
        "poe_gaussian_hard" if hard else "poe_gaussian",
        poe_gaussian.poe_gaussian_hard if hard else poe_gaussian.poe_gaussian,
        fit=fit,
        stderr=True,
        batched=_batched("batch_gaussian", centred=True, hard=hard, pinned=True),
        summary=summary,
        **shown,
    )


# The built-in scorers, registered by the package's entry points (pyproject.toml) as a plugin's are.
WIN_RATIO = ScorerEntry(
    "win_ratio",
    win_ratio.win_ratio,
    batched=_batched("batch_win_ratio"),
    card_rank=3,
    summary="share of comparisons won",
)
AVG_PROB = ScorerEntry(
    "avg_prob",
    average_probability.average_probability,
    batched=_batched("batch_avg_prob"),
    summary="mean probability of winning",
)
BRADLEY_TERRY = ScorerEntry(
    "bradley_terry",
    bradley_terry.bradley_terry,
    batched=_batched("batch_bradley_terry"),
    leaderboard=True,
    card_rank=2,
    summary="Bradley-Terry on soft outcomes (MAP)",
)
POE_GAUSSIAN = _gaussian(
    False,
    "Product-of-Experts, Gaussian experts (closed form)",
    leaderboard=True,
    report_rank=1,
    card_rank=0,
)
POE_GAUSSIAN_HARD = _gaussian(True, "PoE-Gaussian on hard decisions")
POE_BT = ScorerEntry(
    "poe_bt",
    poe_bt.poe_bt,
    batched=_batched("batch_poe_bt", pinned=True),
    summary="Product-of-Experts, Bradley-Terry experts",
)
POE_LAPLACE = ScorerEntry(
    "poe_laplace",
    poe_laplace.poe_laplace,
    batched=_batched("batch_laplace_irls", centred=True, pinned=True),
    unique=False,
    summary="Product-of-Experts, Laplace experts",
)
POE_LOGIT = ScorerEntry(
    "poe_logit",
    poe_logit.poe_logit,
    fit=_logit,
    contradictions=True,
    leaderboard=True,
    report_rank=0,
    card_rank=1,
    round_link="logit",
    summary="capped log-odds, censored at the cap, Huber's experts (the adaptive rounds' model)",
)
ML_RANKING = ScorerEntry("ml_ranking", ml_ranking.ml_ranking, summary="maximum-likelihood ranking")
DAVIDSON = ScorerEntry(
    "davidson", davidson.davidson, ties=True, summary="Davidson's tie model (reads the tie probability)"
)


REGISTRY: Registry[ScorerEntry] = Registry(ENTRY_POINTS, ScorerEntry, "scoring method")


def register(entry: ScorerEntry) -> ScorerEntry:
    """Add a scorer (a test's; a package registers its own by the entry point)."""
    return REGISTRY.register(entry)


def scorers() -> dict[str, ScorerEntry]:
    """Every registered scorer by name, the package's own first, then the plugins'."""
    return REGISTRY.all()


def scorer(name: str) -> ScorerEntry:
    """The registered scorer ``name``; an unknown name lists the valid ones."""
    return REGISTRY.get(name)


def ranked(methods: list[str] | tuple[str, ...], rank: Callable[[ScorerEntry], int | None]) -> list[str]:
    """``methods`` that have a ``rank``, lowest first."""
    found = [(rank(scorer(m)), m) for m in methods]
    return [m for r, m in sorted((r, m) for r, m in found if r is not None)]
