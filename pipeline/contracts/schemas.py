"""Arrow schemas: the data contracts between stages, checked at every stage boundary and written to Parquet.

- CANDIDATES: one row per candidate (its context text repeated), after validation.
- HUMAN_SCORES: one row per candidate and attribute with a human score.
- JUDGED_KEYS: one row per prompt already judged in the run folder (what a resumed run skips).
- LEFT_OUT: one row per prompt a judge leaves out (recorded verdicts that lack its pair), with the judge.
- CONTEXTS: one row per context, its candidates nested, with its shard and the prompts already judged.
- PROMPTS: one row per prompt to judge: a pair in one ordering (mode ``compare``), or one candidate for an
  absolute mode, for one attribute and template.
- RESPONSES: one row per judged prompt as the engine answered it (read log-probabilities, generated texts).
- JUDGMENTS: one row per judged comparison: the label log-probabilities read from the engine, and p(A wins).
- RATINGS: one row per judged absolute prompt: the generated texts, parsed values and the score.
- COMPARISONS: one row per unordered pair (both orderings joined) with the debiased probability.
- POSITION_BIAS: one row per judge, attribute and template: P(A) before and after debiasing.
- SCORES: one row per candidate, attribute, template and method.
- UNSCORED: one row per context a method could not score, with the reason.
- CORRELATIONS: one row per judge, attribute, template and method: agreement with the human scores.
- RATING_FAILURES: one row per absolute prompt with a generation that did not parse.
- COST: one row per judge, attribute, template and mode: prompts, tokens and engine seconds spent.
- ASSESSMENT: per attribute, every method's agreement with people beside the prompts and seconds it cost.
- TASKS: one row per task input of a generate-then-evaluate run: its id and the filled task prompt.
- GENERATIONS: one row per task input and generator model: the output, why it ended, its tokens.
- REASONS: one row per comparison the judge was asked about: the decision and its explanation.
- LEADERBOARD: per model (the candidates' system) and metric: the estimate with a bootstrap interval over inputs
  (or over a pool's items).
"""

from __future__ import annotations

from typing import Literal

import pyarrow as pa

from pipeline.contracts.keys import PROMPT_KEY


def required(type_: pa.DataType, *names: str) -> list[pa.Field]:
    """Columns of one type that every row fills, in the order named."""
    return [pa.field(name, type_, nullable=False) for name in names]


def optional(type_: pa.DataType, *names: str) -> list[pa.Field]:
    """Columns of one type that may be null, in the order named."""
    return [pa.field(name, type_) for name in names]


CANDIDATES = pa.schema(
    [
        *required(pa.string(), "context_id", "context", "candidate_id"),
        pa.field("candidate_index", pa.int32(), nullable=False),
        pa.field("system", pa.string()),
        pa.field("text", pa.string(), nullable=False),
        # The context's category (dataset.category_field, grouped by dataset.category_groups): results are split by
        # it where they are (a judge benchmark's sources or subsets); null where the data gives none.
        pa.field("category", pa.string()),
        # The context's checklist (its items, in order) where it gives one: absolute mode checklist judges each.
        pa.field("checklist", pa.list_(pa.string())),
    ]
)


HUMAN_SCORES = pa.schema(
    [
        *required(pa.string(), "context_id", "candidate_id", "attribute"),
        pa.field("human_score", pa.float64(), nullable=False),
    ]
)


JUDGED_KEYS = pa.schema([pa.field(name, pa.string(), nullable=False) for name in PROMPT_KEY])


# One row per prompt of the run a judge leaves out (a judge that answers by key, recorded verdicts, whose file lacks
# an ordering of the pair, with judge.engine.match=partial): never judged, counted and reported.
LEFT_OUT = pa.schema([*JUDGED_KEYS, pa.field("judge", pa.string(), nullable=False)])


# A judged prompt of one context, as the prompt stage receives it (the context is the row's).
DONE = pa.struct([pa.field(name, pa.string(), nullable=False) for name in PROMPT_KEY[1:]])


CONTEXTS = pa.schema(
    [
        *required(pa.string(), "context_id", "context"),
        pa.field("candidate_ids", pa.list_(pa.string()), nullable=False),
        pa.field("texts", pa.list_(pa.string()), nullable=False),
        # Pair generation runs one task per shard; a context is never split.
        pa.field("shard", pa.int32(), nullable=False),
        # Prompts still to judge, and those already judged in the run folder (skipped).
        pa.field("n_prompts", pa.int64(), nullable=False),
        pa.field("done", pa.list_(DONE), nullable=False),
        # The context's checklist items (empty: none).
        pa.field("checklist", pa.list_(pa.string()), nullable=False),
    ]
)


PROMPTS = pa.schema(
    [
        *required(pa.string(), "context_id", "mode", "attribute", "template_id", "cand_a", "cand_b"),
        # The whole text the engine reads (chat frame, message, answer prefix), from PromptPlan.
        pa.field("prompt", pa.string(), nullable=False),
    ]
)


# With judge.reasoning: the reasoning generated before the verdict (pipeline.judge.reasoning), its tokens, and
# whether the budget cut it; null without reasoning (and in parts written before these columns existed).
REASONING_FIELDS = [
    pa.field("reasoning", pa.string()),
    pa.field("reasoning_tokens", pa.int32()),
    pa.field("reasoning_cut", pa.bool_()),
]


RESPONSES = pa.schema(
    [
        *required(pa.string(), "context_id", "mode", "attribute", "template_id", "cand_a", "cand_b", "judge"),
        # log p(first token = t) for every token the template reads (label, score, yes/no words), in its order.
        pa.field("token_logprobs", pa.list_(pa.float64()), nullable=False),
        # The generated text of every sample (one token for the log-probability reads).
        pa.field("texts", pa.list_(pa.string()), nullable=False),
        *required(pa.int32(), "prompt_tokens", "cached_tokens", "generated_tokens"),
        # Why each sample ended: "stop" or "length" (cut off at max_tokens).
        pa.field("finish_reasons", pa.list_(pa.string()), nullable=False),
        # This prompt's share of the engine call that judged it (calls hold prompts of one mode only).
        pa.field("seconds", pa.float64(), nullable=False),
        # host:pid of the judge actor (which engine judged the prompt).
        pa.field("worker", pa.string()),
        # Why the prompt has no answer (an API request that kept failing); null when answered.
        pa.field("error", pa.string()),
        # Who answered: engine (in-process) | api/token_ids, api/chat (a request to the endpoint by that path) |
        # cache (the API reply cache); and the HTTP requests it took, retries included.
        pa.field("source", pa.string(), nullable=False),
        pa.field("requests", pa.int32(), nullable=False),
        # Requested tokens an API did not return among its alternatives (their log-probability is a floor).
        pa.field("missing_logprobs", pa.int32(), nullable=False),
        # Behind an API: the kind of every attempt that failed before the answer (pipeline.judge.endpoint.replies).
        pa.field("failed_attempts", pa.list_(pa.string()), nullable=False),
        # Behind an API: the reply gave no token counts (they are 0, or the prompt's length on the token-id path).
        pa.field("usage_unknown", pa.bool_(), nullable=False),
        # Behind an API: the model the reply says served it (null: it names none, or no API).
        pa.field("served_model", pa.string()),
        *REASONING_FIELDS,
    ]
)


JUDGMENTS = pa.schema(
    [
        *required(pa.string(), "context_id", "attribute", "template_id", "cand_a", "cand_b", "judge"),
        # log p(first token = w) for every label word, in the order of label_words (file metadata);
        pa.field("label_logprobs", pa.list_(pa.float64()), nullable=False),
        # logsumexp over the A words and over the B words.
        *required(pa.float64(), "logprob_a", "logprob_b"),
        # p(A wins) = (p(A) + p(tie) / 2) / (p(A) + p(B) + p(tie)), and p(A) + p(B) + p(tie)
        # (pipeline.methods.verdicts.win_probability); p_tie: the tie option's share (0 without tie words).
        *required(pa.float64(), "p_a", "p_tie", "label_mass"),
        # The most likely first token (a sanity check that the judge answers with a label).
        pa.field("top_token", pa.string()),
        *required(pa.int32(), "prompt_tokens", "cached_tokens"),
        pa.field("seconds", pa.float64(), nullable=False),
        # host:pid of the judge actor (which engine judged the prompt).
        pa.field("worker", pa.string()),
        *REASONING_FIELDS,
    ]
)


RATINGS = pa.schema(
    [
        *required(pa.string(), "context_id", "candidate_id", "attribute", "template_id", "mode", "judge"),
        # The mode's score (pipeline.methods.verdicts.absolute_scores); null when no generated sample parsed.
        pa.field("score", pa.float64()),
        pa.field("texts", pa.list_(pa.string()), nullable=False),
        # The parsed value of every generated sample (null where it did not parse); empty for read modes.
        pa.field("values", pa.list_(pa.float64()), nullable=False),
        pa.field("n_failed", pa.int32(), nullable=False),
        pa.field("failure", pa.string()),
        pa.field("token_logprobs", pa.list_(pa.float64()), nullable=False),
        # Probability on the read words (score tokens, yes/no words); null for generated modes.
        pa.field("label_mass", pa.float64()),
        *required(pa.int32(), "prompt_tokens", "cached_tokens", "generated_tokens"),
        pa.field("seconds", pa.float64(), nullable=False),
        pa.field("worker", pa.string()),
        *REASONING_FIELDS,
    ]
)


GROUP_FIELDS = [
    *required(pa.string(), "judge", "attribute", "template_id"),
]


# One row per context and adaptive round (workflow=adaptive): what was judged by the end of the round and the
# stopping criterion of the fit after it.
ROUNDS = pa.schema(
    [
        pa.field("round", pa.int32(), nullable=False),
        pa.field("context_id", pa.string(), nullable=False),
        pa.field("items", pa.int32(), nullable=False),
        # pairs judged (both orderings) and judge calls (prompts, absolute ones of a warm start included) so far
        *required(pa.int64(), "pairs", "calls", "prompt_tokens"),
        # the stopping rule's criterion and its value after this round's fit (null without a rule)
        pa.field("criterion", pa.string()),
        pa.field("value", pa.float64()),
        *required(pa.float64(), "expected_tau", "max_stderr"),
        # comparisons the robust fit (adaptive.robust) weighted below one half: answers far from what the other
        # comparisons say of their pair (null: a record of a version without it)
        pa.field("downweighted", pa.int64()),
        # answers at the log-odds cap that the fit places beyond it (adaptive.censor): read as "at least the cap",
        # they pull on nothing (null: without censor, or a record of a version without it)
        pa.field("beyond_cap", pa.int64()),
        # pairs judged so far whose two orderings contradict each other (pipeline.methods.scorers.contradiction): left out
        # of the fit under adaptive.drop_contradicted (null: a record of a version without the count)
        pa.field("contradicted", pa.int64()),
        # Spearman with the human scores where the input has them
        pa.field("spearman", pa.float64()),
        *required(pa.float64(), "fit_seconds", "select_seconds"),
        # why the context's rounds ended after this one (null: they went on)
        pa.field("stopped", pa.string()),
    ]
)


# The pairs adaptive rounds chose: one row per prompt to judge (both orderings of every pair), with its round.
ROUND_PAIRS = pa.schema(
    [
        pa.field("round", pa.int32(), nullable=False),
        *required(pa.string(), "context_id", "attribute", "cand_a", "cand_b"),
    ]
)


COMPARISONS = pa.schema(
    [
        *GROUP_FIELDS,
        *required(pa.string(), "context_id", "cand_i", "cand_j"),
        # p(A wins) with i in slot A, and with j in slot A (null when that ordering was not judged).
        *optional(pa.float64(), "p_ij", "p_ji"),
        # Debiased probability that i beats j (tie probability split evenly), and the mean tie probability.
        *required(pa.float64(), "p", "p_tie"),
    ]
)


POSITION_BIAS = pa.schema(
    [
        *GROUP_FIELDS,
        pa.field("n", pa.int64(), nullable=False),
        # P(A) = mean p(A wins) (EACL eq. 8); the share of prompts where A is the decision; after debiasing.
        *required(pa.float64(), "p_a", "p_a_hard", "p_a_debiased", "label_mass"),
        # How often the judge picks the tie option: mean p(tie), and the share of prompts where it is the top label.
        *required(pa.float64(), "p_tie", "tie_hard"),
        *required(pa.int64(), "prompt_tokens", "cached_tokens"),
        pa.field("cache_share", pa.float64()),
    ]
)


SCORES = pa.schema(
    [
        *GROUP_FIELDS,
        *required(pa.string(), "method", "context_id", "candidate_id"),
        pa.field("score", pa.float64(), nullable=False),
        # Posterior standard error (PoE-Gaussian methods and poe_logit; null for the others, and where it is not
        # defined: a context with no more comparisons than free scores has no residual to estimate it from).
        pa.field("stderr", pa.float64()),
        # 1 = best within the context; ties share the smallest rank.
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("human_score", pa.float64()),
    ]
)


UNSCORED = pa.schema(
    [
        *GROUP_FIELDS,
        *required(pa.string(), "method", "context_id", "reason"),
    ]
)


CORRELATION_METHODS = ("spearman", "pearson", "kendall")


CORRELATIONS = pa.schema(
    [
        *GROUP_FIELDS,
        pa.field("method", pa.string(), nullable=False),
        # Per context, averaged over contexts (EACL section 5), and over the whole pool.
        *(pa.field(m, pa.float64()) for m in CORRELATION_METHODS),
        *(pa.field(f"{m}_pooled", pa.float64()) for m in CORRELATION_METHODS),
        *required(pa.int64(), "n_contexts", "n_skipped_contexts"),
        pa.field("pairwise_accuracy", pa.float64()),
        pa.field("n_pairs", pa.int64(), nullable=False),
        # System-level (the EACL release and G-Eval on SummEval): each system's mean score and mean human score
        # over the contexts, correlated across systems; null where the candidates name fewer than 3 systems.
        *(pa.field(f"{m}_system", pa.float64()) for m in CORRELATION_METHODS),
        pa.field("n_systems", pa.int64(), nullable=False),
    ]
)


RATING_FAILURES = pa.schema(
    [
        *GROUP_FIELDS,
        *required(pa.string(), "mode", "context_id", "candidate_id"),
        *required(pa.int32(), "n_failed", "n_samples"),
        # Whether another sample parsed (the rating has a score) or none did (left out of the scores).
        pa.field("scored", pa.bool_(), nullable=False),
        *optional(pa.string(), "failure", "text"),
    ]
)


COST = pa.schema(
    [
        *GROUP_FIELDS,
        pa.field("mode", pa.string(), nullable=False),
        *required(pa.int64(), "prompts", "candidates", "prompt_tokens", "cached_tokens"),
        pa.field("cache_share", pa.float64()),
        pa.field("generated_tokens", pa.int64(), nullable=False),
        # Engine seconds (measured per engine call; a call holds prompts of one mode).
        pa.field("seconds", pa.float64(), nullable=False),
    ]
)


ASSESSMENT = pa.schema(
    [
        *required(pa.string(), "judge", "attribute"),
        # comparative | absolute | combined
        *required(pa.string(), "approach", "method"),
        # The templates whose prompts the method used (comparative + absolute for a combined method).
        pa.field("templates", pa.string(), nullable=False),
        *optional(pa.float64(), "spearman", "kendall", "pairwise_accuracy"),
        pa.field("prompts", pa.int64(), nullable=False),
        pa.field("prompts_per_candidate", pa.float64()),
        pa.field("prompt_tokens", pa.int64(), nullable=False),
        pa.field("seconds", pa.float64(), nullable=False),
        # 1 = the best spearman of the attribute.
        pa.field("rank", pa.int32(), nullable=False),
    ]
)


TASKS = pa.schema(
    [
        pa.field("input_id", pa.string(), nullable=False),
        # The task prompt filled from the record (the context the outputs are judged in).
        pa.field("task", pa.string(), nullable=False),
        # The record as JSON.
        pa.field("record", pa.string(), nullable=False),
    ]
)


GENERATIONS = pa.schema(
    [
        *required(pa.string(), "input_id", "model", "output"),
        # "stop" or "length" (cut off at max_tokens)
        pa.field("finish_reason", pa.string()),
        *required(pa.int32(), "prompt_tokens", "output_tokens"),
        pa.field("seconds", pa.float64(), nullable=False),
        pa.field("worker", pa.string()),
    ]
)


REASONS = pa.schema(
    [
        *GROUP_FIELDS,
        *required(pa.string(), "context_id", "cand_i", "cand_j"),
        *optional(pa.float64(), "p_ij", "p_ji"),
        pa.field("p", pa.float64(), nullable=False),
        # why this comparison was chosen: disagree | close | random
        pa.field("why", pa.string(), nullable=False),
        # the candidate the judge chose (debiased), and its explanation, generated after the decision
        *required(pa.string(), "decision", "reason"),
    ]
)


LEADERBOARD = pa.schema(
    [
        *GROUP_FIELDS,
        # win_rate, or the scoring method whose mean score over inputs this is
        *required(pa.string(), "metric", "model"),
        pa.field("estimate", pa.float64()),
        # the bootstrap interval over inputs (leaderboard.level)
        *optional(pa.float64(), "lower", "upper"),
        # 1 + the number of models whose interval lies wholly above this one's (equal ranks: statistically tied)
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("tied_with", pa.string(), nullable=False),
        # what the bootstrap resamples: "input" (the contexts), or "item" when the run has one context (a pool: its
        # candidates, so each model's items are drawn with replacement); n_inputs counts the model's units
        pa.field("unit", pa.string(), nullable=False),
        *required(pa.int64(), "n_inputs", "n_games"),
    ]
)


class SchemaError(ValueError):
    """A table does not match the contract of the stage boundary it crosses."""


def check_schema(
    table: pa.Table, schema: pa.Schema, where: str, extra: Literal["drop", "error"] = "drop"
) -> pa.Table:
    """Return ``table`` with exactly ``schema``'s columns, in order, cast where safe.

    Raises SchemaError naming the stage boundary and the column when a column is missing, cannot be cast,
    holds nulls in a non-nullable field, or (``extra="error"``) is not in the schema.
    """
    missing = [f.name for f in schema if f.name not in table.column_names]
    if missing:
        raise SchemaError(f"{where}: missing column(s) {missing}; have {table.column_names}")
    if extra == "error":
        unknown = [name for name in table.column_names if name not in schema.names]
        if unknown:
            raise SchemaError(f"{where}: column(s) {unknown} are not in the declared schema {schema.names}")
    columns = []
    for f in schema:
        col = table.column(f.name)
        if not col.type.equals(f.type):
            try:
                col = col.cast(f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise SchemaError(
                    f"{where}: column {f.name!r} has type {col.type}, expected {f.type}"
                ) from exc
        if not f.nullable and col.null_count:
            raise SchemaError(f"{where}: column {f.name!r} has {col.null_count} null value(s)")
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)
