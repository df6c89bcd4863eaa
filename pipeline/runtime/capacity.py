"""How many workers of a step a cluster has room for: pure arithmetic over its free and total resources, no Ray.

A pool of workers (actors) of ``need`` CPUs and GPUs each must leave its own upstream tasks (the prompts made per
shard) a slot of ``reserve_cpus``: actors that take every CPU slot leave those tasks waiting for ever, and the
pool with them. :func:`refusal` says so before a pool starts; :func:`room` is how many more fit now.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Resources:
    """CPUs and GPUs (of the alive nodes, or free on them)."""

    cpus: float = 0.0
    gpus: float = 0.0


def fits(free: Resources, need: Resources, reserve_cpus: float) -> int:
    """How many workers of ``need`` fit in ``free`` with ``reserve_cpus`` CPUs left over (0 when none does)."""
    counts = []
    if need.cpus > 0:
        counts.append(math.floor((free.cpus - reserve_cpus) / need.cpus + 1e-9))
    if need.gpus > 0:
        counts.append(math.floor(free.gpus / need.gpus + 1e-9))
    if not counts:  # a worker that needs nothing always fits
        return 1 << 30
    return max(0, min(counts))


def room(free: Resources, need: Resources, reserve_cpus: float, have: int, most: int) -> int:
    """How many workers to add to ``have`` now: what fits in ``free`` (leaving the reserve), up to ``most``."""
    return max(0, min(most - have, fits(free, need, reserve_cpus)))


def spread_to(nodes: dict[str, Resources], workers: dict[str, int], need: Resources) -> str | None:
    """The node for one more worker of ``need``: of the ``nodes`` (id -> total resources) whose total holds their
    ``workers`` and one more, the one with the fewest workers (then the most room, then the id). A pool spread this
    way loses as few workers as it can with a node. None when no node holds one more."""
    ranked = []
    for node, total in nodes.items():
        have = workers.get(node, 0)
        holds = fits(total, need, 0.0)
        if holds > have:
            ranked.append((have, -(holds - have), node))
    return min(ranked)[2] if ranked else None


def refusal(step: str, total: Resources, need: Resources, least: int, reserve_cpus: float) -> str | None:
    """Why not even one worker of ``need`` fits on a cluster of ``total`` resources beside the step's own tasks
    (``reserve_cpus``), with the numbers and the fix; None when one does."""
    if fits(total, need, reserve_cpus) >= 1:
        return None
    return (
        f"the {step} step's workers need {need.cpus:g} CPU(s) each and its own tasks {reserve_cpus:g}, but the "
        f"cluster has {total.cpus:g} CPU slot(s): nothing would run. Ask for "
        + ", or ".join(_fixes(total, need, least, reserve_cpus))
    )


def shortfall(step: str, total: Resources, need: Resources, least: int, reserve_cpus: float) -> str:
    """The warning of a pool that runs with fewer workers than the ``least`` asked for: the cluster holds only
    :func:`fits` of them beside the step's own tasks."""
    most = fits(total, need, reserve_cpus)
    return (
        f"the {step} step's {least} worker(s) of {need.cpus:g} CPU(s) each would take {least * need.cpus:g} of "
        f"the cluster's {total.cpus:g} CPU slot(s), leaving {max(0.0, total.cpus - least * need.cpus):g} for its "
        f"own tasks, which need {reserve_cpus:g}: it runs with {most} (and grows as nodes join). Ask for "
        + ", or ".join(_fixes(total, need, least, reserve_cpus))
    )


def _fixes(total: Resources, need: Resources, least: int, reserve_cpus: float) -> list[str]:
    most = fits(total, need, reserve_cpus)
    fixes = [f"at most {most} worker(s)"] if most >= 1 else []
    per_worker = (total.cpus - reserve_cpus) / least
    if per_worker > 0:
        fixes.append(f"{math.floor(per_worker * 100) / 100:g} CPU(s) per worker or fewer")
    fixes.append("a range of workers [1, N] (the pool grows only into the room there is)")
    fixes.append("more CPUs in the cluster (judge.num_actors, judge.num_cpus_per_actor)")
    return fixes
