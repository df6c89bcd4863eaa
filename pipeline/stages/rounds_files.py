"""What adaptive rounds keep in the run folder, and the tables they hand the judge stage.

- ``rounds/round-<r>.parquet``: the prompts chosen in round ``r`` (both orderings of every pair), written
  atomically *before* any is judged: the state a resumed run needs;
- ``rounds/rounds.parquet``: one row per context and round (ROUNDS), written as each round is recorded;
- the CONTEXTS table the judge stage takes for a round's pairs, with what the run folder already holds.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray

from pipeline.contracts.errors import ConfigError
from pipeline.contracts.keys import COMPARE, DONE_KEY
from pipeline.contracts.schemas import CONTEXTS, ROUND_PAIRS, ROUNDS, check_schema
from pipeline.contracts.stats import JudgeStats
from pipeline.data.contexts import Context
from pipeline.prompts.plan import PromptPlan
from pipeline.storage.parts import JudgmentParts, RatingParts

ROUNDS_DIR = "rounds"


def ordered_given(selected: Mapping[str, NDArray[np.int64]]) -> dict[str, NDArray[np.int64]]:
    """Both orderings of every selected pair (rows slot A, slot B): the pair as chosen, then reversed."""
    return {cid: np.concatenate([pairs, pairs[:, ::-1]]) for cid, pairs in selected.items()}


def candidate_index(contexts: Mapping[str, Context]) -> dict[str, dict[str, int]]:
    """Each context's candidate ids by their index (the rounds' item numbers)."""
    return {cid: {c: k for k, c in enumerate(ctx.candidate_ids)} for cid, ctx in contexts.items()}


def given_from(chosen: pa.Table, contexts: Mapping[str, Context]) -> dict[str, NDArray[np.int64]]:
    """The chosen prompts of every round as candidate index rows (slot A, slot B) per context, in file order."""
    index = candidate_index(contexts)
    out: dict[str, list[tuple[int, int]]] = {cid: [] for cid in contexts}
    for cid, a, b in zip(
        *(chosen.column(c).to_pylist() for c in ("context_id", "cand_a", "cand_b")), strict=True
    ):
        known = index.get(cid, {})
        if a not in known or b not in known:
            raise ConfigError(
                f"the run folder's adaptive rounds chose a pair ({cid}: {a} vs {b}) that is not in the input: it "
                "belongs to a different input; use a new paths.run_dir"
            )
        out[cid].append((known[a], known[b]))
    return {cid: np.array(rows, dtype=np.int64).reshape(-1, 2) for cid, rows in out.items()}


def chosen_pairs(chosen: pa.Table, contexts: Mapping[str, Context]) -> dict[str, NDArray[np.int64]]:
    """The pairs as each round chose them, in round order: what a resumed run has judged. Each round's rows of a
    context are its pairs as chosen and then their reversals (:func:`ordered_given`): the first half."""
    given = given_from(chosen, contexts)
    keys = zip(chosen.column("round").to_pylist(), chosen.column("context_id").to_pylist(), strict=True)
    out: dict[str, list[NDArray[np.int64]]] = {cid: [] for cid in contexts}
    at = dict.fromkeys(contexts, 0)
    for (_, cid), rows in itertools.groupby(keys):
        size = sum(1 for _ in rows)
        out[cid].append(given[cid][at[cid] : at[cid] + size // 2])
        at[cid] += size
    return {
        cid: np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)
        for cid, parts in out.items()
    }


def round_contexts(
    contexts: Mapping[str, Context],
    given: Mapping[str, NDArray[np.int64]],
    parts: JudgmentParts,
    rating_parts: RatingParts,
    plan: PromptPlan,
) -> pa.Table:
    """A CONTEXTS table for the judge stage: every context with prompts left among ``given`` (and its absolute
    prompts), with what the run folder already holds in ``done``."""
    judged = pa.concat_tables([parts.judged(), rating_parts.judged()])
    done: dict[str, set[tuple[str, ...]]] = {}
    for row in judged.to_pylist():
        done.setdefault(row["context_id"], set()).add(tuple(row[k] for k in DONE_KEY))
    rows: dict[str, list] = {name: [] for name in CONTEXTS.names}
    template = plan.templates[0].id if plan.templates else ""
    for cid, context in contexts.items():
        mine = done.get(cid, set())
        ids = context.candidate_ids
        left = 0
        for a, b in given.get(cid, np.zeros((0, 2), dtype=np.int64)).tolist():
            for attribute in plan.attributes:
                left += (COMPARE, attribute, template, ids[a], ids[b]) not in mine
        for rated in plan.absolute:
            for cand in ids:
                for attribute, template_id, _ in rated.asked(plan.attributes, context.checklist):
                    left += (str(rated.mode), attribute, template_id, cand, "") not in mine
        if not left:
            continue
        rows["context_id"].append(cid)
        rows["context"].append(context.text)
        rows["candidate_ids"].append(list(ids))
        rows["texts"].append(list(context.texts))
        rows["shard"].append(len(rows["shard"]))
        rows["n_prompts"].append(left)
        rows["done"].append([dict(zip(DONE_KEY, d, strict=True)) for d in mine])
        rows["checklist"].append(list(context.checklist))
    return pa.table(rows, schema=CONTEXTS)


def round_pairs_table(
    r: int, selected: Mapping[str, NDArray[np.int64]], contexts: Mapping[str, Context], attribute: str
) -> pa.Table:
    """ROUND_PAIRS rows of round ``r``: both orderings of every chosen pair."""
    rows: dict[str, list] = {name: [] for name in ROUND_PAIRS.names}
    for cid, pairs in ordered_given(selected).items():
        ids = contexts[cid].candidate_ids
        for a, b in pairs.tolist():
            rows["round"].append(r)
            rows["context_id"].append(cid)
            rows["attribute"].append(attribute)
            rows["cand_a"].append(ids[a])
            rows["cand_b"].append(ids[b])
    return pa.table(rows, schema=ROUND_PAIRS)


def write_round_pairs(folder: Path, r: int, table: pa.Table) -> None:
    """The round's chosen prompts, written atomically before any is judged."""
    target = folder / f"round-{r:05d}.parquet"
    tmp = target.with_suffix(".tmp")
    pq.write_table(table, tmp)
    tmp.replace(target)


def read_round_pairs(folder: Path) -> pa.Table:
    files = sorted(folder.glob("round-*.parquet"))
    if not files:
        return ROUND_PAIRS.empty_table()
    return check_schema(
        pa.concat_tables([pq.read_table(f) for f in files]), ROUND_PAIRS, "chosen pairs on disk"
    )


def write_rounds(folder: Path, records: list[dict]) -> None:
    target = folder / "rounds.parquet"
    tmp = target.with_suffix(".tmp")
    pq.write_table(pa.Table.from_pylist(records, schema=ROUNDS), tmp)
    tmp.replace(target)


def read_rounds(folder: Path) -> pa.Table:
    target = folder / "rounds.parquet"
    if not target.exists():
        return ROUNDS.empty_table()
    table = pq.read_table(target)
    for f in ROUNDS:  # a column added since the folder was written (nullable: "not recorded")
        if f.nullable and f.name not in table.column_names:
            table = table.append_column(f, pa.nulls(table.num_rows, f.type))
    return check_schema(table, ROUNDS, "adaptive rounds on disk")


def step_metrics(row: dict, n_contexts: int) -> dict[str, float]:
    """A round's metrics for MLflow (prefixed by the context when the run has several)."""
    prefix = "adaptive/" if n_contexts == 1 else f"adaptive/{row['context_id']}/"
    out = {
        f"{prefix}pairs": float(row["pairs"]),
        f"{prefix}calls": float(row["calls"]),
        f"{prefix}expected_tau": float(row["expected_tau"]),
        f"{prefix}max_stderr": float(row["max_stderr"]),
    }
    # null: a record of a version without the count, or no censor
    for name in ("downweighted", "beyond_cap", "contradicted"):
        if row.get(name) is not None:
            out[f"{prefix}{name}"] = float(row[name])
    if row["value"] is not None:
        out[f"{prefix}criterion"] = float(row["value"])
    if row["spearman"] is not None:
        out[f"{prefix}spearman"] = float(row["spearman"])
    return out


def combine_stats(stats: list[JudgeStats], prompts: int, seconds: float) -> JudgeStats:
    """The judge stage's numbers over every round."""
    if not stats:
        return JudgeStats(prompts, 0, seconds, float("nan"), float("nan"), 0, 0)
    judged = sum(s.judged_now for s in stats)
    judge_seconds = sum(s.seconds for s in stats)
    money = [s.money for s in stats if s.money is not None]
    # the mode of the last round that started an engine: the workers kept for the stages after (the reasons)
    chose = next((s for s in reversed(stats) if s.engine_eager is not None), stats[-1])
    return dataclasses.replace(
        stats[-1],
        prompts=prompts,
        judged_now=judged,
        seconds=seconds,
        rate=judged / judge_seconds if judge_seconds > 0 else float("nan"),
        rate_with_startup=judged / seconds if seconds > 0 else float("nan"),
        prompt_tokens=sum(s.prompt_tokens for s in stats),
        cached_tokens=sum(s.cached_tokens for s in stats),
        requests=sum(s.requests for s in stats),
        cached_replies=sum(s.cached_replies for s in stats),
        billed_prompt_tokens=sum(s.billed_prompt_tokens for s in stats),
        billed_completion_tokens=sum(s.billed_completion_tokens for s in stats),
        money=sum(money) if money else None,
        engine_mode=chose.engine_mode,
        engine_eager=chose.engine_eager,
        logprobs_read=sum(s.logprobs_read for s in stats),
        missing_logprobs=sum(s.missing_logprobs for s in stats),
        usage_unknown=sum(s.usage_unknown for s in stats),
        reused=sum(s.reused for s in stats),
        failed_attempts=tuple(
            sorted(sum((Counter(dict(s.failed_attempts)) for s in stats), Counter()).items())
        ),
        served_models=tuple(
            sorted(
                (judge, model, n)
                for (judge, model), n in sum(
                    (Counter({(j, m): k for j, m, k in s.served_models}) for s in stats), Counter()
                ).items()
            )
        ),
    )
