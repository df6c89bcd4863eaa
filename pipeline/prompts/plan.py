"""Prompts, settled once: the user message of a pair, the text around it, and the label words.

:func:`plan_prompts` runs once on the driver with the judge's tokenizer: it decides whether the chat template is
used, renders the template once around a placeholder to get the text before and after the message (checked
against a real rendering), resolves the label words to token ids and fixes each template's answer prefix.
The resulting :class:`PromptPlan` is a small picklable object: the pair stage renders whole prompts with it
(pure string functions, no tokenizer), the judge only tokenizes them and reads the label tokens it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pipeline.config.assessment import PromptConfig, TemplateConfig
from pipeline.config.judging import ReasoningConfig
from pipeline.contracts.engine import Reasoning, Request
from pipeline.contracts.frame import PromptFrame
from pipeline.data.words import PromptWords
from pipeline.prompts.absolute import AbsoluteTemplate
from pipeline.prompts.chat import chat_frame, plain_frame, uses_chat_template
from pipeline.prompts.labels import Labels
from pipeline.prompts.render import render_answer_prefix, render_fields, render_message


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
    # judge.reasoning: reason before every verdict (None: off), and the instruction added to every message.
    reasoning: Reasoning | None = None
    reasoning_instruction: str = ""

    def template(self, template_id: str) -> TemplateConfig:
        return next(t for t in self.templates if t.id == template_id)

    def prompt(self, template: TemplateConfig, attribute: str, context: str, a: str, b: str) -> str:
        """The whole text given to the engine for ``a`` in slot A and ``b`` in slot B."""
        message = render_message(template, self.words, attribute, context, a, b)
        return self.frame.wrap(self.instructed(message)) + self.answer_prefixes[(template.id, attribute)]

    def instructed(self, message: str) -> str:
        """The message with the reasoning instruction after it (with judge.reasoning and an instruction)."""
        if self.reasoning is None or not self.reasoning_instruction:
            return message
        return f"{message}\n\n{self.reasoning_instruction}"

    def rate_prompt(
        self, template: AbsoluteTemplate, attribute: str, context: str, candidate: str, item: str = ""
    ) -> str:
        """The whole text given to the engine to judge ``candidate`` on its own (``item``: the checklist item asked,
        mode checklist)."""
        fields = render_fields(self.words, attribute, template.low, template.high, template.options)
        message = template.text.format(context=context, candidate=candidate, item=item, **fields)
        prefix = template.answer_prefix.format(context="", candidate="", item="", **fields)
        return self.frame.wrap(self.instructed(message)) + prefix

    def rated_per_candidate(self, items: int = 0) -> int:
        """Absolute prompts per candidate of a context whose checklist has ``items`` items: every attribute for most
        templates, its own criterion for options, every item for checklist."""
        return sum(1 for t in self.absolute for _ in t.asked(self.attributes, [""] * items))

    def requests(self) -> dict[str, Request]:
        """What the engine reads for every template id: the label tokens of a comparison, the absolute reads (a
        checklist item's prompt, ``<template>#<k>``, reads its template's: :func:`pipeline.contracts.keys.base_template`)."""
        compare = Request(token_ids=self.labels.token_ids, max_tokens=1, reasoning=self.reasoning)
        absolute = {t.id: replace(t.request, reasoning=self.reasoning) for t in self.absolute}
        return {**{t.id: compare for t in self.templates}, **absolute}

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
                    "token_ids": list(t.request.token_ids),
                    "max_tokens": t.request.max_tokens,
                    "samples": t.request.n,
                    "temperature": t.request.temperature,
                    "seed": t.request.seed,
                },
                "example": self.rate_prompt(t, attribute, "<context>", "<candidate>", "<checklist item>"),
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
    reasoning: ReasoningConfig | None = None,
) -> PromptPlan:
    """Settle the prompt once: chat template or plain text, the frame around messages, answer prefixes.
    ``comparative=False``: absolute prompts only (``workflow=absolute``). ``reasoning``: judge.reasoning."""
    chat = uses_chat_template(tokenizer, cfg.chat_template, model)
    frame = chat_frame(tokenizer, cfg.system_prompt, model) if chat else plain_frame(cfg.system_prompt)
    templates = tuple(cfg.templates) if comparative else ()
    prefixes = {(t.id, a): render_answer_prefix(t, words, a) for t in templates for a in attributes}
    think = None
    if reasoning is not None and reasoning.enabled:
        think = Reasoning(reasoning.max_tokens, reasoning.open, reasoning.close, tuple(reasoning.stop))
    return PromptPlan(
        templates,
        tuple(attributes),
        words,
        frame,
        chat,
        labels,
        prefixes,
        tuple(absolute),
        cfg.system_prompt,
        think,
        reasoning.instruction if think is not None and reasoning is not None else "",
    )
