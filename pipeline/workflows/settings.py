"""What the stages of a workflow are built with, derived from the config in this one module where the workflows are
composed (:mod:`pipeline.workflows.segments`, :mod:`pipeline.workflows.catalog`): the identities a run folder is
resumed with, each judge's templates, the reasons' sample, the leaderboard's and the report's methods, the judgement
store, the engine modes' record, the cache folder, the judges' own generators. Bound when a stage is built; no stage
reads the config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path

from pipeline.config.assessment import PromptConfig
from pipeline.config.backends import Trait, backend, generator_backend
from pipeline.config.derived import judge_label, resolve_path
from pipeline.config.enums import Executor
from pipeline.config.judging import JudgeConfig
from pipeline.config.keys import used
from pipeline.config.run import RunConfig
from pipeline.config.workflows import workflow
from pipeline.judge.vllm.mode import RECORD as ENGINE_MODES
from pipeline.judge.vllm.mode import ModeRecord
from pipeline.methods.scorers.registry import ranked, scorers
from pipeline.scoring.leaderboard import Board


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


def judging_identity(cfg: RunConfig, judge: JudgeConfig | None = None) -> dict:
    """The settings that decide what is compared and how it is asked (the judge's own part is added from the
    resolved judge, dtype included): a run folder's comparisons are only resumed with the same identity. ``judge``:
    a juror of the jury (default: ``cfg.judge``), whose templates and reasoning are its own."""
    judge = judge or cfg.judge
    identity = {section: asdict(getattr(cfg, section)) for section in ("dataset", "pairs")}
    identity["prompt"] = asdict(judge_templates(cfg.prompt, judge))
    return identity | reasoning_identity(judge)


def reasoning_identity(judge: JudgeConfig) -> dict:
    """judge.reasoning when it is on (a judgment read after reasoning is not one read without); nothing when off,
    so that the identity of runs without reasoning is what it was before the setting existed."""
    return {"reasoning": asdict(judge.reasoning)} if judge.reasoning.enabled else {}


def rating_identity(cfg: RunConfig) -> dict:
    """The settings that decide what is rated and how (absolute modes with the templates they run, sampling,
    read words, and the prompt frame); the combination settings are not part of it."""
    from dataclasses import asdict

    absolute = asdict(cfg.absolute)
    used = {m: absolute["templates"].get(str(m), []) for m in cfg.absolute.modes}
    absolute["templates"] = used
    absolute["library"] = {
        t: absolute["library"][t] for ids in used.values() for t in ids if t in absolute["library"]
    }
    for key in ("combine", "combine_weight"):
        absolute.pop(key)
    prompt = {
        k: str(v)
        for k, v in asdict(cfg.prompt).items()
        if k in ("chat_template", "system_prompt", "too_long")
    }
    options = {name: [asdict(o) for o in opts] for name, opts in cfg.criteria_options.items()}
    return {
        "dataset": asdict(cfg.dataset),
        "absolute": absolute,
        "prompt": prompt,
        "criteria_options": options,
    } | reasoning_identity(cfg.judge)


def judge_templates(prompt: PromptConfig, judge: JudgeConfig) -> PromptConfig:
    """``prompt`` with the comparative templates ``judge`` answers (``judge.templates``; None: every one)."""
    if judge.templates is None:
        return prompt
    return replace(prompt, templates=[t for t in prompt.templates if t.id in judge.templates])


def cache_dir(cfg: RunConfig, root: Path) -> Path:
    return resolve_path(cfg.paths.cache_dir, root)


def mode_record(cfg: RunConfig, root: Path) -> ModeRecord:
    """This machine's record of the engine's modes, for the place the run's engine runs: a Ray worker for the Ray
    executor, this process otherwise (what ``make engine-modes`` measures and writes)."""
    return ModeRecord(cache_dir(cfg, root) / ENGINE_MODES, in_actor=cfg.runtime.executor == Executor.ray)


def engine_modes(cfg: RunConfig, root: Path) -> ModeRecord | None:
    """The record the judge stage reads for ``enforce_eager=auto`` (:func:`mode_record`); None: a workflow whose
    generators share the judge's engine keeps their mode (vLLM's default for the device)."""
    return None if workflow(cfg.workflow).generated else mode_record(cfg, root)


def leaderboard_board(cfg: RunConfig) -> Board:
    """How the run's leaderboard is made (``leaderboard``: bootstrap, games, controls)."""
    board = cfg.leaderboard
    return Board(
        board.rounds,
        board.level,
        board.seed,
        str(board.games),
        tuple(str(c) for c in board.control),
        board.baseline,
    )


def own_systems(cfg: RunConfig) -> dict[str, tuple[str, ...]]:
    """Per judge (the run's and the jury's), the generators that run on its own model in-process: where a judge
    compares its own outputs with others', its card measures its self-preference."""
    out = {}
    for judge in [cfg.judge, *cfg.jury.judges]:
        own = tuple(
            g.name
            for g in cfg.generate.models
            if g.model == judge.model and Trait.ENDPOINT not in generator_backend(g, cfg.judge).traits
        )
        if own and workflow(cfg.workflow).generated:
            out[judge_label(judge)] = own
    return out


def ppi_board(cfg: RunConfig) -> bool:
    """Whether the run ranks the models with people's labels (``trust.ppi``, where trust runs at all)."""
    return used(cfg, "trust") and cfg.trust.ppi
