"""The stage that checks a judge that answers by key (recorded verdicts) against every prompt of the run, before
anything runs: what it cannot answer is refused, or left out with both orderings of its pair (counted, reported and
listed in ``left_out``); a judge with an engine passes with nothing left out.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline.config.assessment import PairsConfig
from pipeline.config.backends import backend
from pipeline.config.enums import Orderings, Strategy
from pipeline.contracts.errors import ConfigError
from pipeline.contracts.keys import COMPARE, PROMPT_KEY
from pipeline.contracts.schemas import JUDGED_KEYS, LEFT_OUT
from pipeline.data.contexts import group_by_context
from pipeline.judge.spec import JudgeSpec
from pipeline.prompts.pairs import build_contexts, generate_prompts, split_shards
from pipeline.prompts.plan import PromptPlan
from pipeline.stages import ports
from pipeline.stages.base import Stage, StageContext

log = logging.getLogger("pipeline")


def run_prompts(candidates: pa.Table, pairs: PairsConfig, plan: PromptPlan, max_shards: int) -> pa.Table:
    """Every prompt of the run (PROMPT_KEY rows), as the judge stage will make them (the same contexts, pairs and
    plan; nothing judged yet)."""
    contexts = build_contexts(
        group_by_context(candidates),
        pairs,
        len(plan.attributes),
        len(plan.templates),
        max_shards,
        JUDGED_KEYS.empty_table(),
        plan.rated_per_candidate,
    )
    parts = [
        chunk.select(list(PROMPT_KEY))
        for shard in split_shards(contexts)
        for chunk in generate_prompts(shard, pairs, plan)
    ]
    return pa.concat_tables(parts) if parts else JUDGED_KEYS.empty_table()


def with_their_pairs(left_out: pa.Table, prompts: pa.Table) -> pa.Table:
    """``left_out`` with the other ordering of each comparison's pair among ``prompts`` (a pair is judged in both
    orderings or not at all)."""
    if not left_out.num_rows:
        return left_out.select(list(PROMPT_KEY))
    pair = ["context_id", "mode", "attribute", "template_id", "lo", "hi"]

    def keyed(table: pa.Table) -> pl.DataFrame:
        return pl.from_arrow(table.select(list(PROMPT_KEY))).with_columns(
            lo=pl.min_horizontal("cand_a", "cand_b"), hi=pl.max_horizontal("cand_a", "cand_b")
        )

    gone = keyed(left_out).filter(pl.col("mode") == COMPARE).select(pair).unique()
    whole = keyed(prompts).join(gone, on=pair, how="semi")
    out = pl.concat([keyed(left_out), whole]).unique(subset=list(PROMPT_KEY), maintain_order=True)
    return out.select(PROMPT_KEY).to_arrow().cast(JUDGED_KEYS)


@dataclass(frozen=True)
class CheckAnswers(Stage):
    """Check a judge that answers by key (recorded verdicts) against every prompt of the run before anything runs:
    what it cannot answer is refused, or left out with its pair (counted and reported)."""

    pairs: PairsConfig
    max_shards: int
    # workflow=adaptive: the rounds choose their pairs as they go, so the judge must answer every pair of every
    # context in both orderings.
    every_pair: bool = False

    name = "check_answers"
    reads = (ports.CANDIDATES, ports.PROMPT_PLAN, ports.JUDGE)
    writes = (ports.LEFT_OUT,)

    def run(
        self, ctx: StageContext, *, candidates: pa.Table, prompt_plan: PromptPlan, judge: JudgeSpec
    ) -> dict[str, Any]:
        entry = backend(judge.backend)
        if not entry.answers:
            return {"left_out": LEFT_OUT.empty_table()}
        pairs = self.pairs
        if self.every_pair:
            pairs = replace(
                pairs, strategy=Strategy.all_pairs, orderings=Orderings.both, k=None, fraction=None
            )
        prompts = run_prompts(candidates, pairs, prompt_plan, self.max_shards)
        answers = entry.answerer()(judge, prompt_plan.labels)
        coverage = answers.check(prompts, candidates)
        left = with_their_pairs(coverage.left_out, prompts)
        if left.num_rows and self.every_pair:
            raise ConfigError(
                f"judge {judge.name} lacks {left.num_rows} of the {prompts.num_rows} prompts of every pair, and "
                "workflow=adaptive may choose any pair: give it an answer for every pair in both orderings"
            )
        for note in coverage.notes:
            log.info("judge %s: %s", judge.name, note)
        for name, n in coverage.counts.items():
            ctx.metrics[f"judge/{name}"] = float(n)
        ctx.metrics["judge/left_out_prompts"] = float(left.num_rows)
        if left.num_rows:
            first = left.slice(0, 1).to_pylist()[0]
            others = left.num_rows - coverage.left_out.num_rows
            log.info(
                "judge %s: %d of the run's %d prompt(s) are left out, lacking from its file%s, e.g. context %r, %r "
                "shown first, %r second; listed in left_out.parquet",
                judge.name,
                left.num_rows,
                prompts.num_rows,
                f" ({others} of them the other ordering of a pair it lacks: a pair is judged in both orderings or "
                "not at all)"
                if others
                else "",
                first["context_id"],
                first["cand_a"],
                first["cand_b"],
            )
        n = left.num_rows
        table = left.append_column("judge", pa.array([judge.name] * n, pa.string()))
        return {"left_out": table.cast(LEFT_OUT)}
