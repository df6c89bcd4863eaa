"""Generator models as settled on the driver: the engine each runs on (shared by generators of one model and
engine settings), its sampling and system prompt, and what decides its outputs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.config.backends import Trait, generator_backend
from pipeline.config.judging import EndpointConfig, GeneratorConfig, JudgeConfig
from pipeline.contracts.engine import Request
from pipeline.judge.spec import JudgeSpec


@dataclass(frozen=True)
class Generator:
    """A generator as settled on the driver: its engine (shared with generators of the same model and engine
    settings), its sampling and its system prompt."""

    name: str
    spec: JudgeSpec
    request: Request
    system_prompt: str | None


def generator_request(cfg: GeneratorConfig) -> Request:
    sampled = cfg.temperature > 0
    return Request(
        max_tokens=cfg.max_tokens,
        n=1,
        temperature=cfg.temperature,
        seed=cfg.seed if sampled else None,
        top_p=cfg.top_p,
        stop=tuple(cfg.stop),
    )


def generator_judge_config(cfg: GeneratorConfig, judge: JudgeConfig) -> JudgeConfig:
    """The engine of a generator as a judge config, on its backend (:func:`pipeline.config.backends.generator_backend`):
    behind its endpoint (``api``), or its model on this machine with the judge's engine settings under its own."""
    entry = generator_backend(cfg, judge)
    common = {
        "backend": entry.name,
        "model": cfg.model,
        "name": cfg.model,
        "max_model_len": judge.max_model_len,
        "env": {**judge.env, **cfg.env},
        "batch_size": judge.batch_size,
        "num_actors": judge.num_actors,
        "num_cpus_per_actor": judge.num_cpus_per_actor,
    }
    if Trait.ENDPOINT in entry.traits:
        return JudgeConfig(**common, num_gpus_per_actor=0.0, endpoint=cfg.endpoint or EndpointConfig())
    return JudgeConfig(
        **common,
        engine={**judge.engine, **cfg.engine},
        engine_process=judge.engine_process,
        num_gpus_per_actor=judge.num_gpus_per_actor,
    )


def engine_groups(generators: Sequence[Generator]) -> list[list[Generator]]:
    """Generators that share an engine (same model and engine settings), in config order of their first member."""
    groups: dict[str, list[Generator]] = {}
    for g in generators:
        key = json.dumps(
            {
                "path": g.spec.model_path,
                **g.spec.identity(),
                "name": "",
                "endpoint": g.spec.endpoint.describe() if g.spec.endpoint else {},
            },
            sort_keys=True,
            default=str,
        )
        groups.setdefault(key, []).append(g)
    return list(groups.values())


def generator_identity(g: Generator) -> dict[str, Any]:
    """What decides a generator's outputs (its part of the generations' identity)."""
    from dataclasses import asdict

    return {
        "name": g.name,
        "model": g.spec.identity(),
        "system_prompt": g.system_prompt,
        "read": asdict(g.request),
    }


def describe_generators(generators: Sequence[Generator]) -> list[dict[str, Any]]:
    return [
        {
            "name": g.name,
            "model": g.spec.model,
            "dtype": g.spec.dtype,
            "system_prompt": g.system_prompt,
            "temperature": g.request.temperature,
            "top_p": g.request.top_p,
            "max_tokens": g.request.max_tokens,
            "seed": g.request.seed,
            "stop": list(g.request.stop),
        }
        for g in generators
    ]
