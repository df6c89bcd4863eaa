"""Open the engine a judge spec names: one typed registry from backend to engine, each engine implementing
:class:`pipeline.contracts.engine.Engine`.

``VLLMEngine`` is the product (batched, prefix-cached); ``HFEngine`` runs Hugging Face transformers one prompt at
a time, the way the papers' code judges (a baseline for the benchmark and a fallback); ``ApiEngine`` answers
through an OpenAI-compatible endpoint. Each imports its heavy dependencies only when constructed, after setting
the engine's environment (``judge.env``). What to read comes settled from the driver
(:class:`pipeline.prompts.plan.PromptPlan`); the judgement store goes in front of any of them
(:class:`pipeline.judge.stored.StoredEngine`).
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.config.enums import Backend
from pipeline.contracts.engine import Engine
from pipeline.judge.api.engine import ApiEngine
from pipeline.judge.hf_engine import HFEngine
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.vllm_engine import VLLMEngine

ENGINES: dict[Backend, Callable[[JudgeSpec], Engine]] = {
    Backend.vllm: VLLMEngine,
    Backend.hf: HFEngine,
    Backend.api: ApiEngine,
}


def open_engine(spec: JudgeSpec) -> Engine:
    """The engine of ``spec.backend``, started."""
    return ENGINES[spec.backend](spec)
