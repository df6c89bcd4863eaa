"""What the stages of a workflow are built with, derived from the config where the workflows are composed
(:mod:`pipeline.workflows.segments`, :mod:`pipeline.workflows.catalog`): the reasons' sample, the leaderboard's and the
report's methods, the judgement store. Bound when a stage is built; no stage reads the config.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pipeline.config.backends import Trait, backend
from pipeline.config.derived import resolve_path
from pipeline.config.judging import JudgeConfig
from pipeline.config.run import RunConfig
from pipeline.config.workflows import workflow
from pipeline.methods.scorers.registry import ranked, scorers


def reasons_per_group(cfg: RunConfig) -> int:
    """How many comparisons per attribute and template get the judge's reasons (``reasons.n``, or the workflow's
    default where the judge's backend can generate them)."""
    if cfg.reasons.n is not None:
        return cfg.reasons.n
    return workflow(cfg.workflow).reasons if Trait.GENERATION in backend(cfg.judge.backend).traits else 0


def leaderboard_methods(cfg: RunConfig) -> list[str]:
    """The methods whose mean scores the leaderboard reports (``leaderboard.methods``, or its default)."""
    if cfg.leaderboard.methods is not None:
        return list(cfg.leaderboard.methods)
    chosen = set(cfg.scoring.methods)
    comparative = [name for name, entry in scorers().items() if entry.leaderboard and name in chosen]
    return comparative + [str(m) for m in cfg.absolute.modes]


def judgement_store_path(
    cfg: RunConfig, root: Path, cache_dir: Path, judge: JudgeConfig | None = None
) -> Path | None:
    """Where an in-process judge (``judge``, default ``cfg.judge``) keeps its answers across runs
    (``judge.store``); None: off, a judge behind an API (its reply cache does this), or one that answers by key
    (its answers are what it holds)."""
    judge = judge or cfg.judge
    entry = backend(judge.backend)
    if not judge.store or Trait.ENDPOINT in entry.traits or entry.answers:
        return None
    return resolve_path(judge.store_path, root) if judge.store_path else cache_dir / "judgements.sqlite"


def drawn_method(methods: Sequence[str]) -> str:
    """The comparative method the report draws against the human scores: the one of ``methods`` registered first in
    ``report_rank`` (the capped log-odds, then PoE-Gaussian), else the first of ``methods``."""
    drawn = ranked([m for m in methods if m in scorers()], lambda entry: entry.report_rank)
    return drawn[0] if drawn else methods[0]
