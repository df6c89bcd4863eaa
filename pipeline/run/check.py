"""``make check``: every check a run makes before it spends anything, and the plan of what it would do.

:func:`check` composes the workflow as a run does, then runs its ``input`` and ``prompts`` segments with a
:class:`DryContext` (the run folder planned, never created; no MLflow run; no executor): the data are read and checked,
the judge resolved (the model located, the API key read, the engine's settings checked against the engine), the
prompts settled with the judge's tokenizer, a recorded judge checked against every prompt, a resumed folder's identity
checked. No engine starts and no request is sent. Then it makes the prompts the judge stage would make (the pairs
config's selection, the absolute modes, what the run folder already holds skipped) and counts them, estimates their
tokens (a sample tokenized with the judge's own tokenizer) and, behind an API with prices, their cost.

The generate workflow's candidates are made by its models, so before they exist the plan counts the generation
requests and bounds the comparisons; adaptive rounds judge at most every pair (their budget and stopping rule end
them earlier).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from pipeline import PROJECT_ROOT
from pipeline.config.backends import Trait, backend
from pipeline.config.run import RunConfig
from pipeline.config.workflows import workflow as workflow_entry
from pipeline.contracts.keys import COMPARE, base_template

if TYPE_CHECKING:
    from pipeline.stages.judging import Judge

log = logging.getLogger("pipeline")

# Prompts tokenized to estimate the tokens of them all (chars per token measured on them).
SAMPLE = 256
# Characters per token where the judge has no tokenizer here (a hosted model named only by its served name).
CHARS_PER_TOKEN = 4.0
# Seconds a request takes behind an endpoint, for the plan's estimate of a run's time (stated, not measured).
ENDPOINT_SECONDS = 1.0


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class DryContext:
    """A stage context that plans the run folder and never creates it (:mod:`pipeline.stages.base`)."""

    def __init__(self, run_dir: Path):
        self.run_dir = self.planned_run_dir = run_dir
        self.metrics: dict[str, float] = {}
        self.files: list[Path] = []
        self.sends = False

    @property
    def executor(self) -> Any:
        raise RuntimeError("make check starts nothing: a stage of the check asked for an executor")

    def log_step(self, metrics: dict[str, float], step: int) -> None:
        pass


@dataclass
class JudgePlan:
    name: str
    backend: str
    engine_starts: str  # "1", "2-4", "0 (answers by key)", "0 (behind an endpoint)"
    endpoint: bool


@dataclass
class Plan:
    """What a run of the config would do (module docstring)."""

    workflow: str
    segments: list[tuple[str, list[str]]]
    run_dir: Path
    resumed: bool
    contexts: int = 0
    candidates: int = 0
    judges: list[JudgePlan] = field(default_factory=list)
    prompts: int = (
        0  # to judge by this run (every judge of the run's prompts: the judge's, a juror's the same)
    )
    by_mode: dict[str, int] = field(default_factory=dict)
    stored: int = 0  # already judged in the run folder
    left_out: int = 0  # pairs a recorded judge cannot answer (judge.engine.match=partial)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_measured: bool = True
    cost: float | None = None
    # the judging time estimated on this machine, and how
    seconds: float | None = None
    timing: str = ""
    notes: list[str] = field(default_factory=list)
    # one rendered prompt per mode and template, as the judge reads it
    examples: dict[tuple[str, str], str] = field(default_factory=dict)

    def text(self) -> str:
        judged_by = len(self.judges)
        lines = [
            "check: the config, the data, the judge and its settings hold; nothing was started, sent or spent.",
            f"workflow {self.workflow}: "
            + " -> ".join(f"{name} ({', '.join(stages)})" for name, stages in self.segments),
            f"run folder: {self.run_dir}" + (" (resumed: it holds judgments)" if self.resumed else " (new)"),
        ]
        if self.contexts:
            lines.append(f"data: {self.contexts} contexts, {self.candidates} candidates")
        for judge in self.judges:
            lines.append(f"judge {judge.name} ({judge.backend}): engine starts {judge.engine_starts}")
        modes = ", ".join(f"{n} {mode}" for mode, n in sorted(self.by_mode.items()))
        lines.append(
            f"prompts to judge: {self.prompts}"
            + (f" ({modes})" if modes else "")
            + (f" per judge, {self.prompts * judged_by} in all" if judged_by > 1 else "")
            + f"; {self.stored} already judged in the run folder (skipped)"
            + (f"; {self.left_out} left out (the recorded judge has no verdict)" if self.left_out else "")
        )
        how = (
            "a sample tokenized with the judge's tokenizer"
            if self.tokens_measured
            else f"{CHARS_PER_TOKEN:g} characters a token"
        )
        lines.append(
            f"tokens (estimated from {how}): {self.prompt_tokens:,} prompt, {self.completion_tokens:,} generated"
        )
        if self.cost is not None:
            lines.append(f"cost (estimated, at judge.endpoint's prices): {self.cost:.4f}")
        if self.seconds is not None:
            lines.append(
                f"time (estimated, judging on this machine): about {_duration(self.seconds)} ({self.timing})"
            )
            if self.seconds > 3600:
                lines.append(
                    f"WARNING: this run will take more than an hour here (about {_duration(self.seconds)}): fewer "
                    "contexts (dataset.max_contexts), fewer pairs (pairs=balanced pairs.fraction=...) or a faster judge"
                )
        else:
            lines.append(f"time: not estimated ({self.timing or 'no rate known for this judge here'})")
        lines += self.notes
        for (mode, template), prompt in sorted(self.examples.items()):
            cut = len(prompt) - 1600
            shown = prompt if cut <= 0 else f"{prompt[:900]} [... {cut} characters ...] {prompt[-700:]}"
            lines.append(f"prompt ({mode}, template {template}), as the judge reads it:\n" + _indented(shown))
        return "\n".join(lines)


def _indented(text: str) -> str:
    return "\n".join(f"  | {line}" for line in text.splitlines())


def check(cfg: RunConfig, root: Path = PROJECT_ROOT) -> Plan:
    """Every check a run makes before it spends anything, and the plan (module docstring)."""
    from pipeline.run.folder import plan_run_dir, resolve_latest
    from pipeline.runtime.jobs import check_job_storage
    from pipeline.stages.base import run_stages
    from pipeline.workflows.catalog import build

    check_job_storage(cfg, root)
    cfg = resolve_latest(cfg, root)
    flow = build(cfg, root)
    run_dir = plan_run_dir(cfg, root)
    resumed = any(run_dir.glob("judgments/part-*.parquet")) or any(run_dir.glob("ratings/part-*.parquet"))
    if resumed and not cfg.runtime.resume:
        from pipeline.contracts.errors import ConfigError

        raise ConfigError(
            f"config runtime.resume=false but paths.run_dir={run_dir} holds judgments; set runtime.resume=true to "
            "continue that run, or choose a new paths.run_dir"
        )
    plan = Plan(
        str(cfg.workflow),
        [(s.name, [stage.name for stage in s.stages]) for s in flow.segments],
        run_dir,
        resumed,
    )
    entry = workflow_entry(cfg.workflow)
    ctx = DryContext(run_dir)
    values: dict[str, Any] = {}
    if entry.generated:
        first = flow.segment("input").stages[0]  # the tasks, read and checked
        run_stages((first,), ctx, values)
        _generated(cfg, values["tasks"], plan)
        run_stages((flow.stage("resolve_judge"),), ctx, values)
    else:
        run_stages(flow.segment("input").stages + flow.segment("prompts").stages, ctx, values)
        _judged(cfg, values, plan, rounds=entry.rounds)
        from pipeline.stages.judging import Judge
        from pipeline.stages.rounds import Rounds

        last = flow.segment("judge").stages[-1]  # the judge stage, or the rounds' that it judges with
        stage = last.judge_stage if isinstance(last, Rounds) else last
        assert isinstance(stage, Judge)
        _engine_mode(values["judge"], plan, stage)
    plan.judges = _judges(cfg, values, plan)
    _cost(cfg, plan)
    return plan


def _judged(cfg: RunConfig, values: dict[str, Any], plan: Plan, rounds: bool) -> None:
    """The prompts the judge stage would make, counted, and their tokens estimated."""
    from pipeline.prompts.pairs import generate_prompts
    from pipeline.stages.judging import ShardContexts

    candidates = values["candidates"]
    plan.contexts = len(pc.unique(candidates.column("context_id")))
    plan.candidates = candidates.num_rows
    judged, left_out = values["judged"], values.get("left_out")
    plan.stored = judged.num_rows
    plan.left_out = left_out.num_rows if left_out is not None else 0
    pairs = _all_pairs(cfg) if rounds else cfg.pairs
    shard = ShardContexts(pairs, cfg.runtime.max_shards)
    contexts = shard.run(
        DryContext(plan.run_dir),
        candidates=candidates,
        prompt_plan=values["prompt_plan"],
        judged=judged,
        left_out=left_out if left_out is not None else judged.slice(0, 0),
    )["contexts"]
    texts: list[str] = []
    for chunk in generate_prompts(contexts, pairs, values["prompt_plan"]):
        modes = chunk.column("mode").to_pylist()
        for mode in modes:
            plan.by_mode[mode] = plan.by_mode.get(mode, 0) + 1
        prompts = chunk.column("prompt").to_pylist()
        texts += prompts
        for mode, template, prompt in zip(
            modes, chunk.column("template_id").to_pylist(), prompts, strict=True
        ):
            plan.examples.setdefault((mode, base_template(template)), prompt)
    warning = values["dataset"].words.warning()
    if warning:
        plan.notes.append(warning)
    plan.prompts = len(texts)
    if rounds:
        plan.notes.append(
            "adaptive rounds: the prompts above are every pair's, an upper bound; the rounds' budget "
            "(adaptive.budget) and stopping rule end them earlier"
        )
    per_token = _chars_per_token(values["judge"], texts)
    plan.tokens_measured = per_token is not None
    chars = sum(len(t) for t in texts)
    plan.prompt_tokens = round(chars / (per_token or CHARS_PER_TOKEN))
    plan.completion_tokens = _generated_tokens(cfg, plan.by_mode)


def _engine_mode(judge: Any, plan: Plan, stage: Judge) -> None:
    """The engine mode the judge stage chooses for these prompts (``enforce_eager=auto``: its own
    :meth:`~pipeline.stages.judging.Judge.mode`), and why; the time they take from this machine's measurements
    (``make engine-modes``) where it has them, else the backend's stated rate, or one second a request behind an
    endpoint at its concurrency."""
    entry = backend(judge.backend)
    choice = stage.mode(judge, plan.prompts) if entry.engine else None
    if choice is not None:
        plan.notes.append(f"engine mode (judge.engine.enforce_eager=auto): {choice.reason}")
        if choice.seconds is not None:
            plan.seconds, plan.timing = (
                choice.seconds,
                "this machine's measurements of the engine (make engine-modes)",
            )
            return
    if not entry.engine or not plan.prompts:
        plan.seconds, plan.timing = (
            0.0,
            "nothing to judge" if not plan.prompts else "answered by key, no engine",
        )
    elif Trait.ENDPOINT in entry.traits:
        at_once = max(1, judge.endpoint.settings.concurrency) if judge.endpoint is not None else 1
        plan.seconds = plan.prompts / at_once * ENDPOINT_SECONDS
        plan.timing = f"{ENDPOINT_SECONDS:g} s a request, {at_once} at once (judge.endpoint.concurrency); a batch job takes up to a day"
    elif entry.rate is not None:
        start, rate, where = entry.rate
        plan.seconds = start + plan.prompts / rate
        plan.timing = f"{start:g} s start and {rate:g} prompts/s as stated for {entry.name} ({where}); `make engine-modes` measures this machine"


def _all_pairs(cfg: RunConfig) -> Any:
    import dataclasses

    from pipeline.config.enums import Strategy

    return dataclasses.replace(cfg.pairs, strategy=Strategy.all_pairs, k=None, fraction=None)


def _chars_per_token(judge: Any, texts: list[str]) -> float | None:
    """Characters per token on a sample of ``texts``, with the judge's own tokenizer (None: it has none here)."""
    if not texts:
        return None
    from pipeline.judge.tokenizers import is_exact, load_tokenizer

    try:
        tokenizer = load_tokenizer(judge, ask_server=False)
    except Exception as exc:  # a judge answering by key has no model to read a tokenizer from
        log.debug("no tokenizer for the estimate: %s", exc)
        return None
    if not is_exact(tokenizer):
        return None
    step = max(1, len(texts) // SAMPLE)
    sample = texts[::step][:SAMPLE]
    tokens = sum(len(tokenizer.encode(t, add_special_tokens=False)) for t in sample)
    return sum(len(t) for t in sample) / max(tokens, 1)


def _generated_tokens(cfg: RunConfig, by_mode: dict[str, int]) -> int:
    """Tokens the judge generates: one per comparison and read mode (the verdict's first token), the reasoning
    budget where it reasons first, and the generated modes' max_tokens for each sample."""
    from pipeline.prompts.absolute import GENERATED

    reasoning = cfg.judge.reasoning.max_tokens if cfg.judge.reasoning.enabled else 0
    total = 0
    for mode, n in by_mode.items():
        if mode in GENERATED:
            total += n * cfg.absolute.max_tokens * cfg.absolute.samples
        else:
            total += n * (1 + reasoning)
    return total


def _generated(cfg: RunConfig, tasks: pa.Table, plan: Plan) -> None:
    """workflow=generate before its candidates exist: the generation requests, and the comparisons bounded."""
    n_models, n_tasks = len(cfg.generate.models), tasks.num_rows
    criteria = max(len(cfg.criteria), 1)
    templates = max(len(cfg.prompt.templates), 1)
    plan.contexts, plan.candidates = n_tasks, n_tasks * n_models
    plan.prompts = n_tasks * n_models * max(n_models - 1, 0) * criteria * templates
    plan.by_mode = {COMPARE: plan.prompts}
    plan.completion_tokens = plan.prompts
    plan.tokens_measured = False
    chars = sum(len(t) for t in tasks.column("task").to_pylist())
    plan.prompt_tokens = (
        round(chars / CHARS_PER_TOKEN) * n_models * max(n_models - 1, 0) * criteria * templates
    )
    plan.notes.append(
        f"generate: {n_tasks * n_models} generation requests first ({n_tasks} inputs x {n_models} models, up to "
        f"{max((m.max_tokens for m in cfg.generate.models), default=0)} tokens each); the comparisons above are at most every pair of their outputs in "
        "both orderings, their tokens counted on the inputs alone (the outputs are not written yet)"
    )


def _judges(cfg: RunConfig, values: dict[str, Any], plan: Plan) -> list[JudgePlan]:
    configs = [cfg.judge, *cfg.jury.judges]
    names = list(values.get("judges") or ())
    out = []
    for k, judge in enumerate(configs):
        entry = backend(judge.backend)
        least, most = judge.actors
        if Trait.ENDPOINT in entry.traits:
            starts = "0 (behind an endpoint: requests from the driver)"
        elif not entry.engine:
            starts = "0 (answers by key)"
        elif not plan.prompts and not workflow_entry(cfg.workflow).generated:
            starts = "0 (nothing left to judge: the run folder holds every verdict)"
        else:
            starts = str(least) if least == most else f"{least}-{most} (as the cluster has room)"
        name = names[k] if k < len(names) else (judge.name or judge.model)
        out.append(JudgePlan(name, judge.backend, starts, Trait.ENDPOINT in entry.traits))
    return out


def _cost(cfg: RunConfig, plan: Plan) -> None:
    api = cfg.judge.endpoint
    if Trait.ENDPOINT not in backend(cfg.judge.backend).traits or (
        api.price_input is None and api.price_output is None
    ):
        return
    money = (
        plan.prompt_tokens * (api.price_input or 0.0) + plan.completion_tokens * (api.price_output or 0.0)
    ) / 1e6
    plan.cost = money * (api.batch_discount if api.batch else 1.0)
    if not math.isfinite(plan.cost):
        plan.cost = None


HELP = """usage: make check ARGS="<the run's overrides>"   (python -m pipeline.run.check [overrides])

Every check a run makes before it spends anything, and its plan: the config, the data, the judge (model, key,
engine settings), the prompts settled with the judge's tokenizer, the run folder; then the stages, the prompts to
judge (and those already stored), the engine starts, the tokens, the cost at judge.endpoint's prices and the time on
this machine. Nothing is started, sent or spent: a judge behind an API without a tokenizer here has its label words
checked by two test requests when the run starts. Overrides are the run's (e.g. dataset=summeval
dataset.max_contexts=3); docs/configuration.md lists the settings."""


def main(argv: list[str] | None = None) -> int:
    """``python -m pipeline.run.check [overrides]``: the check and the plan, or the problem without a traceback."""
    import sys

    from pipeline.config.hydra import compose, config_error_message
    from pipeline.contracts.errors import UserError

    args = list(sys.argv[1:] if argv is None else argv)
    if {"-h", "--help", "help"} & set(args):
        print(HELP)
        return 0
    try:
        from hydra.errors import HydraException
        from omegaconf.errors import OmegaConfBaseException

        try:
            cfg = compose(args)
            plan = check(cfg)
        except (HydraException, OmegaConfBaseException) as exc:
            raise UserError(f"config error: {config_error_message(exc)}") from exc
    except UserError as exc:
        print(f"check failed: {exc}", file=sys.stderr)
        return 2
    print(plan.text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
