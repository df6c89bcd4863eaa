"""Checks on the driver before any judging starts: every prompt must fit the judge's context length.

For each context the longest prompt is the one holding its two longest candidates; it is rendered with the
real chat template and tokenizer for every template and attribute. A prompt that does not fit is either
refused (an InputError naming the context and the candidates) or fixed by truncating the context text,
counted and warned about (``prompt.too_long``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pipeline.config import PromptConfig, TemplateConfig
from pipeline.data.errors import InputError, Problem
from pipeline.prompts import PromptWords, encode_prompt, full_prompt, render_answer_prefix, render_message

log = logging.getLogger(__name__)

TRUNCATION_MARK = " ..."
# Extra tokens cut beyond the measured overflow, because re-tokenising cut text can shift a boundary.
TRUNCATION_MARGIN = 8


@dataclass
class LengthReport:
    candidates: pa.Table
    truncated: list[str]
    longest_prompt_tokens: int


def _longest_prompt(
    tokenizer: Any,
    prompt: PromptConfig,
    templates: tuple[TemplateConfig, ...],
    words: PromptWords,
    attributes: list[str],
    context: str,
    a: str,
    b: str,
    chat: bool,
) -> int:
    longest = 0
    for template in templates:
        for attribute in attributes:
            message = render_message(template, words, attribute, context, a, b)
            text = full_prompt(
                tokenizer, prompt, message, render_answer_prefix(template, words, attribute), chat
            )
            longest = max(longest, len(encode_prompt(tokenizer, text, chat)))
    return longest


def check_prompt_lengths(
    candidates: pa.Table,
    attributes: list[str],
    prompt: PromptConfig,
    words: PromptWords,
    tokenizer: Any,
    chat: bool,
    max_model_len: int,
) -> LengthReport:
    """Return the candidates (contexts truncated where allowed) or raise InputError for prompts that cannot fit."""
    limit = max_model_len - 1  # room for the one generated token
    templates = tuple(prompt.templates)
    ids = candidates.column("context_id").to_pylist()
    contexts = candidates.column("context").to_pylist()
    cand_ids = candidates.column("candidate_id").to_pylist()
    texts = candidates.column("text").to_pylist()
    lengths = [len(x) for x in tokenizer(texts, add_special_tokens=False)["input_ids"]] if texts else []

    by_context: dict[str, list[int]] = {}
    for row, cid in enumerate(ids):
        by_context.setdefault(cid, []).append(row)

    problems: list[Problem] = []
    truncated: list[str] = []
    new_context: dict[str, str] = {}
    longest_overall = 0
    for cid, rows in by_context.items():
        top = sorted(rows, key=lambda r: -lengths[r])[:2]
        a, b = texts[top[0]], texts[top[1]]
        pair_names = f"{cand_ids[top[0]]} + {cand_ids[top[1]]}"
        context = contexts[rows[0]]
        n_tokens = _longest_prompt(tokenizer, prompt, templates, words, attributes, context, a, b, chat)
        if n_tokens > limit and prompt.too_long == "truncate":
            ctx_ids = list(tokenizer(context, add_special_tokens=False)["input_ids"])
            cut = n_tokens - limit + TRUNCATION_MARGIN
            for _ in range(4):
                keep = len(ctx_ids) - cut
                if keep <= 0:
                    break
                context = tokenizer.decode(ctx_ids[:keep]) + TRUNCATION_MARK
                n_tokens = _longest_prompt(
                    tokenizer, prompt, templates, words, attributes, context, a, b, chat
                )
                if n_tokens <= limit:
                    new_context[cid] = context
                    truncated.append(cid)
                    break
                cut += n_tokens - limit + TRUNCATION_MARGIN
        if n_tokens > limit:
            how = (
                "even with the context truncated away; shorten the candidates or raise judge.max_model_len"
                if prompt.too_long == "truncate"
                else "set prompt.too_long=truncate to cut the context, or raise judge.max_model_len"
            )
            problems.append(
                Problem(
                    cid,
                    pair_names,
                    "context",
                    f"the longest prompt has {n_tokens} tokens, more than the judge's {max_model_len} - 1; {how}",
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
        contexts = [new_context.get(cid, ctx) for cid, ctx in zip(ids, contexts, strict=True)]
        candidates = candidates.set_column(
            candidates.schema.get_field_index("context"), "context", pa.array(contexts, pa.string())
        )
    return LengthReport(candidates, truncated, longest_overall)
