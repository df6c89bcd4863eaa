"""Where streamed work runs (in this process, or on a local Ray or a cluster: Ray Data tasks, then the driver's pool of judge workers that survives lost nodes and grows onto new ones), its logs and its progress.

A stage that streams (pair generation feeding the judge) hands the executor its input blocks and a chain of
:class:`MapStep` s, and reads the output batches as they finish. What runs is the step's function or class;
how it is scheduled (stateless tasks or a pool of actors, batch size, CPUs and GPUs) is the step's other
fields, which only the Ray executor reads. Stages never import Ray: this package is the edge, and only
:mod:`pipeline.runtime.executors` (which the run imports, never a stage) reaches Ray.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pyarrow as pa


class Front(Protocol):
    """What the driver answers itself before a stateful step's batches go to its workers (e.g. the judgement
    store, :class:`pipeline.judge.stored.StoreFront`), and keeps of what they answer."""

    def answer(self, batch: pa.Table) -> tuple[pa.Table | None, pa.Table]:
        """(rows answered here, in the step's output schema; the rows still to send to the workers)."""
        ...

    def keep(self, sent: pa.Table, out: pa.Table) -> None:
        """Keep a worker's output ``out`` for the rows ``sent`` (row for row)."""
        ...


@dataclass(frozen=True)
class MapStep:
    """One step of a streamed chain.

    ``fn`` maps an Arrow table to a table or an iterator of tables. A function is called with ``kwargs`` for
    every block; a class is constructed once per worker with ``kwargs`` (an actor on Ray: heavy state such as an
    LLM engine is made once) and then called per batch.
    """

    name: str
    fn: Callable[..., Any] | type
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    # A class: keyword arguments of every call (``instance(batch, **call_kwargs)``): what a stream asks of workers
    # that may outlive it (a kept-alive engine serving the stages of one model, each with its own prompts).
    call_kwargs: Mapping[str, Any] = field(default_factory=dict)
    # Rows per call; None: whatever block arrives. With ``exact_batches`` every call gets exactly batch_size
    # rows (but the last) and its result streams back on its own, one batch at a time.
    batch_size: int | None = None
    exact_batches: bool = False
    # A class: the number of workers (actors), or the least of them with ``max_workers``: the pool starts with
    # what the cluster has room for in between and grows onto nodes that join. A function: ignored.
    workers: int = 1
    max_workers: int | None = None
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    # A class on Ray: how many times a worker that died on a live node (its engine gone) is replaced, its
    # unfinished batches given to the others; after that the run stops with the error. None: no limit. Workers
    # lost with their node are always replaced (pipeline.runtime.pool).
    max_restarts: int | None = None
    # A class on Ray: the run's events file, where the driver's pool records the workers and nodes it lost.
    events: str | None = None
    # A class: what the driver answers itself before batches go to the workers, and keeps of their answers; a
    # stream it answers whole starts no worker. Not part of the workers' identity (step_key).
    front: Front | None = None
    # A class, the last step of its chain: its workers outlive the stream, and a later stream of a step with the
    # same class, constructor kwargs and resources (whatever its name and call_kwargs) reuses them. An executor
    # keeps one set of workers at a time (an engine each): a stream that needs others releases them first.
    # Adaptive rounds judge every round with the engines started for the first; a model that generates, judges
    # and gives its reasons starts one engine.
    keep_alive: bool = False
    # A class on Ray: the environment its worker processes start with, for what a process reads as it loads
    # (``LD_PRELOAD``, see pipeline.judge.vllm.cores.worker_process_env). The local executor runs the step in this
    # process, already started, and cannot apply it.
    env: Mapping[str, str] = field(default_factory=dict)
    # A class: its one instance runs in the driver's process on every executor, Ray's too (an endpoint's client:
    # waiting on HTTP, it needs no worker of its own, and its reply cache is then opened by the driver alone).
    # A function: it runs in the driver's process on the stream as the driver reads it, never as Ray tasks (a step
    # lighter than a task's scheduling: making prompts, some 50,000 a second on one core, where Ray Data's tasks
    # stalled the judge workers for seconds at a time); it follows the chain's task steps.
    on_driver: bool = False

    @property
    def stateful(self) -> bool:
        return isinstance(self.fn, type)


class Executor(Protocol):
    def stream(self, blocks: Sequence[pa.Table], steps: Sequence[MapStep]) -> Iterator[pa.Table]:
        """Run ``steps`` over ``blocks``; yield the last step's output batches as they finish."""
        ...

    def close(self) -> None:
        """Release the workers kept alive (``MapStep.keep_alive``)."""
        ...


def step_key(step: MapStep) -> str:
    """What makes two steps' workers the same: the class, its constructor kwargs and the workers' resources (not
    the step's name, nor what each call asks)."""
    import hashlib
    import pickle

    fn = step.fn
    digest = hashlib.blake2b(pickle.dumps(dict(step.kwargs)), digest_size=16).hexdigest()
    return (
        f"{fn.__module__}.{fn.__qualname__}:{digest}:{step.workers}:{step.max_workers}:{step.num_cpus}:"
        f"{step.num_gpus}"
    )
