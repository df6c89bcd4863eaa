"""The workers of a stateful step on Ray, driven from the driver: a pool that loses and gains nodes.

Batches go to the actors from this process, at most two in flight per actor (one running, one queued), and each
result is yielded as soon as it arrives: once yielded it is the caller's (written to the run folder) and never
asked for again. When an actor is lost (its process, its engine or its whole node) the batches it held go back to
the front of the queue and a new actor takes its place wherever the cluster has room. A death on a node that is
still alive (an engine that crashed) counts against the step's ``max_restarts``; a lost or drained node does not:
a cluster of spot instances loses nodes as a matter of course. Actors on a node being drained (a preemption
notice, ``ray drain-node``) get no new batch: they finish what they hold and are released, and their places are
taken elsewhere.

The pool starts with what the cluster has room for, at least ``workers`` and at most ``max_workers``, and grows
onto nodes that join, never into the CPU slot its own upstream tasks need (:mod:`pipeline.runtime.capacity`). A
pool that could never leave them one is refused before it starts; while no actor can be placed (a lost node not
yet replaced) it says so every 30 s and stops with the numbers after ``placement_timeout`` seconds. A worker whose
batch runs far longer than batches take is said (:class:`pipeline.runtime.slots.Pace`).

What it saw goes to the run's events file (``worker_started``; ``worker_lost`` with the rows it was judging and
those queued behind them, all given to others; ``node_lost``; ``worker_drained``; ``worker_slow``), written by this
process.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.runtime import MapStep
from pipeline.runtime.capacity import Resources, fits, refusal, room, shortfall, spread_to
from pipeline.runtime.cluster import (
    alive_nodes,
    cluster_resources,
    draining_nodes,
    lost_actor_errors,
    node_resources,
    raylet_answers,
)
from pipeline.runtime.local import Feeder, Fronted
from pipeline.runtime.logs import with_output_to
from pipeline.runtime.slots import NODE_WINDOW, Kept, Loss, Pace, Slot, end, runtime_env
from pipeline.storage.events import record_event

log = logging.getLogger(__name__)


class PoolError(RuntimeError):
    """The pool cannot run: no room for its workers, or more engine deaths than the step allows."""


class ActorPool:
    """The actors of one stateful step (module docstring)."""

    IN_FLIGHT = 2
    TEND_EVERY = 2.0
    SAY_EVERY = 30.0
    # seconds the end of a stream waits for Ray to say why a worker went (a node's death takes Ray's health
    # checks some 15-30 s to notice)
    SETTLE_WAIT = 90.0

    def __init__(
        self,
        step: MapStep,
        log_dir: Path | None,
        reserve_cpus: float = 0.0,
        placement_timeout: float = 900.0,
    ):
        import ray

        cls = with_output_to(step.fn, log_dir, step.name) if log_dir else step.fn  # type: ignore[arg-type]
        self.remote = ray.remote(
            num_cpus=step.num_cpus,
            num_gpus=step.num_gpus,
            max_restarts=0,  # the pool replaces its actors itself (wherever there is room), and counts them
            max_task_retries=0,
            runtime_env=runtime_env(step),
        )(Kept)
        self.cls, self.kwargs = cls, dict(step.kwargs)
        self.name = step.name
        self.events = step.events
        self.need = Resources(step.num_cpus, step.num_gpus)
        self.reserve = reserve_cpus
        self.least = max(1, step.workers)
        self.most = max(self.least, step.max_workers or step.workers)
        self.budget = step.max_restarts
        self.placement_timeout = placement_timeout
        self.deaths = 0
        self.lost_nodes: dict[str, float] = {}  # node -> when its first worker was lost
        self.unsettled: list[Loss] = []
        self.slots: list[Slot] = []
        total, _ = cluster_resources()
        problem = refusal(self.name, total, self.need, self.least, reserve_cpus)
        if problem:
            raise PoolError(problem)
        self._short_said = False
        # no actor yet: the first batch for the workers starts them (:meth:`_begin`), so a stream the driver answers
        # whole starts no engine
        self._tended = time.monotonic()
        self._unplaced_since: float | None = None
        self._said = 0.0
        self.pace = Pace()

    def _start(self) -> None:
        """One more actor, on the node of the fewest of the pool's workers that holds one more (:func:`spread_to`): a
        lost node then costs as few workers as it can. The affinity is soft: Ray places it elsewhere if that node
        goes; while the node's slots are taken by the step's tasks it waits for one of them to end."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        out = set(self.lost_nodes) | {s.node for s in self.slots if s.draining}
        nodes = {node: have for node, have in node_resources().items() if node not in out}
        workers: dict[str, int] = {}
        for slot in self.slots:
            where = slot.node or slot.target
            workers[where] = workers.get(where, 0) + 1
        target = spread_to(nodes, workers, self.need)
        remote = self.remote
        if target is not None:
            remote = remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(target, soft=True))
        actor = remote.remote(self.cls, self.kwargs)
        self.slots.append(Slot(actor, actor.ready.remote(), target=target or ""))

    def _record(self, event: dict) -> None:
        record_event(self.events, {**event, "step": self.name, "by": "driver"})

    def run(
        self, work: Iterator[pa.Table], call_kwargs: Any, front: Fronted | None = None
    ) -> Iterator[pa.Table]:
        """Yield the results of every batch of ``work``, each called with ``call_kwargs`` (put in Ray's object
        store once per stream), whatever actors and nodes are lost on the way; with ``front``, the rows it answered
        as they appear, and every result kept by it as it arrives."""
        feeder = Feeder(work, ahead=self.IN_FLIGHT * self.most)
        try:
            yield from self._loop(feeder, call_kwargs, front)
        finally:  # however the loop ends (its error, the caller's close): the feeder's thread closes the stream
            if not feeder.close():
                log.warning(
                    "%s: the stream's reader still waits on its upstream; it closes it then", self.name
                )

    def _loop(self, feeder: Feeder, call_kwargs: Any, front: Fronted | None) -> Iterator[pa.Table]:
        import ray

        again: deque[pa.Table] = deque()  # batches of lost actors: sent before new ones
        exhausted = False
        while True:
            exhausted = self._send(feeder, again, call_kwargs, exhausted)
            if front is not None:
                yield from front.drain()
            held = {ref: slot for slot in self.slots for ref in slot.held}
            sending = bool(again) or not exhausted  # batches to give: given back, or the upstream not ended
            if not held and not sending:
                self._settle(wait=self.SETTLE_WAIT)  # the stream's account of its losses complete
                return
            self._tend(waiting=sending, feeder=None if exhausted else feeder)
            starting = {slot.starting: slot for slot in self.slots if slot.starting is not None}
            if not held and not starting:
                continue  # nothing to wait on but the upstream (``_send`` waits for it)
            # a quick look again only where an actor has room and there may be a batch to give it; otherwise the
            # wait ends with a result (a batch's end; 1 s at most, for the tending), not 20 times a second
            done, _ = ray.wait(
                [*held, *starting], num_returns=1, timeout=0.05 if sending and self._room() else 1.0
            )
            for ref in done:
                if ref in starting:
                    self._started(starting[ref])
                    continue
                slot = held[ref]
                try:
                    out = ray.get(ref)
                except lost_actor_errors() as exc:
                    if slot in self.slots:
                        self._lose(slot, exc, again)
                    continue
                sent = slot.held.pop(ref)
                self.pace.done(slot, time.monotonic())
                if front is not None:
                    front.keep(sent, out)
                yield out
                if slot.draining and not slot.held:
                    self._release(slot, "worker_drained")

    def _room(self) -> bool:
        """Whether a running actor could take another batch."""
        return any(s.starting is None and not s.draining and len(s.held) < self.IN_FLIGHT for s in self.slots)

    def _send(self, feeder: Feeder, again: deque, call_kwargs: Any, exhausted: bool) -> bool:
        """Give every running actor up to ``IN_FLIGHT`` batches (given-back ones first, then what the upstream has
        ready, waiting a moment for it when every actor is idle); whether the upstream has ended."""
        if not self.slots and not again and not exhausted:
            batch = feeder.take(wait=0.2)
            if batch is Feeder.END:
                return True
            if batch is not None:
                again.append(batch)
                self._begin()
        for slot in self.slots:
            if slot.starting is not None or slot.draining:
                continue
            while len(slot.held) < self.IN_FLIGHT:
                if again:
                    batch = again.popleft()
                elif exhausted:
                    return True
                else:
                    idle = not any(s.held for s in self.slots)
                    batch = feeder.take(wait=0.2 if idle else 0.0)
                    if batch is Feeder.END:
                        return True
                    if batch is None:
                        return exhausted
                self.pace.sent(slot, time.monotonic())
                slot.held[slot.actor.run.remote(batch, call_kwargs)] = batch
        return exhausted

    def _started(self, slot: Slot) -> None:
        import ray

        try:
            slot.worker, slot.node = ray.get(slot.starting)
        except lost_actor_errors() as exc:
            if getattr(exc, "actor_init_failed", False):
                raise  # the step's constructor failed (a bad model, a config): a new actor would fail the same way
            slot.starting = None  # its node went (or its engine died) while it started
            self._lose(slot, exc, deque())
            return
        slot.starting = None
        self._record({"event": "worker_started", "worker": slot.worker, "node": slot.node})

    def _lose(self, slot: Slot, exc: BaseException, again: deque) -> None:
        """An actor gone: its batches back to the front of the queue, its place taken by a new actor, and why it
        went settled as soon as Ray can say (:meth:`_settle`)."""
        batches = list(slot.held.values())
        slot.held.clear()
        again.extendleft(reversed(batches))
        self.slots.remove(slot)
        end(slot.actor, graceful=False)
        # an actor runs its calls in the order they were sent: the oldest it held was being judged (its rows are
        # judged again), the others waited in its queue
        rows = batches[0].num_rows if batches else 0
        queued = sum(b.num_rows for b in batches[1:])
        log.warning(
            "%s worker %s lost with %d batch(es) of %d row(s): given to the other workers",
            self.name,
            slot.worker or "(starting)",
            len(batches),
            rows + queued,
        )
        self.unsettled.append(Loss(slot, exc, rows, queued, len(batches), time.monotonic()))
        self._settle()

    def _settle(self, wait: float = 0.0) -> None:
        """Say why each lost worker went, once it can be told: its node drained; its node gone (its raylet refuses
        connections, or Ray's control store says so); or its node up (its raylet answers): its process died,
        which counts against the step's restarts. A worker lost while starting (no node known yet) went with a
        node lost about then, or by itself. ``wait``: seconds to wait for an answer (the end of a stream)."""
        deadline = time.monotonic() + wait
        while self.unsettled:
            alive, now = alive_nodes(), time.monotonic()
            still = []
            for loss in self.unsettled:
                node = loss.slot.node
                up = raylet_answers(node) if node and node in alive else None
                if loss.slot.draining or getattr(loss.exc, "preempted", False):
                    self._settled(loss, "drain")
                elif node and (node not in alive or up is False):
                    self._settled(loss, "node")
                elif node and up:
                    self._settled(loss, "worker")
                elif not node and not [other for other in self.unsettled if other.slot.node]:
                    recent = any(now - at < NODE_WINDOW for at in self.lost_nodes.values())
                    self._settled(loss, "node" if recent else "worker")
                else:
                    still.append(loss)
            self.unsettled = still
            if not still or time.monotonic() >= deadline:
                return
            time.sleep(0.5)

    def _settled(self, loss: Loss, cause: str) -> None:
        slot = loss.slot
        self._record(
            {
                "event": "worker_lost",
                "worker": slot.worker,
                "node": slot.node,
                "cause": cause,
                "batches": loss.batches,
                "rows": loss.rows,
                "queued_rows": loss.queued,
                "error": str(loss.exc).splitlines()[0][:300] if str(loss.exc) else type(loss.exc).__name__,
            }
        )
        if cause == "node" and slot.node and slot.node not in self.lost_nodes:
            self.lost_nodes[slot.node] = loss.at
            self._record({"event": "node_lost", "node": slot.node})
            log.warning("%s: node %s is gone, with its workers", self.name, slot.node[:12])
        if cause == "worker":
            self.deaths += 1
            if self.budget is not None and self.deaths > self.budget:
                raise loss.exc
        self._refill()

    def _begin(self) -> None:
        """The first workers: what the cluster has room for now, at least the least asked for (as far as the
        cluster holds them beside the step's tasks) and at most the most."""
        total, free = cluster_resources()
        want = max(self.least, room(free, self.need, self.reserve, 0, self.most))
        for _ in range(min(want, fits(total, self.need, self.reserve))):
            self._start()
        self._refill()

    def _refill(self) -> None:
        """Start workers up to the least the step asks for, as far as the cluster holds them beside the step's
        tasks, once no lost node is still listed alive (Ray would place a new worker on it until its health
        checks notice)."""
        if set(self.lost_nodes) & alive_nodes():
            return
        total, _ = cluster_resources()
        cap = fits(total, self.need, self.reserve)
        if cap < self.least and not self._short_said:
            self._short_said = True
            log.warning("%s", shortfall(self.name, total, self.need, self.least, self.reserve))
        while len(self.slots) < min(self.least, cap):
            self._start()

    def _release(self, slot: Slot, event: str) -> None:
        """A drained node's actor that finished its batches: closed, its place taken elsewhere."""
        self.slots.remove(slot)
        end(slot.actor, graceful=True)
        self._record({"event": event, "worker": slot.worker, "node": slot.node})
        log.info("%s worker %s released: its node is being drained", self.name, slot.worker)
        self._refill()

    def _tend(self, waiting: bool, feeder: Feeder | None) -> None:
        """Every ``TEND_EVERY`` seconds: settle losses, stop sending to actors on draining nodes, fit the pool to
        the cluster (refill, shrink, grow), and say (then stop) when nothing runs: no worker placed, or no batch
        reaching the step."""
        now = time.monotonic()
        if now - self._tended < self.TEND_EVERY:
            return
        self._tended = now
        self._settle()
        self._drain()
        self._refill()
        total, free = cluster_resources()
        self._fit(total, free, waiting)
        running = [s for s in self.slots if s.starting is None and not s.draining]
        reserve = f" with {self.reserve:g} CPU(s) left for the step's tasks" if self.reserve else ""
        where = (
            f"each worker needs {self.need.cpus:g} CPU(s) and {self.need.gpus:g} GPU(s){reserve}; the cluster has "
            f"{free.cpus:g} of {total.cpus:g} CPU(s) and {free.gpus:g} of {total.gpus:g} GPU(s) free"
        )
        if running:
            self._unplaced_since = None
        for slot in self.pace.slow(running, now):
            self._slow(slot, now)
        if running and feeder is not None and not any(s.held for s in running):
            self._stalled(now - feeder.last, f"no batch reaching the {self.name} step", where)
        elif not running and waiting:  # no worker running: starting (an engine loading) or waiting for room
            self._unplaced_since = self._unplaced_since or now
            starting = sum(s.starting is not None for s in self.slots)
            what = f"no {self.name} worker running" + (
                f" ({starting} starting: an engine loading)" if starting else ""
            )
            # an engine loading is the normal start (a minute for a compiled one): said, not warned of
            self._stalled(
                now - self._unplaced_since, what, where, logging.INFO if starting else logging.WARNING
            )

    def _slow(self, slot: Slot, now: float) -> None:
        """Say a worker whose batch runs far longer than batches take (a slow or stuck worker, its node up)."""
        typical, seconds = self.pace.typical(), now - slot.busy_since
        took = "none has finished yet" if typical is None else f"they take {typical:.1f} s"
        log.warning(
            f"{self.name} worker {slot.worker} has run one batch for {seconds:.0f} s ({took}): a slow or stuck worker"
        )
        self._record(
            {"event": "worker_slow", "worker": slot.worker, "node": slot.node, "seconds": round(seconds, 1)}
        )

    def _stalled(self, waited: float, what: str, where: str, level: int = logging.WARNING) -> None:
        """Say ``what`` (at ``level``) every ``SAY_EVERY`` seconds it lasts; stop the run after
        ``placement_timeout``."""
        if waited > self.placement_timeout:
            raise PoolError(
                f"{what} for {waited:.0f} s: {where} (runtime.placement_timeout_s={self.placement_timeout:g})"
            )
        now = time.monotonic()
        if waited >= self.SAY_EVERY and now - self._said >= self.SAY_EVERY:
            self._said = now
            log.log(level, "%s for %.0f s: %s", what, waited, where)

    def _drain(self) -> None:
        """Actors on nodes being drained take no new batch; those holding none are released."""
        draining = draining_nodes()
        for slot in list(self.slots):
            if slot.node in draining and not slot.draining:
                slot.draining = True
                log.info(
                    "%s worker %s: its node is being drained, it takes no new batch", self.name, slot.worker
                )
                if not slot.held:
                    self._release(slot, "worker_drained")

    def _fit(self, total: Resources, free: Resources, waiting: bool) -> None:
        """Grow onto free room while there is work; never keep more starting actors than the cluster holds beside
        the step's tasks (after a node is lost, an actor Ray places later would take the tasks' slot)."""
        cap = fits(total, self.need, self.reserve)
        # the surplus let go: starting actors first, then idle ones (a kept pool serving a stream whose tasks need a
        # slot its last stream's did not)
        surplus = [s for s in self.slots if s.starting is not None][::-1]
        surplus += [s for s in self.slots if s.starting is None and not s.held]
        for slot in surplus:
            if len(self.slots) <= max(cap, 1):
                break
            self.slots.remove(slot)
            end(slot.actor, graceful=slot.starting is None)
            log.warning(
                "%s: the cluster holds %d worker(s) beside the step's tasks: %s let go",
                self.name,
                cap,
                slot.worker,
            )
        if not waiting or set(self.lost_nodes) & alive_nodes():
            return
        live = [s for s in self.slots if not s.draining]
        # a starting actor may not be placed yet (its resources not yet taken from ``free``): each counts as taking
        # one more worker's room, so the pool never asks for more than fits
        starting = sum(1 for s in live if s.starting is not None)
        fit = room(free, self.need, self.reserve, 0, self.most) - starting
        for _ in range(max(0, min(self.most - len(live), fit))):
            self._start()

    def close(self) -> None:
        import ray

        slots, self.slots = self.slots, []
        running = [s for s in slots if s.starting is None]  # an engine still loading has nothing to close
        try:
            ray.get([s.actor.close.remote() for s in running], timeout=120)
        except Exception as exc:  # a dead actor has nothing to close; its engine's reaper ends the engine
            log.debug("closing the %s workers: %s", self.name, exc)
        for slot in slots:
            end(slot.actor, graceful=False)
