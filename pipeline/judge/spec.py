"""The judge as resolved once on the driver: where the model loads from and how its engine is configured, or the
endpoint it answers behind (typed end to end: the endpoint's settings are :class:`pipeline.config.judging.EndpointConfig`,
declared once).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from pipeline.config.derived import redacted_env
from pipeline.config.enums import ApiPath, EngineProcess
from pipeline.config.judging import EndpointConfig

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
        # eager or compiled: the same answers within the engine's noise, chosen per run (pipeline.judge.vllm.mode)
        "enforce_eager",
    }
)


class Secret:
    """A key that travels to the judge actors (pickled with the actor's arguments, never in the Ray
    runtime_env) but prints as ``***`` in any repr, str, log line or JSON written with ``default=str``."""

    __slots__ = ("value",)

    def __init__(self, value: str):
        self.value = value

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__


# EndpointConfig settings that stay on the driver: prices (for the report) and the cache switch (resolved into cache_path).
DRIVER_ONLY_API_KEYS = ("price_input", "price_output", "cache", "batch_discount")


@dataclass(frozen=True)
class ApiEndpoint:
    """A judge's (or a generator's) endpoint as resolved on the driver: its settings as configured, the name the
    server serves the model under, the reply cache's file (None: no cache), and the key read from the variable
    ``settings.api_key_env`` names (a :class:`Secret`; None without a key)."""

    settings: EndpointConfig
    model: str
    cache_path: str | None = None
    secret: Secret | None = field(default=None, repr=False, compare=False)
    # batch judging (settings.batch): the run folder's record of the batches submitted (a rerun picks them up)
    record_path: str | None = None

    @property
    def path(self) -> ApiPath:
        return self.settings.path

    def describe(self) -> dict[str, Any]:
        """What ``judge.json`` records of the endpoint (the key by its variable's name only)."""
        settings = {k: v for k, v in asdict(self.settings).items() if k not in DRIVER_ONLY_API_KEYS}
        return {
            **settings,
            "model": self.model,
            "path": str(self.path),
            "cache_path": self.cache_path,
            **({"record_path": self.record_path} if self.record_path else {}),
        }


@dataclass(frozen=True)
class Placement:
    """Where a judge's engines run and how they are fed: workers (least, most), each one's CPUs and GPUs, and the
    rows of a batch (``judge.num_actors``, ``num_cpus_per_actor``, ``num_gpus_per_actor``, ``batch_size``)."""

    workers: tuple[int, int] = (1, 1)
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    batch_size: int = 256


@dataclass(frozen=True)
class JudgeSpec:
    """Everything an engine needs (picklable, shipped to the judge actors)."""

    backend: str
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
    # a backend behind an endpoint (api, anthropic): the endpoint (its settings, the served model name and the key);
    # None in-process.
    endpoint: ApiEndpoint | None = None
    # where its workers run (set where the judge is resolved: pipeline.judge.models.resolve_judge); not an answer's
    placement: Placement = field(default_factory=Placement)

    @property
    def dtype(self) -> str:
        return str(self.engine.get("dtype", "auto"))

    def endpoint_of(self, engine: str) -> ApiEndpoint:
        """The endpoint ``engine`` (an endpoint backend's engine, in words) sends to; an error without one."""
        if self.endpoint is None:
            raise ValueError(f"judge {self.name}: {engine} needs the endpoint (judge.endpoint)")
        return self.endpoint

    def identity(self) -> dict[str, Any]:
        """What decides the judge's answers: a resumed run must match it."""
        return {
            "backend": str(self.backend),
            "model": self.model,
            "name": self.name,
            "max_model_len": self.max_model_len,
            "engine": {k: v for k, v in sorted(self.engine.items()) if k not in RESOURCE_ONLY_ENGINE_KEYS},
            **(
                {"api_model": self.endpoint.model, "api_path": str(self.endpoint.path)}
                if self.endpoint
                else {}
            ),
        }

    def describe(self) -> dict[str, Any]:
        """Every field, and the dtype the engine runs in (``judge.json``)."""
        # the endpoint as it describes itself (no key); the environment by names, its secrets' values redacted
        described = redacted_env(asdict(replace(self, endpoint=None)))
        endpoint = self.endpoint.describe() if self.endpoint else {}
        return {**described, "endpoint": endpoint, "backend": str(self.backend), "dtype": self.dtype}
