"""Settings derived from the config wherever it is read: paths, the config as dotted keys, the jury's judges typed
once, a judge's label. (What a stage is built with is derived where the workflows are composed:
:mod:`pipeline.workflows.segments`.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import Any

from pipeline.config.backends import Trait, backend
from pipeline.config.judging import JudgeConfig
from pipeline.config.run import RunConfig
from pipeline.config.workflows import workflow
from pipeline.contracts.errors import ConfigError


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted keys of a nested dict / dataclass (lists of dicts are indexed: ``prompt.templates.0.id``)."""
    if hasattr(tree, "__dataclass_fields__"):
        tree = asdict(tree)
    out: dict[str, Any] = {}
    if isinstance(tree, dict):
        if not tree and prefix:
            out[prefix] = "{}"
        for k, v in tree.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(tree, list) and tree and isinstance(tree[0], dict):
        for n, v in enumerate(tree):
            out.update(flatten(v, f"{prefix}.{n}"))
    else:
        out[prefix] = tree
    return out


# An engine's environment (``judge.env``, a juror's, a generator's) is recorded by name only, but for the settings
# of the libraries below (vLLM, OpenMP, CUDA, torch, Ray) whose names say nothing secret: a value given there may be a
# token (``+judge.env.HF_TOKEN=...``).
_SETTINGS = re.compile(r"^(VLLM|OMP|MKL|KMP|CUDA|NCCL|TORCH|PYTORCH|RAY|TOKENIZERS)_")
_SECRET = re.compile(r"TOKEN(?!IZERS)|KEY|SECRET|PASS|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
REDACTED = "<redacted>"


def redacted_env(tree: Any) -> Any:
    """``tree`` (a config or judge as a dict) with every ``env`` mapping's values redacted (above)."""
    if isinstance(tree, dict):
        return {
            k: (
                {
                    n: v if _SETTINGS.match(n) and not _SECRET.search(n) else REDACTED
                    for n, v in tree[k].items()
                }
                if k == "env" and isinstance(tree[k], dict)
                else redacted_env(tree[k])
            )
            for k in tree
        }
    return [redacted_env(v) for v in tree] if isinstance(tree, list) else tree


def recorded(cfg: RunConfig) -> dict[str, Any]:
    """The config as every record keeps it (config.json, MLflow's params): engine environments' values redacted."""
    return redacted_env(json.loads(json.dumps(asdict(cfg), default=str)))


def to_flat_dict(cfg: RunConfig) -> dict[str, Any]:
    """The resolved config as dotted keys (for MLflow params), as :func:`recorded` keeps it."""
    return flatten(recorded(cfg))


def resolve_path(path: str, root: Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else (root / p)


def typed_jurors(cfg: RunConfig) -> list[JudgeConfig]:
    """The jury's further judges (``jury.judges`` as written), each merged over ``judge``'s settings, once, when the
    config is converted: what a juror does not set it takes from ``judge``, but its name (its own, else its model's)
    and ``engine`` unless it has ``judge``'s backend. An entry that is not a judge config is refused, naming it; one
    typed already is merged again to itself."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    def plain(judge: JudgeConfig) -> dict[str, Any]:
        return {name: (str(v) if isinstance(v, StrEnum) else v) for name, v in asdict(judge).items()}

    base = plain(cfg.judge)
    base.pop("name")
    out = []
    for n, own in enumerate(cfg.jury.judges):
        key = f"jury.judges[{n}]"
        if isinstance(own, JudgeConfig):
            own = plain(own)
        if not isinstance(own, Mapping):
            raise ConfigError(
                f"config {key} must be a judge config (backend, model, name, api, ...), got {own!r}"
            )
        start = dict(base)
        if str(own.get("backend", start["backend"])) != start["backend"]:
            start["engine"] = {}
        try:
            merged = OmegaConf.merge(OmegaConf.structured(JudgeConfig), start, dict(own))
            juror = OmegaConf.to_object(merged)
        except OmegaConfBaseException as exc:
            raise ConfigError(f"config {key}: {exc}") from exc
        assert isinstance(juror, JudgeConfig)
        out.append(juror)
    return out


def judge_label(judge: JudgeConfig) -> str:
    """A judge's name as the config gives it (``name``, else its model): the tables use the resolved one."""
    return judge.name or judge.model.rstrip("/").rsplit("/", 1)[-1]


def reasons_per_group(cfg: RunConfig) -> int:
    """How many comparisons per attribute and template get the judge's reasons (``reasons.n``, or the workflow's
    default where the judge's backend can generate them)."""
    if cfg.reasons.n is not None:
        return cfg.reasons.n
    try:
        generates = Trait.GENERATION in backend(cfg.judge.backend).traits
    except ValueError:  # an unknown backend: refused, with its key, by the judge's own check
        return 0
    return workflow(cfg.workflow).reasons if generates else 0
