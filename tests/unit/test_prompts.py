"""Prompt templates: rendering, field checks, adjectives and the chat wrapping."""

from __future__ import annotations

import pytest

from pipeline.config import PromptConfig, TemplateConfig
from pipeline.prompts import (
    PromptWords,
    check_template,
    full_prompt,
    render_answer_prefix,
    render_message,
    resolve_adjectives,
)

WORDS = PromptWords("passage", "summary", {"coherence": "coherent"})


def test_default_template_puts_the_question_last():
    message = render_message(TemplateConfig(), WORDS, "coherence", "CTX", "AAA", "BBB")
    assert message == (
        "Passage: CTX\n\nSummary A: AAA\n\nSummary B: BBB\n\nWhich summary is more coherent, Summary A or Summary B?"
    )
    assert render_answer_prefix(TemplateConfig(), WORDS, "coherence") == "Summary"


def test_template_field_errors_name_the_template():
    with pytest.raises(ValueError, match="'t9'.*unknown field"):
        check_template(TemplateConfig(id="t9", text="{context} {a} {b} {nonsense}"))
    with pytest.raises(ValueError, match=r"must contain \{a\} and \{b\}"):
        check_template(TemplateConfig(id="t9", text="{context} {a}"))


def test_adjectives_default_and_missing():
    assert resolve_adjectives(["fluency"], {}) == {"fluency": "fluent"}
    assert resolve_adjectives(["fluency"], {"fluency": "smooth"}) == {"fluency": "smooth"}
    with pytest.raises(ValueError, match="dataset.adjectives.wit"):
        resolve_adjectives(["wit"], {})


class FakeChat:
    chat_template = "x"

    def apply_chat_template(self, conversation, tokenize, add_generation_prompt):
        assert tokenize is False and add_generation_prompt is True
        return "".join(f"<{m['role']}>{m['content']}" for m in conversation) + "<assistant>"


def test_full_prompt_wraps_and_appends_the_answer_prefix():
    cfg = PromptConfig(system_prompt="Be fair.")
    assert (
        full_prompt(FakeChat(), cfg, "MSG", "Summary", chat=True)
        == "<system>Be fair.<user>MSG<assistant>Summary"
    )
    assert full_prompt(FakeChat(), cfg, "MSG", "Summary", chat=False) == "MSG\n\nAnswer: Summary"
