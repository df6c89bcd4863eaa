"""Where the review's agreement goes: the review folder's tables (``agreement.csv``, ``confusion.csv``, ``labels.csv``,
every text cell neutralised against spreadsheet formulas) and a child run of the run's MLflow run."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from pipeline.review.agreement import Agreement
from pipeline.run.folder import json_object
from pipeline.run.runs import configured_root
from pipeline.storage.csv import write_csv

log = logging.getLogger(__name__)


def write(result: Agreement) -> list[Path]:
    """``agreement.csv``, ``confusion.csv`` and ``labels.csv`` in the review folder (every text cell neutralised:
    :mod:`pipeline.storage.csv`)."""
    folder = result.sample.folder
    frames = {"agreement.csv": result.table, "confusion.csv": result.confusion, "labels.csv": result.labels}
    return [write_csv(frame, folder / name) for name, frame in frames.items()]


def own_tracking_uri(run_dir: Path, output_root: Path | None) -> str | None:
    """The project's own tracking store: ``tracking.tracking_uri`` as configured, else the local store of the output
    root (``--root``; else the one the run folder is under, ``<root>/runs/<date>/<run>``; else the configured one),
    None when there is none. Never the URI a run folder's ``tracking.json`` names: a folder received from someone
    else would send the review's labels and notes to their server."""
    from pipeline.config.hydra import compose

    configured = compose([]).tracking.tracking_uri
    if configured:
        return configured
    roots = [output_root] if output_root else [run_dir.parent.parent.parent, configured_root()]
    db = next((r / "mlflow" / "mlflow.db" for r in roots if (r / "mlflow" / "mlflow.db").exists()), None)
    return f"sqlite:///{db.resolve()}" if db else None


def _parent_run(run_dir: Path, uri: str) -> str | None:
    """The run's MLflow run id in the store at ``uri``: the one its ``tracking.json`` names when it is there, else
    the run tagged with the run folder (runs written before ``tracking.json`` existed); None when it has none."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    recorded = (json_object(run_dir / "tracking.json") or {}).get("run_id")
    if isinstance(recorded, str):
        try:
            return client.get_run(recorded).info.run_id
        except MlflowException:
            pass  # not in this store
    experiments = [e.experiment_id for e in client.search_experiments()]
    folder = str(run_dir)
    quote = next((q for q in "'\"" if q not in folder), None)
    if quote is None:  # a path holding both quotes: no filter can name it, look through the tagged runs
        tagged = client.search_runs(experiments, filter_string="tags.run_dir != ''", max_results=50_000)
        found = [r for r in tagged if r.data.tags.get("run_dir") == folder]
    else:
        found = client.search_runs(experiments, f"tags.run_dir = {quote}{folder}{quote}", max_results=1)
    return found[0].info.run_id if found else None


def log_to_mlflow(result: Agreement, files: list[Path], uri: str | None) -> str | None:
    """Log the metrics and files to the review's child run of the run's MLflow run in the store at ``uri`` (the
    user's, or :func:`own_tracking_uri`); its id (None when the store has no run of it)."""
    parent_id = _parent_run(result.sample.run_dir, uri) if uri else None
    if parent_id is None:
        log.info("the run has no MLflow run in %s: the agreement is in %s only", uri, result.sample.folder)
        return None
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    record = result.sample.folder / "mlflow.json"
    known = json.loads(record.read_text()) if record.exists() else {}
    child_id = known.get("run_id") if known.get("tracking_uri") == uri else None
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
