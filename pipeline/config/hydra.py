"""Hydra's side: the schema registered with its ConfigStore, composing ``conf/`` with overrides, and the one
conversion of the composed config into a validated :class:`RunConfig`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pipeline import PROJECT_ROOT
from pipeline.config.assessment import CriterionOption
from pipeline.config.derived import typed_jurors
from pipeline.config.enums import ChatTemplate
from pipeline.config.keys import base_node, refuse, required_missing, unknown_keys
from pipeline.config.run import RunConfig
from pipeline.config.validate import validate
from pipeline.config.workflows import workflow
from pipeline.contracts.errors import ConfigError


def register_configs() -> None:
    """Register the schema with Hydra's ConfigStore (conf/config.yaml lists ``base_config`` first), the keys an
    option of a group requires (``???``) left missing (:func:`pipeline.config.keys.base_node`)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="base_config", node=base_node(RunConfig, Path(CONF_DIR)))


def _option(criterion: str, value: Any) -> CriterionOption:
    """An option of ``criteria_options`` (OmegaConf leaves the items of a dict's lists as plain dicts)."""
    if isinstance(value, CriterionOption):
        return value
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"name", "description", "score"})
        if unknown:
            raise ConfigError(
                f"config criteria_options.{criterion}: unknown option key(s) {unknown}; use name, description, score"
            )
        try:
            return CriterionOption(
                name=str(value.get("name", "")),
                description=str(value.get("description", "")),
                score=float(value.get("score", 0.0)),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"config criteria_options.{criterion}: {exc}") from exc
    raise ConfigError(
        f"config criteria_options.{criterion}: each option is {{name, description, score}}, got {value!r}"
    )


def to_run_config(cfg: Any, choices: dict[str, Any] | None = None) -> RunConfig:
    """Convert a composed DictConfig into a validated :class:`RunConfig` (once, at the entry point): a key the schema
    does not have, or one the chosen option of a group requires (``choices``: group -> option, Hydra's) and nothing
    set, is refused first."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    plain = OmegaConf.to_container(cfg, resolve=False, throw_on_missing=False)
    refuse(list(unknown_keys(plain, RunConfig)) + required_missing(cfg, dict(choices or {}), Path(CONF_DIR)))
    try:
        merged = OmegaConf.merge(OmegaConf.structured(RunConfig), cfg)
        run_cfg = OmegaConf.to_object(merged)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"config: {exc}") from exc
    assert isinstance(run_cfg, RunConfig)
    run_cfg.prompt.chat_template = ChatTemplate.parse(run_cfg.prompt.chat_template)
    try:
        workflow(run_cfg.workflow)
    except ValueError as exc:
        raise ConfigError(f"config workflow: {exc}") from exc
    run_cfg.jury.judges = typed_jurors(run_cfg)
    run_cfg.criteria_options = {
        name: [_option(name, o) for o in options] for name, options in run_cfg.criteria_options.items()
    }
    validate(run_cfg)
    return run_cfg


CONF_DIR = str(PROJECT_ROOT / "conf")


def config_error_message(exc: BaseException) -> str:
    """Hydra's / OmegaConf's message, with its cause, without the internal type lines; a key the schema does not have,
    given without ``+``, answered as with it (the nearest key and the section's keys; Hydra's hint says to add ``+``,
    which adds nothing: every setting is declared). ``make run`` and ``make check`` print the same."""
    import re

    parts = [str(exc)]
    if exc.__cause__ is not None and str(exc.__cause__) not in parts[0]:
        parts.append(str(exc.__cause__))
    unknown = re.search(r"Could not override '([^']+)'", parts[0])
    if unknown:
        *sections, last = unknown.group(1).split(".")
        nested: dict[str, Any] = {last: None}
        for section in reversed(sections):
            nested = {section: nested}
        found = list(unknown_keys(nested, RunConfig))
        if found:
            return found[0]
    lines = [
        line
        for part in parts
        for line in part.splitlines()
        if not line.strip().startswith(("reference_type=", "object_type="))
    ]
    return "\n".join(lines)


def compose(overrides: list[str] | None = None) -> RunConfig:
    """The config of ``conf/`` with command-line style overrides, composed and converted as a run does (for
    tests, benchmarks and notebooks that do not go through ``@hydra.main``)."""
    register_configs()
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf, open_dict

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        cfg = hydra_compose("config", overrides=overrides or [], return_hydra_config=True)
    choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
    with open_dict(cfg):
        del cfg["hydra"]
    return to_run_config(cfg, choices)  # type: ignore[arg-type]
