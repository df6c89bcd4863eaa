"""A stand-in of Anthropic's Messages API (real HTTP on 127.0.0.1): ``POST /v1/messages`` and the Message Batches
endpoints (``POST /v1/messages/batches``, ``GET /v1/messages/batches[/<id>[/results]]``).

A message's answer is a deterministic function of what was asked (the system prompt, the turns and the sample's
``metadata.user_id``): a verdict request (``max_tokens`` at most 8) answers one word, ``A`` or ``B`` (with the
leading space a model gives after a prefilled turn); any other request answers a sentence. It checks the
headers (``x-api-key``, ``anthropic-version``) and the body (no ``n``, no log-probabilities, a final assistant turn
without trailing whitespace), refusing what the real API refuses with a 400, and records every answer it served by
what was asked, so that a test can recompute every stored value. Seeded, it fails a share of the attempts
(``overloaded_error`` 529, a 500, a body that is not a message).

Batches end after ``polls`` polls. In the first batch, seeded, a share of the lines is ``errored``
(``overloaded_error``), ``expired`` or left out, one line is refused (``invalid_request_error``) and one stray line
names no request. ``lost_create``: the first create makes the batch and answers a 500 (the client must find the
batch, not create it again).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections import Counter
from datetime import UTC, datetime

from tests.judge.stand_in import LocalServer, read_json, send

KEY = "sk-ant-stand-in"
VERSION = "2023-06-01"


def asked_key(body: dict) -> str:
    """What decides an answer: everything asked but the model and the sampling settings."""
    asked = [body.get("system"), body.get("messages"), (body.get("metadata") or {}).get("user_id")]
    return hashlib.sha256(json.dumps(asked, sort_keys=True).encode()).hexdigest()[:20]


def conversation_key(body: dict) -> str:
    """A prompt, whichever sample: the system prompt and the turns."""
    return hashlib.sha256(
        json.dumps([body.get("system"), body.get("messages")], sort_keys=True).encode()
    ).hexdigest()[:20]


# a batch line's error by outcome: an overloaded server (worth asking again), a request refused as made
ERRORS = {
    "errored": ("overloaded_error", "Overloaded"),
    "refused": ("invalid_request_error", "prompt is too long"),
}


class AnthropicServer(LocalServer):
    def __init__(self, share: float = 0.0, seed: int = 0, polls: int = 2, line_share: float = 0.0,
                 lost_create: bool = False, max_failures: int = 2, results_failures: int = 0):  # fmt: skip
        self.share, self.seed, self.polls, self.line_share = share, seed, polls, line_share
        # each ended batch's results fail their first ``results_failures`` downloads (a 404, then a 500, in turn)
        self.results_failures = results_failures
        self.downloads: Counter[str] = Counter()
        self.lost_create, self.max_failures = lost_create, max_failures
        self.lock = threading.RLock()
        self.attempts: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()
        self.refused: list[
            str
        ] = []  # why the stand-in refused a request as the API would (should stay empty)
        # conversation key -> {"messages", "system", "words": {user_id: served text}}
        self.served: dict[str, dict] = {}
        self.requests = 0
        self.batches: dict[str, dict] = {}
        self.creates = 0
        self.line_outcomes: Counter[str] = Counter()
        super().__init__()  # serving from here on

    # --- the wire -------------------------------------------------------------------------------------------------

    def post(self, h) -> None:
        self.route(h, read_json(h))

    def get(self, h) -> None:
        self.route(h, None)

    def error(self, h, status: int, kind: str, message: str) -> None:
        send(h, {"type": "error", "error": {"type": kind, "message": message}}, status)

    def route(self, h, body: dict | None) -> None:
        if h.headers.get("x-api-key") != KEY or h.headers.get("anthropic-version") != VERSION:
            self.refused.append(f"headers: {dict(h.headers)}")
            return self.error(h, 401, "authentication_error", "x-api-key and anthropic-version are required")
        if "Authorization" in h.headers:
            self.refused.append("an Authorization header")
        route, _, query = h.path.partition("?")
        parts = route.strip("/").split("/")  # v1 messages [batches [<id> [results]]]
        if parts == ["v1", "messages"] and body is not None:
            return self.message(h, body)
        if parts == ["v1", "messages", "batches"]:
            return self.create(h, body) if body is not None else self.list(h, query)
        if len(parts) == 4:
            return self.poll(h, parts[3])
        if len(parts) == 5 and parts[4] == "results":
            return self.results(h, parts[3])
        return self.error(h, 404, "not_found_error", h.path)

    # --- messages -------------------------------------------------------------------------------------------------

    def problem(self, body: dict) -> str | None:
        """What the real API would refuse in ``body`` (a 400)."""
        unknown = set(body) - {"model", "max_tokens", "messages", "system", "temperature", "top_p", "stop_sequences",
                               "metadata"}  # fmt: skip
        if unknown:
            return f"unknown fields {sorted(unknown)}"
        turns = body.get("messages") or []
        if not turns or turns[0].get("role") != "user":
            return "the first turn must be the user's"
        if turns[-1].get("role") == "assistant" and turns[-1]["content"] != turns[-1]["content"].rstrip():
            return "final assistant content cannot end with trailing whitespace"
        if not 0 <= body.get("temperature", 1.0) <= 1:
            return "temperature out of [0, 1]"
        return None

    def answer(self, body: dict) -> dict:
        """The message answering ``body`` (module docstring), recorded as served."""
        key = asked_key(body)
        digest = hashlib.sha256(key.encode()).digest()
        verdict = body["max_tokens"] <= 8
        text = (
            (" A" if digest[0] % 3 else " B") if verdict else f"Reason {key[:6]}: the first one reads better."
        )
        with self.lock:
            record = self.served.setdefault(
                conversation_key(body),
                {"messages": body["messages"], "system": body.get("system"), "texts": {}},
            )
            record["texts"][(body.get("metadata") or {}).get("user_id")] = text
        words = sum(len(str(t["content"]).split()) for t in body["messages"]) + len(
            str(body.get("system") or "").split()
        )
        return {"id": f"msg_{key}", "type": "message", "role": "assistant", "model": body["model"],
                "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": words, "output_tokens": len(text.split()), "cache_read_input_tokens": 0,
                          "cache_creation_input_tokens": 0}}  # fmt: skip

    def message(self, h, body: dict) -> None:
        why = self.problem(body)
        if why is not None:
            self.refused.append(why)
            return self.error(h, 400, "invalid_request_error", why)
        key = asked_key(body)
        with self.lock:
            self.requests += 1
            attempt = self.attempts[key]
            self.attempts[key] += 1
        rng = random.Random(f"{self.seed}:{key}:{attempt}")
        if attempt < self.max_failures and rng.random() < self.share:
            kind = rng.choice(["overloaded", "http_500", "not_a_message"])
            with self.lock:
                self.injected[kind] += 1
            if kind == "overloaded":
                return self.error(h, 529, "overloaded_error", "Overloaded")
            if kind == "http_500":
                return self.error(h, 500, "api_error", "Internal server error")
            return send(h, {"type": "message", "content": "not a list"})
        send(h, self.answer(body))

    # --- message batches ------------------------------------------------------------------------------------------

    def shown(self, batch: dict) -> dict:
        return {k: v for k, v in batch.items() if not k.startswith("_")}

    def create(self, h, body: dict) -> None:
        requests = body.get("requests")
        if not isinstance(requests, list) or not requests:
            return self.error(h, 400, "invalid_request_error", "requests must be a non-empty list")
        for r in requests:
            cid = str(r.get("custom_id"))
            if not (1 <= len(cid) <= 64 and all(c.isalnum() or c in "_-" for c in cid)):
                self.refused.append(f"custom_id {cid!r}")
                return self.error(
                    h, 400, "invalid_request_error", f"custom_id {cid!r} does not match the pattern"
                )
            why = self.problem(r.get("params") or {})
            if why is not None:
                self.refused.append(why)
                return self.error(h, 400, "invalid_request_error", why)
        with self.lock:
            self.creates += 1
            index = len(self.batches)
            batch_id = f"msgbatch_{index:04d}"
            self.batches[batch_id] = {
                "id": batch_id, "type": "message_batch", "processing_status": "in_progress",
                "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0, "canceled": 0,
                                   "expired": 0},
                "created_at": datetime.now(UTC).isoformat().replace("+00:00", "Z"), "ended_at": None,
                "results_url": None, "_requests": requests, "_polled": 0, "_index": index,
            }  # fmt: skip
        if self.lost_create and index == 0:
            return self.error(h, 500, "api_error", "the create was lost on its way back")
        send(h, self.shown(self.batches[batch_id]))

    def list(self, h, query: str) -> None:
        params = dict(p.split("=", 1) for p in query.split("&") if "=" in p)
        with self.lock:
            items = [self.shown(b) for b in reversed(self.batches.values())]
        after = params.get("after_id")
        if after:
            items = items[[i["id"] for i in items].index(after) + 1 :]
        page = items[:2]
        send(h, {"data": page, "has_more": len(items) > 2, "first_id": page[0]["id"] if page else None,
                           "last_id": page[-1]["id"] if page else None})  # fmt: skip

    def poll(self, h, batch_id: str) -> None:
        with self.lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return self.error(h, 404, "not_found_error", batch_id)
            batch["_polled"] += 1
            if batch["_polled"] >= self.polls and batch["processing_status"] != "ended":
                self.end(batch)
            shown = self.shown(batch)
        send(h, shown)

    def end(self, batch: dict) -> None:
        """Answer the batch's requests (the first batch with its seeded failures: module docstring)."""
        lines, counts = [], Counter()
        first = batch["_index"] == 0
        for n, r in enumerate(batch["_requests"]):
            rng = random.Random(f"{self.seed}:{r['custom_id']}")
            outcome = "succeeded"
            if first and n == 0:
                outcome = "refused"
            elif first and rng.random() < self.line_share:
                outcome = rng.choice(["errored", "expired", "missing"])
            self.line_outcomes[outcome] += 1
            if outcome == "missing":
                counts["expired"] += 1
                continue
            if outcome == "succeeded":
                result = {"type": "succeeded", "message": self.answer(r["params"])}
            elif outcome in ERRORS:
                kind, message = ERRORS[outcome]
                result = {
                    "type": "errored",
                    "error": {"type": "error", "error": {"type": kind, "message": message}},
                }
            else:
                result = {"type": "expired"}
            counts["errored" if outcome == "refused" else outcome] += 1
            lines.append({"custom_id": r["custom_id"], "result": result})
        if first:
            lines.append(
                {"custom_id": "not-one-of-its-requests", "result": {"type": "succeeded", "message": {}}}
            )
        batch["_results"] = "".join(json.dumps(x) + "\n" for x in lines)
        batch["request_counts"] = {"processing": 0, "succeeded": counts["succeeded"], "errored": counts["errored"],
                                   "canceled": 0, "expired": counts["expired"]}  # fmt: skip
        batch["processing_status"] = "ended"
        batch["ended_at"] = datetime.now(UTC).isoformat()
        batch["results_url"] = f"{self.url}/messages/batches/{batch['id']}/results"

    def results(self, h, batch_id: str) -> None:
        with self.lock:
            batch = self.batches[batch_id]
        if batch["processing_status"] != "ended":
            return self.error(h, 400, "invalid_request_error", "the batch has not ended")
        with self.lock:
            attempt = self.downloads[batch_id]
            self.downloads[batch_id] += 1
        if attempt < self.results_failures:
            status = (404, 500)[attempt % 2]
            return self.error(h, status, "not_found_error" if status == 404 else "api_error", "injected")
        send(h, None, raw=batch["_results"].encode())
