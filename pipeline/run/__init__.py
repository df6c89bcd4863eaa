"""The run's context: ``run(RunConfig) -> RunResult``, its folder, its MLflow run, and a finished run's tables.

:mod:`.context` (``run`` and the :class:`.context.RunContext` its stages see), :mod:`.folder` (a new folder or the latest
of the same config), :mod:`.tracking` (MLflow), :mod:`.results` (a finished run's tables for notebooks and scripts).
"""

from pipeline.run.context import RunResult, run

__all__ = ["RunResult", "run"]
