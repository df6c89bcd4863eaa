"""A faulty OpenAI-compatible stand-in server (real HTTP on 127.0.0.1): its answers are a deterministic function of
the prompt, and, seeded, it fails a share of the attempts in every way a real endpoint does: replies that are not
answers (a body that is not JSON, no choices, empty choices, no logprobs, a NaN, too many samples, alternatives keyed by
text or without their token, a log-probability above 0, usage that is a list, an index that is a string), bodies built
to break a reader (nested 100 and 5,000 deep, a 310-digit integer, a lone surrogate, 5 MB, a 200 carrying an error),
5xx, 429 with Retry-After, replies slower than the client's timeout and dropped connections. It records, per prompt, the answers
it served and every failure it injected, so that a test can check that every prompt was answered once and every
stored value is what it served."""

from __future__ import annotations

import hashlib
import json
import random
import select
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler

from pipeline.judge.endpoint.batch import TERMINAL
from tests.judge.stand_in import LocalServer, read_json, send

# What the server injects, and the kind the client must count it as (pipeline.judge.endpoint.replies.KINDS).
INJECTED = {
    "not_json": "not_json",
    "no_choices": "no_choices",
    "empty_choices": "no_choices",
    "no_logprobs": "no_logprobs",
    "nan": "not_finite",
    "two_samples": "wrong_samples",
    # replies that parse but do not answer what was asked
    "text_keys": "bad_token",  # alternatives keyed by text (completions), or without their token (chat)
    "positive": "bad_logprob",  # a log-probability above 0
    "usage_list": "bad_usage",  # usage that is a list
    "string_index": "bad_index",  # a choice's index as a string
    # bodies built to break a reader (issue 47): each is refused by its kind, never a crash
    "deep_100": "too_deep",  # an answer nested 100 deep (it parses)
    "deep_5000": "not_json",  # nested deeper than the parser goes
    "huge_int": "bad_number",  # a log-probability written as an integer of 310 digits
    "surrogate": "bad_text",  # the generated text a lone UTF-16 surrogate
    "oversize": "too_large",  # an answer padded to 5 MB
    "error_200": "http_5xx",  # a 200 carrying an error object beside empty choices
    "http_500": "http_5xx",
    "http_429": "http_5xx",
    "slow": "timeout",
    "dropped": "connection",
}


def _deep(depth: int):
    return lambda answer: json.dumps(answer).encode()[:-1] + b', "x": ' + b"[" * depth + b"]" * depth + b"}"


def _huge(answer: dict) -> bytes:
    """The answer with its first log-probability written as an integer of 310 digits."""
    choice = answer["choices"][0]
    if "content" in (choice["logprobs"] or {}):
        choice["logprobs"]["content"][0]["top_logprobs"][0]["logprob"] = "HUGE"
    else:
        first = choice["logprobs"]["top_logprobs"][0]
        first[next(iter(first))] = "HUGE"
    return json.dumps(answer).encode().replace(b'"HUGE"', b"-" + b"9" * 310)


def _surrogate(answer: dict) -> bytes:
    choice = answer["choices"][0]
    if "message" in choice:
        choice["message"]["content"] = "\ud800"
    else:
        choice["text"] = "\ud800"
    return json.dumps(answer).encode()  # ASCII: the surrogate written as the escape \ud800


HOSTILE = {
    "deep_100": _deep(100),
    "deep_5000": _deep(5000),
    "huge_int": _huge,
    "surrogate": _surrogate,
    "oversize": lambda answer: json.dumps(dict(answer, padding="x" * (5 * 2**20))).encode(),
    "error_200": lambda answer: json.dumps(
        dict(answer, choices=[], error={"message": "upstream overloaded", "type": "server_error"})
    ).encode(),
}
# Batch output lines built to break a reader: nested 5,000 and 100 deep, a 310-digit integer, a lone surrogate (each
# refused whole, before its custom id is read: a stray line of its kind).
HOSTILE_LINES = (
    '{"custom_id": ' + "[" * 5000 + "]" * 5000 + "}",
    '{"custom_id": "x", "response": {"status_code": 200, "body": ' + "[" * 100 + "]" * 100 + "}}",
    '{"custom_id": "x", "response": {"status_code": 200, "body": {"n": -' + "9" * 310 + "}}}",
    '{"custom_id": "x", "response": {"status_code": 200, "body": {"text": "\\ud800"}}}',
)
# The chat path's alternatives: the label words any demo template reads.
WORDS = (" A", "A", " B", "B")


def prompt_key(path: str, body: dict) -> str:
    asked = body.get("prompt") if path.endswith("/completions") and "prompt" in body else body.get("messages")
    return hashlib.sha256(json.dumps([path, asked], sort_keys=True).encode()).hexdigest()[:16]


def logprob(key: str, token: object) -> float:
    """The deterministic answer: a log-probability in (-10.1, -0.1] for each prompt and token."""
    digest = hashlib.sha256(f"{key}:{token}".encode()).digest()
    return -(0.1 + int.from_bytes(digest[:4], "big") % 1000 / 100)


class FaultyServer(LocalServer):
    def __init__(
        self, share: float = 0.5, seed: int = 0, max_failures: int = 3, slow: float = 1.5, models: tuple = ()
    ):
        self.share, self.seed, self.max_failures, self.slow = share, seed, max_failures, slow
        # the snapshots a reply names as its model (a provider switching snapshots mid-run), by the prompt's key
        self.models = models
        self.model_of: dict[str, str] = {}  # prompt key -> the model its answer named
        self.lock = threading.Lock()
        self.attempts: Counter[str] = Counter()
        self.served: dict[str, list] = {}  # prompt key -> the answer's log-probabilities, once per success
        self.successes: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()
        self.in_flight = self.max_in_flight = 0
        self.no_usage: set[str] = set()  # prompts answered without usage
        super().__init__()  # serving from here on

    def post(self, handler: BaseHTTPRequestHandler) -> None:
        body = read_json(handler)
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self.handle(handler, body)
        finally:
            with self.lock:
                self.in_flight -= 1

    def failure(self, key: str) -> str | None:
        """What this attempt at the prompt does: fail (seeded by prompt and attempt), or answer."""
        with self.lock:
            attempt = self.attempts[key]
            self.attempts[key] += 1
        rng = random.Random(f"{self.seed}:{key}:{attempt}")
        if attempt < self.max_failures and rng.random() < self.share:
            return rng.choice(sorted(INJECTED))
        return None

    def hold(self, handler: BaseHTTPRequestHandler) -> None:
        """A reply slower than the client's timeout: nothing is written until the client hangs up (or ``slow``
        seconds pass). The server never closes first: a client that a loaded machine wakes late would read that
        close as a lost connection, not as the timeout it is."""
        sock = handler.connection
        deadline = time.monotonic() + self.slow
        while time.monotonic() < deadline:
            readable, _, _ = select.select([sock], [], [], 0.05)
            try:
                if readable and not sock.recv(1, socket.MSG_PEEK):
                    break  # the client closed its end
            except OSError:  # reset by the client
                break
        handler.close_connection = True

    def handle(self, handler: BaseHTTPRequestHandler, body: dict) -> None:
        path = handler.path
        key = prompt_key(path, body)
        kind = self.failure(key)
        if kind is not None:
            with self.lock:
                self.injected[kind] += 1
        if kind == "dropped":
            handler.close_connection = True
            return
        if kind == "slow":
            self.hold(handler)
            return
        if kind in ("http_500", "http_429"):
            status = 500 if kind == "http_500" else 429
            return send(handler, {"error": {"message": kind}}, status, {"Retry-After": "0"})
        answer, logprobs = self.answer(path, body, key)
        asked = body.get("logprobs") or body.get("logprob_token_ids")
        if (
            kind in ("no_logprobs", "nan", "text_keys", "positive", "huge_int") and not asked
        ):  # nothing to leave out: a reply without choices instead
            with self.lock:
                self.injected[kind] -= 1
                self.injected["empty_choices"] += 1
            kind = "empty_choices"
        if kind == "not_json":
            return send(handler, None, raw=b"<html>upstream error</html>")
        if kind in HOSTILE:
            return send(handler, None, raw=HOSTILE[kind](answer))
        if kind == "no_choices":
            answer.pop("choices")
        elif kind == "empty_choices":
            answer["choices"] = []
        elif kind == "no_logprobs":
            answer["choices"][0].pop("logprobs")
        elif kind == "nan":
            if path.endswith("/chat/completions"):
                answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]["logprob"] = float("nan")
            else:
                first = answer["choices"][0]["logprobs"]["top_logprobs"][0]
                first[next(iter(first))] = float("nan")
        elif kind in ("text_keys", "positive"):
            if path.endswith("/chat/completions"):
                alternative = answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"][0]
                if kind == "text_keys":
                    del alternative["token"]
                else:
                    alternative["logprob"] = 5.0
            else:
                first = answer["choices"][0]["logprobs"]["top_logprobs"][0]
                if kind == "text_keys":
                    first = answer["choices"][0]["logprobs"]["top_logprobs"][0] = {
                        k.removeprefix("token_id:"): v for k, v in first.items()
                    }
                else:
                    first[next(iter(first))] = 5.0
        elif kind == "usage_list":
            answer["usage"] = [answer["usage"]]
        elif kind == "string_index":
            answer["choices"][0]["index"] = "0"
        elif kind == "two_samples":
            answer["choices"].append(dict(answer["choices"][0], index=1))
        else:  # an answer; one prompt in five answered without its usage (an answer, its token counts unknown)
            if self.models:
                answer["model"] = self.models[int(key, 16) % len(self.models)]
            with self.lock:
                self.successes[key] += 1
                self.served[key] = logprobs
                if self.models:
                    self.model_of[key] = answer["model"]
            if int(key, 16) % 5 == 0:
                answer.pop("usage")
                self.no_usage.add(key)
        send(handler, answer)

    @property
    def served_models(self) -> Counter[str]:
        """The prompts answered, by the model their answer named (a prompt answered twice counts once)."""
        return Counter(self.model_of.values())

    def answer(self, path: str, body: dict, key: str) -> tuple[dict, list]:
        if path.endswith("/chat/completions"):
            alternatives = [{"token": w, "logprob": logprob(key, w)} for w in WORDS]
            first = {"token": WORDS[0], "logprob": alternatives[0]["logprob"], "top_logprobs": alternatives}
            choice = {"index": 0, "message": {"role": "assistant", "content": " A"}, "finish_reason": "length",
                      "logprobs": {"content": [first]}}  # fmt: skip
            usage = {"prompt_tokens": 20, "completion_tokens": 1}
            return {"choices": [choice], "usage": usage}, [a["logprob"] for a in alternatives]
        ids = body.get("logprob_token_ids") or []
        top = {f"token_id:{t}": logprob(key, t) for t in ids} or {"token_id:1": -0.5}
        choice = {"index": 0, "text": " A", "finish_reason": "length", "logprobs": {"top_logprobs": [top]}}
        usage = {"prompt_tokens": len(body.get("prompt", [])), "completion_tokens": 1}
        return {"choices": [choice], "usage": usage}, [top[f"token_id:{t}"] for t in ids]

    def expected_client_kinds(self) -> Counter[str]:
        """The failed attempts the client must count, by its kinds."""
        out: Counter[str] = Counter()
        for kind, n in self.injected.items():
            out[INJECTED[kind]] += n
        return out

    def check_counted(self, counted: Counter[str]) -> None:
        """The client counted every failure this server injected by its kind, but for attempts it had already given
        up on: on a loaded machine a reply (a failure of another kind, or an answer, then asked again) can reach
        the client after its timeout, which it counts as a timeout of its own. So each kind is counted at most as
        often as injected, and what is missing is made up by the client's extra timeouts."""
        expected = self.expected_client_kinds()
        late = counted["timeout"] - expected["timeout"]
        missing = {k: expected[k] - counted[k] for k in set(expected) | set(counted) if k != "timeout"}
        again = sum(n - 1 for n in self.successes.values())
        assert all(n >= 0 for n in missing.values()), (counted, expected)
        assert sum(missing.values()) + again <= late, (counted, expected, again)


class BatchServer(FaultyServer):
    """A stand-in of OpenAI's Batch API (``/files``, ``/batches``, ``/files/<id>/content``, the lists ``GET /batches``
    and ``GET /files``) over the same answers: a batch completes after ``polls`` polls, or ends as ``ends`` says
    (batch index -> expired | failed | cancelled, answering ``partial`` of its lines first). Seeded, a share of the
    lines fail (a 500 in the error file, a body that is not an answer, a line left out): in the first batch, or with
    ``every`` in every batch (drawn again per batch). ``create_delay``: the create is answered that many seconds after
    the batch exists (a client with a shorter timeout never sees its id). ``malformed``: the first batch's output also
    holds lines of every wrong type and, for one request, two different answers. ``keep_metadata=False``: a provider
    that drops a batch's metadata (its input file's id still tells it)."""

    def __init__(self, polls: int = 2, share: float = 0.3, seed: int = 0, every: bool = False,
                 ends: dict[int, str] | None = None, partial: float = 0.5, create_delay: float = 0.0,
                 malformed: bool = False, keep_metadata: bool = True, download_failures: int = 0,
                 upload_delay: float = 0.0):  # fmt: skip
        super().__init__(share=0.0, seed=seed)
        self.upload_delay = (
            upload_delay  # seconds an upload takes (two runs at once both upload before either creates)
        )
        # each output or error file fails its first ``download_failures`` downloads (a 404, a 500, a 502, a dropped
        # connection, in turn) and is then served
        self.download_failures = download_failures
        self.downloads: Counter[str] = Counter()
        self.forgotten: set[str] = (
            set()
        )  # batches the provider no longer knows (a 404 for their id, not listed)
        self.forget_after: dict[str, int] = {}  # batch id -> forgotten once polled that many times
        self.polls, self.line_share, self.every = polls, share, every
        self.ends, self.partial, self.create_delay, self.malformed = (
            ends or {},
            partial,
            create_delay,
            malformed,
        )
        self.keep_metadata = keep_metadata  # False: a provider that drops a batch's metadata
        self.idempotency_keys: list[str | None] = []
        self.files: dict[str, bytes] = {}
        self.filenames: dict[str, str] = {}
        self.batches: dict[str, dict] = {}
        self.created: list[str] = []
        self.inputs: list[bytes] = []  # the input file of every batch created
        self.line_failures: Counter[str] = Counter()

    def post(self, h) -> None:
        length = int(h.headers["Content-Length"])
        raw = h.rfile.read(length)
        if h.path.endswith("/files"):
            from email.parser import BytesParser

            time.sleep(self.upload_delay)
            message = BytesParser().parsebytes(
                f"Content-Type: {h.headers['Content-Type']}\r\n\r\n".encode() + raw
            )
            part = next(p for p in message.get_payload() if p.get_filename())
            with self.lock:
                file_id = f"file-{len(self.files)}"
                self.files[file_id] = part.get_payload(decode=True)
                self.filenames[file_id] = part.get_filename()
            return send(
                h, {"id": file_id, "object": "file", "purpose": "batch", "filename": part.get_filename()}
            )
        body = json.loads(raw)
        with self.lock:
            batch_id = f"batch-{len(self.batches)}"
            self.batches[batch_id] = {"id": batch_id, "status": "in_progress", "input_file_id": body["input_file_id"],
                                      "endpoint": body["endpoint"],
                                      "metadata": body.get("metadata") if self.keep_metadata else None,
                                      "polled": 0}  # fmt: skip
            self.idempotency_keys.append(h.headers.get("Idempotency-Key"))
            self.created.append(batch_id)
            self.inputs.append(self.files[body["input_file_id"]])
        if self.create_delay:
            time.sleep(self.create_delay)
        send(h, self.shown(self.batches[batch_id]))

    @staticmethod
    def shown(batch: dict) -> dict:
        return {k: v for k, v in batch.items() if k != "polled"}

    def get(self, h) -> None:
        route, _, query = h.path.partition("?")
        parts = route.strip("/").split("/")  # v1 batches [<id>] | v1 files [<id> content]
        if len(parts) == 2:  # a list, newest first, paged by ?after=<id>
            with self.lock:
                items = (
                    [self.shown(b) for b in reversed(self.batches.values()) if b["id"] not in self.forgotten]
                    if parts[1] == "batches"
                    else [
                        {"id": f, "object": "file", "purpose": "batch", "filename": n}
                        for f, n in reversed(self.filenames.items())
                    ]  # fmt: skip
                )
            after = dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("after")
            if after:
                items = items[[i["id"] for i in items].index(after) + 1 :]
            return send(h, {"object": "list", "data": items[:2], "has_more": len(items) > 2})
        if parts[1] == "batches":
            with self.lock:
                known = self.batches.get(parts[2])
                if known is not None and known["polled"] >= self.forget_after.get(parts[2], 10**9):
                    self.forgotten.add(parts[2])
            if parts[2] in self.forgotten or parts[2] not in self.batches:
                return send(h, {"error": {"message": f"No batch found with id '{parts[2]}'"}}, 404)
            with self.lock:
                batch = self.batches[parts[2]]
                batch["polled"] += 1
                if batch["polled"] >= self.polls and batch["status"] not in TERMINAL:
                    self.complete(batch)
                shown = self.shown(batch)
            return send(h, shown)
        with self.lock:
            attempt = self.downloads[parts[2]]
            self.downloads[parts[2]] += 1
        if attempt < self.download_failures:
            fault = ("404", "500", "502", "dropped")[attempt % 4]
            if fault == "dropped":
                h.close_connection = True
                return None
            return send(h, {"error": {"message": f"injected {fault}"}}, int(fault))
        return send(h, None, raw=self.files[parts[2]])

    def complete(self, batch: dict) -> None:
        """Answer the lines of the batch's input file (with its seeded failures), or end it as ``ends`` says."""
        index = int(batch["id"].split("-")[1])
        ends = self.ends.get(index)
        out, err = [], []
        raws = self.files[batch["input_file_id"]].decode().splitlines()
        last = json.loads(raws[-1])["custom_id"]
        for raw in raws:
            line = json.loads(raw)
            if self.malformed and index == 0 and line["custom_id"] == last:
                continue  # its only line is malformed (below)
            path = line["url"]
            key = prompt_key(path, line["body"])
            rng = random.Random(f"{self.seed}:{key}:{index if self.every else 0}")
            if ends is not None and rng.random() >= self.partial:
                continue  # the batch ended before this line
            fail = (index == 0 or self.every) and rng.random() < self.line_share
            kind = rng.choice(["http_500", "no_logprobs", "missing", "missing"]) if fail else None
            if kind == "missing":
                self.line_failures[kind] += 1
                continue
            if kind == "http_500":
                self.line_failures[kind] += 1
                err.append({"custom_id": line["custom_id"], "response": {"status_code": 500, "body": {}},
                            "error": None})  # fmt: skip
                continue
            answer, logprobs = self.answer(path, line["body"], key)
            if kind == "no_logprobs":
                self.line_failures[kind] += 1
                answer["choices"][0].pop("logprobs")
            elif self.malformed and index == 0 and len(out) == 0:
                self.line_failures["conflict"] += 1  # two different answers: neither is taken
                other = json.loads(json.dumps(answer))
                other["choices"][0]["text"] = " B"
                out.append({"custom_id": line["custom_id"], "response": {"status_code": 200, "body": other}})
            else:
                self.successes[key] += 1
                self.served[key] = logprobs
            out.append({"custom_id": line["custom_id"], "response": {"status_code": 200, "body": answer},
                        "error": None})  # fmt: skip
        if self.malformed and index == 0:
            out += [{"custom_id": [last], "response": {"status_code": 200}}, {"custom_id": None}, ["a list"],
                    {"custom_id": "unknown", "response": {"status_code": 200, "body": {}}}]  # fmt: skip
            self.line_failures["bad_line"] += 1
            out.append({"custom_id": last, "response": "a string"})
        for name, rows in (("output_file_id", out), ("error_file_id", err)):
            file_id = f"file-{len(self.files)}"
            text = "".join(json.dumps(r) + "\n" for r in rows)
            if self.malformed and index == 0 and name == "output_file_id":
                text += "".join(line + "\n" for line in HOSTILE_LINES)
            self.files[file_id] = (text + ("{cut sh" if self.malformed and index == 0 else "")).encode()
            batch[name] = file_id
        batch["status"] = ends or "completed"
