"""Checks on the driver before any judging starts: every prompt must fit the judge's context length.

For each context the longest prompt is the one holding its two longest candidates; it is rendered exactly as
the judge will see it (:meth:`PromptPlan.prompt`) and tokenized for every template and attribute. A prompt
that does not fit is either refused (an InputError naming the context and the candidates) or fixed by
truncating the context text, counted and warned about (``prompt.too_long``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipeline.config.enums import TooLong
from pipeline.contracts.errors import InputError, Problem
from pipeline.data.contexts import group_by_context
from pipeline.prompts.plan import PromptPlan

log = logging.getLogger(__name__)

TRUNCATION_MARK = " ..."
# Extra tokens cut beyond the measured overflow, because re-tokenising cut text can shift a boundary.
TRUNCATION_MARGIN = 8


@dataclass(frozen=True)
class LengthReport:
    candidates: pa.Table
    truncated: tuple[str, ...]
    longest_prompt_tokens: int


def _longest_prompt(
    tokenizer: Any, plan: PromptPlan, context: str, a: str, b: str, checklist: Sequence[str] = ()
) -> int:
    """Tokens the longest prompt of a context needs with its answer: a comparison of its two longest candidates
    (one generated token), or an absolute prompt of its longest candidate (the tokens it may generate; each item of
    its ``checklist`` for mode checklist)."""
    texts = [
        plan.prompt(t, attribute, context, a, b) for t in plan.templates for attribute in plan.attributes
    ]
    answers = [1] * len(texts)
    for t in plan.absolute:
        for attribute, _, item in t.asked(plan.attributes, checklist):
            texts.append(plan.rate_prompt(t, attribute, context, a, item))
            answers.append(t.request.max_tokens)
    # with reasoning, the verdict is read after the reasoning's budget and the text that closes it
    extra = 0
    if plan.reasoning is not None:
        r = plan.reasoning
        extra = r.max_tokens + len(tokenizer(r.open + r.close, add_special_tokens=False)["input_ids"])
    return max(
        len(ids) + n + extra for ids, n in zip(plan.frame.encode(tokenizer, texts), answers, strict=True)
    )


def check_prompt_lengths(
    candidates: pa.Table, plan: PromptPlan, tokenizer: Any, max_model_len: int, too_long: TooLong
) -> LengthReport:
    """Return the candidates (contexts truncated where allowed) or raise InputError for prompts that cannot fit."""
    limit = max_model_len  # prompt and answer tokens
    texts = candidates.column("text").to_pylist()
    lengths = dict(
        zip(
            texts,
            (len(x) for x in tokenizer(texts, add_special_tokens=False)["input_ids"]) if texts else (),
            strict=False,
        )
    )
    problems: list[Problem] = []
    truncated: list[str] = []
    new_context: dict[str, str] = {}
    longest_overall = 0
    for ctx in group_by_context(candidates):
        top = sorted(range(ctx.size), key=lambda k: -lengths[ctx.texts[k]])[:2]
        a, b = ctx.texts[top[0]], ctx.texts[top[1]]
        pair_names = f"{ctx.candidate_ids[top[0]]} + {ctx.candidate_ids[top[1]]}"
        context = ctx.text
        n_tokens = _longest_prompt(tokenizer, plan, context, a, b, ctx.checklist)
        if n_tokens > limit and too_long == TooLong.truncate:
            ctx_ids = list(tokenizer(context, add_special_tokens=False)["input_ids"])
            cut = n_tokens - limit + TRUNCATION_MARGIN
            for _ in range(4):
                keep = len(ctx_ids) - cut
                if keep <= 0:
                    break
                context = tokenizer.decode(ctx_ids[:keep]) + TRUNCATION_MARK
                n_tokens = _longest_prompt(tokenizer, plan, context, a, b, ctx.checklist)
                if n_tokens <= limit:
                    new_context[ctx.context_id] = context
                    truncated.append(ctx.context_id)
                    break
                cut += n_tokens - limit + TRUNCATION_MARGIN
        if n_tokens > limit:
            how = (
                "even with the context truncated away; shorten the candidates or raise judge.max_model_len"
                if too_long == TooLong.truncate
                else "set prompt.too_long=truncate to cut the context, or raise judge.max_model_len"
            )
            problems.append(
                Problem(
                    ctx.context_id,
                    pair_names,
                    "context",
                    f"the longest prompt needs {n_tokens} tokens with its answer, more than the judge's "
                    f"max_model_len={max_model_len}; {how}",
                )
            )
        longest_overall = max(longest_overall, n_tokens)
    if problems:
        raise InputError(problems)
    if truncated:
        log.warning(
            "truncated the context text of %d context(s) so every prompt fits judge.max_model_len=%d: %s%s "
            "(set prompt.too_long=refuse to stop instead)",
            len(truncated),
            max_model_len,
            ", ".join(truncated[:10]),
            " ..." if len(truncated) > 10 else "",
        )
        contexts = [
            new_context.get(cid, c)
            for cid, c in zip(
                candidates.column("context_id").to_pylist(),
                candidates.column("context").to_pylist(),
                strict=True,
            )
        ]
        candidates = candidates.set_column(
            candidates.schema.get_field_index("context"), "context", pa.array(contexts, pa.string())
        )
    return LengthReport(candidates, tuple(truncated), longest_overall)
