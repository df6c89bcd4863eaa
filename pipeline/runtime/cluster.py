"""What the driver asks Ray about its cluster: the alive nodes and their resources, the nodes being drained, whether
a node's raylet still answers, and which errors mean a worker (or the node holding its result) is gone."""

from __future__ import annotations

import logging
import socket

from pipeline.runtime.capacity import Resources

log = logging.getLogger(__name__)


def raylet_answers(node: str, timeout: float = 2.0) -> bool | None:
    """Whether ``node``'s raylet takes a connection now: True (the node is up), False (refused: its raylet is gone
    with the node), None (no answer in ``timeout``, or a node Ray no longer lists: wait for Ray to say)."""
    import ray

    for info in ray.nodes():
        if info.get("NodeID") == node:
            address = (info.get("NodeManagerAddress"), int(info.get("NodeManagerPort") or 0))
            break
    else:
        return None
    try:
        with socket.create_connection(address, timeout=timeout):
            return True
    except ConnectionRefusedError:
        return False
    except OSError:
        return None


def cluster_resources() -> tuple[Resources, Resources]:
    """(total of the alive nodes, free now)."""
    import ray

    total = Resources()
    for node in ray.nodes():
        if node.get("Alive"):
            have = node.get("Resources", {})
            total = Resources(total.cpus + have.get("CPU", 0.0), total.gpus + have.get("GPU", 0.0))
    free = ray.available_resources()
    return total, Resources(free.get("CPU", 0.0), free.get("GPU", 0.0))


def node_resources() -> dict[str, Resources]:
    """Each alive node's total resources."""
    import ray

    return {
        node["NodeID"]: Resources(node["Resources"].get("CPU", 0.0), node["Resources"].get("GPU", 0.0))
        for node in ray.nodes()
        if node.get("Alive")
    }


def alive_nodes() -> set[str]:
    import ray

    return {node["NodeID"] for node in ray.nodes() if node.get("Alive")}


def draining_nodes() -> set[str]:
    """The nodes being drained (a preemption notice, ``ray drain-node``), from Ray's control store; none where this
    Ray cannot say."""
    import ray

    try:
        client = ray._private.worker.global_worker.gcs_client
        return set(client.get_draining_nodes(timeout=5))
    except Exception as exc:  # an older or newer Ray without the call: drains are then seen as losses
        log.debug("cannot read the draining nodes: %s", exc)
        return set()


def lost_actor_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean a call's actor, or the node that held its result, is gone (not an error of the call)."""
    from ray import exceptions

    return (exceptions.RayActorError, exceptions.ObjectLostError, exceptions.OwnerDiedError)
