"""The judge's reasons for a sample of comparisons."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline.config.enums import ReasonSample
from pipeline.contracts.engine import Request
from pipeline.contracts.schemas import REASONS
from pipeline.contracts.stats import JudgeStats
from pipeline.judge.hosting.worker import Task
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.stored import closing_front, on_the_driver
from pipeline.judge.tokenizers import load_tokenizer
from pipeline.prompts.plan import PromptPlan
from pipeline.prompts.reasons import REASON, choose, reason_prompts
from pipeline.stages import ports
from pipeline.stages.accounting import ENGINE_EVENTS
from pipeline.stages.base import Stage, StageContext
from pipeline.stages.judging import engine_step

log = logging.getLogger("pipeline")


@dataclass(frozen=True)
class Reasons(Stage):
    """Ask the judge why, for a sample of comparisons (orderings that disagree, the closest calls, random): a
    short explanation generated after the decision and stored beside it, never used to change a score. In the
    workflow where the run asks for reasons (``reasons.n``, or the workflow's default)."""

    n: int
    sample: tuple[str, ...]
    max_tokens: int
    seed: int
    # The judgement store (pipeline.storage.judgements) in front of an in-process judge; None: off.
    judgement_store: Path | None = None

    name = "reasons"
    reads = (ports.COMPARISONS, ports.CANDIDATES, ports.PROMPT_PLAN, ports.JUDGE, ports.JUDGE_STATS)
    writes = (ports.REASONS,)

    def run(
        self,
        ctx: StageContext,
        *,
        comparisons: pa.Table,
        candidates: pa.Table,
        prompt_plan: PromptPlan,
        judge: JudgeSpec,
        judge_stats: JudgeStats,
    ) -> dict[str, Any]:
        # the run's judge's comparisons: a jury's other judges have prompts of their own
        own = pl.from_arrow(comparisons).filter(pl.col("judge") == judge.name)
        chosen = choose(own, self.n, [ReasonSample(s) for s in self.sample], self.seed)
        if not chosen.height:
            return {"reasons": REASONS.empty_table()}
        # an API judge gets conversations: the server applies its own chat template
        prompts = reason_prompts(
            chosen, candidates, prompt_plan, load_tokenizer(judge), as_messages=bool(judge.endpoint)
        )
        # the judge's workers of the judge stage where they were kept (one engine per model and run: its mode too)
        task = Task(judge, {REASON: Request(max_tokens=self.max_tokens)}, prompt_plan.frame)
        front = on_the_driver(task, self.judgement_store)
        events = ctx.run_dir / "logs" / ENGINE_EVENTS
        step = engine_step("reasons", judge, task, front, events, True, eager=judge_stats.engine_eager)
        log.info("asking the judge why for %d comparison(s)", prompts.num_rows)
        with closing_front(step):
            answers = pa.concat_tables(list(ctx.executor.stream([prompts], [step])))
        return {"reasons": with_reasons(chosen, answers)}


def with_reasons(chosen: pl.DataFrame, answers: pa.Table) -> pl.DataFrame:
    """REASONS: the chosen comparisons with the judge's decision and the reason it generated for each."""
    said = {
        (a["mode"], a["context_id"], a["attribute"], a["cand_a"], a["cand_b"]): (
            a["texts"][0] if a["texts"] else ""
        )
        for a in answers.select(["mode", "context_id", "attribute", "cand_a", "cand_b", "texts"]).to_pylist()
    }
    out = chosen.with_columns(
        decision=pl.when(pl.col("p") >= 0.5).then(pl.col("cand_i")).otherwise(pl.col("cand_j")),
        reason=pl.struct("template_id", "context_id", "attribute", "cand_i", "cand_j").map_elements(
            lambda k: said[
                (f"{REASON}:{k['template_id']}", k["context_id"], k["attribute"], k["cand_i"], k["cand_j"])
            ].strip(),
            return_dtype=pl.String,
        ),
    )
    return out.select(REASONS.names)
