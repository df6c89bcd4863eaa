"""Map a chain of steps onto Ray: input blocks -> Ray Data tasks (stateless steps; the light ones on the driver) -> the
driver's pool of actors (the chain's stateful last step, :mod:`pipeline.runtime.pool`: it survives lost nodes and
grows onto new ones).

Workers' own output (an engine's warnings and progress bars, the engine process it spawns) goes to
``<run folder>/logs/<step>-<host>-<pid>.log`` instead of the driver's console, unless the run is verbose;
errors still reach the driver as exceptions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.config.run import RuntimeConfig
from pipeline.runtime import MapStep, step_key
from pipeline.runtime.local import Fronted, LocalExecutor, apply
from pipeline.runtime.pool import ActorPool


def init_ray(runtime: RuntimeConfig, quiet: bool = True) -> None:
    """Start a local Ray (or join ``runtime.address``) unless this process is already connected."""
    import ray

    if ray.is_initialized():
        return
    ray.init(
        # None: a Ray of this run's own ("local"), even where a `ray start` cluster runs on this machine, which
        # ray.init() would join; runtime.address=auto joins that one
        address=runtime.address or "local",
        num_cpus=runtime.num_cpus if runtime.address is None else None,
        include_dashboard=False,
        ignore_reinit_error=True,
        # workers' output stays in their own log files (and the run folder's logs/), not on this console
        log_to_driver=not quiet,
        # a joined cluster's system settings were fixed when it started
        _system_config=None
        if runtime.address
        else {"prestart_worker_first_driver": runtime.prestart_workers},
    )


@contextmanager
def ended(iterator: Any) -> Iterator[Any]:
    """``iterator``, closed when the block is left however it is left. A Ray Data iterator left open when a stream
    stops with an error would be shut down by its finaliser only when the error's traceback is freed, at the
    interpreter's exit, after Ray is shut down: its shutdown then connects to a Ray that is gone and the process
    does not end. Closed here, it is shut down while Ray is up, and a run that stops ends at once."""
    try:
        yield iterator
    finally:
        close = getattr(iterator, "close", None)
        if callable(close):
            close()


class RayDataExecutor:
    def __init__(self, runtime: RuntimeConfig, log_dir: Path | None):
        self.runtime = runtime
        self.log_dir = log_dir
        self.kept: dict[str, ActorPool] = {}
        self.driver = LocalExecutor()  # the steps that run on the driver (MapStep.on_driver)

    def close(self) -> None:
        self._release(but=None)

    def _release(self, but: str | None) -> None:
        """Close the kept workers but those of key ``but``."""
        for key in [k for k in self.kept if k != but]:
            self.kept.pop(key).close()
        self.driver._release(but)

    def stream(self, blocks: Sequence[pa.Table], steps: Sequence[MapStep]) -> Iterator[pa.Table]:
        if not blocks:
            return
        init_ray(self.runtime, quiet=self.log_dir is not None)
        stateful = [k for k, step in enumerate(steps) if step.stateful]
        if stateful and stateful != [len(steps) - 1]:
            raise ValueError(f"a chain's one stateful step comes last: {[s.name for s in steps]}")
        if stateful:
            self._release(but=step_key(steps[-1]))  # one set of engine workers at a time
        if stateful and steps[-1].on_driver:
            upstream = self._stream_tasks(blocks, steps[:-1]) if len(steps) > 1 else iter(blocks)
            with ended(upstream):
                yield from self.driver.serve(upstream, steps[-1])
        elif stateful:
            yield from self._stream_pool(blocks, steps)
        else:
            yield from self._stream_tasks(blocks, steps)

    def _stream_tasks(self, blocks: Sequence[pa.Table], steps: Sequence[MapStep]) -> Iterator[pa.Table]:
        """Stateless steps: Ray Data tasks, then those that run on the driver (``MapStep.on_driver``) on what the
        tasks yield, as it is read."""
        tasks = [step for step in steps if not step.on_driver]
        if steps[: len(tasks)] != tasks:
            raise ValueError(f"a chain's steps on the driver follow its tasks: {[s.name for s in steps]}")
        stream = self._tasks(blocks, tasks) if tasks else iter(blocks)
        for step in steps[len(tasks) :]:
            stream = apply(stream, step.fn, dict(step.kwargs), step.batch_size)
        return stream

    def _tasks(self, blocks: Sequence[pa.Table], steps: Sequence[MapStep]) -> Iterator[pa.Table]:
        """Stateless steps as Ray Data tasks."""
        import ray.data

        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False  # the driver logs its own progress with rate and ETA
        # The work is CPU-bound in the engine; don't spend cycles polling the actors' memory every second.
        context.memory_usage_poll_interval_s = None
        ds = ray.data.from_arrow(list(blocks))
        for step in steps:
            ds = ds.map_batches(
                step.fn,
                fn_kwargs=dict(step.kwargs),
                batch_size=step.batch_size,
                batch_format="pyarrow",
                num_cpus=step.num_cpus,
            )
        with ended(ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=0)) as batches:
            yield from batches

    def _stream_pool(self, blocks: Sequence[pa.Table], steps: Sequence[MapStep]) -> Iterator[pa.Table]:
        """The chain but its last step as tasks; the last step's batches (exactly ``batch_size`` rows, but the
        last) to its pool of actors (:class:`pipeline.runtime.pool.ActorPool`), kept for the next stream when the
        step says so."""
        import ray

        last, upstream_steps = steps[-1], steps[:-1]
        upstream = self._stream_tasks(blocks, upstream_steps) if upstream_steps else iter(blocks)
        work = Fronted(last.front, upstream, last.batch_size)
        key = step_key(last)
        # a new pool starts its workers with its first batch for them: none when the driver answers every row
        reserve = max((s.num_cpus for s in upstream_steps if not s.on_driver), default=0.0)
        pool = self.kept.pop(key, None) or ActorPool(
            last, self.log_dir, reserve_cpus=reserve, placement_timeout=self.runtime.placement_timeout_s
        )
        pool.reserve = reserve  # a kept pool serves this stream's tasks: it leaves them their slot
        # its messages and events name the step it serves now (a judge after the generators)
        pool.name = last.name
        try:  # the pool's feeder reads ``work`` in its own thread and closes it there (with the upstream under it)
            yield from pool.run(work, ray.put(dict(last.call_kwargs)), work)
        except BaseException:
            pool.close()  # a pool that failed is not reused: the next stream starts a new one
            raise
        if last.keep_alive:
            self.kept[key] = pool
        else:
            pool.close()
