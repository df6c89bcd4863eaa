"""Where the stages run: in-process (tests, notebooks) or on Ray Data (local Ray or a cluster).

Both take the same shards, pair plan and judge spec and yield JUDGMENTS batches as they finish; the stages
themselves never import Ray.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from pipeline.config import JudgeConfig, RuntimeConfig
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.stage import JudgeStage
from pipeline.pairs import PairPlan


def judge_shards(
    shards: list[pa.Table],
    plan: PairPlan,
    spec: JudgeSpec,
    judge: JudgeConfig,
    runtime: RuntimeConfig,
    stage_cls: type[JudgeStage] = JudgeStage,
) -> Iterator[pa.Table]:
    """Yield JUDGMENTS batches; ``stage_cls`` lets benchmarks wrap the judge stage (e.g. to time it)."""
    if runtime.executor == "local":
        from pipeline.runtime.local import judge_local

        return judge_local(shards, plan, spec, judge.batch_size, stage_cls)
    from pipeline.runtime.ray_data import judge_ray

    return judge_ray(shards, plan, spec, judge, runtime, stage_cls)
