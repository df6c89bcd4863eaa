"""Prompts, settled once: the user message of a pair, the text around it, and the label words.

:func:`plan_prompts` runs once on the driver with the judge's tokenizer: it decides whether the chat template is
used, renders the template once around a placeholder to get the text before and after the message (checked
against a real rendering), resolves the label words to token ids and fixes each template's answer prefix.
The resulting :class:`PromptPlan` is a small picklable object: the pair stage renders whole prompts with it
(pure string functions, no tokenizer), the judge only tokenizes them and reads the label tokens it names.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from pipeline.absolute import AbsoluteTemplate, Read, render_fields, template_fields
from pipeline.config import ChatTemplate, PromptConfig, TemplateConfig
from pipeline.errors import ConfigError
from pipeline.judge.labels import Labels

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

FIELDS = frozenset(
    {"context", "a", "b", "adjective", "noun", "Noun", "context_noun", "Context_noun", "criterion"}
)
# Plain-text prompts (no chat template): the message, then the answer cue.
PLAIN_TAIL = "\n\nAnswer: "
# Marks a prompt given as a whole conversation (JSON messages after it): an API judge sends it to the chat endpoint
# as it is, and the server applies its own chat template (the judge's reasons, a follow-up question).
CONVERSATION = "\ue001conversation\ue001"
# Stands for the message when the chat template is rendered once (a private-use character, never in templates).
_PLACEHOLDER = "\ue000MESSAGE\ue000"
# A message with surrounding whitespace and characters templates might escape: shows how the template treats it.
_PROBE = "  Probe {message} <with> 'quotes' & \"marks\"\n\nand a second paragraph.  "


@dataclass(frozen=True)
class PromptWords:
    """What a dataset calls its contexts and candidates, and the adjective of each attribute."""

    context_noun: str
    candidate_noun: str
    adjectives: Mapping[str, str]
    # attribute -> an evaluation criterion in plain words ({criterion}; the attribute's name where none is given).
    criteria: Mapping[str, str] = field(default_factory=dict)


def template_problems(template: TemplateConfig) -> list[str]:
    """What is wrong with a template (unknown fields, no {a}/{b}), each naming the template."""
    problems = []
    for part, text in (("text", template.text), ("answer_prefix", template.answer_prefix)):
        try:
            unknown = template_fields(text) - FIELDS
        except ValueError as exc:
            problems.append(f"config prompt template {template.id!r} {part}: {exc}")
            continue
        if unknown:
            problems.append(
                f"config prompt template {template.id!r} {part}: unknown field(s) {sorted(unknown)}; "
                f"use {sorted(FIELDS)}"
            )
    if not problems:
        missing = {"a", "b"} - template_fields(template.text)
        if missing:
            problems.append(
                f"config prompt template {template.id!r} text must contain {{a}} and {{b}}; missing {sorted(missing)}"
            )
    return problems


def resolve_adjectives(attributes: list[str], configured: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for attribute in attributes:
        adjective = configured.get(attribute) or DEFAULT_ADJECTIVES.get(attribute)
        if not adjective:
            raise ConfigError(
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
        "criterion": words.criteria.get(attribute, attribute),
    }


def render_message(
    template: TemplateConfig, words: PromptWords, attribute: str, context: str, a: str, b: str
) -> str:
    """The user message comparing ``a`` (slot A) and ``b`` (slot B) on ``attribute``."""
    return template.text.format(context=context, a=a, b=b, **_words(words, attribute))


def render_answer_prefix(template: TemplateConfig, words: PromptWords, attribute: str) -> str:
    return template.answer_prefix.format(context="", a="", b="", **_words(words, attribute))


@dataclass(frozen=True)
class PromptFrame:
    """The text around every user message, from the judge's chat template (or the plain-text layout)."""

    head: str
    tail: str
    # The chat template strips the message's surrounding whitespace (e.g. Llama 3's ``| trim``).
    strip: bool = False
    # Tokenize with the tokenizer's own special tokens (BOS): plain text. Chat text holds its own.
    add_special_tokens: bool = True
    # The system prompt inside ``head`` (an API judge's chat path sends it as its own message).
    system: str | None = None

    def wrap(self, message: str) -> str:
        return self.head + (message.strip() if self.strip else message) + self.tail


class ChatTokenizer(Protocol):
    chat_template: Any

    def apply_chat_template(self, conversation: list[dict[str, str]], **kwargs: Any) -> Any: ...


def uses_chat_template(tokenizer: ChatTokenizer, mode: ChatTemplate | str | bool, model: str) -> bool:
    """Whether prompts go through the judge's chat template (``prompt.chat_template``, decided once)."""
    mode = ChatTemplate.parse(mode)
    has = bool(getattr(tokenizer, "chat_template", None))
    if mode == ChatTemplate.true and not has:
        raise ConfigError(
            f"config prompt.chat_template=true but judge {model}'s tokenizer has no chat template; "
            "use prompt.chat_template=auto or false"
        )
    return has and mode != ChatTemplate.false


def plain_frame(system_prompt: str | None) -> PromptFrame:
    """Plain text: the system prompt (if any) as the first paragraph, the message, then ``Answer:``."""
    return PromptFrame(
        head=f"{system_prompt}\n\n" if system_prompt else "", tail=PLAIN_TAIL, system=system_prompt or None
    )


def chat_frame(tokenizer: ChatTokenizer, system_prompt: str | None, model: str) -> PromptFrame:
    """Render the chat template once around a placeholder; check that a real message lands there verbatim
    (or stripped), so that ``frame.wrap(message)`` equals the template's own rendering of every message."""

    def render(content: str) -> str:
        conversation = [{"role": "system", "content": system_prompt}] if system_prompt else []
        conversation.append({"role": "user", "content": content})
        try:
            return tokenizer.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
        except Exception as exc:  # jinja's raise_exception, e.g. "System role not supported"
            raise ConfigError(
                f"judge {model}'s chat template refused the prompt ({exc}); "
                + ("remove prompt.system_prompt or " if system_prompt else "")
                + "set prompt.chat_template=false"
            ) from exc

    text = render(_PLACEHOLDER)
    if text.count(_PLACEHOLDER) != 1:
        raise ConfigError(
            f"judge {model}'s chat template does not place the user message once in the prompt; "
            "set prompt.chat_template=false"
        )
    head, tail = text.split(_PLACEHOLDER)
    probe = render(_PROBE)
    for strip in (False, True):
        frame = PromptFrame(head, tail, strip=strip, add_special_tokens=False, system=system_prompt or None)
        if frame.wrap(_PROBE) == probe:
            return frame
    raise ConfigError(
        f"judge {model}'s chat template changes the user message (not only its surrounding whitespace), so "
        "prompts cannot be built from it once; set prompt.chat_template=false"
    )


@dataclass(frozen=True)
class PromptPlan:
    """Everything that decides the text a judge sees and the tokens read from its answer (picklable)."""

    templates: tuple[TemplateConfig, ...]
    attributes: tuple[str, ...]
    words: PromptWords
    frame: PromptFrame
    chat: bool
    labels: Labels
    # (template id, attribute) -> the text the answer starts with ("Summary"), so the next token is the label.
    answer_prefixes: Mapping[tuple[str, str], str]
    # The absolute templates of the run (absolute.modes), settled with their token ids and sampling.
    absolute: tuple[AbsoluteTemplate, ...] = ()
    # prompt.system_prompt (inside the frame already; kept for conversations built anew, e.g. the judge's reasons).
    system_prompt: str | None = None

    def template(self, template_id: str) -> TemplateConfig:
        return next(t for t in self.templates if t.id == template_id)

    def prompt(self, template: TemplateConfig, attribute: str, context: str, a: str, b: str) -> str:
        """The whole text given to the engine for ``a`` in slot A and ``b`` in slot B."""
        message = render_message(template, self.words, attribute, context, a, b)
        return self.frame.wrap(message) + self.answer_prefixes[(template.id, attribute)]

    def rate_prompt(self, template: AbsoluteTemplate, attribute: str, context: str, candidate: str) -> str:
        """The whole text given to the engine to judge ``candidate`` on its own."""
        fields = render_fields(self.words, attribute, template.low, template.high, template.options)
        message = template.text.format(context=context, candidate=candidate, **fields)
        return self.frame.wrap(message) + template.answer_prefix.format(context="", candidate="", **fields)

    def rated_per_candidate(self) -> int:
        """Absolute prompts per candidate: every attribute for most templates, its own criterion for options."""
        return sum(1 for t in self.absolute for a in self.attributes if t.asks(a))

    def reads(self) -> dict[str, Read]:
        """What the engine reads for every template id: the label tokens of a comparison, the absolute reads."""
        compare = Read(token_ids=self.labels.token_ids, max_tokens=1)
        return {**{t.id: compare for t in self.templates}, **{t.id: t.read for t in self.absolute}}

    def describe(self) -> dict[str, Any]:
        """What the judge sees, for the run folder (``prompt_plan.json``)."""
        attribute = self.attributes[0]
        out: dict[str, Any] = {
            "chat_template": self.chat,
            "frame": {"head": self.frame.head, "tail": self.frame.tail, "strip": self.frame.strip},
            "answer_prefixes": {f"{t}/{a}": p for (t, a), p in self.answer_prefixes.items()},
            "label_words": list(self.labels.words),
            "label_token_ids": list(self.labels.token_ids),
        }
        if self.templates:
            out["example"] = self.prompt(
                self.templates[0], attribute, "<context>", "<candidate A>", "<candidate B>"
            )
        out["absolute"] = [
            {
                "id": t.id,
                "mode": str(t.mode),
                "scale": [t.low, t.high],
                "read_words": list(t.words),
                "read": {
                    "token_ids": list(t.read.token_ids),
                    "max_tokens": t.read.max_tokens,
                    "samples": t.read.n,
                    "temperature": t.read.temperature,
                    "seed": t.read.seed,
                },
                "example": self.rate_prompt(t, attribute, "<context>", "<candidate>"),
            }
            for t in self.absolute
        ]
        return out


def plan_prompts(
    cfg: PromptConfig,
    attributes: list[str] | tuple[str, ...],
    words: PromptWords,
    tokenizer: Any,
    labels: Labels,
    model: str,
    absolute: tuple[AbsoluteTemplate, ...] = (),
    comparative: bool = True,
) -> PromptPlan:
    """Settle the prompt once: chat template or plain text, the frame around messages, answer prefixes.
    ``comparative=False``: absolute prompts only (``workflow=absolute``)."""
    chat = uses_chat_template(tokenizer, cfg.chat_template, model)
    frame = chat_frame(tokenizer, cfg.system_prompt, model) if chat else plain_frame(cfg.system_prompt)
    templates = tuple(cfg.templates) if comparative else ()
    prefixes = {(t.id, a): render_answer_prefix(t, words, a) for t in templates for a in attributes}
    return PromptPlan(
        templates, tuple(attributes), words, frame, chat, labels, prefixes, tuple(absolute), cfg.system_prompt
    )


def conversation_prompt(messages: list[dict[str, str]]) -> str:
    """A prompt that is a whole conversation (for an API judge's chat endpoint)."""
    return CONVERSATION + json.dumps(messages, ensure_ascii=False)


def parse_conversation(prompt: str) -> list[dict[str, str]] | None:
    """The messages of a :func:`conversation_prompt`; None for a prompt text."""
    if not prompt.startswith(CONVERSATION):
        return None
    return json.loads(prompt[len(CONVERSATION) :])


def encode_prompts(tokenizer: Any, texts: list[str], frame: PromptFrame) -> list[list[int]]:
    """Token ids of whole prompts: chat text holds its special tokens, plain text gets the tokenizer's own."""
    if not texts:
        return []
    return [list(ids) for ids in tokenizer(texts, add_special_tokens=frame.add_special_tokens)["input_ids"]]
