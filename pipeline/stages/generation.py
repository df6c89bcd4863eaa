"""The stages of generate-then-evaluate before the judging: task inputs, every generator's outputs, candidates."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.config.backends import Trait, backend
from pipeline.config.judging import GenerateConfig, JudgeConfig
from pipeline.contracts.frame import PromptFrame
from pipeline.contracts.schemas import GENERATIONS
from pipeline.data.records import InputReport
from pipeline.data.source import DatasetInfo
from pipeline.judge.generators import (
    Generator,
    describe_generators,
    engine_groups,
    generator_identity,
    generator_judge_config,
    generator_request,
)
from pipeline.judge.hosting.worker import JudgeWorker, Task
from pipeline.judge.models import resolve_judge
from pipeline.judge.stored import closing_front, on_the_driver
from pipeline.judge.tokenizers import load_tokenizer
from pipeline.prompts.generation import generation_prompts, generator_frame
from pipeline.runtime import MapStep
from pipeline.runtime.progress import Progress
from pipeline.scoring.responses import generation_rows
from pipeline.stages import ports
from pipeline.stages.accounting import (
    ENGINE_EVENTS,
    ApiUsage,
    column_total,
    raise_failed,
    report_generator_usage,
    report_interruptions,
)
from pipeline.stages.base import Stage, StageContext
from pipeline.stages.judging import engine_step
from pipeline.storage.events import read_events
from pipeline.storage.parts import PartStore

log = logging.getLogger("pipeline")


@dataclass(frozen=True)
class LoadTasks(Stage):
    """Read the task records and fill the task prompt from each; refuse every record missing a field at once."""

    generate: GenerateConfig
    root: Path
    cache_dir: Path

    name = "load_tasks"
    writes = (ports.TASKS,)

    def run(self, ctx: StageContext) -> dict[str, Any]:
        from pipeline.config.derived import resolve_path
        from pipeline.data.tasks import load_tasks, write_demo_tasks

        if self.generate.inputs is None:
            path = write_demo_tasks(self.cache_dir / "demo")
        else:
            path = resolve_path(self.generate.inputs, self.root)
        loaded = load_tasks(self.generate, path)
        log.info(
            "tasks %s: %d input(s), fields %s", path, loaded.tasks.num_rows, ", ".join(loaded.fields) or "-"
        )
        return {"tasks": loaded.tasks}


@dataclass(frozen=True)
class Generate(Stage):
    """Every generator model answers every task input: generators that share a model share one engine (one
    actor pool, run to completion before the next); outputs stream to Parquet in the run folder, resumable."""

    generate: GenerateConfig
    judge: JudgeConfig
    cache_dir: Path
    identity: dict[str, Any]
    # The judgement store (pipeline.storage.judgements) in front of in-process generators; None: off.
    judgement_store: Path | None = None
    # The engines stay up after the stage (the judge's model among the generators': the judge stage uses its engine).
    keep_workers: bool = False

    name = "generate"
    reads = (ports.TASKS,)
    writes = (ports.GENERATIONS, ports.GENERATORS)

    def run(self, ctx: StageContext, *, tasks: pa.Table) -> dict[str, Any]:
        generators = self._generators()
        identities = {g.name: {**self.identity, "generator": generator_identity(g)} for g in generators}
        # every generator's earlier outputs checked before anything is generated (or the run folder opened)
        for g in generators:
            PartStore(
                ctx.planned_run_dir / "generations" / g.name, identities[g.name], GENERATIONS
            ).check_identity()
        done = Generated()
        events = ctx.run_dir / "logs" / ENGINE_EVENTS
        seen_events = len(read_events(events))
        for group in engine_groups(generators):
            parts = {
                g.name: PartStore(ctx.run_dir / "generations" / g.name, identities[g.name], GENERATIONS)
                for g in group
            }
            self._generate(ctx, group, tasks, parts, done)
        report_interruptions(
            ctx, events, seen_events, stage="generate"
        )  # nodes and workers lost, outputs redone
        report_generator_usage(done.usage, self.generate, ctx.metrics)
        if done.failed:
            raise_failed(pa.concat_tables(done.failed), ctx.run_dir, what="generated")
        generations = pa.concat_tables(done.parts) if done.parts else GENERATIONS.empty_table()
        expected = tasks.num_rows * len(generators)
        if generations.num_rows != expected:
            raise RuntimeError(f"the generate stage has {generations.num_rows} outputs, expected {expected}")
        self._report(ctx, generations, done)
        return {"generations": generations, "generators": describe_generators(generators)}

    def _generators(self) -> list[Generator]:
        """The generators as settled on the driver: each one's engine, request and system prompt."""
        out = []
        for cfg in self.generate.models:
            key = f"generate.models[{cfg.name}].model"
            spec = resolve_judge(generator_judge_config(cfg, self.judge), self.cache_dir, key)
            out.append(Generator(cfg.name, spec, generator_request(cfg), cfg.system_prompt))
        return out

    def _generate(
        self,
        ctx: StageContext,
        group: Sequence[Generator],
        tasks: pa.Table,
        parts: dict[str, PartStore],
        done: Generated,
    ) -> None:
        """One engine's generators: the outputs the folder lacks generated and stored as they arrive; then the
        folder's outputs of the task inputs kept."""
        spec = group[0].spec
        tokenizer = load_tokenizer(spec)
        frames = {g.name: generator_frame(tokenizer, g.spec.name, g.system_prompt) for g in group}
        held = {name: set(own.read().column("input_id").to_pylist()) for name, own in parts.items()}
        prompts = generation_prompts(frames, tasks, held)
        log.info(
            "generating %d output(s) with %s (%s) for %s",
            prompts.num_rows,
            spec.model,
            spec.dtype,
            ", ".join(g.name for g in group),
        )
        done.generated += prompts.num_rows
        if prompts.num_rows:
            size = self.generate.batch_size
            blocks = [prompts.slice(k, size) for k in range(0, prompts.num_rows, size)]
            step = generation_step(
                group,
                frames,
                size,
                self.judgement_store,
                events=ctx.run_dir / "logs" / ENGINE_EVENTS,
                keep_alive=self.keep_workers,
            )
            progress = Progress(prompts.num_rows, verb="generated", noun="outputs")
            with closing_front(step), closing(ctx.executor.stream(blocks, [step])) as batches:
                for batch in batches:
                    if Trait.ENDPOINT in backend(spec.backend).traits:
                        done.usage.setdefault(group[0].name, ApiUsage()).add(batch)
                    done.reused += pc.sum(pc.equal(batch.column("source"), "store")).as_py() or 0
                    is_failed = pc.is_valid(batch.column("error"))
                    if pc.any(is_failed).as_py():  # requests that kept failing: not outputs, reported after
                        done.failed.append(batch.filter(is_failed))
                        batch = batch.filter(pc.invert(is_failed))
                    for (model,), part in pl.from_arrow(generation_rows(batch)).group_by(
                        ["model"], maintain_order=True
                    ):
                        parts[model].add(part.to_arrow())
                    progress.update(
                        batch.num_rows,
                        column_total(batch, "prompt_tokens"),
                        column_total(batch, "cached_tokens"),
                    )
        wanted = tasks.column("input_id")
        for own in parts.values():
            own.flush()
            # outputs of inputs no longer in the task set (e.g. a lower max_inputs) stay out
            kept = own.read()
            done.parts.append(kept.filter(pc.is_in(kept.column("input_id"), value_set=wanted)))

    def _report(self, ctx: StageContext, generations: pa.Table, done: Generated) -> None:
        ctx.metrics["generate/outputs"] = float(generations.num_rows)
        ctx.metrics["generate/generated_now"] = float(done.generated)
        ctx.metrics["generate/reused_outputs"] = float(done.reused)
        ctx.metrics["generate/output_tokens"] = float(column_total(generations, "output_tokens"))
        if done.reused:
            log.info(
                "%d of the %d output(s) were answered from the judgement store %s (the same prompt generated "
                "before)",
                done.reused,
                done.generated,
                self.judgement_store,
            )


@dataclass
class Generated:
    """What the generate stage gathered over its engines: outputs, failures, API usage and counts."""

    parts: list[pa.Table] = field(default_factory=list)
    failed: list[pa.Table] = field(default_factory=list)
    # generators behind an API, by their engine group's first member: requests, cache, billed tokens
    usage: dict[str, ApiUsage] = field(default_factory=dict)
    generated: int = 0
    reused: int = 0


@dataclass(frozen=True)
class MakeCandidates(Stage):
    """Turn the outputs into candidates (context = the task prompt, system = the model), empty and cut-off outputs
    handled as configured and counted; the criteria become the attributes judged."""

    generate: GenerateConfig
    criteria: dict[str, str]

    name = "make_candidates"
    reads = (ports.TASKS, ports.GENERATIONS)
    writes = (ports.CANDIDATES, ports.HUMAN_SCORES, ports.INPUT_REPORT, ports.DATASET)

    def run(self, ctx: StageContext, *, tasks: pa.Table, generations: pa.Table) -> dict[str, Any]:
        from pipeline.contracts.schemas import HUMAN_SCORES
        from pipeline.data.tasks import candidates_from_generations
        from pipeline.data.words import PromptWords

        candidates, report = candidates_from_generations(generations, tasks, self.generate)
        for key, value in report.counts().items():
            ctx.metrics[f"generate/{key}"] = float(value)
        if report.empty or report.cut_off:
            log.warning(
                "outputs: %d empty (%s), %d cut off at max_tokens (%s); %d dropped, %d replaced by %r",
                len(report.empty),
                self.generate.empty_output,
                len(report.cut_off),
                self.generate.cut_off_output,
                len(report.dropped),
                len(report.placeholder),
                self.generate.placeholder,
            )
        attributes = tuple(self.criteria)
        words = PromptWords("task", "output", dict.fromkeys(attributes, "good"), dict(self.criteria))
        input_report = InputReport(
            n_contexts=len(set(candidates.column("context_id").to_pylist())),
            n_candidates=candidates.num_rows,
            empty_text_replaced=list(report.placeholder),
            empty_text_dropped=list(report.dropped),
            attributes_without_scores=list(attributes),
        )
        info = DatasetInfo("generate", self.generate.inputs or "demo tasks", attributes, words)
        return {
            "candidates": candidates,
            "human_scores": HUMAN_SCORES.empty_table(),
            "input_report": input_report,
            "dataset": info,
        }


def generation_step(
    group: Sequence[Generator],
    frames: Mapping[str, PromptFrame],
    batch_size: int,
    judgement_store: Path | None = None,
    worker: type | None = None,
    events: Path | None = None,
    keep_alive: bool = False,
) -> MapStep:
    """The streamed step of one engine: an actor pool of the judge worker answering every generator's prompts
    with its own request and frame (the judge's actor resources), behind the ``judgement_store`` for an
    in-process engine; ``keep_alive``: its workers stay for the next stage of the same engine (the judge's)."""
    spec = group[0].spec
    task = Task(spec, {g.name: g.request for g in group}, frames[group[0].name], dict(frames))
    front = on_the_driver(task, judgement_store)
    return engine_step("generate", spec, task, front, events, keep_alive, worker or JudgeWorker, batch_size)
