"""A run submitted as a Ray job (``jobs/submit.sh``, ``jobs/rayjob.yaml``) starts in Ray's temporary copy of the
project (``.../runtime_resources/working_dir_files/_ray_pkg_<hash>``), which is deleted with the cluster's
session. A run folder, a local MLflow store or a judgement store there would be lost without a word, so a job
refuses them before anything runs and asks for shared storage and a tracking server instead."""

from __future__ import annotations

import logging
from pathlib import Path

from pipeline.config.derived import resolve_path
from pipeline.config.run import RunConfig
from pipeline.contracts.errors import ConfigError

log = logging.getLogger(__name__)

# Where Ray unpacks a job's working_dir.
_RAY_COPIES = ("runtime_resources/working_dir_files", "/_ray_pkg_")


def ray_working_dir(root: Path) -> bool:
    """Whether the project folder ``root`` is Ray's temporary copy of a job's working_dir."""
    text = str(Path(root).resolve())
    return any(part in text for part in _RAY_COPIES)


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
        return True
    except ValueError:
        return False


def check_job_storage(cfg: RunConfig, root: Path) -> None:
    """Refuse, in a Ray job's temporary working dir, outputs that would be deleted with it (naming each key)."""
    if not ray_working_dir(root):
        return
    problems = []
    output_root = resolve_path(cfg.paths.output_root, root)
    if _inside(output_root, root):
        problems.append(
            f"paths.output_root={cfg.paths.output_root} (the run folders, and the local MLflow store unless "
            "tracking.tracking_uri is set)"
        )
    if (
        cfg.paths.run_dir
        and cfg.paths.run_dir != "latest"
        and _inside(resolve_path(cfg.paths.run_dir, root), root)
    ):
        problems.append(f"paths.run_dir={cfg.paths.run_dir}")
    uri = cfg.tracking.tracking_uri
    if (
        cfg.tracking.enabled
        and uri
        and "://" not in uri.removeprefix("file://")
        and _inside(resolve_path(uri.removeprefix("file://"), root), root)
    ):
        problems.append(f"tracking.tracking_uri={uri}")
    if cfg.judge.store and cfg.judge.store_path and _inside(resolve_path(cfg.judge.store_path, root), root):
        problems.append(f"judge.store_path={cfg.judge.store_path}")
    cache = resolve_path(cfg.paths.cache_dir, root)
    if not problems and _inside(cache, root):
        log.warning(
            "paths.cache_dir=%s is inside Ray's temporary copy of the project: converted models%s are made again "
            "by every job; set paths.cache_dir to shared storage to keep them",
            cfg.paths.cache_dir,
            " and the judgement store" if cfg.judge.store and not cfg.judge.store_path else "",
        )
    if problems:
        raise ConfigError(
            f"this run is a Ray job started in Ray's temporary copy of the project ({root}), which is deleted "
            f"when the cluster's session ends; {'; '.join(problems)} would be written there and lost. Point "
            "them at shared storage every node sees, e.g. paths.output_root=/shared/ca-outputs, and "
            "tracking.tracking_uri at an MLflow server (or a folder on shared storage)"
        )
