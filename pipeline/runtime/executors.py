"""The executor a run streams its work through (``runtime.executor``): imported by the run, never by a stage; the way
the run reaches Ray (:mod:`pipeline.runtime.ray_data`, whose pool and cluster modules import it)."""

from __future__ import annotations

from pathlib import Path

from pipeline.config.enums import Executor as ExecutorKind
from pipeline.config.run import RuntimeConfig
from pipeline.runtime import Executor


def make_executor(runtime: RuntimeConfig, log_dir: Path | None, verbose: bool) -> Executor:
    """The executor of ``runtime.executor``. ``log_dir``: where workers write their own output (engine logs)
    unless ``verbose`` (then it reaches the console)."""
    if runtime.executor == ExecutorKind.local:
        from pipeline.runtime.local import LocalExecutor

        return LocalExecutor()
    from pipeline.runtime.ray_data import RayDataExecutor

    return RayDataExecutor(runtime, None if verbose else log_dir)
