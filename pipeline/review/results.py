"""Where the review's agreement goes: the review folder's tables (``agreement.csv``, ``confusion.csv``, ``labels.csv``,
the reviewers' notes neutralised against spreadsheet formulas) and a child run of the run's MLflow run."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import polars as pl

from pipeline.review.agreement import Agreement

log = logging.getLogger(__name__)


# A cell that a spreadsheet would read as a formula starts with one of these; the reviewers' free text (their notes)
# is written with a leading apostrophe there (OWASP's neutralisation of CSV injection), so that opening labels.csv runs
# nothing. Ids and names are not free text (checked where they are made) and are written as they are.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
FREE_TEXT = ("note",)


def neutralised(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with every free-text cell that starts like a formula prefixed with an apostrophe."""
    return frame.with_columns(
        pl.when(pl.any_horizontal([pl.col(c).str.starts_with(p) for p in FORMULA_START]))
        .then(pl.lit("'") + pl.col(c))
        .otherwise(pl.col(c))
        .alias(c)
        for c in FREE_TEXT
        if c in frame.columns
    )


def write(result: Agreement) -> list[Path]:
    """``agreement.csv``, ``confusion.csv`` and ``labels.csv`` (its notes neutralised) in the review folder."""
    folder = result.sample.folder
    paths = [folder / "agreement.csv", folder / "confusion.csv", folder / "labels.csv"]
    frames = (result.table, result.confusion, neutralised(result.labels))
    for frame, path in zip(frames, paths, strict=True):
        tmp = path.with_suffix(".tmp")
        frame.write_csv(tmp)
        tmp.replace(path)
    return paths


def _parent_run(run_dir: Path) -> tuple[str, str] | None:
    """(tracking URI, MLflow run id) of the run, from its ``tracking.json``, or else the run folder's tag in the
    local store beside it (runs written before ``tracking.json`` existed); None without MLflow."""
    recorded = run_dir / "tracking.json"
    if recorded.exists():
        meta = json.loads(recorded.read_text())
        return meta["tracking_uri"], meta["run_id"]
    config = json.loads((run_dir / "config.json").read_text())
    tracking = config.get("tracking") or {}
    if not tracking.get("enabled", True):
        return None
    db = run_dir.parent.parent.parent / "mlflow" / "mlflow.db"
    uri = tracking.get("tracking_uri") or (f"sqlite:///{db.resolve()}" if db.exists() else None)
    if uri is None:
        return None
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, filter_string=f"tags.run_dir = '{run_dir}'", max_results=1)
    return (uri, runs[0].info.run_id) if runs else None


def log_to_mlflow(result: Agreement, files: list[Path]) -> str | None:
    """Log the metrics and files to the review's child run of the run's MLflow run; its id (None without one)."""
    parent = _parent_run(result.sample.run_dir)
    if parent is None:
        log.info("the run has no MLflow run: the agreement is in %s only", result.sample.folder)
        return None
    uri, parent_id = parent
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    record = result.sample.folder / "mlflow.json"
    child_id = json.loads(record.read_text())["run_id"] if record.exists() else None
    if child_id is None:
        experiment = client.get_run(parent_id).info.experiment_id
        child = client.create_run(
            experiment,
            run_name=f"review {result.sample.run_dir.name}",
            tags={"mlflow.parentRunId": parent_id, "review_of": str(result.sample.run_dir)},
        )
        child_id = child.info.run_id
        record.write_text(
            json.dumps({"run_id": child_id, "parent_run_id": parent_id, "tracking_uri": uri}) + "\n"
        )
        client.set_tag(parent_id, "review_run_id", child_id)
        spec = result.sample.spec
        for key, value in (("strategy", spec.strategy.value), ("n", spec.n), ("seed", spec.seed)):
            client.log_param(child_id, f"review.{key}", value)
    step = result.labels.height
    for name, value in result.metrics().items():
        client.log_metric(child_id, name, value, step=step)
    for path in [*files, result.sample.folder / "sample.json"]:
        client.log_artifact(child_id, str(path), artifact_path="review")
    client.set_terminated(child_id, "FINISHED")
    return child_id
