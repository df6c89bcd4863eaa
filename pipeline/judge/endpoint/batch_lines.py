"""A batch job's files: the input file written for it, its output and error files read back, and the run folder's
record of its batches (:class:`BatchRecord`).

Every output line is checked as a reply of its own (:mod:`pipeline.judge.endpoint.replies`). A line that cannot be read
never stops the read; it is counted by kind:

- a line that is not JSON, is not an object, or names no request of the batch by a string ``custom_id``: a *stray*
  line (counted for the batch; the request it may have meant is then without a line, ``no_line``, or the batch's
  failure, ``batch_failed``);
- a line of a request whose ``response`` or ``status_code`` has the wrong type: ``bad_line``;
- an error line, or a status other than 200: ``http_4xx`` (a refusal, not asked again in this run) or ``http_5xx``;
- a 200 whose body is not an answer: the kind its reader gives;
- two lines of one request with different answers: ``conflict`` (neither is taken; the request goes into the next
  batch). The same answer twice is one answer.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.judge.endpoint.parse import parse_json
from pipeline.judge.endpoint.replies import Check, Refused


@dataclass(frozen=True)
class Line:
    """One request of a batch: its id (the cache key), its body and the check its reply must pass."""

    custom_id: str
    body: dict[str, Any]
    check: Check | None


@dataclass
class Tally:
    """What a batch's read did not answer: the failure kinds and the last error of each request (by custom id), and
    the lines that named no request of the batch, by kind."""

    failures: dict[str, list[str]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    stray: Counter[str] = field(default_factory=Counter)


def input_file(path: str, lines: Sequence[Line]) -> str:
    """The batch input file of ``lines`` for the endpoint ``path`` (``/completions``, ``/chat/completions``)."""
    return "".join(
        json.dumps(
            {"custom_id": ln.custom_id, "method": "POST", "url": "/v1" + path, "body": ln.body},
            sort_keys=True,
        )
        + "\n"
        for ln in lines
    )


def read_output(
    texts: Sequence[str],
    lines: Sequence[Line],
    tally: Tally,
    what: str = "the batch",
    without_line: str = "no_line",
) -> dict[str, dict[str, Any]]:
    """The answers of a batch's output and error files (``texts``) by custom id; every line that is not an answer
    counted in the ``tally``'s failures (by kind) and errors, every request without a line as ``without_line``, and
    every line that names no request of the batch as stray (module docstring)."""
    wanted = {ln.custom_id: ln for ln in lines}
    answers: dict[str, list[dict[str, Any]]] = {}
    failed: dict[str, tuple[str, str]] = {}
    for text in texts:
        for raw in text.splitlines():
            if raw.strip():
                _read_line(raw, wanted, answers, failed, tally.stray)
    out: dict[str, dict[str, Any]] = {}
    for custom_id in wanted:
        got = answers.get(custom_id, [])
        distinct = {json.dumps(b, sort_keys=True) for b in got}
        if len(distinct) == 1:
            out[custom_id] = got[0]
            continue
        if len(distinct) > 1:
            kind, error = "conflict", f"{what} returned {len(distinct)} different answers for it"
        elif custom_id in failed:
            kind, error = failed[custom_id]
        else:
            kind, error = without_line, f"{what} returned no line for it"
        tally.failures.setdefault(custom_id, []).append(kind)
        tally.errors[custom_id] = error
    return out


def _read_line(
    raw: str,
    wanted: dict[str, Line],
    answers: dict[str, list[dict[str, Any]]],
    failed: dict[str, tuple[str, str]],
    stray: Counter[str],
) -> None:
    """One output or error line: an answer of its request (its body passes the request's check), a failure of its
    kind, or a stray line."""
    try:
        entry = parse_json(raw)
    except Refused as unreadable:  # not JSON, too large, too deep, an integer too long, a lone surrogate
        stray[unreadable.kind] += 1
        return
    custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
    if not isinstance(custom_id, str) or custom_id not in wanted:
        stray["no_request"] += 1
        return
    response = entry.get("response")
    error = entry.get("error")
    if response is None and error:
        failed.setdefault(custom_id, ("http_5xx", f"the batch line failed: {str(error)[:200]}"))
        return
    if not isinstance(response, dict) or not _is_status(response.get("status_code")):
        failed.setdefault(custom_id, ("bad_line", f"a batch line whose response is {str(response)[:80]!r}"))
        return
    status = response["status_code"]
    if status != 200 or error:
        refused = 400 <= status < 500 and status not in (408, 409, 429)
        failed.setdefault(
            custom_id, ("http_4xx" if refused else "http_5xx", f"the batch line failed: {error or status}")
        )
        return
    body = response.get("body")
    check = wanted[custom_id].check
    problem = check(body) if check is not None else None
    if problem is not None or not isinstance(body, dict):
        problem = problem or ("no_choices", f"the body is a {type(body).__name__}, not an object")
        failed[custom_id] = (problem[0], f"a batch reply that is not an answer ({problem[0]}: {problem[1]})")
        return
    answers.setdefault(custom_id, []).append(body)


def _is_status(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# The record of a run's batches, in its run folder.
RECORD_FILE = "api_batches.jsonl"


class BatchRecord:
    """The run folder's record of the batches (JSON lines, appended): every step of a batch as an entry of its
    marker; a batch's state is its entries merged in order."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None

    def entries(self) -> list[dict[str, Any]]:
        if self.path is None or not self.path.exists():
            return []
        out = []
        for raw in self.path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(raw)
            except ValueError:
                continue  # a line cut short by a crash
            if not isinstance(entry, dict):
                continue
            if "marker" not in entry and isinstance(entry.get("input"), str) and entry.get("batch_id"):
                # a record of an earlier version (input digest -> batch id): the first batch of that input
                entry = {**entry, "marker": f"{entry['input']}.0", "state": "created"}
            if isinstance(entry.get("marker"), str):
                out.append(entry)
        return out

    def batches(self) -> dict[str, dict[str, Any]]:
        """Every batch's state by marker, in the order they were first recorded."""
        merged: dict[str, dict[str, Any]] = {}
        for entry in self.entries():
            merged.setdefault(entry["marker"], {}).update(entry)
        return merged

    @staticmethod
    def marker(batches: dict[str, dict[str, Any]], digest: str) -> str:
        """The marker of the next batch of the input file ``digest`` among ``batches`` (:meth:`batches`): one more
        than the batches of it already read."""
        read = sum(1 for b in batches.values() if b.get("input") == digest and b.get("state") == "read")
        return f"{digest}.{read}"

    def add(self, entry: dict[str, Any]) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps({**entry, "time": time.time()}, sort_keys=True) + "\n"
        with self.path.open("a+b") as f:
            end = f.seek(0, os.SEEK_END)
            if (
                end and (f.seek(end - 1), f.read(1))[1] != b"\n"
            ):  # a line cut short by a crash: ours starts anew
                line = "\n" + line
            f.write(line.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())


def batch_states(path: str | Path | None) -> dict[str, int]:
    """How many of the batches recorded in ``path`` are in each state: their status once read (completed, expired,
    failed, cancelled), else ``open`` (submitted, not yet read: the same command picks them up)."""
    states: Counter[str] = Counter()
    for batch in BatchRecord(path).batches().values():
        states[str(batch.get("status")) if batch.get("state") == "read" else "open"] += 1
    return dict(sorted(states.items()))
