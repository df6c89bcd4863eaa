"""Run the pair and judge stages in this process, one engine, no Ray."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from pipeline.judge.spec import JudgeSpec
from pipeline.judge.stage import JudgeStage
from pipeline.pairs import PairPlan, generate_pairs


def batches(chunks: Iterator[pa.Table], batch_size: int) -> Iterator[pa.Table]:
    """Re-cut a stream of tables into tables of ``batch_size`` rows (the last one may be shorter)."""
    pending: list[pa.Table] = []
    rows = 0
    for chunk in chunks:
        pending.append(chunk)
        rows += chunk.num_rows
        while rows >= batch_size:
            table = pa.concat_tables(pending)
            yield table.slice(0, batch_size)
            rest = table.slice(batch_size)
            pending, rows = ([rest], rest.num_rows) if rest.num_rows else ([], 0)
    if rows:
        yield pa.concat_tables(pending)


def judge_local(
    shards: list[pa.Table],
    plan: PairPlan,
    spec: JudgeSpec,
    batch_size: int,
    stage_cls: type[JudgeStage] = JudgeStage,
) -> Iterator[pa.Table]:
    if not shards:
        return
    stage = stage_cls(spec)
    try:
        chunks = (chunk for shard in shards for chunk in generate_pairs(shard, plan))
        for batch in batches(chunks, batch_size):
            yield stage(batch)
    finally:
        stage.close()
