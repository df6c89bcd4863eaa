"""The text around every user message (the chat template's frame, or the plain-text layout), and how a whole
prompt is tokenized or split back into its message and answer prefix.

A whole prompt is ``frame.head + message + frame.tail + answer prefix`` (:class:`PromptFrame`), or a whole
conversation (:func:`conversation_prompt`: the judge's reasons) that an endpoint's chat template renders itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

# Plain-text prompts (no chat template): the message, then the answer cue.
PLAIN_TAIL = "\n\nAnswer: "

# Marks a prompt given as a whole conversation (JSON messages after it): an API judge sends it to the chat endpoint
# as it is, and the server applies its own chat template (the judge's reasons, a follow-up question).
CONVERSATION = "\ue001conversation\ue001"


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

    def encode(self, tokenizer: Any, texts: list[str]) -> list[list[int]]:
        """Token ids of whole prompts: chat text holds its special tokens, plain text gets the tokenizer's own."""
        if not texts:
            return []
        return [
            list(ids) for ids in tokenizer(texts, add_special_tokens=self.add_special_tokens)["input_ids"]
        ]

    def split(self, prompt: str) -> tuple[str, str]:
        """(the user message, the answer prefix) of a whole prompt ``head + message + tail + prefix``."""
        if not prompt.startswith(self.head):
            raise ValueError("a prompt does not start with the prompt frame's head")
        rest = prompt[len(self.head) :]
        at = rest.rfind(self.tail) if self.tail else len(rest)
        if at < 0:
            raise ValueError("a prompt does not hold the prompt frame's tail")
        return rest[:at], rest[at + len(self.tail) :]


def conversation_prompt(messages: list[dict[str, str]]) -> str:
    """A prompt that is a whole conversation (for an API judge's chat endpoint)."""
    return CONVERSATION + json.dumps(messages, ensure_ascii=False)


def parse_conversation(prompt: str) -> list[dict[str, str]] | None:
    """The messages of a :func:`conversation_prompt`; None for a prompt text."""
    if not prompt.startswith(CONVERSATION):
        return None
    return json.loads(prompt[len(CONVERSATION) :])
