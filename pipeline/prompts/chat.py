"""Whether prompts go through the judge's chat template, and the frame around every message: rendered once around
a placeholder and checked against a real rendering.
"""

from __future__ import annotations

from typing import Any, Protocol

from pipeline.config.enums import ChatTemplate
from pipeline.contracts.errors import ConfigError
from pipeline.contracts.frame import PLAIN_TAIL, PromptFrame

# Stands for the message when the chat template is rendered once (a private-use character, never in templates).
_PLACEHOLDER = "\ue000MESSAGE\ue000"


# A message with surrounding whitespace and characters templates might escape: shows how the template treats it.
_PROBE = "  Probe {message} <with> 'quotes' & \"marks\"\n\nand a second paragraph.  "


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
