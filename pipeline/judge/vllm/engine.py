"""The product's engine: one ``vllm.LLM`` per process, batched and prefix-cached."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline.config.judging import JudgeConfig
from pipeline.contracts.engine import Request, Result
from pipeline.contracts.errors import ConfigError
from pipeline.contracts.frame import PromptFrame
from pipeline.judge.models import resolve_local
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.vllm.compile_cache import load_saved_models
from pipeline.judge.vllm.cores import (
    AOT_COMPILE_ENV,
    engine_inside,
    in_ray_actor,
    preloads_openmp,
    torch_openmp,
    vllm_env,
)
from pipeline.judge.vllm.mode import settled

log = logging.getLogger(__name__)


def resolve(cfg: JudgeConfig, cache_dir: Path, key: str = "judge.model") -> JudgeSpec:
    """The vllm backend's resolver: a judge on this machine (:func:`pipeline.judge.models.resolve_local`), its
    ``judge.engine`` checked against vLLM's settings."""
    spec = resolve_local(cfg, cache_dir, key)
    check_engine_keys(spec.engine)
    return spec


def engine_settings() -> frozenset[str] | None:
    """The names ``vllm.LLM`` takes (the fields of ``vllm.EngineArgs``), read from vLLM's source without importing
    vLLM, which costs a driver that never runs an engine 2-8 s; imported where the source does not read as one
    dataclass; None where vLLM is not installed."""
    import ast
    import importlib.util

    spec = importlib.util.find_spec("vllm")  # a top-level package: found, not imported
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        source = Path(next(iter(spec.submodule_search_locations)), "engine", "arg_utils.py").read_text()
        (cls,) = [n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "EngineArgs"]
        if cls.bases or [ast.unparse(d) for d in cls.decorator_list] != ["dataclass"]:
            raise ValueError("not a plain dataclass")
        return frozenset(
            n.target.id
            for n in cls.body
            if isinstance(n, ast.AnnAssign)
            and isinstance(n.target, ast.Name)
            and "ClassVar" not in ast.unparse(n.annotation)
        )
    except (OSError, SyntaxError, ValueError):
        from dataclasses import fields

        from vllm.engine.arg_utils import EngineArgs

        return frozenset(f.name for f in fields(EngineArgs))


def check_engine_keys(engine: Mapping[str, Any]) -> None:
    """Refuse ``judge.engine`` keys that ``vllm.LLM`` would not take (checked on the driver, before any actor
    starts); skipped where vLLM is not installed on the driver."""
    known = engine_settings()
    if known is None:
        return
    unknown = sorted(set(engine) - known)
    if unknown:
        import difflib

        hints = []
        for key in unknown:
            close = difflib.get_close_matches(key, known, n=2)
            hints.append(f"{key} (did you mean {' or '.join(close)}?)" if close else key)
        raise ConfigError(
            f"config judge.engine: {', '.join(hints)} is not a setting of vllm.LLM (vllm.EngineArgs); remove it"
        )


class VLLMEngine:
    """One ``vllm.LLM`` per process; ``run`` answers a batch of prompts as one :class:`pipeline.contracts.engine.Request` says."""

    def __init__(self, spec: JudgeSpec):
        inside = engine_inside(spec, in_ray_actor())
        env = vllm_env(spec, inside)
        if "OMP_NUM_THREADS" in env and "torch" in sys.modules:
            log.warning(
                "torch was imported in this process before its engine: the engine computes on the process's "
                "OpenMP threads (OMP_NUM_THREADS=%s), not on %s",
                os.environ.get("OMP_NUM_THREADS", "unset"),
                env["OMP_NUM_THREADS"],
            )
        if inside and not spec.on_gpu and not preloads_openmp(os.environ.get("LD_PRELOAD")):
            log.warning(
                "this process was started without PyTorch's OpenMP runtime preloaded: the engine inside it judges "
                "about 20%% slower on the CPU (start it with LD_PRELOAD=%s, as the judge's Ray actors are)",
                torch_openmp(),
            )
        os.environ.update(env)
        if inside and env.get(AOT_COMPILE_ENV) == "1":
            load_saved_models()  # the compiled model saved at an earlier start, loaded (not compiled again)
        self.inside = inside
        log.info(
            "vLLM engine %s (judge.engine_process=%s)",
            "inside this process" if inside else "in processes of its own",
            spec.engine_process,
        )
        from vllm import LLM, SamplingParams

        self._sampling = SamplingParams
        start = time.perf_counter()
        engine = dict(
            settled(spec).engine
        )  # a mode chosen where the engine was placed, else the device's default
        self.llm = LLM(model=spec.model_path, max_model_len=spec.max_model_len, **engine)
        self.start_seconds = time.perf_counter() - start
        self.tokenizer = self.llm.get_tokenizer()
        self._params: dict[Request, Any] = {}
        log.info("vLLM engine for %s ready in %.1f s (%s)", spec.name, self.start_seconds, spec.dtype)

    def processes(self) -> list[int]:
        """The processes vLLM records it started for this engine (its engine cores; a core ends when one of its
        workers dies), by their handles rather than their titles (see
        :func:`pipeline.judge.hosting.watchdog.engine_like`); [] for an engine inside this process, or a vLLM that keeps
        no such record."""
        client = getattr(self.llm.llm_engine, "engine_core", None)
        manager = getattr(getattr(client, "resources", None), "engine_manager", None)
        return [p.pid for p in getattr(manager, "processes", None) or [] if p.pid is not None]

    def params(self, request: Request) -> Any:
        if request not in self._params:
            self._params[request] = self._sampling(
                max_tokens=request.max_tokens,
                n=request.n,
                temperature=request.temperature,
                seed=request.seed,
                top_p=request.top_p,
                stop=list(request.stop) or None,
                logprob_token_ids=list(request.token_ids) or None,
                detokenize=True,
            )
        return self._params[request]

    @property
    def dtype(self) -> str:
        return str(self.llm.llm_engine.vllm_config.model_config.dtype).removeprefix("torch.")

    def answer(self, prompts: Sequence[str], frame: PromptFrame, request: Request) -> list[Result]:
        """Whole prompt texts, tokenized with the judge's tokenizer as ``frame`` says, answered by :meth:`run`."""
        return self.run(frame.encode(self.tokenizer, list(prompts)), request)

    def run(self, token_ids: list[list[int]], request: Request) -> list[Result]:
        outputs = self.llm.generate(
            [{"prompt_token_ids": ids} for ids in token_ids], self.params(request), use_tqdm=False
        )
        results = []
        for out in outputs:
            completions = out.outputs
            logprobs: list[float] = []
            if request.token_ids:
                first = completions[0].logprobs[0]
                missing = [t for t in request.token_ids if t not in first]
                if missing:
                    raise RuntimeError(f"vLLM returned no log-probability for token id(s) {missing}")
                logprobs = [float(first[t].logprob) for t in request.token_ids]
            results.append(
                Result(
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
