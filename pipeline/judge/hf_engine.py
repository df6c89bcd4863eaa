"""Hugging Face transformers, one prompt per forward pass (the papers' way): a baseline and a fallback."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from pipeline.contracts.engine import Request, Result
from pipeline.contracts.frame import PromptFrame
from pipeline.judge.builtin_backends import HFSettings
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.vllm.cores import apply_env


class HFEngine:
    """Hugging Face transformers, one prompt per forward pass (no batching, no prefix cache).

    Settings (``judge.engine``): ``dtype`` (torch dtype name), ``threads`` (torch threads; default every core
    this process may use), ``seed`` (torch's seed). ``judge.env`` is set before torch is imported here.
    """

    inside = True

    def __init__(self, spec: JudgeSpec):
        apply_env(spec.env)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        start = time.perf_counter()
        self.torch = torch
        settings = HFSettings(**spec.engine)
        # every core this process may use unless set (an engine imported earlier may have lowered it)
        torch.set_num_threads(int(settings.threads or len(os.sched_getaffinity(0))))
        if settings.seed is not None:
            torch.manual_seed(int(settings.seed))
        self.tokenizer: Any = AutoTokenizer.from_pretrained(spec.model_path)
        self.model = AutoModelForCausalLM.from_pretrained(spec.model_path, dtype=settings.dtype)
        self.model.eval()
        self.start_seconds = time.perf_counter() - start

    @property
    def dtype(self) -> str:
        return str(self.model.dtype).removeprefix("torch.")

    def answer(self, prompts: Sequence[str], frame: PromptFrame, request: Request) -> list[Result]:
        """Whole prompt texts, tokenized with the judge's tokenizer as ``frame`` says, answered by :meth:`run`."""
        return self.run(frame.encode(self.tokenizer, list(prompts)), request)

    def run(self, token_ids: list[list[int]], request: Request) -> list[Result]:
        torch = self.torch
        wanted = torch.tensor(request.token_ids, dtype=torch.long)
        results = []
        with torch.inference_mode():
            for ids in token_ids:
                prompt = torch.tensor([ids])
                if request.max_tokens == 1 and request.n == 1 and request.temperature == 0:
                    logits = self.model(prompt).logits[0, -1].float()
                    logprobs = torch.log_softmax(logits, dim=-1)
                    texts = [self.tokenizer.decode([int(torch.argmax(logprobs))])]
                    read_lp = logprobs[wanted].tolist() if request.token_ids else []
                    generated = 1
                    finish = ["length"]
                else:
                    sample = request.temperature > 0
                    if sample and request.seed is not None:
                        torch.manual_seed(request.seed)
                    out = self.model.generate(
                        prompt,
                        attention_mask=torch.ones_like(prompt),
                        max_new_tokens=request.max_tokens,
                        do_sample=sample,
                        temperature=request.temperature if sample else None,
                        top_p=request.top_p if sample else None,
                        stop_strings=list(request.stop) or None,
                        tokenizer=self.tokenizer,
                        top_k=None,
                        num_return_sequences=request.n,
                        output_scores=bool(request.token_ids),
                        return_dict_in_generate=True,
                        pad_token_id=self.tokenizer.eos_token_id,
                    )
                    new = out.sequences[:, len(ids) :]
                    texts = [self.tokenizer.decode(row, skip_special_tokens=True) for row in new]
                    read_lp = (
                        torch.log_softmax(out.scores[0][0].float(), dim=-1)[wanted].tolist()
                        if request.token_ids
                        else []
                    )
                    generated = int((new != self.tokenizer.eos_token_id).sum())
                    finish = [
                        "stop"
                        if (row == self.tokenizer.eos_token_id).any() or len(row) < request.max_tokens
                        else "length"
                        for row in new
                    ]
                results.append(
                    Result(
                        token_logprobs=read_lp,
                        texts=texts,
                        prompt_tokens=len(ids),
                        cached_tokens=0,
                        generated_tokens=generated,
                        finish_reasons=finish,
                    )
                )
        return results

    def close(self) -> None:
        del self.model
