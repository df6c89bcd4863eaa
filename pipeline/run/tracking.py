"""MLflow: one run per pipeline run, with the resolved config as params, the metrics, and the run folder's
tables and plots as artifacts. The default store is a local SQLite file under the output root, shared by all
runs so they can be compared (``mlflow ui --backend-store-uri sqlite:///outputs/mlflow/mlflow.db``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pipeline.config.run import TrackingConfig
from pipeline.contracts.values import tracking_key

log = logging.getLogger(__name__)

# MLflow refuses longer param values.
MAX_PARAM_CHARS = 6000


def local_store(output_root: Path) -> tuple[str, str]:
    """(tracking URI, artifact root) of the local store under ``output_root/mlflow``."""
    folder = (output_root / "mlflow").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / 'mlflow.db'}", (folder / "artifacts").as_uri()


class Tracker:
    """Thin wrapper so the pipeline does not depend on MLflow's global state beyond this module. Every key goes
    through :func:`pipeline.contracts.values.tracking_key` (any name a run accepts makes a valid, distinct key)."""

    def __init__(self, run_id: str | None, tracking_uri: str | None):
        self.run_id = run_id
        self.tracking_uri = tracking_uri

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        if self.run_id is None:
            return
        import mlflow

        mlflow.log_metrics({tracking_key(k): float(v) for k, v in metrics.items()}, step=step)

    def log_artifacts(self, folder: Path, artifact_path: str | None = None) -> None:
        if self.run_id is None:
            return
        import mlflow

        mlflow.log_artifacts(str(folder), artifact_path=artifact_path)

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        if self.run_id is None:
            return
        import mlflow

        mlflow.log_artifact(str(path), artifact_path=artifact_path)

    def set_tags(self, tags: dict[str, str]) -> None:
        if self.run_id is None:
            return
        import mlflow

        mlflow.set_tags({tracking_key(k): v for k, v in tags.items()})


@contextmanager
def tracked_run(
    cfg: TrackingConfig, output_root: Path, params: dict[str, Any], run_name: str
) -> Iterator[Tracker]:
    """Start an MLflow run (FAILED if the body raises), log the params, yield a :class:`Tracker`."""
    if not cfg.enabled:
        yield Tracker(None, None)
        return
    import mlflow

    if cfg.tracking_uri:
        tracking_uri, artifact_root = cfg.tracking_uri, None
    else:
        tracking_uri, artifact_root = local_store(output_root)
    mlflow.set_tracking_uri(tracking_uri)
    experiment = mlflow.get_experiment_by_name(cfg.experiment)
    if experiment is None:
        experiment_id = mlflow.create_experiment(cfg.experiment, artifact_location=artifact_root)
    else:
        experiment_id = experiment.experiment_id
    with mlflow.start_run(experiment_id=experiment_id, run_name=cfg.run_name or run_name) as run:
        clipped = {
            tracking_key(k): (str(v)[: MAX_PARAM_CHARS - 3] + "...") if len(str(v)) > MAX_PARAM_CHARS else v
            for k, v in params.items()
        }
        mlflow.log_params(clipped)
        log.info("MLflow run %s in %s (experiment %r)", run.info.run_id, tracking_uri, cfg.experiment)
        yield Tracker(run.info.run_id, tracking_uri)
