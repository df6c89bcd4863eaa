"""Engines that answer a batch of prompts as a :class:`pipeline.absolute.Read` says: the first-token
log-probability of each requested token (label words, score tokens, yes/no words) and the generated text (one
token for those reads; a few tokens, greedy or sampled, for the generated absolute modes).

``VLLMEngine`` is the product (batched, prefix-cached); ``HFEngine`` runs Hugging Face transformers one prompt
at a time, the way the papers' code judges (a baseline for the benchmark and a fallback). Both import their
heavy dependencies only when constructed, after setting the engine's environment (``judge.env``). What to read
comes settled from the driver (:class:`pipeline.prompts.PromptPlan`).
"""

from __future__ import annotations

from typing import Any

from pipeline.config.enums import Backend
from pipeline.judge.hf_engine import HFEngine
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.vllm_engine import VLLMEngine


def make_engine(spec: JudgeSpec) -> Any:
    if spec.backend == Backend.vllm:
        return VLLMEngine(spec)
    if spec.backend == Backend.api:
        from pipeline.judge.api.engine import ApiEngine

        return ApiEngine(spec)
    return HFEngine(spec)
