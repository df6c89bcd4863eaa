"""Everything a judge actor needs, resolved on the driver and shipped to the actors (picklable)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline.config import PromptConfig


@dataclass(frozen=True)
class JudgeSpec:
    backend: str
    # Local folder or hub id of the model.
    model_path: str
    # The judge's name in the tables.
    name: str
    max_model_len: int
    prompt: PromptConfig
    # "<template_id>\t<attribute>" -> the answer prefix ("Summary") appended after the chat template.
    answer_prefixes: dict[str, str]
    engine: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
