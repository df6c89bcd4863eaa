"""The workflows a run can execute, each a declared list of stages built from the typed config.

Adding a judging mode means writing its stages (:mod:`pipeline.stages`) and a function here; ``run()`` picks
the workflow named by ``cfg.workflow`` and executes its list.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pipeline.config import RunConfig
from pipeline.config import Workflow as WorkflowName
from pipeline.data.source import resolve_path
from pipeline.stages import (
    Correlate,
    JudgePairs,
    LoadInput,
    OpenStore,
    PreparePrompts,
    Reduce,
    Report,
    ResolveJudge,
    Score,
    ShardContexts,
)
from pipeline.workflow import Workflow


def judging_identity(cfg: RunConfig) -> dict:
    """The settings that decide what is judged and how it is asked (the judge's own part is added from the
    resolved judge, dtype included): a run folder is only resumed with the same identity."""
    from dataclasses import asdict

    return {section: asdict(getattr(cfg, section)) for section in ("dataset", "pairs", "prompt")}


def comparative(cfg: RunConfig, root: Path) -> Workflow:
    """Pairwise comparative assessment: every pair judged in both orderings, debiased, scored, reported."""
    cache_dir = resolve_path(cfg.paths.cache_dir, root)
    methods = tuple(cfg.scoring.methods)
    return Workflow(
        "comparative",
        (
            LoadInput(cfg.dataset, cfg.scoring.correlation, root, cache_dir),
            ResolveJudge(cfg.judge, cache_dir),
            PreparePrompts(cfg.prompt),
            OpenStore(judging_identity(cfg)),
            ShardContexts(cfg.pairs, cfg.runtime.max_shards),
            JudgePairs(cfg.pairs, cfg.judge, cfg.runtime.pair_chunk_rows),
            Reduce(cfg.scoring.debias, cfg.pairs.orderings),
            Score(methods, cfg.scoring.debias),
            Correlate(cfg.scoring.correlation),
            Report(cfg.tracking.plots, "poe_gaussian" if "poe_gaussian" in methods else methods[0]),
        ),
    )


WORKFLOWS: dict[WorkflowName, Callable[[RunConfig, Path], Workflow]] = {WorkflowName.comparative: comparative}
