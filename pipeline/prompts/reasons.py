"""The judge's reasons: which comparisons to ask about, and the conversation that asks.

A reason is generated after the decision, with the decision given: the comparison prompt (candidate i in slot
A), the judge's own answer (the label of the side the debiased probability favours), then "Explain briefly why."
It is stored beside the comparison and never changes a score. The comparisons asked about are chosen per judge,
attribute and template in the configured order: those whose two orderings disagree (the judge picks the same
slot, not the same candidate), then the closest calls (debiased probability nearest 1/2), then a seeded random
sample of the rest.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.config.enums import ReasonSample
from pipeline.contracts.schemas import PROMPTS
from pipeline.prompts.plan import PromptPlan

ASK = "Explain briefly why."


def choose(comparisons: pl.DataFrame, n: int, order: list[ReasonSample], seed: int) -> pl.DataFrame:
    """Up to ``n`` comparisons per (judge, attribute, template), with ``why``: the rule that chose each."""
    if n <= 0 or not comparisons.height:
        return comparisons.clear().with_columns(why=pl.lit(None, dtype=pl.String))
    chosen = []
    for _, group in comparisons.group_by(["judge", "attribute", "template_id"], maintain_order=True):
        group = group.sort(["context_id", "cand_i", "cand_j"]).with_row_index("row")
        taken: list[tuple[int, str]] = []
        used: set[int] = set()
        for rule in order:
            if len(taken) >= n:
                break
            if rule == ReasonSample.disagree:
                both = group.filter(pl.col("p_ij").is_not_null() & pl.col("p_ji").is_not_null())
                rows = both.filter((pl.col("p_ij") > 0.5) == (pl.col("p_ji") > 0.5)).sort(
                    (pl.col("p") - 0.5).abs()
                )["row"]
            elif rule == ReasonSample.close:
                rows = group.sort((pl.col("p") - 0.5).abs(), "row")["row"]
            else:
                rows = pl.Series(np.random.default_rng(seed).permutation(group.height))
            for r in rows.to_list():
                if len(taken) >= n:
                    break
                if r not in used:
                    used.add(r)
                    taken.append((r, str(rule)))
        picked = pl.DataFrame(
            {"row": [r for r, _ in taken], "why": [w for _, w in taken]},
            schema={"row": pl.UInt32, "why": pl.String},
        )
        chosen.append(group.join(picked, on="row").sort("row").drop("row"))
    return pl.concat(chosen)


def reason_prompt(
    plan: PromptPlan,
    tokenizer: Any,
    attribute: str,
    template_id: str,
    context: str,
    a: str,
    b: str,
    a_wins: bool,
    as_messages: bool = False,
) -> str:
    """The comparison prompt, the judge's answer (the first label word of the side it chose), and the question;
    ``as_messages``: as a conversation for an API judge's chat endpoint (the server applies its chat template)."""
    template = plan.template(template_id)
    label = plan.labels.words[0] if a_wins else plan.labels.words[plan.labels.n_a]
    answer = plan.answer_prefixes[(template_id, attribute)] + label
    if not plan.chat and not as_messages:
        return plan.prompt(template, attribute, context, a, b) + label + f"\n\n{ASK}\n\n"
    from pipeline.contracts.frame import conversation_prompt
    from pipeline.prompts.render import render_message

    message = render_message(template, plan.words, attribute, context, a, b)
    conversation = [{"role": "system", "content": plan.system_prompt}] if plan.system_prompt else []
    conversation += [
        {"role": "user", "content": message},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": ASK},
    ]
    if as_messages:
        return conversation_prompt(conversation)
    return tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)


# The template id of a reason's prompt in the stream; the comparison's template rides in its mode
# (``reason:<template>``).
REASON = "reason"


def reason_prompts(
    chosen: pl.DataFrame, candidates: pa.Table, plan: PromptPlan, tokenizer: Any, as_messages: bool = False
) -> pa.Table:
    """PROMPTS asking the judge why, one per chosen comparison (:func:`reason_prompt`, candidate i in slot A)."""
    text = {
        (c, k): t
        for c, k, t in zip(
            *(candidates.column(n).to_pylist() for n in ("context_id", "candidate_id", "text")), strict=True
        )
    }
    context = dict(
        zip(
            candidates.column("context_id").to_pylist(), candidates.column("context").to_pylist(), strict=True
        )
    )
    rows: dict[str, list] = {name: [] for name in PROMPTS.names}
    for r in chosen.iter_rows(named=True):
        cid = r["context_id"]
        prompt = reason_prompt(
            plan,
            tokenizer,
            r["attribute"],
            r["template_id"],
            context[cid],
            text[(cid, r["cand_i"])],
            text[(cid, r["cand_j"])],
            r["p"] >= 0.5,
            as_messages=as_messages,
        )
        values = (
            cid,
            f"{REASON}:{r['template_id']}",
            r["attribute"],
            REASON,
            r["cand_i"],
            r["cand_j"],
            prompt,
        )
        for name, value in zip(PROMPTS.names, values, strict=True):
            rows[name].append(value)
    return pa.table(rows, schema=PROMPTS)
