"""The prompts of generate-then-evaluate: each task prompt in the generator's chat template with its system prompt."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from pipeline.contracts.frame import PromptFrame
from pipeline.contracts.keys import GENERATE
from pipeline.contracts.schemas import PROMPTS
from pipeline.prompts.chat import chat_frame, plain_frame, uses_chat_template


def generator_frame(tokenizer: Any, model: str, system_prompt: str | None) -> PromptFrame:
    """The text around a generator's task prompts: its model's chat template with its system prompt, or plain
    text (the system prompt as the first paragraph, the task, a blank line)."""
    if uses_chat_template(tokenizer, "auto", model):
        return chat_frame(tokenizer, system_prompt, model)
    return PromptFrame(plain_frame(system_prompt).head, "\n\n", system=system_prompt or None)


def generation_prompts(
    frames: Mapping[str, PromptFrame], tasks: pa.Table, done: Mapping[str, set[str]] | None = None
) -> pa.Table:
    """PROMPTS for the generators of one engine (by name, each with its frame): every task prompt wrapped in the
    generator's frame, skipping the inputs in ``done[generator]``."""
    rows: dict[str, list] = {name: [] for name in PROMPTS.names}
    inputs = tasks.column("input_id").to_pylist()
    texts = tasks.column("task").to_pylist()
    for name, frame in frames.items():
        skip = (done or {}).get(name, set())
        for input_id, text in zip(inputs, texts, strict=True):
            if input_id in skip:
                continue
            values = (input_id, GENERATE, "", name, input_id, "", frame.wrap(text))
            for column, value in zip(PROMPTS.names, values, strict=True):
                rows[column].append(value)
    return pa.table(rows, schema=PROMPTS)
