"""Prompt templates: the user message for a pair, and the full prompt with chat template and answer prefix.

Pure string functions; the tokenizer (for the chat template) is passed in by the caller.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pipeline.config import PromptConfig, TemplateConfig

# The adjective asked about for an attribute ("Which summary is more <adjective>?").
DEFAULT_ADJECTIVES = {
    "coherence": "coherent",
    "consistency": "consistent",
    "fluency": "fluent",
    "relevance": "relevant",
    "naturalness": "natural",
    "engagingness": "engaging",
    "understandability": "understandable",
    "groundedness": "grounded in the facts",
    "overall": "good",
    "grammar": "grammatically correct",
    "semantics": "faithful to the semantic triples",
    "difficulty": "difficult",
    "quality": "good",
}

FIELDS = frozenset({"context", "a", "b", "adjective", "noun", "Noun", "context_noun", "Context_noun"})


@dataclass(frozen=True)
class PromptWords:
    """What a dataset calls its contexts and candidates, and the adjective of each attribute."""

    context_noun: str
    candidate_noun: str
    adjectives: Mapping[str, str]


def template_fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def check_template(template: TemplateConfig) -> None:
    """Raise ValueError naming the template and the unknown or missing field."""
    for part, text in (("text", template.text), ("answer_prefix", template.answer_prefix)):
        unknown = template_fields(text) - FIELDS
        if unknown:
            raise ValueError(
                f"prompt template {template.id!r} {part}: unknown field(s) {sorted(unknown)}; "
                f"use {sorted(FIELDS)}"
            )
    missing = {"a", "b"} - template_fields(template.text)
    if missing:
        raise ValueError(
            f"prompt template {template.id!r} text must contain {{a}} and {{b}}; missing {sorted(missing)}"
        )


def resolve_adjectives(attributes: list[str], configured: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for attribute in attributes:
        adjective = configured.get(attribute) or DEFAULT_ADJECTIVES.get(attribute)
        if not adjective:
            raise ValueError(
                f"no adjective for attribute {attribute!r}: set dataset.adjectives.{attribute}=<adjective> "
                "(the word in 'Which summary is more <adjective>?')"
            )
        out[attribute] = adjective
    return out


def _words(words: PromptWords, attribute: str) -> dict[str, str]:
    return {
        "adjective": words.adjectives[attribute],
        "noun": words.candidate_noun,
        "Noun": words.candidate_noun[:1].upper() + words.candidate_noun[1:],
        "context_noun": words.context_noun,
        "Context_noun": words.context_noun[:1].upper() + words.context_noun[1:],
    }


def render_message(
    template: TemplateConfig, words: PromptWords, attribute: str, context: str, a: str, b: str
) -> str:
    """The user message comparing ``a`` (slot A) and ``b`` (slot B) on ``attribute``."""
    return template.text.format(context=context, a=a, b=b, **_words(words, attribute))


def render_answer_prefix(template: TemplateConfig, words: PromptWords, attribute: str) -> str:
    return template.answer_prefix.format(context="", a="", b="", **_words(words, attribute))


class ChatTokenizer(Protocol):
    chat_template: Any

    def apply_chat_template(self, conversation: list[dict[str, str]], **kwargs: Any) -> Any: ...


def uses_chat_template(tokenizer: ChatTokenizer, mode: str) -> bool:
    has = bool(getattr(tokenizer, "chat_template", None))
    if mode == "true" and not has:
        raise ValueError("prompt.chat_template=true but the judge model's tokenizer has no chat template")
    return has and mode != "false"


def full_prompt(
    tokenizer: ChatTokenizer, cfg: PromptConfig, message: str, answer_prefix: str, chat: bool
) -> str:
    """The text given to the engine: chat-wrapped message (when ``chat``) followed by the answer prefix."""
    if not chat:
        return f"{message}\n\nAnswer: {answer_prefix}"
    conversation = []
    if cfg.system_prompt:
        conversation.append({"role": "system", "content": cfg.system_prompt})
    conversation.append({"role": "user", "content": message})
    text = tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
    return text + answer_prefix


def encode_prompt(tokenizer: Any, text: str, chat: bool) -> list[int]:
    """Token ids of a full prompt. A chat-templated text already holds its special tokens; plain text gets
    the tokenizer's usual ones (e.g. BOS)."""
    return list(tokenizer(text, add_special_tokens=not chat)["input_ids"])


def prefix_key(template_id: str, attribute: str) -> str:
    return f"{template_id}\t{attribute}"
