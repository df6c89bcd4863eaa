"""The prompts of generate-then-evaluate: each task prompt in the generator's chat template with its system prompt."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from pipeline.contracts.keys import GENERATE
from pipeline.judge.generators import Generator


def generator_frame(tokenizer: Any, g: Generator) -> Any:
    """The text around a generator's task prompts: its model's chat template with its system prompt, or plain
    text (the system prompt as the first paragraph, the task, a blank line)."""
    from pipeline.contracts.frame import PromptFrame
    from pipeline.prompts.chat import chat_frame, plain_frame, uses_chat_template

    if uses_chat_template(tokenizer, "auto", g.spec.name):
        return chat_frame(tokenizer, g.system_prompt, g.spec.name)
    return PromptFrame(plain_frame(g.system_prompt).head, "\n\n", system=g.system_prompt or None)


def generation_prompts(
    group: Sequence[Generator], tasks: pa.Table, tokenizer: Any, done: Mapping[str, set[str]] | None = None
) -> pa.Table:
    """PROMPTS for the generators of one engine: each task prompt in the model's chat template with the
    generator's system prompt (plain text without one), skipping the inputs in ``done[generator]``."""
    from pipeline.contracts.schemas import PROMPTS

    rows: dict[str, list] = {name: [] for name in PROMPTS.names}
    inputs = tasks.column("input_id").to_pylist()
    texts = tasks.column("task").to_pylist()
    for g in group:
        frame = generator_frame(tokenizer, g)
        skip = (done or {}).get(g.name, set())
        for input_id, text in zip(inputs, texts, strict=True):
            if input_id in skip:
                continue
            prompt = frame.wrap(text)
            for name, value in zip(
                PROMPTS.names, (input_id, GENERATE, "", g.name, input_id, "", prompt), strict=True
            ):
                rows[name].append(value)
    return pa.table(rows, schema=PROMPTS)
