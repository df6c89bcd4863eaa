"""Settings derived from the config wherever it is read: paths, the config as dotted keys, the jury's judges typed
once, a judge's label; and what the stages of a workflow are built with (:class:`Derived`), worked out once before
the segments are composed (:mod:`pipeline.workflows.segments` reads it and the config's own sections, nothing else).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from pipeline.config.backends import Trait, backend, generator_backend
from pipeline.config.judging import JudgeConfig
from pipeline.config.keys import reasons_per_group, refuse, unknown_keys, used
from pipeline.config.run import RunConfig
from pipeline.config.workflows import workflow
from pipeline.contracts.errors import ConfigError
from pipeline.methods.scorers.registry import ranked, scorers


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
                f"config {key} must be a judge config (backend, model, name, endpoint, ...), got {own!r}"
            )
        refuse(list(unknown_keys(own, JudgeConfig, f"{key}.")))
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


@dataclass(frozen=True)
class Derived:
    """What the stages of the run's workflow are built with beyond the config's own sections, worked out once
    (:func:`derive`) before the segments are composed."""

    # the folder relative paths are read from, and the cache folder
    root: Path
    cache: Path
    # the workflow's shape (pipeline.config.workflows): it compares pairs; its rounds may choose any pair; its
    # candidates are generated
    pairs: bool
    every_pair: bool
    generated: bool
    # comparisons per attribute and template that get the judge's reasons (0: none)
    reasons: int
    # the optional parts that run (pipeline.config.keys.PARTS): trust, and its PPI leaderboard
    trust: bool
    ppi: bool
    # the judgement store across runs of the run's judge, then of each juror (None: off)
    stores: tuple[Path | None, ...]
    # the jurors' names as the config gives them
    jurors: tuple[str, ...]
    # the methods the leaderboard reports, and the one the report draws against the human scores
    leaderboard: tuple[str, ...]
    drawn: str
    # per judge, the generators that run on its own model in-process (its card measures its self-preference)
    own_systems: Mapping[str, tuple[str, ...]]


def derive(cfg: RunConfig, root: Path) -> Derived:
    """What the stages of ``cfg``'s workflow are built with (:class:`Derived`), from the config and the registries."""
    shape = workflow(cfg.workflow)
    cache = resolve_path(cfg.paths.cache_dir, root)
    judges = [cfg.judge, *cfg.jury.judges]
    reasons, trust = reasons_per_group(cfg), used(cfg, "trust")
    stores = tuple(judgement_store_path(judge, root, cache) for judge in judges)
    own: dict[str, tuple[str, ...]] = {}
    for judge in judges if shape.generated else []:
        names = tuple(
            g.name
            for g in cfg.generate.models
            if g.model == judge.model and Trait.ENDPOINT not in generator_backend(g, cfg.judge).traits
        )
        if names:
            own[judge_label(judge)] = names
    if cfg.leaderboard.methods is not None:
        board = tuple(cfg.leaderboard.methods)
    else:
        chosen = set(cfg.scoring.methods)
        board = tuple(n for n, entry in scorers().items() if entry.leaderboard and n in chosen)
        board += tuple(str(m) for m in cfg.absolute.modes)
    return Derived(
        root=root,
        cache=cache,
        pairs=shape.pairs,
        every_pair=shape.rounds,
        generated=shape.generated,
        reasons=reasons,
        trust=trust,
        ppi=trust and cfg.trust.ppi,
        stores=stores,
        jurors=tuple(judge_label(j) for j in cfg.jury.judges),
        leaderboard=board,
        drawn=drawn_method(cfg.scoring.methods) if shape.pairs else str(cfg.absolute.modes[0]),
        own_systems=own,
    )


def judgement_store_path(judge: JudgeConfig, root: Path, cache_dir: Path) -> Path | None:
    """Where an in-process judge keeps its answers across runs (``judge.store``); None: off, a judge behind an API
    (its reply cache does this), or one that answers by key (its answers are what it holds)."""
    entry = backend(judge.backend)
    if not judge.store or Trait.ENDPOINT in entry.traits or entry.answers:
        return None
    return resolve_path(judge.store_path, root) if judge.store_path else cache_dir / "judgements.sqlite"


def drawn_method(methods: Sequence[str]) -> str:
    """The comparative method the report draws against the human scores: the one of ``methods`` registered first in
    ``report_rank`` (the capped log-odds, then PoE-Gaussian), else the first of ``methods``."""
    drawn = ranked([m for m in methods if m in scorers()], lambda entry: entry.report_rank)
    return drawn[0] if drawn else methods[0]
