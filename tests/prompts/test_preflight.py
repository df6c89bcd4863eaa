"""Pre-flight with the real judge tokenizer: label words and prompt lengths (refuse or truncate, counted)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pipeline.config.assessment import PromptConfig
from pipeline.config.enums import TooLong
from pipeline.contracts.errors import InputError
from pipeline.contracts.schemas import CANDIDATES
from pipeline.data.words import PromptWords
from pipeline.prompts.labels import LabelError, resolve_labels
from pipeline.prompts.plan import plan_prompts
from pipeline.prompts.preflight import TRUNCATION_MARK, check_prompt_lengths

pytestmark = pytest.mark.engine
WORDS = PromptWords("passage", "summary", {"coherence": "coherent"})


def table(context: str, texts: list[str]) -> pa.Table:
    n = len(texts)
    return pa.table(
        {
            "context_id": ["c1"] * n,
            "context": [context] * n,
            "candidate_id": [f"x{k}" for k in range(n)],
            "candidate_index": list(range(n)),
            "system": [None] * n,
            "text": texts,
            "category": [None] * n,
            "checklist": [None] * n,
        },
        schema=CANDIDATES,
    )


@pytest.fixture(scope="module")
def plan(tokenizer):
    labels = resolve_labels(tokenizer, [" A", "A"], [" B", "B"], "smollm2")
    return plan_prompts(PromptConfig(), ["coherence"], WORDS, tokenizer, labels, "smollm2")


def test_label_words_are_single_tokens(tokenizer):
    labels = resolve_labels(tokenizer, [" A", "A"], [" B", "B"], "smollm2")
    assert labels.n_a == 2 and len(set(labels.token_ids)) == 4
    with pytest.raises(LabelError, match="'Summary A' is 2 tokens"):
        resolve_labels(tokenizer, ["Summary A"], [" B"], "smollm2")


def test_short_prompts_pass_unchanged(tokenizer, plan):
    cands = table("A short passage.", ["one summary", "another summary", "a third"])
    out = check_prompt_lengths(cands, plan, tokenizer, 512, TooLong.truncate)
    assert out.truncated == () and out.candidates.equals(cands)
    # the longest prompt, measured as the judge will see it (chat template, answer prefix), with its one answer token
    longest = plan.prompt(
        plan.templates[0], "coherence", "A short passage.", "another summary", "one summary"
    )
    assert out.longest_prompt_tokens == len(tokenizer(longest, add_special_tokens=False)["input_ids"]) + 1


def test_too_long_is_refused_with_names(tokenizer, plan):
    cands = table("word " * 600, ["short", "a much longer summary " * 5, "mid length one"])
    with pytest.raises(InputError) as info:
        check_prompt_lengths(cands, plan, tokenizer, 256, TooLong.refuse)
    message = str(info.value)
    assert "context 'c1'" in message and "x1 + x2" in message and "field 'context'" in message


def test_too_long_is_truncated_and_counted(tokenizer, plan):
    cands = table("word " * 600, ["short", "a much longer summary " * 5, "mid length one"])
    out = check_prompt_lengths(cands, plan, tokenizer, 256, TooLong.truncate)
    assert out.truncated == ("c1",)
    assert out.longest_prompt_tokens <= 255
    context = out.candidates.column("context").to_pylist()[0]
    assert context.endswith(TRUNCATION_MARK) and len(context) < 3000


def test_candidates_too_long_for_any_context_are_refused(tokenizer, plan):
    cands = table("ctx", ["long " * 400, "long " * 400])
    with pytest.raises(InputError, match="even with the context truncated away"):
        check_prompt_lengths(cands, plan, tokenizer, 256, TooLong.truncate)


def test_absolute_prompts_are_measured_with_the_tokens_they_generate(tokenizer, plan):
    """workflow=absolute: the longest prompt is the longest candidate's absolute prompt plus the tokens its mode may
    generate (absolute.max_tokens), and a context too long for it is truncated like a comparison's."""
    from pipeline.config.assessment import AbsoluteConfig
    from pipeline.config.enums import AbsoluteMode
    from pipeline.prompts.absolute import resolve_absolute

    rated = resolve_absolute(
        AbsoluteConfig(modes=[AbsoluteMode.prompt_score], max_tokens=7), tokenizer, "smollm2"
    )
    only_absolute = plan_prompts(
        PromptConfig(), ["coherence"], WORDS, tokenizer, plan.labels, "smollm2", rated, comparative=False
    )
    cands = table("A short passage.", ["one summary", "a much longer summary than the others", "a third"])
    out = check_prompt_lengths(cands, only_absolute, tokenizer, 512, TooLong.truncate)
    longest = only_absolute.rate_prompt(
        rated[0], "coherence", "A short passage.", "a much longer summary than the others"
    )
    assert out.longest_prompt_tokens == len(tokenizer(longest, add_special_tokens=False)["input_ids"]) + 7
    long_context = table("word " * 600, ["short", "mid length one"])
    cut = check_prompt_lengths(long_context, only_absolute, tokenizer, 256, TooLong.truncate)
    assert cut.truncated == ("c1",) and cut.longest_prompt_tokens <= 256
