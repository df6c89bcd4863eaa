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

import pyarrow as pa

from pipeline.config import RuntimeConfig
from pipeline.logs import redirect_output
from pipeline.runtime import MapStep

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


class RayDataExecutor:
    def __init__(self, runtime: RuntimeConfig, log_dir: Path | None):
        self.runtime = runtime
        self.log_dir = log_dir

    def stream(self, blocks: Sequence[pa.Table], steps: Sequence[MapStep]) -> Iterator[pa.Table]:
        if not blocks:
            return
        import ray.data

        init_ray(self.runtime, quiet=self.log_dir is not None)
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
            if step.stateful:
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

    @staticmethod
    def _map_actors(ds, step: MapStep, fn: type):
        import ray.data

        return ds.map_batches(
            fn,
            fn_constructor_kwargs=dict(step.kwargs),
            batch_size=step.batch_size,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=step.workers),
            num_cpus=step.num_cpus,
            num_gpus=step.num_gpus or None,
            **(
                {"max_restarts": step.max_restarts, "max_task_retries": step.max_restarts}
                if step.max_restarts is not None
                else {}
            ),
        )
