"""The judge's reasons for a sample of comparisons."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from pipeline.config.judging import JudgeConfig
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.worker import JudgeWorker
from pipeline.prompts.plan import PromptPlan
from pipeline.runtime import MapStep
from pipeline.stages import ports
from pipeline.stages.base import Stage, StageContext

log = logging.getLogger("pipeline")


@dataclass(frozen=True)
class Reasons(Stage):
    """Ask the judge why, for a sample of comparisons (orderings that disagree, the closest calls, random): a
    short explanation generated after the decision and stored beside it, never used to change a score."""

    n: int
    sample: tuple[str, ...]
    max_tokens: int
    seed: int
    judge_cfg: JudgeConfig
    # The judgement store (pipeline.storage.judgements) in front of an in-process judge; None: off.
    store_path: Path | None = None

    name = "reasons"
    reads = (ports.COMPARISONS, ports.CANDIDATES, ports.PROMPT_PLAN, ports.JUDGE)
    writes = (ports.REASONS,)

    def run(
        self,
        ctx: StageContext,
        *,
        comparisons: pa.Table,
        candidates: pa.Table,
        prompt_plan: PromptPlan,
        judge: JudgeSpec,
    ) -> dict[str, Any]:
        from pipeline.config.enums import ReasonSample
        from pipeline.contracts.engine import Request
        from pipeline.contracts.schemas import PROMPTS, REASONS
        from pipeline.prompts.reasons import choose, reason_prompt

        chosen = choose(pl.from_arrow(comparisons), self.n, [ReasonSample(s) for s in self.sample], self.seed)
        if not chosen.height:
            return {"reasons": REASONS.empty_table()}
        from pipeline.judge.tokenizers import load_tokenizer

        tokenizer = load_tokenizer(judge)
        text = {
            (c, k): t
            for c, k, t in zip(
                *(candidates.column(n).to_pylist() for n in ("context_id", "candidate_id", "text")),
                strict=True,
            )
        }
        context = dict(
            zip(
                candidates.column("context_id").to_pylist(),
                candidates.column("context").to_pylist(),
                strict=True,
            )
        )
        rows: dict[str, list] = {name: [] for name in PROMPTS.names}
        for r in chosen.iter_rows(named=True):
            cid = r["context_id"]
            prompt = reason_prompt(
                prompt_plan,
                tokenizer,
                r["attribute"],
                r["template_id"],
                context[cid],
                text[(cid, r["cand_i"])],
                text[(cid, r["cand_j"])],
                r["p"] >= 0.5,
                as_messages=bool(judge.api),  # an API judge: the server applies its own chat template
            )
            # the comparison's template rides in ``mode`` (the read is keyed by template_id "reason")
            values = (
                cid,
                f"reason:{r['template_id']}",
                r["attribute"],
                "reason",
                r["cand_i"],
                r["cand_j"],
                prompt,
            )
            for name, value in zip(PROMPTS.names, values, strict=True):
                rows[name].append(value)
        prompts = pa.table(rows, schema=PROMPTS)
        step = MapStep(
            "reasons",
            JudgeWorker,
            {
                "spec": judge,
                "requests": {"reason": Request(max_tokens=self.max_tokens)},
                "frame": prompt_plan.frame,
                "store": str(self.store_path) if self.store_path is not None and judge.api is None else None,
            },
            batch_size=self.judge_cfg.batch_size,
            exact_batches=True,
            workers=1,
            num_cpus=self.judge_cfg.num_cpus_per_actor,
            num_gpus=self.judge_cfg.num_gpus_per_actor,
        )
        log.info("asking the judge why for %d comparison(s)", prompts.num_rows)
        answers = pa.concat_tables(list(ctx.executor.stream([prompts], [step])))
        said = {
            (a["mode"], a["context_id"], a["attribute"], a["cand_a"], a["cand_b"]): (
                a["texts"][0] if a["texts"] else ""
            )
            for a in answers.select(
                ["mode", "context_id", "attribute", "cand_a", "cand_b", "texts"]
            ).to_pylist()
        }
        out = chosen.with_columns(
            decision=pl.when(pl.col("p") >= 0.5).then(pl.col("cand_i")).otherwise(pl.col("cand_j")),
            reason=pl.struct("template_id", "context_id", "attribute", "cand_i", "cand_j").map_elements(
                lambda k: said[
                    (f"reason:{k['template_id']}", k["context_id"], k["attribute"], k["cand_i"], k["cand_j"])
                ].strip(),
                return_dtype=pl.String,
            ),
        )
        return {"reasons": out.select(REASONS.names)}
