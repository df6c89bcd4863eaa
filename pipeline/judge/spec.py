"""The judge as resolved once on the driver: where the model loads from and how its engine is configured."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pipeline.config.enums import Backend, EngineProcess

# vLLM engine settings that change where and how fast the engine runs, not what it computes: a resumed run may
# change them (e.g. a lower gpu_memory_utilization after running out of memory). Every other engine key, the
# dtype chosen for the CPU included, is part of the judging identity.
RESOURCE_ONLY_ENGINE_KEYS = frozenset(
    {
        "gpu_memory_utilization",
        "swap_space",
        "cpu_offload_gb",
        "max_num_seqs",
        "max_num_batched_tokens",
        "enable_prefix_caching",
        "tensor_parallel_size",
        "pipeline_parallel_size",
        "data_parallel_size",
        "threads",
    }
)


@dataclass(frozen=True)
class JudgeSpec:
    """Everything an engine needs (picklable, shipped to the judge actors)."""

    backend: Backend
    # As configured: an alias, a local folder or a hub id.
    model: str
    # What the engine loads: a local folder or a hub id.
    model_path: str
    # The judge's name in the tables.
    name: str
    max_model_len: int
    # Engine settings, with the dtype resolved (vllm.LLM keyword arguments, or the hf backend's settings).
    engine: Mapping[str, Any] = field(default_factory=dict)
    # Environment of the engine's process (set before the engine is imported).
    env: Mapping[str, str] = field(default_factory=dict)
    # vllm: where the engine runs (judge.engine_process; auto decided by the worker, see engine_inside), and
    # whether the judge is placed on GPUs. Neither changes an answer.
    engine_process: EngineProcess = EngineProcess.auto
    on_gpu: bool = False
    # Why the engine runs in its dtype (logged, and written to judge.json).
    dtype_reason: str = ""
    # backend=api: the endpoint's settings (pipeline.judge.api.ApiSettings fields and the served model name;
    # the key's environment variable by name only).
    api: Mapping[str, Any] = field(default_factory=dict)
    # The API key (pipeline.judge.api.Secret: prints as ***), read on the driver; not in describe() or identity().
    secret: Any = field(default=None, repr=False, compare=False)

    @property
    def dtype(self) -> str:
        return str(self.engine.get("dtype", "auto"))

    def identity(self) -> dict[str, Any]:
        """What decides the judge's answers: a resumed run must match it."""
        return {
            "backend": str(self.backend),
            "model": self.model,
            "name": self.name,
            "max_model_len": self.max_model_len,
            "engine": {k: v for k, v in sorted(self.engine.items()) if k not in RESOURCE_ONLY_ENGINE_KEYS},
            **({"api_model": self.api.get("model"), "api_path": self.api.get("path")} if self.api else {}),
        }

    def describe(self) -> dict[str, Any]:
        """Every field, and the dtype the engine runs in (``judge.json``)."""
        described = {k: v for k, v in asdict(self).items() if k != "secret"}
        return {**described, "backend": str(self.backend), "dtype": self.dtype}
