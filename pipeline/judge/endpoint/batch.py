"""Batch judging (``judge.endpoint.batch``): an engine call's requests as jobs of OpenAI's Batch API, at the providers'
batch price (half on OpenAI's and Anthropic's), never paid twice and never stuck.

1. The requests the reply cache does not hold are written as a batch input file (:mod:`pipeline.judge.endpoint.batch_lines`:
   one JSON line per request, its ``custom_id`` the request's cache key). The batch is named by a **marker**: the
   SHA-256 of the input file and the number of batches of that file already read (``<digest>.<n>``); a batch of the
   same requests again (the first ended without answering them) names its lines ``<cache key>#<n>``, so that no
   input file is ever submitted twice.
2. **An intent before anything is paid for.** The run folder's record (``api_batches.jsonl``, JSON lines appended
   and flushed) gets the marker before the upload; then the file id; then the batch id. The marker goes to the
   provider twice: as the input file's name (``<marker>.jsonl``) and in the batch's ``metadata``
   (``pipeline_marker``; the create also sends it as an ``Idempotency-Key`` header, for providers that honour one). A
   rerun (or this run, after a create that timed out) whose record has the intent but no batch id looks the marker
   up among the provider's batches (``GET /batches``: by its metadata, or by the uploaded input file's id) and files
   (``GET /files``) and takes the batch that exists instead of creating another. A create is never retried blindly: after a failed create
   the batch is looked up first, and created again only if it is not there. **Runs at once**: the processes sharing
   a reply cache (run folders, hosts on one file system) claim each batch (endpoint and marker) in the cache's folder
   (:mod:`pipeline.storage.claims`): the first submits it and writes its id, the others wait and take it, so two runs
   started together pay for one batch; a holder that crashes releases its claim, and the next one looks the batch up
   at the provider before creating it.
3. The batch is polled (``GET /batches/<id>``) from ``batch_poll`` seconds, doubling to ``batch_poll_max``, for at
   most ``batch_wait`` seconds; then the run stops with what to do (:class:`BatchPending`), and the same command
   picks the recorded batch up.
4. A batch that ends, ``completed`` or not (``expired``, ``failed``, ``cancelled``), is read: the output and error
   files it has are downloaded, every line checked as a reply (:mod:`pipeline.judge.endpoint.replies`); the answers go to
   the reply cache (with ``judge.endpoint.cache=false``, to the run folder's ``api_batch_replies.sqlite``), and only then
   is the batch recorded as read, with its status and counts. A batch recorded as
   read is never picked up again. A download that fails (a 404, a 5xx or a dropped connection past the retries) is
   asked again; if it still fails the run stops (:class:`BatchPending`) with the batch unread, and the same command
   downloads it again: a failed download is never read as an empty output (which would pay for every request again).
5. **Rounds.** The requests a batch did not answer (no line, a failed line, a line that is not an answer, a batch
   that ended without answering them) go into a new batch, up to ``batch_rounds`` batches per engine call; the
   rounds stop early when two in a row answer nothing. Requests the provider refused (a 4xx line) are not asked
   again in this run. What is left is reported with its reason (the prompt is not stored): the same command asks
   it again, in a new batch.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pipeline.judge.endpoint.batch_lines import (
    RECORD_FILE,
    BatchRecord,
    Line,
    Tally,
    batch_states,
    input_file,
    read_output,
)
from pipeline.judge.endpoint.client import ApiClient, Reply, cache_key
from pipeline.judge.endpoint.replies import Check
from pipeline.storage.claims import Claims
from pipeline.storage.sqlite import SqliteCache

log = logging.getLogger(__name__)

# A run's batches' answers, in its run folder, when the reply cache is off.
BATCH_REPLIES = "api_batch_replies.sqlite"
TERMINAL = ("completed", "failed", "expired", "cancelled")
# a recorded batch the provider no longer knows (a 404 for its id): read as ended, answering nothing
LOST = "lost"
METADATA_KEY = "pipeline_marker"
# Pages of the provider's batch and file lists looked through for a marker.
LOOKUP_PAGES = 20

__all__ = [
    "RECORD_FILE",
    "BatchJobs",
    "BatchPending",
    "BatchRecord",
    "Line",
    "batch_states",
    "input_file",
    "read_output",
]


class BatchPending(RuntimeError):
    """A batch that was not done within ``judge.endpoint.batch_wait``, or whose results could not be downloaded: it is
    recorded (not read), and the same command picks it up."""


def download(client: ApiClient, path: str, what: str, record: Path | None) -> str:
    """The content at ``path`` (a finished batch's output, error file or results), asked up to
    ``max_retries + 1`` times with backoff (each ask with the client's own retries of a 5xx or a dropped connection);
    a download that still fails stops the run with :class:`BatchPending`: the batch is not recorded as read, so
    nothing it answered is lost or paid for again, and the same command downloads it again."""
    settings, error = client.settings, ""
    for attempt in range(settings.max_retries + 1):
        got = client.call("GET", path, text=True)
        if got.body is not None:
            return str(got.body.get("text") or "")
        error = got.error or "no content"
        log.warning("could not download %s (attempt %d): %s", what, attempt + 1, error)
        time.sleep(min(settings.backoff_max, settings.backoff * 2**attempt))
    raise BatchPending(
        f"could not download {what} from {client.base_url} after {settings.max_retries + 1} attempts ({error}); the "
        f"batch is finished and recorded in {record}, not read: the same command downloads its results again "
        "(nothing is paid twice)"
    )


class BatchJobs:
    """Batch judging through an :class:`ApiClient`'s endpoint (module docstring); :meth:`post` answers like
    :meth:`ApiClient.post`, each reply marked ``batch``."""

    def __init__(self, client: ApiClient, record: str | Path | None):
        self.client = client
        self.settings = client.settings
        self.record = BatchRecord(record)
        # a batch's answers are kept before it is recorded as read: in the reply cache, or (judge.endpoint.cache=false)
        # in the run folder's own, so that a rerun after a crash at any point of the read pays for nothing again
        folder = self.record.path.parent if self.record.path else None
        self.cache = client.cache or (SqliteCache(folder / BATCH_REPLIES) if folder else None)
        # one create per batch among every process sharing the cache (module docstring, 2.)
        self.claims = Claims(self.cache.path.parent / "batch-claims") if self.cache else None

    def post(
        self, path: str, bodies: Sequence[dict[str, Any]], checks: Sequence[Check | None]
    ) -> list[Reply]:
        cache = self.cache
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
        rounds = idle = 0
        while rounds < self.settings.batch_rounds and idle < 2:
            pending = [
                lines[k]
                for k in todo
                if replies[k] is None and "http_4xx" not in failures.get(lines[k].custom_id, ())
            ]
            if not pending:
                break
            rounds += 1
            answered = self._round(path, pending, failures, errors)
            idle = 0 if answered else idle + 1
            for k in todo:
                body = answered.get(lines[k].custom_id)
                if (
                    body is not None and replies[k] is None
                ):  # (stored by the round, before it was recorded read)
                    replies[k] = Reply(body, attempts=rounds, failures=failures.get(lines[k].custom_id, []))
        for k in todo:
            if replies[k] is None:
                kinds = failures.get(lines[k].custom_id, [])
                error = errors.get(lines[k].custom_id, "no reply")
                replies[k] = Reply(
                    None, error=f"{error} (after {rounds} batch(es))", attempts=rounds, failures=kinds
                )
        out = [r for r in replies if r is not None]
        for r in out:
            r.batch = not r.cached
        return out

    def _round(
        self, path: str, lines: list[Line], failures: dict[str, list[str]], errors: dict[str, str]
    ) -> dict[str, dict[str, Any]]:
        """One batch of ``lines``: submitted (or picked up: the record, or the provider's own list), waited for, and
        its output read; the answers by custom id, every failure counted in ``failures`` and ``errors``."""
        digest = hashlib.sha256(input_file(path, lines).encode()).hexdigest()
        recorded = self.record.batches()  # the record read once per round
        marker = self.record.marker(recorded, digest)
        generation = int(marker.rsplit(".", 1)[1])
        # a batch of the same requests again (its first ended without answering them): its ids carry the generation,
        # so that no input file is ever submitted twice
        sent = [replace(ln, custom_id=f"{ln.custom_id}#{generation}") if generation else ln for ln in lines]
        original = {s.custom_id: ln.custom_id for s, ln in zip(sent, lines, strict=True)}
        content = input_file(path, sent)
        job = recorded.get(marker, {})
        if job.get("batch_id"):
            log.info(
                "batch %s (%d requests) picked up from %s", job["batch_id"], len(lines), self.record.path
            )
        else:
            job = self._claimed(content, digest, marker, path, len(lines), job)
        batch = self._wait(job["batch_id"])
        status = str(batch.get("status"))
        tally = Tally()
        out = {original[c]: body for c, body in self._read(batch, sent, tally).items()}
        cache = self.cache
        if cache is not None:  # stored before the batch is recorded as read
            for custom_id, body in out.items():
                cache.put(custom_id, body)
        for custom_id, kinds_of in tally.failures.items():
            failures.setdefault(original[custom_id], []).extend(kinds_of)
            errors[original[custom_id]] = tally.errors[custom_id]
        kinds = Counter(k for kinds_of in tally.failures.values() for k in kinds_of)
        self.record.add(
            {
                "marker": marker,
                "state": "read",
                "status": status,
                "answered": len(out),
                "failed": dict(kinds),
                "stray_lines": dict(tally.stray),
            }  # fmt: skip
        )
        log.info(
            "batch %s %s: %d of %d answered%s",
            job["batch_id"],
            status,
            len(out),
            len(lines),
            f" ({sum(tally.stray.values())} stray output line(s))" if tally.stray else "",
        )
        return out

    def _claimed(
        self, content: str, digest: str, marker: str, path: str, n: int, job: dict[str, Any]
    ) -> dict[str, Any]:
        """The batch of ``marker`` at this endpoint, created once among the processes sharing the cache: the first to
        hold the claim submits it and writes its id; the others, waiting, take that id."""
        if self.claims is None:
            return self._submit(content, digest, marker, path, n, job)
        key = hashlib.sha256(f"{self.client.base_url}\x1f{marker}".encode()).hexdigest()
        with self.claims.hold(key):
            made = self.claims.get(key)
            if made:
                if not job:
                    self.record.add({"marker": marker, "input": digest, "state": "intent", "requests": n})
                return self._created(marker, made, "created by another run sharing the reply cache")
            job = self._submit(content, digest, marker, path, n, job)
            self.claims.put(key, job["batch_id"])
            return job

    def _submit(
        self, content: str, digest: str, marker: str, path: str, n: int, job: dict[str, Any]
    ) -> dict[str, Any]:
        """The batch of ``marker``: found at the provider (a rerun after a crash, a create that timed out) or
        created, every step recorded before the next."""
        if not job:
            self.record.add({"marker": marker, "input": digest, "state": "intent", "requests": n})
        # the provider is searched for the marker before every create: a rerun after a crash, a create that timed
        # out, or another run folder's run of the same requests (its batch is taken, not paid for again)
        found = self._find("/batches", self._ours(marker, job.get("file_id")))
        if found:
            return self._created(marker, found, "found at the provider")
        name = f"{marker}.jsonl"
        file_id = job.get("file_id") or (
            self._find("/files", lambda f: f.get("filename") == name) if job else None
        )
        if not file_id:
            upload = self.client.call(
                "POST", "/files", data={"purpose": "batch"}, files={"file": (name, content.encode())}
            )
            file_id = _field(upload, "id", "upload the batch input file")
        self.record.add({"marker": marker, "state": "uploaded", "file_id": file_id})
        request = {"input_file_id": file_id, "endpoint": "/v1" + path, "completion_window": "24h",
                   "metadata": {METADATA_KEY: marker}}  # fmt: skip
        return self._create(
            marker,
            n,
            "the batch",
            lambda: self.client.call(
                "POST", "/batches", retry=False, json=request, headers={"Idempotency-Key": marker}
            ),
            lambda: self._find("/batches", self._ours(marker, file_id)),
        )

    def _create(
        self,
        marker: str,
        n: int,
        what: str,
        create: Callable[[], Reply],
        look_up: Callable[[], str | None],
    ) -> dict[str, Any]:
        """Create the batch of ``marker`` (``create``: one request, never retried by the client), retried with backoff
        up to ``max_retries``; a create that failed may have reached the provider, so ``look_up`` looks for the batch
        before each retry. A refusal (4xx) is not retried."""
        error = ""
        for attempt in range(self.settings.max_retries + 1):
            created = create()
            if created.body is not None and created.body.get("id"):
                return self._created(marker, str(created.body["id"]), f"submitted: {n} requests")
            error = created.error or "no 'id' in the reply"
            if created.failures and created.failures[-1] == "http_4xx":
                break
            time.sleep(min(self.settings.backoff_max, self.settings.backoff * 2**attempt))
            found = look_up()
            if found:
                return self._created(marker, found, "found at the provider after a create that failed")
        raise RuntimeError(
            f"could not create {what} {marker} at {self.client.base_url}: {error}; the intent is recorded in "
            f"{self.record.path}: the same command looks for it at the provider before creating it"
        )

    @staticmethod
    def _ours(marker: str, file_id: str | None) -> Callable[[dict[str, Any]], bool]:
        """Whether a batch of the provider's list is the one of ``marker``: its metadata says so, or its input is the
        file uploaded for it."""

        def match(batch: dict[str, Any]) -> bool:
            metadata = batch.get("metadata")
            tagged = isinstance(metadata, dict) and metadata.get(METADATA_KEY) == marker
            return tagged or (file_id is not None and batch.get("input_file_id") == file_id)

        return match

    def _created(self, marker: str, batch_id: str, how: str) -> dict[str, Any]:
        self.record.add({"marker": marker, "state": "created", "batch_id": batch_id})
        log.info("batch %s %s (%s)", batch_id, how, self.client.base_url)
        return {"marker": marker, "batch_id": batch_id}

    def _find(self, path: str, match: Callable[[dict[str, Any]], bool]) -> str | None:
        """The id of the first object of the provider's list at ``path`` that ``match`` accepts (paged by ``after``)."""
        params: dict[str, Any] = {"limit": 100}
        for _ in range(LOOKUP_PAGES):
            listed = self.client.call("GET", path, params=params)
            page = (listed.body or {}).get("data") if isinstance(listed.body, dict) else None
            if not isinstance(page, list):
                log.warning(
                    "could not search %s%s for a batch's marker (%s): the provider's list is unreadable",
                    self.client.base_url,
                    path,
                    listed.error or "no 'data' list",
                )
                return None
            for item in page:
                if isinstance(item, dict) and match(item) and item.get("id"):
                    return str(item["id"])
            if not (listed.body or {}).get("has_more") or not page or not isinstance(page[-1], dict):
                return None
            params["after"] = page[-1].get("id")
        return None

    def _wait(self, batch_id: str) -> dict[str, Any]:
        def ended(body: dict[str, Any]) -> dict[str, Any] | None:
            return body if body.get("status") in TERMINAL else None

        return wait_for(
            self.client, self.record.path, f"/batches/{batch_id}", f"batch {batch_id}", ended, "status"
        )

    def _read(self, batch: dict[str, Any], lines: list[Line], tally: Tally) -> dict[str, dict[str, Any]]:
        texts = [
            download(self.client, f"/files/{batch[key]}/content", f"the {key[:-8]} file of batch {batch.get('id')}",
                     self.record.path)
            for key in ("output_file_id", "error_file_id")
            if batch.get(key)
        ]  # fmt: skip
        status = batch.get("status")
        return read_output(
            texts,
            lines,
            tally,
            f"batch {batch.get('id')} ({status})",
            without_line="no_line" if status == "completed" else "batch_failed",
        )


def wait_for(
    client: ApiClient,
    record: Path | None,
    path: str,
    what: str,
    ended: Callable[[dict[str, Any]], dict[str, Any] | None],
    status_field: str,
) -> dict[str, Any]:
    """Poll ``path`` (a provider's batch) until ``ended`` gives its final body, every ``judge.endpoint.batch_poll`` seconds,
    doubling up to ``batch_poll_max``: a batch the provider answers 404 for is read as lost (its requests asked
    again); one not ended within ``batch_wait`` stops the run with :class:`BatchPending` (recorded in ``record``: the
    same command picks it up). The one loop of every provider's batches (OpenAI's, Anthropic's)."""
    settings = client.settings
    started = time.monotonic()
    delay = settings.batch_poll
    while True:
        polled = client.call("GET", path)
        final = ended(polled.body) if isinstance(polled.body, dict) else None
        if final is not None:
            return final
        if polled.body is None and (polled.error or "").startswith("HTTP 404"):
            log.warning(
                "%s is not known to %s (%s): it is read as lost, and its requests are asked again",
                what,
                client.base_url,
                polled.error,
            )
            return {"id": path.rsplit("/", 1)[-1], "status": LOST}
        if time.monotonic() - started + delay > settings.batch_wait:
            status = (polled.body or {}).get(status_field) if isinstance(polled.body, dict) else None
            raise BatchPending(
                f"{what} at {client.base_url} is {status or 'not answering'} after "
                f"{time.monotonic() - started:.0f} s (judge.endpoint.batch_wait={settings.batch_wait:g}); it is "
                f"recorded in {record}: the same command picks it up (every answer is stored as it arrives)"
            )
        time.sleep(delay)
        delay = min(delay * 2, settings.batch_poll_max)


def _field(reply: Reply, name: str, what: str) -> str:
    value = (reply.body or {}).get(name) if reply.body is not None else None
    if not value:
        raise RuntimeError(f"could not {what}: {reply.error or f'no {name!r} in the reply'}")
    return str(value)
