"""Open the engine a judge spec names, by its backend's entry (:mod:`pipeline.config.backends`): each engine
implements :class:`pipeline.contracts.engine.Engine` and is imported here, where it runs, by the ``module:attr`` its
backend registered (so nothing that imports this module imports vLLM, torch or a provider's client).

``vllm`` is the product (batched, prefix-cached); ``hf`` runs Hugging Face transformers one prompt at a time, the
way the papers' code judges (a baseline for the benchmark and a fallback); ``api`` answers through an
OpenAI-compatible endpoint; plugins add their own. Each imports its heavy dependencies only when constructed, after
setting the engine's environment (``judge.env``). What to read comes settled from the driver
(:class:`pipeline.prompts.plan.PromptPlan`); the judgement store answers on the driver before any of them is
asked (:class:`pipeline.judge.stored.StoreFront`).
"""

from __future__ import annotations

from pipeline.config.backends import backend
from pipeline.contracts.engine import Engine
from pipeline.judge.spec import JudgeSpec


def open_engine(spec: JudgeSpec) -> Engine:
    """The engine of ``spec.backend``, started."""
    engine: Engine = backend(spec.backend).engine_factory()(spec)
    return engine
