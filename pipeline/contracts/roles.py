"""What the columns of every output table are, declared once beside the schemas: the invariance battery
(``tests/invariance``) reads these declarations to check every table of every workflow, so that a new table is
covered by declaring its roles here (a test refuses a table port without them, naming it).

Every string of a table may hold names (of contexts, candidates, models, judges, templates, reviewers), alone or
joined into a composite (``<input>:<model>``, ``judge/template``, ``combined:<template>``): the battery maps every
name back when it compares a renamed run with the original. Besides that, a table declares:

- ``pair``: the two columns that name a pair's candidates (``i``, ``j``) where the product orients a pair by its
  ids; reading the pair the other way round swaps them and changes the ``flips`` columns (``COMPLEMENT``: ``x`` becomes
  ``1 - x``; ``NEGATE``: ``-x``; another column's name: the two swap); every other column reads the same;
- ``sets``: columns that list names joined by a separator, in an order that follows the names (``tied_with``;
  a jury's ``template_id``, its jurors' templates joined by ``:``); several separators nest, the first outermost;
- ``probabilities``: columns in [0, 1]; ``intervals``: ``(estimate, lower, upper)`` with ``lower <= estimate <=
  upper``, the bounds null together, never without the estimate (an estimate may stand without one: too few units
  for a valid interval);
- ``undefined``: the columns that may be null, meaning "not defined" (printed n/a); a float column is never NaN,
  and a column not listed here is never null;
- ``measured``: what a run measures rather than computes (seconds, which process): never compared;
- ``input_order``: columns that record the input's order, compared under renaming but not under a shuffle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pyarrow as pa

from pipeline.contracts import card_schema as card
from pipeline.contracts import jury_schema as jury
from pipeline.contracts import schemas
from pipeline.contracts import trust_schema as trust

COMPLEMENT = "1 - x"
NEGATE = "-x"


@dataclass(frozen=True)
class Roles:
    """The declared roles of one table's columns (module docstring)."""

    pair: tuple[str, str] | None = None
    flips: Mapping[str, str] = field(default_factory=dict)
    sets: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    probabilities: tuple[str, ...] = ()
    intervals: tuple[tuple[str, str, str], ...] = ()
    undefined: tuple[str, ...] = ()
    measured: tuple[str, ...] = ()
    input_order: tuple[str, ...] = ()

    def columns(self) -> set[str]:
        """Every column these roles name."""
        named = set(self.pair or ()) | set(self.flips) | set(self.sets) | set(self.probabilities)
        named |= {c for triple in self.intervals for c in triple}
        named |= set(self.undefined) | set(self.measured) | set(self.input_order)
        named |= {v for v in self.flips.values() if v not in (COMPLEMENT, NEGATE)}
        return named


REASONING = ("reasoning", "reasoning_tokens", "reasoning_cut")
CORRELATION_VALUES = tuple(
    f"{m}{suffix}" for suffix in ("", "_pooled", "_system") for m in schemas.CORRELATION_METHODS
)

# A jury's template_id: its jurors' templates joined by ":" (pipeline.scoring.jury_table).
JURY_TEMPLATES = {"template_id": (":",)}

# Per schema (the object of pipeline.contracts), the roles of its columns.
ROLES: dict[int, Roles] = {
    id(schemas.CANDIDATES): Roles(
        undefined=("system", "category", "checklist"), input_order=("candidate_index",)
    ),
    id(schemas.HUMAN_SCORES): Roles(),
    id(schemas.LEFT_OUT): Roles(),
    id(schemas.JUDGMENTS): Roles(
        probabilities=("p_a", "p_tie", "label_mass"),
        undefined=("top_token", "worker", *REASONING),
        measured=("seconds", "worker"),
    ),
    id(schemas.RATINGS): Roles(
        probabilities=("label_mass",),
        undefined=("score", "failure", "label_mass", "worker", *REASONING),
        measured=("seconds", "worker"),
    ),
    id(schemas.ROUNDS): Roles(
        undefined=("criterion", "value", "downweighted", "beyond_cap", "contradicted", "spearman", "stopped"),
        measured=("fit_seconds", "select_seconds"),
    ),
    id(schemas.ROUND_PAIRS): Roles(),
    id(schemas.COMPARISONS): Roles(
        pair=("cand_i", "cand_j"),
        flips={"p_ij": "p_ji", "p": COMPLEMENT},
        probabilities=("p_ij", "p_ji", "p", "p_tie"),
        undefined=("p_ij", "p_ji"),
    ),
    id(schemas.POSITION_BIAS): Roles(
        probabilities=("p_a", "p_a_hard", "p_a_debiased", "label_mass", "p_tie", "tie_hard", "cache_share"),
        undefined=("cache_share",),
    ),
    id(schemas.SCORES): Roles(sets=JURY_TEMPLATES, undefined=("stderr", "human_score")),
    id(schemas.UNSCORED): Roles(sets=JURY_TEMPLATES),
    id(schemas.CORRELATIONS): Roles(
        sets=JURY_TEMPLATES,
        probabilities=("pairwise_accuracy",),
        undefined=(*CORRELATION_VALUES, "pairwise_accuracy"),
    ),
    id(schemas.RATING_FAILURES): Roles(undefined=("failure", "text")),
    id(schemas.COST): Roles(
        probabilities=("cache_share",), undefined=("cache_share",), measured=("seconds",)
    ),
    id(schemas.ASSESSMENT): Roles(
        sets={"templates": ("+", ":")},
        probabilities=("pairwise_accuracy",),
        undefined=("spearman", "kendall", "pairwise_accuracy", "prompts_per_candidate"),
        measured=("seconds",),
    ),
    id(schemas.TASKS): Roles(),
    id(schemas.GENERATIONS): Roles(undefined=("finish_reason", "worker"), measured=("seconds", "worker")),
    id(schemas.REASONS): Roles(
        pair=("cand_i", "cand_j"),
        flips={"p_ij": "p_ji", "p": COMPLEMENT},
        probabilities=("p_ij", "p_ji", "p"),
        undefined=("p_ij", "p_ji"),
    ),
    id(schemas.LEADERBOARD): Roles(
        sets={"tied_with": (", ",)},
        intervals=(("estimate", "lower", "upper"),),
        undefined=("estimate", "lower", "upper"),
    ),
    id(jury.JURORS): Roles(probabilities=("share", "p_a_raw")),
    id(jury.JUROR_AGREEMENT): Roles(
        pair=("juror_a", "juror_b"),
        probabilities=("raw_agreement",),
        undefined=("raw_agreement", "kappa", "spearman"),
    ),
    id(card.JUDGE_CARD): Roles(
        intervals=(
            ("accuracy", "accuracy_lower", "accuracy_upper"),
            ("models_spearman", "models_spearman_lower", "models_spearman_upper"),
            ("models_kendall", "models_kendall_lower", "models_kendall_upper"),
        ),
        probabilities=(
            "signal_p_value",
            "signal_alpha",
            "accuracy",
            "accuracy_lower",
            "accuracy_upper",
            "ece",
            "brier",
            "ece_calibrated",
            "brier_calibrated",
            "position_consistency",
            "p_a_raw",
            "p_a_debiased",
            "longer_share_judge",
            "longer_share_people",
            "self_preference",
            "self_preference_people",
            "benchmark_accuracy",
            "ordering_accuracy",
            "positional_agreement",
        ),
        undefined=tuple(
            f.name
            for f in card.JUDGE_CARD
            if f.nullable and f.name not in ("judge", "attribute", "template_id")
        ),
    ),
    id(card.META_EVALUATION): Roles(
        sets={"tied_with": (", ",)},
        probabilities=card.META_SHARES,
        intervals=(("accuracy", "lower", "upper"),),
        undefined=("category", *card.META_BY_ORDERING),
        input_order=("accuracy_listed_first", "accuracy_listed_second"),
    ),
    id(trust.LABELS): Roles(
        pair=("cand_i", "cand_j"),
        flips={"preference": COMPLEMENT},
        probabilities=("preference", "inclusion"),
        undefined=("preference",),
    ),
    id(trust.TRUST): Roles(
        probabilities=(
            "alpha",
            "delta",
            "threshold",
            "bound",
            "agreement",
            "coverage",
            "coverage_open",
            "observed_disagreement",
        ),
        undefined=("threshold", "agreement", "coverage_open", "labels_needed", "observed_disagreement"),
    ),  # fmt: skip
    id(trust.ACCEPTED): Roles(
        pair=("cand_i", "cand_j"),
        flips={"p": COMPLEMENT, "preference": COMPLEMENT},
        probabilities=("p", "p_tie", "confidence", "preference"),
        undefined=("p", "p_tie", "confidence", "preference"),
    ),
    id(trust.RISK_COVERAGE): Roles(probabilities=("threshold", "coverage", "risk", "bound")),
    id(trust.PPI_LEADERBOARD): Roles(
        intervals=(("estimate", "lower", "upper"),),
        undefined=("estimate", "lower", "upper", "lam", "effective_labels"),
    ),
    id(card.JUDGE_RELIABILITY): Roles(
        probabilities=("lower", "upper", "mean_p", "frequency"), undefined=("mean_p", "frequency")
    ),
}


def roles_of(schema: pa.Schema) -> Roles | None:
    """The declared roles of a table's schema (None: not declared)."""
    return ROLES.get(id(schema))


def declare(schema: pa.Schema, roles: Roles) -> pa.Schema:
    """Declare the roles of a table of a stage from outside (:mod:`pipeline.config.stage_plugins`), so that the
    invariance battery checks it as it checks the package's own; a schema declared twice is refused."""
    if id(schema) in ROLES:
        raise ValueError(f"the roles of table schema {schema.names} are declared twice")
    ROLES[id(schema)] = roles
    return schema
