"""The run's context: ``run(RunConfig) -> RunResult`` (:mod:`pipeline.run.context`), its folder
(:mod:`pipeline.run.folder`), its MLflow run (:mod:`pipeline.run.tracking`), and a finished run's tables opened
for notebooks and scripts (:mod:`pipeline.run.results`)."""

from pipeline.run.context import RunResult, run

__all__ = ["RunResult", "run"]
