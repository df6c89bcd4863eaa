"""The pool's parts (:mod:`pipeline.runtime.pool`): the actor around a step's class, the pool's record of each
actor (its slot) and of each loss, and the pace of its batches, by which a worker whose batch runs far longer than
batches take (a paused machine, a hung engine) is said, never waited on in silence."""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pipeline.runtime import MapStep


def runtime_env(step: MapStep) -> dict | None:
    """The actors' runtime environment: the step's process environment (Ray merges it into the job's)."""
    return {"env_vars": dict(step.env)} if step.env else None


class Kept:
    """The actor: one instance of the step's class, called batch by batch."""

    def __init__(self, cls: type, kwargs: dict):
        self.inner = cls(**kwargs)

    def ready(self) -> tuple[str, str]:
        """Where this worker runs: ``host:pid`` (as the judge worker names itself) and its Ray node."""
        import ray

        return f"{socket.gethostname()}:{os.getpid()}", ray.get_runtime_context().get_node_id()

    def run(self, batch: pa.Table, call_kwargs: dict) -> pa.Table:
        out = self.inner(batch, **call_kwargs)
        return out if isinstance(out, pa.Table) else pa.concat_tables(list(out))

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()


@dataclass(eq=False)
class Slot:
    """One actor of the pool: starting (``starting``: its ``ready()`` call) or running, the batches it holds."""

    actor: Any
    starting: Any
    worker: str = ""
    node: str = ""
    target: str = ""  # the node it was sent to (:meth:`pipeline.runtime.pool.ActorPool._start`)
    held: dict = field(default_factory=dict)  # ObjectRef of a call -> its batch
    draining: bool = False
    # when the batch it runs began: its last result, or a batch sent while it held none
    busy_since: float = 0.0
    said_slow: float = -1.0  # the ``busy_since`` of the batch said slow (:meth:`Pace.slow`)


# A worker lost while starting went with its node if a node was lost within this many seconds of it.
NODE_WINDOW = 120.0


@dataclass(eq=False)
class Loss:
    """A worker lost, its cause not settled yet: what it held, and when."""

    slot: Slot
    exc: BaseException
    rows: int
    queued: int
    batches: int
    at: float


class Pace:
    """How long the pool's batches take, and which running batch has taken far longer: ``SLOW_FACTOR`` times the
    median of the last batches and at least ``SLOW_AFTER`` seconds, or ``FIRST_AFTER`` before any batch has finished
    (an engine's first batch warms it up)."""

    SLOW_FACTOR = 10.0
    SLOW_AFTER = 120.0
    FIRST_AFTER = 600.0

    def __init__(self) -> None:
        self.took: deque[float] = deque(maxlen=64)

    def sent(self, slot: Slot, now: float) -> None:
        """A batch sent to ``slot``: it begins now if the actor held none."""
        if not slot.held:
            slot.busy_since = now

    def done(self, slot: Slot, now: float) -> None:
        """A result of ``slot`` arrived: its batch took since ``busy_since``, and the next it holds begins now."""
        self.took.append(now - slot.busy_since)
        slot.busy_since = now

    def typical(self) -> float | None:
        return statistics.median(self.took) if self.took else None

    def slow(self, slots: list[Slot], now: float) -> list[Slot]:
        """The running actors whose batch has run past the limit, each once per batch."""
        typical = self.typical()
        limit = self.FIRST_AFTER if typical is None else max(self.SLOW_AFTER, self.SLOW_FACTOR * typical)
        out = [
            s
            for s in slots
            if s.starting is None and s.held and now - s.busy_since > limit and s.said_slow != s.busy_since
        ]
        for slot in out:
            slot.said_slow = slot.busy_since
        return out


def end(actor: Any, graceful: bool) -> None:
    """End a pool's actor: asked to close first where ``graceful`` (its engine shut down), then killed, not restarted;
    an actor already gone is ended as it is."""
    import ray

    if graceful:
        with contextlib.suppress(Exception):
            ray.get(actor.close.remote(), timeout=60)
    with contextlib.suppress(Exception):
        ray.kill(actor, no_restart=True)
