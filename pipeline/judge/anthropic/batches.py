"""Message Batches (``judge.endpoint.batch`` with ``judge.backend=anthropic``): the requests of an engine call as batches
of Anthropic's Message Batches API, at the batch price, with the lifecycle of :mod:`pipeline.judge.endpoint.batch` (an
intent recorded before anything is paid for, a batch that ends read whatever its state, rounds for what it did not
answer, a read batch never picked up again); what differs is the wire:

- a batch is created with its requests inline (``POST /messages/batches``, each ``{custom_id, params}``; no file);
  a ``custom_id`` is at most 64 letters, digits, ``_`` or ``-``, so a request's id (its cache key, ``#n`` for a batch
  of the same requests again) goes as ``<56 hex of its SHA-256>-<n>``;
- it is polled at ``GET /messages/batches/<id>`` until its ``processing_status`` is ``ended``;
- its results are read from ``GET /messages/batches/<id>/results`` (JSON lines): ``succeeded`` lines are read as
  replies (:mod:`pipeline.judge.anthropic.messages`); an ``errored`` line is a refusal (``invalid_request_error``:
  ``http_4xx``, not asked again in the run) or a server error (``http_5xx``); ``canceled`` and ``expired`` lines, and
  requests without a line, go into the next batch (``batch_failed``);
- a batch carries no metadata, so a create that failed or timed out is looked up among the provider's batches
  (``GET /messages/batches``) as one created after the intent was recorded with as many requests and not recorded
  under another marker; exactly one such batch is taken, none means it was not created (so it is created), and
  several stop the run with their ids (cancel the ones that are not this run's, then rerun). The results' ids are
  checked against the requests: a line naming none of them is stray.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime
from typing import Any

from pipeline.judge.endpoint.batch import LOOKUP_PAGES, LOST, BatchJobs, download, wait_for
from pipeline.judge.endpoint.batch_lines import Line, Tally, read_output
from pipeline.judge.endpoint.parse import parse_json
from pipeline.judge.endpoint.replies import Refused

log = logging.getLogger(__name__)

ENDED = "ended"
# Seconds of clock difference allowed between this machine and the provider when a batch's creation time is
# compared with the intent's.
CLOCK_SKEW = 60.0
# An errored line's error type that is the request's own fault (a refusal): not asked again in the run.
REFUSED = frozenset({"invalid_request_error", "authentication_error", "permission_error", "not_found_error"})


def provider_id(custom_id: str) -> str:
    """A request's id as the Messages Batches API takes it (``^[a-zA-Z0-9_-]{1,64}$``)."""
    key, _, generation = custom_id.partition("#")
    return f"{hashlib.sha256(key.encode()).hexdigest()[:56]}-{generation or 0}"


class MessageBatches(BatchJobs):
    """Batch judging through Anthropic's Message Batches (module docstring); ``post`` as :class:`BatchJobs`."""

    def _submit(
        self, content: str, digest: str, marker: str, path: str, n: int, job: dict[str, Any]
    ) -> dict[str, Any]:
        entries = [json.loads(raw) for raw in content.splitlines() if raw.strip()]
        requests = [{"custom_id": provider_id(e["custom_id"]), "params": e["body"]} for e in entries]
        if not job:
            self.record.add({"marker": marker, "input": digest, "state": "intent", "requests": n})
            job = self.record.batches().get(marker, {})
        else:
            found = self._look_up(job, n)
            if found:
                return self._created(marker, found, "found at the provider")
        return self._create(
            marker,
            n,
            "the message batch",
            lambda: self.client.call("POST", "/messages/batches", retry=False, json={"requests": requests}),
            lambda: self._look_up(job, n),
        )

    def _look_up(self, job: dict[str, Any], n: int) -> str | None:
        """The provider's batch that is the one of ``job`` (module docstring), or None."""
        since = float(job.get("time") or 0.0) - CLOCK_SKEW
        known = {str(b.get("batch_id")) for b in self.record.batches().values() if b.get("batch_id")}
        candidates = []
        params: dict[str, Any] = {"limit": 100}
        for _ in range(LOOKUP_PAGES):
            listed = self.client.call("GET", "/messages/batches", params=params)
            page = (listed.body or {}).get("data") if isinstance(listed.body, dict) else None
            if not isinstance(page, list):
                log.warning(
                    "could not list the message batches at %s: %s", self.client.base_url, listed.error
                )
                return None
            for batch in page:
                if (
                    isinstance(batch, dict)
                    and self._could_be(batch, since, n)
                    and str(batch["id"]) not in known
                ):
                    candidates.append(str(batch["id"]))
            if not (listed.body or {}).get("has_more") or not page:
                break
            params["after_id"] = (listed.body or {}).get("last_id")
        if len(candidates) > 1:
            raise RuntimeError(
                f"message batches {candidates} at {self.client.base_url} could each be the one this run created "
                f"(recorded in {self.record.path}): cancel those that are not this run's, then run the same command"
            )
        return candidates[0] if candidates else None

    @staticmethod
    def _could_be(batch: dict[str, Any], since: float, n: int) -> bool:
        counts = batch.get("request_counts")
        if not batch.get("id") or not isinstance(counts, dict):
            return False
        try:
            created = datetime.fromisoformat(str(batch.get("created_at")).replace("Z", "+00:00")).timestamp()
            total = sum(int(v) for v in counts.values())
        except (TypeError, ValueError):
            return False
        return created >= since and total == n

    def _wait(self, batch_id: str) -> dict[str, Any]:
        def ended(body: dict[str, Any]) -> dict[str, Any] | None:
            return {**body, "status": ENDED} if body.get("processing_status") == ENDED else None

        path = f"/messages/batches/{batch_id}"
        return wait_for(
            self.client, self.record.path, path, f"message batch {batch_id}", ended, "processing_status"
        )

    def _read(self, batch: dict[str, Any], lines: list[Line], tally: Tally) -> dict[str, dict[str, Any]]:
        """The batch's results as the lines of an output file (:func:`pipeline.judge.endpoint.batch_lines.read_output`:
        every reply checked, conflicts and stray lines counted)."""
        ours = {provider_id(ln.custom_id): ln.custom_id for ln in lines}
        text = (
            ""  # a batch the provider no longer knows has no results: its requests go into the next batch
            if batch.get("status") == LOST
            else download(
                self.client,
                f"/messages/batches/{batch.get('id')}/results",
                f"the results of message batch {batch.get('id')}",
                self.record.path,
            )
        )
        converted = (as_output_line(raw, ours) for raw in text.splitlines())
        output = "".join(line + "\n" for line in converted if line and line.strip())
        return read_output([output], lines, tally, f"message batch {batch.get('id')}", "batch_failed")


def as_output_line(raw: str, ours: dict[str, str]) -> str | None:
    """A results line as a line of an OpenAI batch output file (the reader's form): a ``succeeded`` line a 200 with
    the message; an ``errored`` one the status of its error's type; ``canceled`` and ``expired`` no line at all
    (their requests go into the next batch); anything else as it came (counted stray or ``bad_line``)."""
    try:
        entry = parse_json(raw)
    except Refused:  # read again, and counted, as the output line it is
        return raw
    if not isinstance(entry, dict) or not isinstance(entry.get("result"), dict):
        return raw
    custom_id = ours.get(str(entry.get("custom_id")), entry.get("custom_id"))
    result = entry["result"]
    kind = result.get("type")
    if kind == "succeeded":
        return json.dumps(
            {"custom_id": custom_id, "response": {"status_code": 200, "body": result.get("message")}}
        )
    if kind == "errored":
        error: dict[str, Any] = result["error"] if isinstance(result.get("error"), dict) else {}
        inner: dict[str, Any] = error["error"] if isinstance(error.get("error"), dict) else error
        status = 400 if str(inner.get("type")) in REFUSED else 500
        return json.dumps(
            {
                "custom_id": custom_id,
                "response": {"status_code": status, "body": None},
                "error": inner or "errored",
            }
        )
    if kind in ("canceled", "expired"):
        return None
    return raw
