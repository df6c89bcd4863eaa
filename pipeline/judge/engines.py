"""Engines that return the first-token log-probability of each label token for a batch of prompts.

``VLLMEngine`` is the product (batched, prefix-cached); ``HFEngine`` runs Hugging Face transformers one prompt
at a time, the way the papers' code judges (a baseline for the benchmark and a fallback). Both import their
heavy dependencies only when constructed, after setting the engine's environment (``judge.env``). The label
token ids come settled from the driver (:class:`pipeline.prompts.PromptPlan`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.config import Backend
from pipeline.judge.spec import JudgeSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineResult:
    label_logprobs: list[float]
    top_token: str
    prompt_tokens: int
    cached_tokens: int


def resolve_env(env: Mapping[str, str]) -> dict[str, str]:
    """The engine's environment; ``VLLM_CPU_OMP_THREADS_BIND=all`` becomes every core this process may use."""
    out = {str(k): str(v) for k, v in env.items()}
    if out.get("VLLM_CPU_OMP_THREADS_BIND") == "all":
        cores = sorted(os.sched_getaffinity(0))
        out["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in cores)
    return out


def apply_env(env: Mapping[str, str]) -> None:
    """Set the engine's environment (e.g. VLLM_CPU_KVCACHE_SPACE) before the engine is imported here."""
    os.environ.update(resolve_env(env))


class VLLMEngine:
    """One ``vllm.LLM`` per process; ``run`` generates one token per prompt and reads the label log-probs."""

    def __init__(self, spec: JudgeSpec, label_token_ids: Sequence[int]):
        apply_env(spec.env)
        from vllm import LLM, SamplingParams

        start = time.perf_counter()
        self.llm = LLM(model=spec.model_path, max_model_len=spec.max_model_len, **spec.engine)
        self.start_seconds = time.perf_counter() - start
        self.tokenizer = self.llm.get_tokenizer()
        self.token_ids = tuple(int(t) for t in label_token_ids)
        self.params = SamplingParams(
            max_tokens=1, temperature=0.0, logprob_token_ids=list(self.token_ids), detokenize=True
        )
        log.info("vLLM engine for %s ready in %.1f s (%s)", spec.name, self.start_seconds, spec.dtype)

    @property
    def dtype(self) -> str:
        return str(self.llm.llm_engine.vllm_config.model_config.dtype).removeprefix("torch.")

    def run(self, token_ids: list[list[int]]) -> list[EngineResult]:
        outputs = self.llm.generate(
            [{"prompt_token_ids": ids} for ids in token_ids], self.params, use_tqdm=False
        )
        results = []
        for out in outputs:
            completion = out.outputs[0]
            first = completion.logprobs[0]
            missing = [t for t in self.token_ids if t not in first]
            if missing:
                raise RuntimeError(f"vLLM returned no log-probability for label token id(s) {missing}")
            results.append(
                EngineResult(
                    label_logprobs=[float(first[t].logprob) for t in self.token_ids],
                    top_token=completion.text,
                    prompt_tokens=len(out.prompt_token_ids),
                    cached_tokens=int(out.num_cached_tokens or 0),
                )
            )
        return results

    def close(self) -> None:
        """Shut the engine's processes down (so another engine can start in this process)."""
        engine = getattr(self.llm, "llm_engine", None)
        shutdown = getattr(engine, "shutdown", None)
        if callable(shutdown):
            shutdown()
        del self.llm


class HFEngine:
    """Hugging Face transformers, one prompt per forward pass (no batching, no prefix cache).

    Settings (``judge.engine``): ``dtype`` (torch dtype name), ``threads`` (torch threads; default every core
    this process may use), ``seed`` (torch's seed). ``judge.env`` is set before torch is imported here.
    """

    def __init__(self, spec: JudgeSpec, label_token_ids: Sequence[int]):
        apply_env(spec.env)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        start = time.perf_counter()
        self.torch = torch
        settings: dict[str, Any] = dict(spec.engine)
        # every core this process may use unless set (an engine imported earlier may have lowered it)
        torch.set_num_threads(int(settings.get("threads", len(os.sched_getaffinity(0)))))
        if "seed" in settings:
            torch.manual_seed(int(settings["seed"]))
        self.tokenizer: Any = AutoTokenizer.from_pretrained(spec.model_path)
        self.model = AutoModelForCausalLM.from_pretrained(
            spec.model_path, dtype=settings.get("dtype", "auto")
        )
        self.model.eval()
        self.start_seconds = time.perf_counter() - start
        self.token_ids = tuple(int(t) for t in label_token_ids)
        self._ids = torch.tensor(self.token_ids)

    @property
    def dtype(self) -> str:
        return str(self.model.dtype).removeprefix("torch.")

    def run(self, token_ids: list[list[int]]) -> list[EngineResult]:
        torch = self.torch
        results = []
        with torch.inference_mode():
            for ids in token_ids:
                logits = self.model(torch.tensor([ids])).logits[0, -1].float()
                logprobs = torch.log_softmax(logits, dim=-1)
                top = int(torch.argmax(logprobs))
                results.append(
                    EngineResult(
                        label_logprobs=logprobs[self._ids].tolist(),
                        top_token=self.tokenizer.decode([top]),
                        prompt_tokens=len(ids),
                        cached_tokens=0,
                    )
                )
        return results

    def close(self) -> None:
        del self.model


def make_engine(spec: JudgeSpec, label_token_ids: Sequence[int]) -> VLLMEngine | HFEngine:
    if spec.backend == Backend.vllm:
        return VLLMEngine(spec, label_token_ids)
    return HFEngine(spec, label_token_ids)
