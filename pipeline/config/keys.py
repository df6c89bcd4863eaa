"""Every value set is applied or refused: the keys a composed config may hold, the keys a chosen config group
requires (``???``), and the settings of parts the run does not use.

- :func:`unknown_keys`: a key that is not a field of the schema (a typo, with or without Hydra's ``+``), named with
  the nearest key. Mappings of free keys (``judge.engine``, ``judge.env``, ``criteria``...) are the backend's or the
  user's and are checked where they are read.
- :func:`base_node` and :func:`required_missing`: a group option that says ``???`` (``judge=gpu``'s ``model``)
  requires the key: the schema registered with Hydra leaves those keys missing, so that a value from the schema's
  defaults cannot stand in for it, and a key still missing when the option is chosen is refused (where another option
  is chosen, the schema's default applies).
- :data:`PARTS` and :func:`unused_settings`: a section that only one part of the product reads (``judge.endpoint`` an
  endpoint judge, ``adaptive`` the adaptive workflow...) and whose values differ from their defaults in a run that does
  not use that part is refused, saying what would use it.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.config.backends import Trait, backend, backends
from pipeline.config.workflows import workflow
from pipeline.contracts.errors import ConfigError

# --- unknown keys ------------------------------------------------------------------------------------------------


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _strip_optional(tp: Any) -> Any:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0] if len(rest) == 1 else tp
    return tp


# Settings renamed, by their old name: an old command or preset is told the new one. ``api`` (of the judge, a juror, a
# generator) is the endpoint's section ``endpoint``, named apart from the backend ``api``.
RENAMED = {"api": "endpoint"}


def unknown_keys(value: Any, schema: type, prefix: str = "") -> Iterator[str]:
    """A message per key of ``value`` (a composed mapping) that ``schema`` (a dataclass) has no field for, naming
    the nearest field; nested dataclasses, lists and mappings of them walked."""
    hints = _hints(schema)
    names = [f.name for f in dataclasses.fields(schema)]
    for key in value:
        path = f"{prefix}{key}"
        if key not in hints or key not in names:
            near = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
            hint = f"did you mean {prefix}{near[0]}? " if near else ""
            if RENAMED.get(str(key)) in names:
                hint = f"it is now {prefix}{RENAMED[str(key)]}; "
            yield (
                f"config {path}: no such setting (a + does not add one: every setting is declared); {hint}"
                f"{prefix.rstrip('.') or 'the config'} has {', '.join(names)}"
            )
            continue
        yield from _walk(value[key], _strip_optional(hints[key]), f"{path}.")


def _walk(value: Any, tp: Any, prefix: str) -> Iterator[str]:
    from omegaconf import DictConfig, ListConfig

    if dataclasses.is_dataclass(tp) and isinstance(value, (dict, DictConfig)):
        yield from unknown_keys(value, tp, prefix)  # type: ignore[arg-type]
        return
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is list and args and isinstance(value, (list, ListConfig)):
        for k, item in enumerate(value):
            yield from _walk(item, _strip_optional(args[0]), f"{prefix.rstrip('.')}[{k}].")
    elif origin is dict and len(args) == 2 and isinstance(value, (dict, DictConfig)):
        for key, item in value.items():
            yield from _walk(item, _strip_optional(args[1]), f"{prefix}{key!s}.")


# --- required keys (???) -----------------------------------------------------------------------------------------


def _marked(conf_dir: Path) -> dict[tuple[str, str], list[str]]:
    """Per (group, option) of ``conf_dir``, the keys its file marks ``???`` (with the group's package)."""
    from omegaconf import OmegaConf

    out: dict[tuple[str, str], list[str]] = {}
    for path in sorted(conf_dir.glob("*/*.yaml")):
        text = path.read_text()
        if "???" not in text:
            continue
        group = path.parent.name
        package = "" if "@package _global_" in text else f"{group}."
        missing = OmegaConf.missing_keys(OmegaConf.load(path))
        if missing:
            out[(group, path.stem)] = sorted(package + key for key in missing)
    return out


def base_node(schema: type, conf_dir: Path) -> Any:
    """The schema as Hydra's base config, every key that some option marks ``???`` left missing."""
    from omegaconf import MISSING, OmegaConf

    node = OmegaConf.structured(schema)
    for keys in _marked(conf_dir).values():
        for key in keys:
            OmegaConf.update(node, key, MISSING, merge=False)
    return node


def required_missing(cfg: Any, choices: dict[str, Any], conf_dir: Path) -> list[str]:
    """A message per key that the chosen option of a group marks ``???`` and nothing set."""
    from omegaconf import OmegaConf

    missing = OmegaConf.missing_keys(cfg)
    problems = []
    for (group, option), keys in _marked(conf_dir).items():
        if choices.get(group) != option:
            continue
        for key in keys:
            if key in missing:
                problems.append(
                    f"config {key} is required by {group}={option} (its file says ???) and nothing set it: add "
                    f"{key}=<value> to the command"
                )
    return problems


# --- settings of parts the run does not use ----------------------------------------------------------------------


@dataclass(frozen=True)
class Part:
    """A section of the config that one part of the product reads: ``used`` says whether the run uses it, ``what``
    says in words what would and ``fix`` how to turn it on; ``free``: fields that may differ from their defaults anyway
    (a catalogue, the switch)."""

    key: str
    used: Callable[[Any], bool]
    what: str
    fix: str
    free: tuple[str, ...] = ()


def _endpoint(cfg: Any) -> bool:
    entry = backends().get(cfg.judge.backend)
    return entry is None or Trait.ENDPOINT in entry.traits  # an unknown backend is refused by its own check


def reasons_per_group(cfg: Any) -> int:
    """How many comparisons per attribute and template get the judge's reasons (``reasons.n``, or the workflow's
    default where the judge's backend can generate them)."""
    if cfg.reasons.n is not None:
        return cfg.reasons.n
    try:
        generates = Trait.GENERATION in backend(cfg.judge.backend).traits
    except ValueError:  # an unknown backend: refused, with its key, by the judge's own check
        return 0
    return workflow(cfg.workflow).reasons if generates else 0


PARTS = (
    Part(
        "judge.endpoint", _endpoint, "a judge behind an endpoint", "choose one: judge=api or judge=anthropic"
    ),
    Part(
        "judge.reasoning",
        lambda c: c.judge.reasoning.enabled,
        "reasoning before the verdict",
        "set judge.reasoning.enabled=true",
        ("enabled",),
    ),
    Part("adaptive", lambda c: workflow(c.workflow).rounds, "adaptive rounds", "set workflow=adaptive"),
    Part(
        "generate",
        lambda c: workflow(c.workflow).generated,
        "generating the candidates",
        "set workflow=generate",
    ),
    Part(
        "absolute",
        lambda c: bool(c.absolute.modes),
        "absolute judging",
        "set absolute.modes=[prompt_score|g_eval|implicit|explicit|options|checklist]",
        ("modes", "library", "templates"),
    ),
    Part(
        "reasons",
        lambda c: reasons_per_group(c) > 0,
        "the judge's reasons",
        "set reasons.n=<pairs>",
        ("n",),
    ),
    Part("trust", lambda c: c.trust.enabled, "certified verdicts", "set trust.enabled=true", ("enabled",)),
)


def used(cfg: Any, key: str) -> bool:
    """Whether the run uses the optional part ``key`` (:data:`PARTS`: the one place that decides it)."""
    return next(part for part in PARTS if part.key == key).used(cfg)


def _section(cfg: Any, key: str) -> Any:
    for part in key.split("."):
        cfg = getattr(cfg, part)
    return cfg


def unused_settings(cfg: Any) -> list[str]:
    """A message per setting that differs from its default in a section the run does not use (:data:`PARTS`)."""
    problems = []
    for part in PARTS:
        if part.used(cfg):
            continue
        section = _section(cfg, part.key)
        default = type(section)()
        for f in dataclasses.fields(section):
            value = getattr(section, f.name)
            if f.name in part.free or value == getattr(default, f.name):
                continue
            problems.append(
                f"config {part.key}.{f.name}={value} is set, but this run does not use it: it is for {part.what}; "
                f"remove it, or {part.fix}"
            )
    return problems


def refuse(problems: list[str]) -> None:
    if problems:
        raise ConfigError(
            problems[0] if len(problems) == 1 else "\n  - ".join(["invalid config:", *problems])
        )
