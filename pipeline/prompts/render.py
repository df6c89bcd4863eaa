"""The fields of a template filled for one attribute: the message of a pair, its answer prefix, an absolute prompt's fields."""

from __future__ import annotations

from typing import Any

from pipeline.config.assessment import TemplateConfig
from pipeline.data.words import PromptWords


def render_fields(
    words: PromptWords, attribute: str, low: int, high: int, options: str = ""
) -> dict[str, Any]:
    """The template fields other than the context and the candidate (``words``: :class:`PromptWords`)."""
    noun, context_noun = words.candidate_noun, words.context_noun
    return {
        "attribute": attribute,
        "Attribute": attribute[:1].upper() + attribute[1:],
        "adjective": words.adjectives[attribute],
        "noun": noun,
        "Noun": noun[:1].upper() + noun[1:],
        "context_noun": context_noun,
        "Context_noun": context_noun[:1].upper() + context_noun[1:],
        "low": low,
        "high": high,
        "criterion": words.criteria.get(attribute, attribute),
        "options": options,
    }


def render_message(
    template: TemplateConfig, words: PromptWords, attribute: str, context: str, a: str, b: str
) -> str:
    """The user message comparing ``a`` (slot A) and ``b`` (slot B) on ``attribute``."""
    return template.text.format(context=context, a=a, b=b, **render_fields(words, attribute, 0, 0))


def render_answer_prefix(template: TemplateConfig, words: PromptWords, attribute: str) -> str:
    return template.answer_prefix.format(context="", a="", b="", **render_fields(words, attribute, 0, 0))
