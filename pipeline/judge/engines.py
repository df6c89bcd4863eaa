"""Engines that return the first-token log-probability of each label word for a batch of prompts.

``VLLMEngine`` is the product (batched, prefix-cached); ``HFEngine`` runs Hugging Face transformers one prompt
at a time, the way the papers' code judges (a baseline for the benchmark and a fallback). Both import their
heavy dependencies only when constructed.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from pipeline.judge.labels import Labels, resolve_labels
from pipeline.judge.spec import JudgeSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineResult:
    label_logprobs: list[float]
    top_token: str
    prompt_tokens: int
    cached_tokens: int


def resolve_env(env: dict[str, str]) -> dict[str, str]:
    """The engine's environment; ``VLLM_CPU_OMP_THREADS_BIND=all`` becomes every core this process may use."""
    out = {str(k): str(v) for k, v in env.items()}
    if out.get("VLLM_CPU_OMP_THREADS_BIND") == "all":
        cores = sorted(os.sched_getaffinity(0))
        out["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in cores)
    return out


def apply_env(env: dict[str, str]) -> None:
    """Set the engine's environment (e.g. VLLM_CPU_KVCACHE_SPACE) before vLLM is imported in this process."""
    os.environ.update(resolve_env(env))


class VLLMEngine:
    """One ``vllm.LLM`` per process; ``run`` generates one token per prompt and reads the label log-probs."""

    def __init__(self, spec: JudgeSpec):
        apply_env(spec.env)
        from vllm import LLM, SamplingParams

        start = time.perf_counter()
        self.llm = LLM(model=spec.model_path, max_model_len=spec.max_model_len, **spec.engine)
        self.start_seconds = time.perf_counter() - start
        self.tokenizer = self.llm.get_tokenizer()
        self.labels: Labels = resolve_labels(
            self.tokenizer, spec.prompt.label_words_a, spec.prompt.label_words_b, spec.name
        )
        self.params = SamplingParams(
            max_tokens=1, temperature=0.0, logprob_token_ids=list(self.labels.token_ids), detokenize=True
        )
        log.info("vLLM engine for %s ready in %.1f s", spec.name, self.start_seconds)

    def run(self, token_ids: list[list[int]]) -> list[EngineResult]:
        outputs = self.llm.generate(
            [{"prompt_token_ids": ids} for ids in token_ids], self.params, use_tqdm=False
        )
        results = []
        for out in outputs:
            completion = out.outputs[0]
            first = completion.logprobs[0]
            missing = [t for t in self.labels.token_ids if t not in first]
            if missing:
                raise RuntimeError(f"vLLM returned no log-probability for label token id(s) {missing}")
            results.append(
                EngineResult(
                    label_logprobs=[float(first[t].logprob) for t in self.labels.token_ids],
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
    """Hugging Face transformers, one prompt per forward pass (no batching, no prefix cache)."""

    def __init__(self, spec: JudgeSpec):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        start = time.perf_counter()
        self.torch = torch
        # every core this process may use (an engine imported earlier may have lowered torch's thread count)
        torch.set_num_threads(int(spec.engine.get("threads", len(os.sched_getaffinity(0)))))
        self.tokenizer: Any = AutoTokenizer.from_pretrained(spec.model_path)
        dtype = spec.engine.get("dtype", "auto")
        self.model = AutoModelForCausalLM.from_pretrained(spec.model_path, dtype=dtype)
        self.model.eval()
        self.start_seconds = time.perf_counter() - start
        self.labels = resolve_labels(
            self.tokenizer, spec.prompt.label_words_a, spec.prompt.label_words_b, spec.name
        )
        self._ids = torch.tensor(self.labels.token_ids)

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


def make_engine(spec: JudgeSpec) -> VLLMEngine | HFEngine:
    if spec.backend == "vllm":
        return VLLMEngine(spec)
    if spec.backend == "hf":
        return HFEngine(spec)
    raise ValueError(f"judge.backend={spec.backend!r} is not one of vllm, hf")
