"""Where a run writes: a new run folder, or the latest folder of the same configuration (``paths.run_dir=latest``)."""

from __future__ import annotations

import json
import logging
from dataclasses import fields
from datetime import datetime
from pathlib import Path

from pipeline.config.derived import recorded, resolve_path
from pipeline.config.judging import JudgeConfig
from pipeline.config.run import RunConfig
from pipeline.config.workflows import workflow
from pipeline.contracts.errors import UserError
from pipeline.contracts.values import name_part

log = logging.getLogger(__name__)


# paths.run_dir=latest: continue the latest run of the same configuration (or start one).
LATEST = "latest"


# What may differ between a run and the one it continues (where it runs, how it logs and is tracked): these sections,
# and the judge's fields marked as placement (its workers, their engines' processes and environment, batch size).
_NOT_COMPARED = {"paths", "runtime", "tracking", "verbose", "log_level"}
_JUDGE_PLACEMENT = {f.name for f in fields(JudgeConfig) if f.metadata.get("placement")}


def _compared(config: dict) -> dict:
    kept = {k: v for k, v in config.items() if k not in _NOT_COMPARED}
    if isinstance(kept.get("judge"), dict):
        kept["judge"] = {k: v for k, v in kept["judge"].items() if k not in _JUDGE_PLACEMENT}
    return kept


def latest_matching_run(cfg: RunConfig, root: Path) -> Path | None:
    """The newest run folder under ``<output_root>/runs`` whose ``config.json`` is this configuration (apart
    from where and how it runs: paths, runtime, tracking, logging, the judge's placement)."""
    wanted = _compared(recorded(cfg))
    folders = sorted(
        (resolve_path(cfg.paths.output_root, root) / "runs").glob("*/*/config.json"),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for path in folders:
        try:
            if _compared(json.loads(path.read_text())) == wanted:
                return path.parent
        except (OSError, json.JSONDecodeError):
            continue
    return None


def resolve_latest(cfg: RunConfig, root: Path) -> RunConfig:
    """``paths.run_dir=latest``: the latest run of this configuration (a driver that was killed, a run that
    stopped), whose folder holds what it judged; a new folder when there is none."""
    import dataclasses

    if cfg.paths.run_dir != LATEST:
        return cfg
    found = latest_matching_run(cfg, root)
    if found is None:
        log.info("paths.run_dir=latest: no earlier run of this configuration; a new run folder")
    else:
        log.info("paths.run_dir=latest: continuing %s", found)
    return dataclasses.replace(
        cfg, paths=dataclasses.replace(cfg.paths, run_dir=str(found) if found else None)
    )


def json_object(path: Path) -> dict | None:
    """A JSON object file's content; None when it is missing, empty, torn or not an object."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def is_run_folder(folder: Path) -> bool:
    """Whether ``folder`` is a run's: its config.json is a run's config (a model's checkpoint has a config.json too)."""
    config = json_object(folder / "config.json")
    return config is not None and {"workflow", "dataset", "judge"} <= config.keys()


def check_run_dir(folder: Path) -> Path:
    """``folder`` if a run may write there: a run's folder (to continue it; one killed before its config.json too),
    or a new or empty one. A folder of anything else (a model's checkpoint, a data set) is refused: a run would
    overwrite its config.json and mix its tables into it."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise UserError(f"config paths.run_dir={folder} is not a folder")
    begun = {".run.lock", "tables", "run.log"}  # what a run makes before its config.json
    if folder.exists() and not is_run_folder(folder) and any(p.name not in begun for p in folder.iterdir()):
        raise UserError(
            f"config paths.run_dir={folder} holds files that are not a run's (no run's config.json); give a run's "
            "folder to continue it, or a new or empty one"
        )
    return folder


def plan_run_dir(cfg: RunConfig, root: Path) -> Path:
    """This run's folder: ``paths.run_dir`` (a run's folder, or a new or empty one: :func:`check_run_dir`), or a new
    ``<output_root>/runs/<date>/<time>-<dataset>``."""
    if cfg.paths.run_dir:
        return check_run_dir(resolve_path(cfg.paths.run_dir, root))
    now = datetime.now()
    base = resolve_path(cfg.paths.output_root, root) / "runs" / now.strftime("%Y-%m-%d")
    label = str(cfg.workflow) if workflow(cfg.workflow).generated else cfg.dataset.name
    name = f"{now.strftime('%H-%M-%S')}-{name_part(label)}"  # a name cannot leave the output root
    run_dir, n = base / name, 1
    while run_dir.exists():
        n += 1
        run_dir = base / f"{name}-{n}"
    return run_dir
