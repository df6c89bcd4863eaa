"""The tables of a judge's report card (:mod:`pipeline.scoring.card_table`): how far to trust each judge, attribute and
template, and the reliability diagram of its probabilities; and the judge measured as the judge benchmarks measure
it (:mod:`pipeline.scoring.meta_table`)."""

from __future__ import annotations

import pyarrow as pa

from pipeline.contracts.schemas import GROUP_FIELDS, optional, required

JUDGE_CARD = pa.schema(
    [
        *GROUP_FIELDS,
        pa.field("n_pairs", pa.int64(), nullable=False),
        # whether the judge is informative here, with no labels (pipeline.methods.quality.signal): its slot-A verdicts'
        # agreement with its slot-B verdicts beyond position bias (null: not testable), the units it read (candidates;
        # pairs in contexts of two), the one-sided permutation p-value, and the false-alarm rate it is tested at
        pa.field("signal", pa.float64()),
        pa.field("signal_units", pa.int64(), nullable=False),
        *required(pa.float64(), "signal_p_value", "signal_alpha"),
        pa.field("informative", pa.bool_(), nullable=False),
        # pairs people scored apart (their preference is known), and how often the judge's debiased verdict agrees
        pa.field("n_human_pairs", pa.int64(), nullable=False),
        pa.field("accuracy", pa.float64()),
        # its interval at leaderboard.level: exact (Clopper-Pearson) where no two pairs share a context, else a
        # bootstrap over contexts from 10 of them (null: fewer)
        *optional(pa.float64(), "accuracy_lower", "accuracy_upper"),
        # calibration of the debiased P(i beats j) against people's preferences
        *optional(pa.float64(), "ece", "brier", "log_loss"),
        # the temperature fitted to people's preferences on every pair, and the calibration after the cross-fitted
        # temperature (each context calibrated with one fitted on the other contexts; a pool's pairs on other pairs)
        pa.field("temperature", pa.float64()),
        # whether the fit stopped at a bound of its search (1e-3 or 1e3), and what the temperature means, in words
        pa.field("temperature_at_bound", pa.bool_()),
        pa.field("temperature_reading", pa.string()),
        *optional(pa.float64(), "ece_calibrated", "brier_calibrated", "log_loss_calibrated"),
        # the share of pairs whose two orderings choose the same candidate; P(A) raw and debiased
        *optional(pa.float64(), "position_consistency", "p_a_raw", "p_a_debiased"),
        # length: how often the judge prefers the longer text, how often people do, and the length coefficient of a
        # logistic model of the judge's verdict (people's score difference beside it where there are human scores)
        pa.field("n_length_pairs", pa.int64(), nullable=False),
        *optional(pa.float64(), "longer_share_judge", "longer_share_people", "length_coef"),
        # self-preference (a judge that is also a generator of the run): pairs of its own output against another
        # model's, the judge's mean probability for its own, and how often people preferred it
        pa.field("n_self_pairs", pa.int64(), nullable=False),
        *optional(pa.float64(), "self_preference", "self_preference_people"),
        # agreement with people: the Spearman of one scoring method's scores (per context, averaged)
        pa.field("method", pa.string()),
        pa.field("spearman", pa.float64()),
        # the models (the candidates' systems) on the leaderboard, and how far the judge's leaderboard (win rate) and
        # people's (their mean score) order them alike: Spearman and Kendall across the models with the leaderboard's
        # bootstrap interval (null: fewer than 5 models, or no human scores)
        pa.field("n_models", pa.int64(), nullable=False),
        *optional(pa.float64(), "models_spearman", "models_spearman_lower", "models_spearman_upper"),
        *optional(pa.float64(), "models_kendall", "models_kendall_lower", "models_kendall_upper"),
        # where the human scores are an objective label: the pairs with one right candidate, and the judge's numbers
        # as the judge benchmarks count them (META_EVALUATION, every category together)
        pa.field("n_objective_pairs", pa.int64(), nullable=False),
        *optional(pa.float64(), "benchmark_accuracy", "ordering_accuracy", "positional_agreement"),
        # behind an API: the models the judge's replies say served them, with their answers ("model (n), ..."; null
        # where no reply names one); more than one is a judge that changed within the run
        pa.field("served_models", pa.string()),
        pa.field("n_served_models", pa.int32(), nullable=False),
    ]
)


JUDGE_RELIABILITY = pa.schema(
    [
        *GROUP_FIELDS,
        # the judge's probabilities as given, or after the cross-fitted temperature
        pa.field("calibrated", pa.bool_(), nullable=False),
        pa.field("bin", pa.int32(), nullable=False),
        *required(pa.float64(), "lower", "upper"),
        pa.field("n", pa.int64(), nullable=False),
        *optional(pa.float64(), "mean_p", "frequency"),
    ]
)


# A judge measured as the judge benchmarks measure it (:mod:`pipeline.methods.quality.benchmark`), on the pairs of an
# attribute whose human scores are an objective label (0 or 1: one candidate of the pair is right): per judge,
# attribute, template and category (null: every category together).
META_EVALUATION = pa.schema(
    [
        *GROUP_FIELDS,
        pa.field("category", pa.string()),
        # the pairs with one right and one wrong candidate that the judge judged
        pa.field("n_pairs", pa.int64(), nullable=False),
        # JudgeBench: the share of pairs whose two orderings' votes sum above 0, with Clopper-Pearson's exact interval at
        # leaderboard.level; the judges' statistical rank by it
        *required(pa.float64(), "accuracy", "lower", "upper"),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("tied_with", pa.string(), nullable=False),
        # LLMBar: each ordering's accuracy (the candidate listed first in the data shown first, then second), their
        # mean, the share right in both, and the share whose orderings choose the same candidate (or neither)
        *optional(pa.float64(), "accuracy_listed_first", "accuracy_listed_second", "accuracy_orderings"),
        *optional(pa.float64(), "both_right", "positional_agreement"),
        # the share of orderings that prefer neither candidate (ties, no verdict)
        pa.field("no_preference", pa.float64()),
        # the product's own verdict: the debiased P(right beats wrong) above one half (exactly one half: half)
        pa.field("accuracy_debiased", pa.float64(), nullable=False),
    ]
)
# The meta-evaluation's measures read per ordering (LLMBar's): null where a pair's two orderings were not both judged.
META_BY_ORDERING = (
    "accuracy_listed_first",
    "accuracy_listed_second",
    "accuracy_orderings",
    "both_right",
    "positional_agreement",
    "no_preference",
)
# Its shares (in [0, 1]): JudgeBench's accuracy with its interval, LLMBar's per ordering, the product's own verdict.
META_SHARES = ("accuracy", "lower", "upper", *META_BY_ORDERING, "accuracy_debiased")
