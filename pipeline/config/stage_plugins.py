"""Stages from outside: a user's installed package registers a stage by the entry point group
``llm_comparative_assessment.stages`` (the Python packaging convention), naming a :class:`StageEntry`; a run takes it
by name (``extra_stages=[name]``), at the end of the segment its entry names (``score``: after the scores are made,
before the report). Its ports are checked with the workflow's (every port it reads written by an earlier stage), its
tables are written to the run folder's ``tables/`` and logged to MLflow with the others, and ``make stages`` lists it.
::

    [project.entry-points."llm_comparative_assessment.stages"]
    my_stage = "my_package:MY_STAGE"

The entry points are loaded once, the first time the registry is read (:func:`stage_plugins`), as every
registry's are (:mod:`pipeline.registry`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.registry import Registry, load

ENTRY_POINTS = "llm_comparative_assessment.stages"


@dataclass(frozen=True)
class StageEntry:
    """A stage from outside: ``build`` is ``module:attr`` of ``f(cfg, root) -> pipeline.stages.base.Stage`` (imported
    when a workflow is composed); ``segment``: the segment whose end it joins."""

    name: str
    build: str
    segment: str
    summary: str = ""

    def builder(self) -> Any:
        """The function making the stage (imported now)."""
        return load(self.build, f"stage {self.name}")


REGISTRY: Registry[StageEntry] = Registry(ENTRY_POINTS, StageEntry, "stage")


def stage_plugins() -> dict[str, StageEntry]:
    """Every registered stage from outside, by name."""
    return REGISTRY.all()


def stage_plugin(name: str) -> StageEntry:
    """The registered stage ``name``; an unknown name lists the valid ones."""
    return REGISTRY.get(name)
