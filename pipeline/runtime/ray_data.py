"""Map the stages onto Ray Data: shards -> pair tasks -> an actor pool of judges (one engine per actor)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pyarrow as pa

from pipeline.config import JudgeConfig, RuntimeConfig
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.stage import JudgeStage
from pipeline.pairs import PairPlan, generate_pairs

log = logging.getLogger(__name__)


def init_ray(runtime: RuntimeConfig) -> None:
    import ray

    if ray.is_initialized():
        return
    ray.init(
        address=runtime.address,
        num_cpus=runtime.num_cpus if runtime.address is None else None,
        include_dashboard=False,
        ignore_reinit_error=True,
        log_to_driver=True,
    )


def _pair_stage(shard: pa.Table, plan: PairPlan) -> Iterator[pa.Table]:
    yield from generate_pairs(shard, plan)


def judge_ray(
    shards: list[pa.Table],
    plan: PairPlan,
    spec: JudgeSpec,
    judge: JudgeConfig,
    runtime: RuntimeConfig,
    stage_cls: type[JudgeStage] = JudgeStage,
) -> Iterator[pa.Table]:
    if not shards:
        return
    import ray.data

    init_ray(runtime)
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the driver logs its own progress with rate and ETA
    # Judging is CPU-bound in the engine; don't spend cycles polling the actors' memory every second.
    context.memory_usage_poll_interval_s = None
    ds = ray.data.from_arrow(shards)
    ds = ds.map_batches(
        _pair_stage, fn_kwargs={"plan": plan}, batch_size=None, batch_format="pyarrow", num_cpus=0.25
    )
    # Blocks of exactly one engine batch (strict: never a bundle of several blocks): each actor task judges one
    # batch and its rows reach the driver (and the store) as soon as it is done, and one big context (a pool
    # of hundreds of candidates) is spread over every judge actor. Without strict, a task may take a bundle of
    # blocks and return all of them at its end.
    ds = ds.repartition(target_num_rows_per_block=judge.batch_size, strict=True)
    ds = ds.map_batches(
        stage_cls,
        fn_constructor_kwargs={"spec": spec},
        batch_size=judge.batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=judge.num_actors),
        num_cpus=judge.num_cpus_per_actor,
        num_gpus=judge.num_gpus_per_actor or None,
    )
    yield from ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=0)
