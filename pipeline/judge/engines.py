"""Engines that answer a batch of prompts as a :class:`pipeline.absolute.Read` says: the first-token
log-probability of each requested token (label words, score tokens, yes/no words) and the generated text (one
token for those reads; a few tokens, greedy or sampled, for the generated absolute modes).

``VLLMEngine`` is the product (batched, prefix-cached); ``HFEngine`` runs Hugging Face transformers one prompt
at a time, the way the papers' code judges (a baseline for the benchmark and a fallback). Both import their
heavy dependencies only when constructed, after setting the engine's environment (``judge.env``). What to read
comes settled from the driver (:class:`pipeline.prompts.PromptPlan`).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.absolute import Read
from pipeline.config import MULTIPROCESSING_ENV, Backend, EngineProcess
from pipeline.judge.spec import JudgeSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineResult:
    # First-token log-probability of each requested token, in the Read's order.
    token_logprobs: list[float]
    # The generated text of each sample (the first token alone for a one-token read).
    texts: list[str]
    prompt_tokens: int
    cached_tokens: int
    generated_tokens: int
    # Why each sample ended: "stop" (end of text or a stop string) or "length" (cut off at max_tokens).
    finish_reasons: list[str]
    # Why there is no answer (an API request that kept failing; the other fields are empty).
    error: str | None = None
    # Who answered: "engine" (in-process), "api/token_ids" or "api/chat" (a request to the endpoint by that
    # path), "cache" (the API reply cache); and the HTTP requests it took (retries included; 0 from the cache).
    source: str = "engine"
    requests: int = 0
    # Requested tokens not among an API's returned alternatives (given a floor; see pipeline.judge.api).
    missing: int = 0


# Cores claimed by engines on this machine (``VLLM_CPU_OMP_THREADS_BIND=auto``): one lock file per core, held
# by the process that uses it for as long as it lives.
CORE_LOCKS = Path(os.environ.get("CA_CORE_LOCKS", f"/tmp/ca-cores-{os.getuid()}"))
# This process's claims (kept open: closing a file releases its lock).
_claimed: list[Any] = []


def claim_cores(n: int, folder: Path = CORE_LOCKS) -> list[int]:
    """``n`` cores of this process's affinity that no other engine on this machine has claimed, held until
    the process ends; where fewer are free, the free ones and then the first ones (logged)."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    available = sorted(os.sched_getaffinity(0))
    n = max(1, min(n, len(available)))
    got: list[int] = []
    for core in available:
        if len(got) == n:
            break
        handle = open(folder / f"core-{core}.lock", "w")  # noqa: SIM115 (held for the process's life)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _claimed.append(handle)
        got.append(core)
    if len(got) < n:
        extra = [c for c in available if c not in got][: n - len(got)]
        log.warning("only %d free core(s) of %d wanted: sharing %s with another engine", len(got), n, extra)
        got += extra
    return sorted(got)


def resolve_env(env: Mapping[str, str]) -> dict[str, str]:
    """The engine's environment. ``VLLM_CPU_OMP_THREADS_BIND``: ``all`` becomes every core this process may
    use; ``auto`` claims ``CA_CORES_PER_WORKER`` cores no other engine on this machine holds (several judge
    actors on one machine, each on its own cores) and restricts this process to them."""
    out = {str(k): str(v) for k, v in env.items()}
    per_worker = int(out.pop("CA_CORES_PER_WORKER", "0") or 0)
    if out.get("VLLM_CPU_OMP_THREADS_BIND") == "all":
        cores = sorted(os.sched_getaffinity(0))
        out["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in cores)
    elif out.get("VLLM_CPU_OMP_THREADS_BIND") == "auto":
        cores = claim_cores(per_worker or len(os.sched_getaffinity(0)))
        os.sched_setaffinity(0, cores)
        out["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(str(c) for c in cores)
        log.info("engine threads pinned to core(s) %s", out["VLLM_CPU_OMP_THREADS_BIND"])
    return out


def apply_env(env: Mapping[str, str]) -> None:
    """Set the engine's environment (e.g. VLLM_CPU_KVCACHE_SPACE) before the engine is imported here."""
    os.environ.update(resolve_env(env))


def engine_inside(spec: JudgeSpec, in_actor: bool) -> bool:
    """Whether the vLLM engine runs inside this process (``judge.engine_process``): ``auto`` is inside for a
    CPU engine on a Ray actor (a process of its own for the engine), in processes of its own elsewhere."""
    if spec.engine_process == EngineProcess.worker:
        return True
    if spec.engine_process == EngineProcess.own:
        return False
    return in_actor and not spec.on_gpu


def bound_cores(bind: str | None) -> int | None:
    """The number of cores ``VLLM_CPU_OMP_THREADS_BIND`` gives an engine (its first rank's list: ``0-3``,
    ``0,1,4``, ``0-3|4-7``); None where it names none (unset, ``nobind``)."""
    cores: set[int] = set()
    for part in (bind or "").split("|")[0].split(","):
        first, _, last = part.strip().partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            return None
        cores.update(range(int(first), int(last or first) + 1))
    return len(cores) or None


def vllm_env(spec: JudgeSpec, inside: bool) -> dict[str, str]:
    """The environment of a vLLM engine: ``judge.env`` resolved (:func:`resolve_env`), vLLM's multiprocessing
    switch, and for an engine inside this process the OpenMP threads of its bound cores (a Ray actor's
    ``OMP_NUM_THREADS`` is its CPU count, one by default: the engine would compute on one thread; vLLM's own
    engine process sets it itself)."""
    env = resolve_env(spec.env)
    env[MULTIPROCESSING_ENV] = "0" if inside else "1"
    cores = bound_cores(env.get("VLLM_CPU_OMP_THREADS_BIND"))
    if inside and cores and "OMP_NUM_THREADS" not in spec.env:
        env["OMP_NUM_THREADS"] = str(cores)
    return env


class VLLMEngine:
    """One ``vllm.LLM`` per process; ``run`` answers a batch of prompts as one :class:`Read` says."""

    def __init__(self, spec: JudgeSpec):
        from pipeline.judge.watchdog import in_ray_actor

        inside = engine_inside(spec, in_ray_actor())
        env = vllm_env(spec, inside)
        if "OMP_NUM_THREADS" in env and "torch" in sys.modules:
            log.warning(
                "torch was imported in this process before its engine: the engine computes on the process's "
                "OpenMP threads (OMP_NUM_THREADS=%s), not on %s",
                os.environ.get("OMP_NUM_THREADS", "unset"),
                env["OMP_NUM_THREADS"],
            )
        os.environ.update(env)
        self.inside = inside
        log.info(
            "vLLM engine %s (judge.engine_process=%s)",
            "inside this process" if inside else "in processes of its own",
            spec.engine_process,
        )
        from vllm import LLM, SamplingParams

        self._sampling = SamplingParams
        start = time.perf_counter()
        self.llm = LLM(model=spec.model_path, max_model_len=spec.max_model_len, **spec.engine)
        self.start_seconds = time.perf_counter() - start
        self.tokenizer = self.llm.get_tokenizer()
        self._params: dict[Read, Any] = {}
        log.info("vLLM engine for %s ready in %.1f s (%s)", spec.name, self.start_seconds, spec.dtype)

    def params(self, read: Read) -> Any:
        if read not in self._params:
            self._params[read] = self._sampling(
                max_tokens=read.max_tokens,
                n=read.n,
                temperature=read.temperature,
                seed=read.seed,
                top_p=read.top_p,
                stop=list(read.stop) or None,
                logprob_token_ids=list(read.token_ids) or None,
                detokenize=True,
            )
        return self._params[read]

    @property
    def dtype(self) -> str:
        return str(self.llm.llm_engine.vllm_config.model_config.dtype).removeprefix("torch.")

    def run(self, token_ids: list[list[int]], read: Read) -> list[EngineResult]:
        outputs = self.llm.generate(
            [{"prompt_token_ids": ids} for ids in token_ids], self.params(read), use_tqdm=False
        )
        results = []
        for out in outputs:
            completions = out.outputs
            logprobs: list[float] = []
            if read.token_ids:
                first = completions[0].logprobs[0]
                missing = [t for t in read.token_ids if t not in first]
                if missing:
                    raise RuntimeError(f"vLLM returned no log-probability for token id(s) {missing}")
                logprobs = [float(first[t].logprob) for t in read.token_ids]
            results.append(
                EngineResult(
                    token_logprobs=logprobs,
                    texts=[c.text for c in completions],
                    prompt_tokens=len(out.prompt_token_ids),
                    cached_tokens=int(out.num_cached_tokens or 0),
                    generated_tokens=sum(len(c.token_ids) for c in completions),
                    finish_reasons=[str(c.finish_reason) for c in completions],
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

    def __init__(self, spec: JudgeSpec):
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

    @property
    def dtype(self) -> str:
        return str(self.model.dtype).removeprefix("torch.")

    def run(self, token_ids: list[list[int]], read: Read) -> list[EngineResult]:
        torch = self.torch
        wanted = torch.tensor(read.token_ids, dtype=torch.long)
        results = []
        with torch.inference_mode():
            for ids in token_ids:
                prompt = torch.tensor([ids])
                if read.max_tokens == 1 and read.n == 1 and read.temperature == 0:
                    logits = self.model(prompt).logits[0, -1].float()
                    logprobs = torch.log_softmax(logits, dim=-1)
                    texts = [self.tokenizer.decode([int(torch.argmax(logprobs))])]
                    read_lp = logprobs[wanted].tolist() if read.token_ids else []
                    generated = 1
                    finish = ["length"]
                else:
                    sample = read.temperature > 0
                    if sample and read.seed is not None:
                        torch.manual_seed(read.seed)
                    out = self.model.generate(
                        prompt,
                        attention_mask=torch.ones_like(prompt),
                        max_new_tokens=read.max_tokens,
                        do_sample=sample,
                        temperature=read.temperature if sample else None,
                        top_p=read.top_p if sample else None,
                        stop_strings=list(read.stop) or None,
                        tokenizer=self.tokenizer,
                        top_k=None,
                        num_return_sequences=read.n,
                        output_scores=bool(read.token_ids),
                        return_dict_in_generate=True,
                        pad_token_id=self.tokenizer.eos_token_id,
                    )
                    new = out.sequences[:, len(ids) :]
                    texts = [self.tokenizer.decode(row, skip_special_tokens=True) for row in new]
                    read_lp = (
                        torch.log_softmax(out.scores[0][0].float(), dim=-1)[wanted].tolist()
                        if read.token_ids
                        else []
                    )
                    generated = int((new != self.tokenizer.eos_token_id).sum())
                    finish = [
                        "stop"
                        if (row == self.tokenizer.eos_token_id).any() or len(row) < read.max_tokens
                        else "length"
                        for row in new
                    ]
                results.append(
                    EngineResult(
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


def make_engine(spec: JudgeSpec) -> Any:
    if spec.backend == Backend.vllm:
        return VLLMEngine(spec)
    if spec.backend == Backend.api:
        from pipeline.judge.api import ApiEngine

        return ApiEngine(spec)
    return HFEngine(spec)
