"""The workflows a run can execute, each a declared list of stages built from the typed config.

Adding a judging mode means writing its stages (:mod:`pipeline.stages`) and a function here; ``run()`` picks
the workflow named by ``cfg.workflow`` and executes its list.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

from pipeline.config.derived import (
    drawn_method,
    judgement_store,
    judging_identity,
    leaderboard_methods,
    rating_identity,
    reasons_per_group,
    resolve_path,
)
from pipeline.config.enums import Workflow as WorkflowName
from pipeline.config.run import RunConfig
from pipeline.methods import poe_logit
from pipeline.stages.generation import Generate, LoadTasks, MakeCandidates
from pipeline.stages.inputs import LoadInput, OpenStore, PreparePrompts, ResolveJudge
from pipeline.stages.judging import Judge, ShardContexts
from pipeline.stages.reasons import Reasons
from pipeline.stages.reporting import Report, ReportRounds
from pipeline.stages.scoring import Combine, Correlate, Cost, Leaderboard, Rate, Reduce, Score
from pipeline.workflows.core import Workflow

log = logging.getLogger("pipeline")


def assessment(cfg: RunConfig, root: Path) -> Workflow:
    """Comparative assessment (every pair judged in both orderings, debiased, scored) and, with
    ``absolute.modes``, absolute assessment of every candidate beside it, combined with it, correlated and costed.
    ``workflow=absolute`` runs the same stages with no comparisons."""
    cache_dir = resolve_path(cfg.paths.cache_dir, root)
    methods = tuple(cfg.scoring.methods)
    comparative = cfg.workflow != WorkflowName.absolute
    if comparative:
        plot_method = drawn_method(methods)
    else:
        plot_method = str(cfg.absolute.modes[0])
    return Workflow(
        str(cfg.workflow),
        (
            LoadInput(cfg.dataset, cfg.scoring.correlation, root, cache_dir),
            ResolveJudge(cfg.judge, cache_dir),
            PreparePrompts(cfg.prompt, cfg.absolute, comparative, dict(cfg.criteria_options)),
            OpenStore(judging_identity(cfg), rating_identity(cfg)),
            ShardContexts(cfg.pairs, cfg.runtime.max_shards),
            Judge(
                cfg.pairs,
                cfg.judge,
                cfg.runtime.pair_chunk_rows,
                cfg.runtime.max_engine_restarts,
                judgement_store(cfg, root, cache_dir),
            ),
            Reduce(cfg.scoring.debias, cfg.pairs.orderings),
            Reasons(
                reasons_per_group(cfg),
                tuple(str(s) for s in cfg.reasons.sample),
                cfg.reasons.max_tokens,
                cfg.reasons.seed,
                cfg.judge,
            ),
            Score(methods, cfg.scoring.debias),
            Rate(),
            Combine(cfg.scoring.debias, cfg.absolute.combine_weight, cfg.absolute.combine),
            Leaderboard(
                tuple(leaderboard_methods(cfg)),
                cfg.leaderboard.rounds,
                cfg.leaderboard.level,
                cfg.leaderboard.seed,
            ),
            Correlate(cfg.scoring.correlation),
            Cost(),
            Report(
                cfg.tracking.plots,
                plot_method,
                cfg.leaderboard.level,
                full_leaderboard=cfg.workflow == WorkflowName.generate,
            ),
        ),
    )


def generate(cfg: RunConfig, root: Path) -> Workflow:
    """Generate, then evaluate: every generator model answers every task input, the outputs of each input are
    compared (both orderings, debiased) against each criterion, and the models ranked with intervals."""
    from dataclasses import asdict

    cache_dir = resolve_path(cfg.paths.cache_dir, root)
    judged = assessment(cfg, root).stages
    generation_identity = {
        "task": cfg.generate.task,
        "inputs": cfg.generate.inputs,
        "id_field": cfg.generate.id_field,
    }
    identity = judging_identity(cfg)
    identity["dataset"] = {"generate": asdict(cfg.generate), "criteria": dict(cfg.criteria)}
    evaluate = [s for s in judged if s.name not in ("load_input", "open_store")]
    open_store = OpenStore(identity, {**rating_identity(cfg), "dataset": identity["dataset"]})
    at = [s.name for s in evaluate].index("prepare_prompts") + 1
    return Workflow(
        "generate",
        (
            LoadTasks(cfg.generate, root, cache_dir),
            Generate(cfg.generate, cfg.judge, cache_dir, generation_identity),
            MakeCandidates(cfg.generate, dict(cfg.criteria)),
            *evaluate[:at],
            open_store,
            *evaluate[at:],
        ),
    )


def adaptive(cfg: RunConfig, root: Path) -> Workflow:
    """Adaptive rounds: each context (a large pool) ranked by rounds of fit, select and judge (both orderings)
    until its budget is spent or its ranking has settled; then scored, correlated and reported as a comparative
    run (:mod:`pipeline.adaptive`)."""
    from pipeline.config.enums import RoundLink
    from pipeline.stages.rounds import Rounds

    if cfg.adaptive.link == RoundLink.logit and "poe_logit" not in cfg.scoring.methods:
        log.warning(
            "the rounds fit the capped log-odds, but scoring.methods=%s has no poe_logit: the report ranks by %s; "
            "add poe_logit, the rounds' model (the summeval_pool preset lists it first)",
            list(cfg.scoring.methods),
            drawn_method(cfg.scoring.methods),
        )
    stages = list(assessment(cfg, root).stages)
    names = [s.name for s in stages]
    # poe_logit scores with the rounds' settings, so that the report ranks by the model the rounds fitted
    a = cfg.adaptive
    logit = poe_logit.Settings(a.logit_clip, a.robust, a.censor, a.ridge, a.drop_contradicted)
    stages[names.index("score")] = dataclasses.replace(stages[names.index("score")], logit=logit)
    judge = stages[names.index("judge")]
    rounds = Rounds(cfg.adaptive, judge)  # type: ignore[arg-type]
    report = stages[names.index("report")]
    stages.append(ReportRounds(cfg.tracking.plots, report.plot_method))  # type: ignore[attr-defined]
    at = names.index("shard_contexts")
    stages[at : names.index("judge") + 1] = [rounds]
    return Workflow("adaptive", tuple(stages))


WORKFLOWS: dict[WorkflowName, Callable[[RunConfig, Path], Workflow]] = {
    WorkflowName.adaptive: adaptive,
    WorkflowName.comparative: assessment,
    WorkflowName.absolute: assessment,
    WorkflowName.generate: generate,
}
