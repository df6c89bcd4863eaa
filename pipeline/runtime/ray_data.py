"""Map a chain of steps onto Ray Data: input blocks -> tasks (stateless steps) -> actor pools (stateful steps).

Workers' own output (an engine's warnings and progress bars, the engine process it spawns) goes to
``<run folder>/logs/<step>-<host>-<pid>.log`` instead of the driver's console, unless the run is verbose;
errors still reach the driver as exceptions.
"""

from __future__ import annotations

import logging
import os
import socket
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.config.run import RuntimeConfig
from pipeline.runtime import MapStep, step_key
from pipeline.runtime.local import batches
from pipeline.runtime.logs import redirect_output

log = logging.getLogger(__name__)


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
    )


def with_output_to(cls: type, log_dir: Path, step: str) -> type:
    """``cls`` whose instances first send their process's output to a file in ``log_dir`` (an actor's own
    output: the engine's log lines, warnings and progress bars)."""

    def __init__(self, *args, **kwargs):  # noqa: N807
        path = log_dir / f"{step}-{socket.gethostname()}-{os.getpid()}.log"
        try:
            redirect_output(path)
        except OSError as exc:  # e.g. a cluster node without the run folder's file system
            logging.getLogger(__name__).warning(
                "output stays in Ray's worker logs: cannot write %s (%s)", path, exc
            )
        cls.__init__(self, *args, **kwargs)

    return type(cls.__name__, (cls,), {"__init__": __init__})


def runtime_env(step: MapStep) -> dict | None:
    """The actors' runtime environment: the step's process environment (Ray merges it into the job's)."""
    return {"env_vars": dict(step.env)} if step.env else None


class RayDataExecutor:
    def __init__(self, runtime: RuntimeConfig, log_dir: Path | None):
        self.runtime = runtime
        self.log_dir = log_dir
        self.kept: dict[str, KeptPool] = {}

    def close(self) -> None:
        self._release(but=None)

    def _release(self, but: str | None) -> None:
        """Close the kept workers but those of key ``but``."""
        for key in [k for k in self.kept if k != but]:
            self.kept.pop(key).close()

    def stream(self, blocks: Sequence[pa.Table], steps: Sequence[MapStep]) -> Iterator[pa.Table]:
        if not blocks:
            return
        import ray.data

        init_ray(self.runtime, quiet=self.log_dir is not None)
        for step in steps:
            if step.stateful:  # one set of engine workers at a time: others kept alive are released first
                self._release(but=step_key(step))
        last = steps[-1] if steps else None
        if last is not None and last.stateful and last.keep_alive:
            yield from self._stream_kept(blocks, steps)
            return
        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False  # the driver logs its own progress with rate and ETA
        # The work is CPU-bound in the engine; don't spend cycles polling the actors' memory every second.
        context.memory_usage_poll_interval_s = None
        ds = ray.data.from_arrow(list(blocks))
        for step in steps:
            if step.exact_batches and step.batch_size:
                # Blocks of exactly one batch (strict: never a bundle of several blocks): each actor task handles
                # one batch and its rows reach the driver as soon as it is done, and one big input block (a pool
                # of hundreds of candidates) is spread over every actor. Without strict, a task may take a bundle
                # of blocks and return all of them at its end.
                ds = ds.repartition(target_num_rows_per_block=step.batch_size, strict=True)
            if isinstance(step.fn, type):
                fn = with_output_to(step.fn, self.log_dir, step.name) if self.log_dir else step.fn
                with warnings.catch_warnings():
                    # max_restarts / max_task_retries have no named parameter in Ray 2.60 (pinned); the
                    # deprecated ray_remote_args still carry them. Revisit when Ray is upgraded past 2.63.
                    warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
                    ds = self._map_actors(ds, step, fn)
            else:
                ds = ds.map_batches(
                    step.fn,
                    fn_kwargs=dict(step.kwargs),
                    batch_size=step.batch_size,
                    batch_format="pyarrow",
                    num_cpus=step.num_cpus,
                )
        yield from ds.iter_batches(batch_size=None, batch_format="pyarrow", prefetch_batches=0)

    def _stream_kept(self, blocks: Sequence[pa.Table], steps: Sequence[MapStep]) -> Iterator[pa.Table]:
        """The chain but its last step on Ray Data; the last step's batches to its kept-alive actors."""
        import ray

        last = steps[-1]
        # the upstream steps streamed on Ray Data as the kept workers take their batches
        upstream = self.stream(blocks, steps[:-1]) if len(steps) > 1 else iter(blocks)
        key = step_key(last)
        pool = self.kept.get(key)
        if pool is None:
            pool = self.kept[key] = KeptPool(last, self.log_dir)
        try:
            yield from pool.run(batches(upstream, last.batch_size), ray.put(dict(last.call_kwargs)))
        except BaseException:
            # a pool that failed (an actor lost for good) is not reused: the next stream starts a new one
            self.kept.pop(key, None)
            pool.close()
            raise

    @staticmethod
    def _map_actors(ds, step: MapStep, fn: type):
        import ray.data

        return ds.map_batches(
            fn,
            fn_constructor_kwargs=dict(step.kwargs),
            fn_kwargs=dict(step.call_kwargs) or None,
            batch_size=step.batch_size,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=step.workers),
            num_cpus=step.num_cpus,
            num_gpus=step.num_gpus or None,
            runtime_env=runtime_env(step),
            **(
                {"max_restarts": step.max_restarts, "max_task_retries": step.max_restarts}
                if step.max_restarts is not None
                else {}
            ),
        )


class _Kept:
    """The actor of a kept-alive step: one instance of the step's class, called batch by batch."""

    def __init__(self, cls: type, kwargs: dict):
        self.inner = cls(**kwargs)

    def run(self, batch: pa.Table, call_kwargs: dict) -> pa.Table:
        out = self.inner(batch, **call_kwargs)
        return out if isinstance(out, pa.Table) else pa.concat_tables(list(out))

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()


class KeptPool:
    """Actors of a kept-alive step (``MapStep.keep_alive``), made on first use and reused by later streams: each
    holds at most two batches (one running, one queued); results are yielded as they finish. A dead actor is
    restarted by Ray (``max_restarts``, its unfinished batches retried on the new one, as the Ray Data pool does);
    an actor whose constructor fails is not."""

    IN_FLIGHT = 2

    def __init__(self, step: MapStep, log_dir: Path | None):
        import ray

        cls = with_output_to(step.fn, log_dir, step.name) if log_dir else step.fn  # type: ignore[arg-type]
        restarts = -1 if step.max_restarts is None else step.max_restarts
        remote = ray.remote(
            num_cpus=step.num_cpus,
            num_gpus=step.num_gpus,
            max_restarts=restarts,
            max_task_retries=restarts,
            runtime_env=runtime_env(step),
        )(_Kept)
        self.actors = [remote.remote(cls, dict(step.kwargs)) for _ in range(max(1, step.workers))]
        self.name = step.name

    def run(self, work: Iterator[pa.Table], call_kwargs: Any) -> Iterator[pa.Table]:
        """Yield the results of every batch of ``work``, each called with ``call_kwargs`` (put in Ray's object
        store once per stream)."""
        import ray

        todo = iter(work)
        load = [0] * len(self.actors)
        running: dict = {}

        def submit() -> bool:
            for k, actor in enumerate(self.actors):
                while load[k] < self.IN_FLIGHT:
                    batch = next(todo, None)
                    if batch is None:
                        return False
                    running[actor.run.remote(batch, call_kwargs)] = k
                    load[k] += 1
            return True

        more = submit()
        while running:
            [ref], _ = ray.wait(list(running), num_returns=1)
            k = running.pop(ref)
            load[k] -= 1
            yield ray.get(ref)
            if more:
                more = submit()

    def close(self) -> None:
        import ray

        actors, self.actors = self.actors, []
        try:
            ray.get([a.close.remote() for a in actors], timeout=120)
        except Exception as exc:  # a dead actor has nothing to close; its engine's reaper ends the engine
            log.debug("closing the %s workers: %s", self.name, exc)
        for actor in actors:
            ray.kill(actor)
