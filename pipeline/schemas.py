"""Arrow schemas: the data contracts between stages, checked at stage boundaries and written to Parquet.

- CANDIDATES: one row per candidate (its context text repeated), after validation.
- HUMAN_SCORES: one row per candidate and attribute with a human score.
- PAIRS: one row per prompt to judge (a pair in one ordering, for one attribute and template).
- JUDGMENTS: one row per judged prompt: the label log-probabilities read from the engine.
- COMPARISONS: one row per unordered pair (both orderings joined) with the debiased probability.
- SCORES: one row per candidate, attribute, template and method.
"""

from __future__ import annotations

import pyarrow as pa

CANDIDATES = pa.schema(
    [
        pa.field("context_id", pa.string(), nullable=False),
        pa.field("context", pa.string(), nullable=False),
        pa.field("candidate_id", pa.string(), nullable=False),
        pa.field("candidate_index", pa.int32(), nullable=False),
        pa.field("system", pa.string()),
        pa.field("text", pa.string(), nullable=False),
    ]
)

HUMAN_SCORES = pa.schema(
    [
        pa.field("context_id", pa.string(), nullable=False),
        pa.field("candidate_id", pa.string(), nullable=False),
        pa.field("attribute", pa.string(), nullable=False),
        pa.field("human_score", pa.float64(), nullable=False),
    ]
)

# A shard: one row per context, candidates nested, plus the comparisons already judged (for resume).
SHARD = pa.schema(
    [
        pa.field("context_id", pa.string(), nullable=False),
        pa.field("context", pa.string(), nullable=False),
        pa.field("candidate_ids", pa.list_(pa.string()), nullable=False),
        pa.field("texts", pa.list_(pa.string()), nullable=False),
        pa.field("done", pa.list_(pa.string()), nullable=False),
    ]
)

PAIRS = pa.schema(
    [
        pa.field("context_id", pa.string(), nullable=False),
        pa.field("attribute", pa.string(), nullable=False),
        pa.field("template_id", pa.string(), nullable=False),
        pa.field("cand_a", pa.string(), nullable=False),
        pa.field("cand_b", pa.string(), nullable=False),
        # The user message (template filled in); the judge applies the chat template and answer prefix.
        pa.field("message", pa.string(), nullable=False),
    ]
)

JUDGMENTS = pa.schema(
    [
        pa.field("context_id", pa.string(), nullable=False),
        pa.field("attribute", pa.string(), nullable=False),
        pa.field("template_id", pa.string(), nullable=False),
        pa.field("cand_a", pa.string(), nullable=False),
        pa.field("cand_b", pa.string(), nullable=False),
        pa.field("judge", pa.string(), nullable=False),
        # log p(first token = w) for every label word, in the order of label_words (file metadata);
        pa.field("label_logprobs", pa.list_(pa.float64()), nullable=False),
        # logsumexp over the A words and over the B words.
        pa.field("logprob_a", pa.float64(), nullable=False),
        pa.field("logprob_b", pa.float64(), nullable=False),
        # The most likely first token (a sanity check that the judge answers with a label).
        pa.field("top_token", pa.string()),
        pa.field("prompt_tokens", pa.int32(), nullable=False),
        pa.field("cached_tokens", pa.int32(), nullable=False),
        # host:pid of the judge actor (which engine judged the prompt).
        pa.field("worker", pa.string()),
    ]
)

COMPARISONS = pa.schema(
    [
        pa.field("judge", pa.string(), nullable=False),
        pa.field("attribute", pa.string(), nullable=False),
        pa.field("template_id", pa.string(), nullable=False),
        pa.field("context_id", pa.string(), nullable=False),
        pa.field("cand_i", pa.string(), nullable=False),
        pa.field("cand_j", pa.string(), nullable=False),
        # p(A wins) with i in slot A, and with j in slot A (null when that ordering was not judged).
        pa.field("p_ij", pa.float64()),
        pa.field("p_ji", pa.float64()),
        # Debiased probability that i beats j.
        pa.field("p", pa.float64(), nullable=False),
    ]
)

SCORES = pa.schema(
    [
        pa.field("judge", pa.string(), nullable=False),
        pa.field("attribute", pa.string(), nullable=False),
        pa.field("template_id", pa.string(), nullable=False),
        pa.field("method", pa.string(), nullable=False),
        pa.field("context_id", pa.string(), nullable=False),
        pa.field("candidate_id", pa.string(), nullable=False),
        pa.field("score", pa.float64(), nullable=False),
        # Posterior standard error (PoE-Gaussian methods; null for the others).
        pa.field("stderr", pa.float64()),
        # 1 = best within the context; ties share the smallest rank.
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("human_score", pa.float64()),
    ]
)


class SchemaError(ValueError):
    """A table does not match the contract of the stage boundary it crosses."""


def check_schema(table: pa.Table, schema: pa.Schema, where: str) -> pa.Table:
    """Return ``table`` with exactly ``schema``'s columns, in order, cast where safe.

    Raises SchemaError naming the stage boundary and the column when a column is missing, cannot be cast,
    or holds nulls in a non-nullable field.
    """
    missing = [f.name for f in schema if f.name not in table.column_names]
    if missing:
        raise SchemaError(f"{where}: missing column(s) {missing}; have {table.column_names}")
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
