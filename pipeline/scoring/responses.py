"""The engine's responses as tables: comparisons read as label probabilities (JUDGMENTS), absolute prompts read or
parsed as their mode says (RATINGS), generations (GENERATIONS).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.config.enums import AbsoluteMode
from pipeline.contracts.keys import COMPARE, JUDGMENT_KEY, base_template
from pipeline.contracts.schemas import (
    GENERATIONS,
    REASONING_FIELDS,
    check_schema,
)
from pipeline.methods.verdicts.absolute_scores import (
    expected_score,
    sample_scores,
    yes_no_mass,
    yes_probability,
)
from pipeline.methods.verdicts.win_probability import label_mass, p_a_wins, p_tie, side_logprobs, tie_logprob
from pipeline.prompts.absolute import GENERATED, AbsoluteTemplate
from pipeline.prompts.labels import Labels
from pipeline.prompts.plan import PromptPlan


def judgments_from_responses(responses: Any, labels: Labels) -> Any:
    """JUDGMENTS rows for the comparative responses of the prompt stream (an Arrow table of RESPONSES rows)."""
    import pyarrow as pa

    from pipeline.contracts.schemas import JUDGMENTS, check_schema

    lp = np.array(responses.column("token_logprobs").to_pylist(), dtype=np.float64).reshape(
        responses.num_rows, len(labels.words)
    )
    lp_a, lp_b = side_logprobs(lp, labels.n_a, labels.n_tie)
    lp_t = tie_logprob(lp, labels.n_tie) if labels.n_tie else None
    texts = responses.column("texts").to_pylist()
    out = pa.table(
        {
            **{k: responses.column(k) for k in JUDGMENT_KEY},
            "label_logprobs": pa.array(lp.tolist(), pa.list_(pa.float64())),
            "logprob_a": pa.array(lp_a, pa.float64()),
            "logprob_b": pa.array(lp_b, pa.float64()),
            "p_a": pa.array(p_a_wins(lp_a, lp_b, lp_t), pa.float64()),
            "p_tie": pa.array(p_tie(lp_a, lp_b, lp_t), pa.float64()),
            "label_mass": pa.array(label_mass(lp_a, lp_b, lp_t), pa.float64()),
            "top_token": pa.array([t[0] if t else None for t in texts], pa.string()),
            **{k: responses.column(k) for k in ("prompt_tokens", "cached_tokens", "seconds", "worker")},
            **{f.name: responses.column(f.name) for f in REASONING_FIELDS},
        }
    )
    return check_schema(out, JUDGMENTS, "judgments")


def ratings_from_responses(responses: pa.Table, templates: Sequence[AbsoluteTemplate]) -> pa.Table:
    """RATINGS rows for the absolute responses of the prompt stream (one per candidate, attribute, template)."""
    from pipeline.contracts.schemas import RATINGS, check_schema

    by_id = {t.id: t for t in templates}
    cols = {name: responses.column(name).to_pylist() for name in responses.column_names}
    rows: dict[str, list] = {name: [] for name in RATINGS.names}
    for k in range(responses.num_rows):
        t = by_id[base_template(cols["template_id"][k])]
        texts, lps = cols["texts"][k], cols["token_logprobs"][k]
        values: list[float | None] = []
        failures: list[str] = []
        mass = None
        if t.mode in GENERATED:
            score, values, failures = sample_scores(texts, t.low, t.high)
        else:
            lp = np.array([lps], dtype=np.float64)
            if t.mode in (AbsoluteMode.g_eval, AbsoluteMode.options):
                s, m = expected_score(lp, t.values)
            else:
                s = yes_probability(lp, t.n_yes)
                m = np.add(*yes_no_mass(lp, t.n_yes))
            score, mass = float(s[0]), float(m[0])
        for name in ("context_id", "attribute", "template_id", "mode", "judge", "texts", "token_logprobs"):
            rows[name].append(cols[name][k])
        for name in ("prompt_tokens", "cached_tokens", "generated_tokens", "seconds", "worker"):
            rows[name].append(cols[name][k])
        for f in REASONING_FIELDS:
            rows[f.name].append(cols[f.name][k])
        rows["candidate_id"].append(cols["cand_a"][k])
        rows["score"].append(score)
        rows["values"].append(values)
        rows["n_failed"].append(len(failures))
        rows["failure"].append(failures[0] if failures else None)
        rows["label_mass"].append(mass)
    return check_schema(pa.table(rows), RATINGS, "ratings")


def split_responses(responses: pa.Table, plan: PromptPlan) -> tuple[pa.Table, pa.Table]:
    """(JUDGMENTS, RATINGS) of a batch of RESPONSES: comparisons read as label probabilities, absolute prompts
    read or parsed as their mode says."""
    is_compare = pc.equal(responses.column("mode"), COMPARE)
    return (
        judgments_from_responses(responses.filter(is_compare), plan.labels),
        ratings_from_responses(responses.filter(pc.invert(is_compare)), plan.absolute),
    )


def generation_rows(responses: pa.Table) -> pa.Table:
    """GENERATIONS rows from the engine's responses to generation prompts."""
    texts = responses.column("texts").to_pylist()
    reasons = responses.column("finish_reasons").to_pylist()
    out = pa.table(
        {
            "input_id": responses.column("cand_a"),
            "model": responses.column("template_id"),
            "output": pa.array([t[0] if t else "" for t in texts], pa.string()),
            "finish_reason": pa.array([r[0] if r else None for r in reasons], pa.string()),
            "prompt_tokens": responses.column("prompt_tokens"),
            "output_tokens": responses.column("generated_tokens"),
            "seconds": responses.column("seconds"),
            "worker": responses.column("worker"),
        }
    )
    return check_schema(out, GENERATIONS, "generations")
