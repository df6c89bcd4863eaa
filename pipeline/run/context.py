"""A whole run as one plain function: ``run(RunConfig) -> RunResult``.

``run`` picks the workflow the config names (:mod:`pipeline.workflows`: load_input -> resolve_judge ->
prepare_prompts -> open_store -> shard_contexts -> judge -> reduce -> score -> rate -> combine -> correlate -> cost
-> report) and executes its stages in a :class:`RunContext`: the run folder (its
``run.log``, ``config.json``, ``tables/``) and the MLflow run are opened when a stage first needs them, the
executor (Ray Data or in-process) when a stage first streams work. ``@hydra.main`` in :mod:`pipeline.cli` is a
thin shell around ``run``; tests and notebooks call it directly.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline import PROJECT_ROOT
from pipeline.config.derived import recorded, resolve_path, to_flat_dict
from pipeline.config.run import RunConfig
from pipeline.contracts.errors import ConfigError
from pipeline.contracts.stats import JudgeStats
from pipeline.run.folder import plan_run_dir, resolve_latest
from pipeline.run.lock import run_folder_lock
from pipeline.run.tracking import Tracker, tracked_run
from pipeline.runtime.logs import FILE_ONLY, RunLog
from pipeline.stages.base import Port, write_port
from pipeline.workflows.catalog import build

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    run_dir: Path
    tables: dict[str, Path]
    metrics: dict[str, float]
    summary: str
    mlflow_run_id: str | None
    tracking_uri: str | None
    judge_stats: JudgeStats | None = None
    # Why the run's results could not be logged to MLflow (its outputs are written all the same); None: they were.
    reporting_error: str | None = None
    # Every port's value (tables as Arrow, settled objects as they are).
    values: dict[str, Any] = field(default_factory=dict)


class RunContext:
    """One run's folder, log, MLflow run, metrics and executor, opened lazily (see the module docstring)."""

    def __init__(self, cfg: RunConfig, root: Path):
        self.cfg = cfg
        self.root = root
        self.output_root = resolve_path(cfg.paths.output_root, root)
        self._run_dir = plan_run_dir(cfg, root)
        parts = sorted(self._run_dir.glob("judgments/part-*.parquet")) + sorted(
            self._run_dir.glob("ratings/part-*.parquet")
        )
        if parts and not cfg.runtime.resume:
            raise ConfigError(
                f"config runtime.resume=false but paths.run_dir={self._run_dir} holds {len(parts)} part(s) of "
                "judgments or ratings; set runtime.resume=true to continue that run, or choose a new paths.run_dir"
            )
        self.metrics: dict[str, float] = {}
        self.files: list[Path] = []
        self.sends = True
        self.tables: dict[str, Path] = {}
        self.log = RunLog(str(cfg.log_level))
        self.opened = False
        self.tracker = Tracker(None, None)
        self._stack = contextlib.ExitStack()
        self._pending: list[tuple[Port, Any]] = []
        self._executor = None
        self.reporting_error: str | None = None

    # --- what stages see -------------------------------------------------------------------------------
    @property
    def run_dir(self) -> Path:
        self.open()
        return self._run_dir

    @property
    def planned_run_dir(self) -> Path:
        return self._run_dir

    @property
    def executor(self):
        if self._executor is None:
            from pipeline.runtime.executors import make_executor

            self._executor = make_executor(self.cfg.runtime, self.run_dir / "logs", self.cfg.verbose)
        return self._executor

    def log_step(self, metrics: dict[str, float], step: int) -> None:
        self.open()
        self.tracker.log_metrics({k: v for k, v in metrics.items() if math.isfinite(v)}, step=step)

    # --- the runner's side -----------------------------------------------------------------------------
    def open(self) -> None:
        """Create the run folder with run.log and config.json, start the MLflow run, write pending outputs."""
        if self.opened:
            return
        self.opened = True
        if not self.cfg.paths.run_dir:
            # a new folder of its own, even if another run took the planned name meanwhile
            base, n = self._run_dir, 1
            while True:
                try:
                    self._run_dir.mkdir(parents=True)
                    break
                except FileExistsError:
                    n += 1
                    self._run_dir = base.with_name(f"{base.name}-{n}")
        run_dir = self._run_dir
        (run_dir / "tables").mkdir(parents=True, exist_ok=True)
        self._stack.enter_context(run_folder_lock(run_dir))  # one run at a time in a folder
        self.log.open(run_dir / "run.log")
        (run_dir / "config.json").write_text(json.dumps(recorded(self.cfg), indent=2))
        log.info("run folder %s", run_dir)
        self.tracker = self._stack.enter_context(
            tracked_run(self.cfg.tracking, self.output_root, to_flat_dict(self.cfg), run_dir.name)
        )
        self.tracker.set_tags(
            {"run_dir": str(run_dir), "dataset": self.cfg.dataset.name, "workflow": str(self.cfg.workflow)}
        )
        if self.tracker.run_id:  # where later commands (the review) log what belongs to this run
            tracking = {"run_id": self.tracker.run_id, "tracking_uri": self.tracker.tracking_uri}
            (run_dir / "tracking.json").write_text(json.dumps(tracking, indent=2) + "\n")
        for port, value in self._pending:
            self.persist(port, value)
        self._pending.clear()

    def persist(self, port: Port, value: Any) -> None:
        """Write an output that has a file: a table to ``tables/<file>.parquet``, an object to ``<file>.json``."""
        if not self.opened:
            self._pending.append((port, value))
            return
        path = write_port(self._run_dir, port, value)
        if port.schema is not None:
            self.tables[port.name] = path
        else:
            self.files.append(path)

    def _log_outputs(self, error: BaseException | None) -> None:
        self.tracker.log_metrics({k: v for k, v in self.metrics.items() if math.isfinite(v)})
        self.tracker.log_artifacts(self._run_dir / "tables", "tables")
        for path in dict.fromkeys([*self.files, self._run_dir / "config.json"]):
            if path.is_dir():
                self.tracker.log_artifacts(path, path.name)
            elif path.exists():
                self.tracker.log_artifact(path)
        if error is None:
            log.info("outputs in %s", self._run_dir)
            if self.tracker.run_id:
                log.info("MLflow run %s in %s", self.tracker.run_id, self.tracker.tracking_uri)
        if self.log.file is not None:
            self.log.file.flush()
        self.tracker.log_artifact(self._run_dir / "run.log")

    def close(self, error: BaseException | None) -> None:
        """Log metrics and artifacts to MLflow (the run is FAILED if ``error``), close the log."""
        try:
            if self._executor is not None:  # the workers kept alive across streams (adaptive rounds' engines)
                try:
                    self._executor.close()
                except Exception as exc:
                    log.warning("closing the executor's workers: %s", exc)
            if self.opened:
                if error is not None:  # into run.log with its traceback; the caller reports it on the console
                    log.error("run failed: %s", error, exc_info=error, extra=FILE_ONLY)
                try:
                    self._log_outputs(error)
                except Exception as exc:  # the outputs are on disk: a run that has judged does not fail here
                    self.reporting_error = f"{type(exc).__name__}: {str(exc)[:500]}"
                    log.error(
                        "MLflow: the run's results could not be logged (%s); its outputs are in %s",
                        self.reporting_error,
                        self._run_dir,
                    )
        finally:
            exc_info = (type(error), error, error.__traceback__) if error is not None else (None, None, None)
            try:
                self._stack.__exit__(*exc_info)
            finally:
                self.log.close()


def run(cfg: RunConfig, root: Path = PROJECT_ROOT, stop_after: str | None = None) -> RunResult:
    """Run the workflow ``cfg.workflow``; relative paths are resolved against ``root`` (the project folder).

    ``stop_after`` ends after that stage (e.g. ``"shard_contexts"`` to plan a run without judging).
    """
    from pipeline.runtime.jobs import check_job_storage

    check_job_storage(cfg, root)
    cfg = resolve_latest(cfg, root)
    workflow = build(cfg, root)
    ctx = RunContext(cfg, root)
    try:
        values = workflow.run(ctx, persist=ctx.persist, stop_after=stop_after)
    except BaseException as exc:
        ctx.close(exc)
        raise
    ctx.close(None)
    return RunResult(
        run_dir=ctx._run_dir,
        tables=dict(ctx.tables),
        metrics=dict(ctx.metrics),
        summary=values.get("summary", ""),
        mlflow_run_id=ctx.tracker.run_id,
        tracking_uri=ctx.tracker.tracking_uri,
        reporting_error=ctx.reporting_error,
        judge_stats=values.get("judge_stats"),
        values=values,
    )
