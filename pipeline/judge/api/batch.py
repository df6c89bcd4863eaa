"""Batch judging (``judge.api.batch``): an engine call's requests as one job of OpenAI's Batch API, at the providers'
batch price (half on OpenAI's and Anthropic's).

1. The requests the reply cache does not hold are written as a batch input file: one JSON line per request,
   ``{"custom_id", "method": "POST", "url": "/v1/<path>", "body"}``, its ``custom_id`` the request's cache key (the
   same request is the same line in any run).
2. The file is uploaded (``POST /files``, purpose ``batch``) and the batch created (``POST /batches``); its id is
   recorded in the run folder (``api_batches.jsonl``, keyed by the SHA-256 of the input file). A rerun of the same
   requests finds the record and picks the batch up instead of submitting again.
3. The batch is polled (``GET /batches/<id>``) from ``batch_poll`` seconds, doubling to ``batch_poll_max``, for at
   most ``batch_wait`` seconds; then the run stops with what to do (:class:`BatchPending`).
4. The output and error files are downloaded (``GET /files/<id>/content``) and every line is checked as a reply of
   its own (:mod:`pipeline.judge.api.replies`: a line that is not an answer is a failed attempt of its kind).
5. The lines that failed are sent once more, as a batch of their own; what fails again is reported with its reason
   (the prompt is not stored; a rerun asks it again). Answers go to the reply cache.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.judge.api.client import ApiClient, Reply, cache_key
from pipeline.judge.api.replies import Check

log = logging.getLogger(__name__)

TERMINAL = ("completed", "failed", "expired", "cancelled")


class BatchPending(RuntimeError):
    """A batch that was not done within ``judge.api.batch_wait``: it is recorded, and the same command picks it up."""


@dataclass(frozen=True)
class Line:
    """One request of a batch: its id (the cache key), its body and the check its reply must pass."""

    custom_id: str
    body: dict[str, Any]
    check: Check | None


class BatchRecord:
    """The run folder's record of the batches submitted (JSON lines, appended): input digest -> batch id."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None

    def find(self, digest: str) -> dict[str, Any] | None:
        if self.path is None or not self.path.exists():
            return None
        found = None
        for raw in self.path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(raw)
            except json.JSONDecodeError:
                continue  # a line cut short by a crash
            if entry.get("input") == digest:
                found = entry
        return found

    def add(self, entry: dict[str, Any]) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")


class BatchJobs:
    """Batch judging through an :class:`ApiClient`'s endpoint (module docstring); :meth:`post` answers like
    :meth:`ApiClient.post`, each reply marked ``batch``."""

    def __init__(self, client: ApiClient, record: str | Path | None):
        self.client = client
        self.settings = client.settings
        self.record = BatchRecord(record)

    def post(
        self, path: str, bodies: Sequence[dict[str, Any]], checks: Sequence[Check | None]
    ) -> list[Reply]:
        cache = self.client.cache
        lines = [
            Line(cache_key(self.client.base_url, path, b), b, c) for b, c in zip(bodies, checks, strict=True)
        ]
        replies: list[Reply | None] = [None] * len(lines)
        todo = []
        for k, line in enumerate(lines):
            hit = cache.get(line.custom_id) if cache else None
            if hit is not None and (line.check is None or line.check(hit) is None):
                replies[k] = Reply(hit, cached=True)
            else:
                todo.append(k)
        failures: dict[str, list[str]] = {}
        errors: dict[str, str] = {}
        for round_ in range(2):  # the batch, then its failed lines once more
            pending = [lines[k] for k in todo if replies[k] is None]
            if not pending:
                break
            answered = self._round(path, pending, failures, errors)
            for k in todo:
                body = answered.get(lines[k].custom_id)
                if body is not None and replies[k] is None:
                    replies[k] = Reply(
                        body, attempts=round_ + 1, failures=failures.get(lines[k].custom_id, [])
                    )
                    if cache:
                        cache.put(lines[k].custom_id, body)
        for k in todo:
            if replies[k] is None:
                kinds = failures.get(lines[k].custom_id, [])
                replies[k] = Reply(
                    None, error=errors.get(lines[k].custom_id, "no reply"), attempts=2, failures=kinds
                )
        out = [r for r in replies if r is not None]
        for r in out:
            r.batch = not r.cached
        return out

    def _round(
        self, path: str, lines: list[Line], failures: dict[str, list[str]], errors: dict[str, str]
    ) -> dict[str, dict[str, Any]]:
        """One batch of ``lines``: submitted (or picked up from the record), waited for, and its output read; the
        answers by custom id, every failure counted in ``failures`` and ``errors``."""
        content = input_file(path, lines)
        digest = hashlib.sha256(content.encode()).hexdigest()
        job = self.record.find(digest)
        if job is None:
            job = self._submit(content, digest, path, len(lines))
        else:
            log.info(
                "batch %s (%d requests) picked up from %s", job["batch_id"], len(lines), self.record.path
            )
        batch = self._wait(job["batch_id"])
        out = self._read(batch, lines, failures, errors)
        log.info("batch %s %s: %d of %d answered", batch.get("id"), batch.get("status"), len(out), len(lines))
        return out

    def _submit(self, content: str, digest: str, path: str, n: int) -> dict[str, Any]:
        upload = self.client.call(
            "POST", "/files", data={"purpose": "batch"}, files={"file": ("batch.jsonl", content.encode())}
        )
        file_id = _field(upload, "id", "upload the batch input file")
        created = self.client.call(
            "POST",
            "/batches",
            json={"input_file_id": file_id, "endpoint": "/v1" + path, "completion_window": "24h"},
        )
        batch_id = _field(created, "id", "create the batch")
        entry = {
            "input": digest,
            "batch_id": batch_id,
            "file_id": file_id,
            "requests": n,
            "time": time.time(),
        }
        self.record.add(entry)
        log.info("batch %s submitted: %d requests to %s", batch_id, n, self.client.base_url)
        return entry

    def _wait(self, batch_id: str) -> dict[str, Any]:
        started = time.monotonic()
        delay = self.settings.batch_poll
        while True:
            polled = self.client.call("GET", f"/batches/{batch_id}")
            status = (polled.body or {}).get("status")
            if status in TERMINAL:
                return polled.body or {}
            if time.monotonic() - started + delay > self.settings.batch_wait:
                raise BatchPending(
                    f"batch {batch_id} at {self.client.base_url} is {status or 'not answering'} after "
                    f"{time.monotonic() - started:.0f} s (judge.api.batch_wait={self.settings.batch_wait:g}); it is "
                    f"recorded in {self.record.path}: the same command picks it up (every answer is stored as it "
                    "arrives)"
                )
            time.sleep(delay)
            delay = min(delay * 2, self.settings.batch_poll_max)

    def _read(
        self, batch: dict[str, Any], lines: list[Line], failures: dict[str, list[str]], errors: dict[str, str]
    ) -> dict[str, dict[str, Any]]:
        texts = []
        for key in ("output_file_id", "error_file_id"):
            file_id = batch.get(key)
            if file_id:
                got = self.client.call("GET", f"/files/{file_id}/content", text=True)
                texts.append((got.body or {}).get("text") or "")
        return read_output(texts, lines, failures, errors, f"batch {batch.get('id')} ({batch.get('status')})")


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
    failures: dict[str, list[str]],
    errors: dict[str, str],
    what: str = "the batch",
) -> dict[str, dict[str, Any]]:
    """The answers of a batch's output and error files (``texts``) by custom id; every line that is not an answer,
    and every request without a line, counted in ``failures`` (by kind) and ``errors``."""
    wanted = {ln.custom_id: ln for ln in lines}
    out: dict[str, dict[str, Any]] = {}
    seen: set[str] = set()
    for text in texts:
        for raw in text.splitlines():
            _read_line(raw, wanted, out, seen, failures, errors)
    for custom_id in wanted:
        if custom_id not in seen:
            failures.setdefault(custom_id, []).append("no_line")
            errors[custom_id] = f"{what} returned no line for it"
    return out


def _read_line(
    raw: str,
    wanted: dict[str, Line],
    out: dict[str, dict[str, Any]],
    seen: set[str],
    failures: dict[str, list[str]],
    errors: dict[str, str],
) -> None:
    """One output or error line: an answer (its body passes the request's check), or a failure of its kind."""
    try:
        entry = json.loads(raw)
    except json.JSONDecodeError:
        return  # a line that names no request: each request without a line is counted below
    custom_id = entry.get("custom_id") if isinstance(entry, dict) else None
    if custom_id not in wanted or custom_id in out:
        return
    seen.add(custom_id)
    response = entry.get("response") or {}
    status = response.get("status_code")
    body = response.get("body")
    if status != 200 or entry.get("error"):
        kind = (
            "http_4xx"
            if isinstance(status, int) and 400 <= status < 500 and status not in (408, 429)
            else "http_5xx"
        )
        failures.setdefault(custom_id, []).append(kind)
        errors[custom_id] = f"the batch line failed: {entry.get('error') or status}"
        return
    check = wanted[custom_id].check
    problem = check(body) if check is not None else None
    if problem is not None:
        failures.setdefault(custom_id, []).append(problem[0])
        errors[custom_id] = f"a batch reply that is not an answer ({problem[0]}: {problem[1]})"
        return
    if isinstance(body, dict):
        out[custom_id] = body


def _field(reply: Reply, name: str, what: str) -> str:
    value = (reply.body or {}).get(name) if reply.body is not None else None
    if not value:
        raise RuntimeError(f"could not {what}: {reply.error or f'no {name!r} in the reply'}")
    return str(value)
