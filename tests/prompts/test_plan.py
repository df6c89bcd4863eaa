"""Prompts: rendering, template checks, adjectives, and the prompt settled once (chat frame, system prompt)."""

from __future__ import annotations

import pytest

from pipeline.config.assessment import PromptConfig, TemplateConfig
from pipeline.config.enums import ChatTemplate
from pipeline.config.templates import template_problems
from pipeline.contracts.errors import ConfigError
from pipeline.data.words import PromptWords, resolve_adjectives
from pipeline.prompts.chat import chat_frame, uses_chat_template
from pipeline.prompts.labels import Labels
from pipeline.prompts.plan import plan_prompts
from pipeline.prompts.render import render_answer_prefix, render_message
from tests.conftest import compose

WORDS = PromptWords("passage", "summary", {"coherence": "coherent"})
LABELS = Labels((" A", " B"), (1, 2), 1)
MESSAGE = "Passage: CTX\n\nSummary A: AAA\n\nSummary B: BBB\n\nWhich summary is more coherent, Summary A or Summary B?"


def test_default_template_puts_the_question_last():
    assert render_message(TemplateConfig(), WORDS, "coherence", "CTX", "AAA", "BBB") == MESSAGE
    assert render_answer_prefix(TemplateConfig(), WORDS, "coherence") == "Summary"


def test_template_problems_name_the_template():
    assert "'t9'" in template_problems(TemplateConfig(id="t9", text="{context} {a} {b} {nonsense}"))[0]
    assert "must contain {a} and {b}" in template_problems(TemplateConfig(id="t9", text="{context} {a}"))[0]
    assert "'t9'" in template_problems(TemplateConfig(id="t9", text="{a} {b} {unclosed"))[0]
    assert template_problems(TemplateConfig()) == []


def test_adjectives_default_and_missing():
    assert resolve_adjectives(["fluency"], {}) == {"fluency": "fluent"}
    assert resolve_adjectives(["fluency"], {"fluency": "smooth"}) == {"fluency": "smooth"}
    with pytest.raises(ConfigError, match="dataset.adjectives.wit"):
        resolve_adjectives(["wit"], {})


class FakeChat:
    """A chat template like SmolLM2's: a default system message, the user turn, the assistant cue."""

    chat_template = "x"

    def apply_chat_template(self, conversation, tokenize, add_generation_prompt):
        assert tokenize is False and add_generation_prompt is True
        if conversation[0]["role"] != "system":
            conversation = [{"role": "system", "content": "Default."}, *conversation]
        return "".join(f"<{m['role']}>{m['content']}</>" for m in conversation) + "<assistant>"


class TrimmingChat(FakeChat):
    def apply_chat_template(self, conversation, tokenize, add_generation_prompt):
        trimmed = [{**m, "content": m["content"].strip()} for m in conversation]
        return super().apply_chat_template(trimmed, tokenize, add_generation_prompt)


class ShoutingChat(FakeChat):
    def apply_chat_template(self, conversation, tokenize, add_generation_prompt):
        loud = [{**m, "content": m["content"].upper()} for m in conversation]
        return super().apply_chat_template(loud, tokenize, add_generation_prompt)


class NoChat:
    chat_template = None


def plan(cfg: PromptConfig, tokenizer):
    return plan_prompts(cfg, ["coherence"], WORDS, tokenizer, LABELS, "fake")


def prompt(cfg: PromptConfig, tokenizer) -> str:
    p = plan(cfg, tokenizer)
    return p.prompt(p.templates[0], "coherence", "CTX", "AAA", "BBB")


def test_the_chat_frame_equals_the_templates_own_rendering():
    tok = FakeChat()
    cfg = PromptConfig(system_prompt="Be fair.")
    expected = tok.apply_chat_template(
        [{"role": "system", "content": "Be fair."}, {"role": "user", "content": MESSAGE}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert prompt(cfg, tok) == expected + "Summary"
    assert prompt(PromptConfig(), tok) == f"<system>Default.</><user>{MESSAGE}</><assistant>Summary"


def test_a_trimming_template_is_followed_and_a_rewriting_one_refused():
    frame = chat_frame(TrimmingChat(), None, "fake")
    assert frame.strip and frame.wrap("  x  ") == "<system>Default.</><user>x</><assistant>"
    with pytest.raises(ConfigError, match="changes the user message"):
        chat_frame(ShoutingChat(), None, "fake")


def test_chat_template_false_gives_plain_text_prompts():
    # `prompt.chat_template=false` on the command line is a YAML boolean: it must mean plain text
    cfg = compose(["prompt.chat_template=false"])
    assert cfg.prompt.chat_template == ChatTemplate.false
    p = plan(cfg.prompt, FakeChat())
    assert not p.chat
    assert prompt(cfg.prompt, FakeChat()) == f"{MESSAGE}\n\nAnswer: Summary"


def test_chat_template_true_requires_one():
    cfg = compose(["prompt.chat_template=true"])
    assert cfg.prompt.chat_template == ChatTemplate.true
    with pytest.raises(ConfigError, match="prompt.chat_template=true but judge fake's tokenizer has no chat"):
        uses_chat_template(NoChat(), cfg.prompt.chat_template, "fake")
    assert uses_chat_template(FakeChat(), cfg.prompt.chat_template, "fake")
    # auto: the template when there is one
    assert not uses_chat_template(NoChat(), "auto", "fake") and uses_chat_template(FakeChat(), "auto", "fake")


def test_the_system_prompt_is_kept_without_a_chat_template():
    cfg = PromptConfig(system_prompt="You are a strict examiner.")
    for tokenizer in (NoChat(), FakeChat()):
        text = prompt(PromptConfig(system_prompt=cfg.system_prompt, chat_template="false"), tokenizer)
        assert text == f"You are a strict examiner.\n\n{MESSAGE}\n\nAnswer: Summary"
    assert "You are a strict examiner." in prompt(cfg, FakeChat())


def test_answer_prefixes_per_template_and_attribute():
    t2 = TemplateConfig(id="t2", text="{a} vs {b}: more {adjective}?", answer_prefix="Answer:")
    words = PromptWords("passage", "summary", {"coherence": "coherent", "fluency": "fluent"})
    p = plan_prompts(
        PromptConfig(templates=[TemplateConfig(), t2]), ["coherence", "fluency"], words, NoChat(), LABELS, "m"
    )
    assert p.answer_prefixes == {
        ("c1", "coherence"): "Summary",
        ("c1", "fluency"): "Summary",
        ("t2", "coherence"): "Answer:",
        ("t2", "fluency"): "Answer:",
    }
    assert p.prompt(t2, "fluency", "", "x", "y") == "x vs y: more fluent?\n\nAnswer: Answer:"
