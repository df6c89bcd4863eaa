"""A run's events file (``logs/engine_events.jsonl``): one JSON line per event, appended by whichever process saw
it (a judge worker: its engine started, a batch started and done, its engine died; the driver's worker pool: a
worker or a node lost, the batches it gave to others)."""

from __future__ import annotations

import json
import os
from pathlib import Path


def record_event(path: str | os.PathLike | None, event: dict, sync: bool = True) -> None:
    """Append one event (a JSON line) to the run's engine events file. ``sync``: fsync'd (a death record);
    without it the line still survives the writer's process being killed (it is in the kernel's page cache), not
    a crash of the machine."""
    if not path:
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(event) + "\n").encode()
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)  # one write of an O_APPEND file: lines of several workers never interleave
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def read_events(path: str | os.PathLike) -> list[dict]:
    """The events recorded so far (a torn last line skipped)."""
    target = Path(path)
    if not target.exists():
        return []
    events = []
    for line in target.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events
