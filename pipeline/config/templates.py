"""What a template may say: the fields of comparative and absolute templates, and their checks."""

from __future__ import annotations

import string

from pipeline.config.assessment import AbsoluteTemplateConfig, TemplateConfig
from pipeline.config.enums import AbsoluteMode
from pipeline.contracts.engine import MAX_READ_TOKENS
from pipeline.contracts.keys import ITEM

TEMPLATE_FIELDS = frozenset(
    {"context", "a", "b", "adjective", "noun", "Noun", "context_noun", "Context_noun", "criterion"}
)


def template_problems(template: TemplateConfig) -> list[str]:
    """What is wrong with a template (unknown fields, no {a}/{b}), each naming the template."""
    problems = field_problems(f"config prompt template {template.id!r} ", template, TEMPLATE_FIELDS)
    if not problems:
        missing = {"a", "b"} - template_fields(template.text)
        if missing:
            problems.append(
                f"config prompt template {template.id!r} text must contain {{a}} and {{b}}; missing {sorted(missing)}"
            )
    return problems


# Fields an absolute template may use.
ABSOLUTE_FIELDS = frozenset(
    {
        "context",
        "candidate",
        "attribute",
        "Attribute",
        "adjective",
        "noun",
        "Noun",
        "context_noun",
        "Context_noun",
        "low",
        "high",
        "criterion",
        "options",
        "item",
    }
)


def template_fields(text: str) -> set[str]:
    """The fields a template text uses (``{context}`` ...), comparative and absolute alike."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def field_problems(
    where: str, template: TemplateConfig | AbsoluteTemplateConfig, allowed: frozenset[str]
) -> list[str]:
    """The text's and the answer prefix's fields that do not parse or are not ``allowed``, each named after ``where``
    and the part."""
    problems = []
    for part, text in (("text", template.text), ("answer_prefix", template.answer_prefix)):
        try:
            unknown = template_fields(text) - allowed
        except ValueError as exc:
            problems.append(f"{where}{part}: {exc}")
            continue
        if unknown:
            problems.append(f"{where}{part}: unknown field(s) {sorted(unknown)}; use {sorted(allowed)}")
    return problems


def absolute_template_problems(template_id: str, template: AbsoluteTemplateConfig) -> list[str]:
    """What is wrong with an absolute template, each problem naming it."""
    where = f"config absolute.library.{template_id}"
    problems = field_problems(f"{where}.", template, ABSOLUTE_FIELDS)
    if ITEM in template_id:
        problems.append(
            f"{where}: {ITEM!r} is not allowed in a template's id (it marks a checklist item's prompt)"
        )
    if not problems and "candidate" not in template_fields(template.text):
        problems.append(f"{where}.text must contain {{candidate}}")
    if not problems and (template.mode == AbsoluteMode.checklist) != (
        "item" in template_fields(template.text)
    ):
        problems.append(
            f"{where}.text: {{item}} (the checklist item asked) is for mode checklist, which needs it"
        )
    if template.low >= template.high:
        problems.append(f"{where}: low={template.low} must be below high={template.high}")
    elif template.mode == AbsoluteMode.g_eval and template.high - template.low + 1 > MAX_READ_TOKENS:
        problems.append(
            f"{where}: g_eval reads one token per score; {template.high - template.low + 1} scores is more than "
            f"the {MAX_READ_TOKENS} an engine returns"
        )
    return problems
