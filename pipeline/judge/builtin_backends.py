"""The built-in judge backends' entries (registered by the package's entry points, as a plugin's are:
:mod:`pipeline.config.backends`), each with its own checks.

- ``vllm``: the product, vLLM in-process (batched, prefix-cached); its engine inside the judge worker's process or
  in processes of its own (``judge.engine_process``);
- ``hf``: Hugging Face transformers, one prompt at a time (the papers' way: a baseline and a fallback);
- ``api``: an OpenAI-compatible endpoint (``judge.endpoint``: ``/completions`` with token ids, ``/chat/completions``,
  sampled verdicts, OpenAI's Batch API).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.config.backends import BackendEntry, Trait
from pipeline.config.checks import endpoint_problems
from pipeline.config.judging import JudgeConfig


@dataclass(frozen=True)
class HFSettings:
    """The hf backend's settings (``judge.engine``): torch's dtype (``auto``: the checkpoint's; without one the dtype
    chosen for this CPU, :mod:`pipeline.judge.hardware`), its threads (None: every core the process may use) and the
    seed of its sampling."""

    dtype: str = "auto"
    threads: int | None = None
    seed: int | None = None


def endpoint_judge_problems(judge: JudgeConfig, key: str) -> list[str]:
    """What is wrong with a judge behind an endpoint: its ``judge.endpoint`` (never echoing a value that may be a key),
    engine settings it would ignore, and reasoning it cannot continue from."""
    problems = endpoint_problems(judge.endpoint, f"{key}.endpoint")
    if judge.engine:
        problems.append(
            f"config {key}.engine {sorted(judge.engine)} has no effect with {key}.backend={judge.backend}"
        )
    if judge.reasoning.enabled and not judge.endpoint.prefill:
        problems.append(
            f"config {key}.reasoning needs {key}.endpoint.prefill=true behind an API: the verdict is read after the "
            "reasoning, sent as the assistant's message for the endpoint to continue"
        )
    return problems


VLLM = BackendEntry(
    name="vllm",
    traits=Trait.LOCAL | Trait.TOKEN_IDS | Trait.WORKER_ENV,
    engine="pipeline.judge.vllm.engine:VLLMEngine",
    resolve="pipeline.judge.vllm.engine:resolve",
    runs="in-process vLLM: inside the judge worker's process, or in engine processes of its own that the worker "
    "watches (judge.engine_process)",
    summary="vLLM in-process (batched, prefix-cached): the product",
    rate=(20.0, 3.5, "SmolLM2-135M eager on a 2-core AMD EPYC, the demo's prompts; a larger model is slower"),
)
HF = BackendEntry(
    name="hf",
    traits=Trait.LOCAL | Trait.TOKEN_IDS,
    engine="pipeline.judge.hf_engine:HFEngine",
    resolve="pipeline.judge.models:resolve_local",
    settings=HFSettings,
    runs="inside the judge worker's process",
    summary="Hugging Face transformers, one prompt at a time (the papers' way)",
)
API = BackendEntry(
    name="api",
    traits=Trait.LOCAL | Trait.ENDPOINT | Trait.TOKEN_IDS | Trait.SAMPLED | Trait.BATCH,
    engine="pipeline.judge.openai.engine:ApiEngine",
    resolve="pipeline.judge.models:resolve_endpoint",
    checks=endpoint_judge_problems,
    runs="behind an OpenAI-compatible endpoint; the driver holds the client (no worker starts)",
    summary="an OpenAI-compatible endpoint (completions, chat, sampled verdicts, Batch API)",
)
