"""A faulty OpenAI-compatible stand-in server (real HTTP on 127.0.0.1): its answers are a deterministic function of
the prompt, and, seeded, it fails a share of the attempts in every way a real endpoint does: replies that are not
answers (a body that is not JSON, no choices, empty choices, no logprobs, a NaN, too many samples), 5xx, 429 with
Retry-After, replies slower than the client's timeout and dropped connections. It records, per prompt, the answers
it served and every failure it injected, so that a test can check that every prompt was answered once and every
stored value is what it served."""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# What the server injects, and the kind the client must count it as (pipeline.judge.api.replies.KINDS).
INJECTED = {
    "not_json": "not_json",
    "no_choices": "no_choices",
    "empty_choices": "no_choices",
    "no_logprobs": "no_logprobs",
    "nan": "not_finite",
    "two_samples": "wrong_samples",
    "http_500": "http_5xx",
    "http_429": "http_5xx",
    "slow": "timeout",
    "dropped": "connection",
}
# The chat path's alternatives: the label words any demo template reads.
WORDS = (" A", "A", " B", "B")


def prompt_key(path: str, body: dict) -> str:
    asked = body.get("prompt") if path.endswith("/completions") and "prompt" in body else body.get("messages")
    return hashlib.sha256(json.dumps([path, asked], sort_keys=True).encode()).hexdigest()[:16]


def logprob(key: str, token: object) -> float:
    """The deterministic answer: a log-probability in (-10.1, -0.1] for each prompt and token."""
    digest = hashlib.sha256(f"{key}:{token}".encode()).digest()
    return -(0.1 + int.from_bytes(digest[:4], "big") % 1000 / 100)


class Server(ThreadingHTTPServer):
    # a deep accept queue: a connection the stand-in has no time to accept is not one of the failures it injects
    request_queue_size = 256
    daemon_threads = True


class FaultyServer:
    def __init__(self, share: float = 0.5, seed: int = 0, max_failures: int = 3, slow: float = 1.5):
        self.share, self.seed, self.max_failures, self.slow = share, seed, max_failures, slow
        self.lock = threading.Lock()
        self.attempts: Counter[str] = Counter()
        self.served: dict[str, list] = {}  # prompt key -> the answer's log-probabilities, once per success
        self.successes: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()
        self.in_flight = self.max_in_flight = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    server.handle(self, body)
                finally:
                    with server.lock:
                        server.in_flight -= 1

        self.http = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    def __enter__(self) -> FaultyServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.http.shutdown()
        self.http.server_close()

    def failure(self, key: str) -> str | None:
        """What this attempt at the prompt does: fail (seeded by prompt and attempt), or answer."""
        with self.lock:
            attempt = self.attempts[key]
            self.attempts[key] += 1
        rng = random.Random(f"{self.seed}:{key}:{attempt}")
        if attempt < self.max_failures and rng.random() < self.share:
            return rng.choice(sorted(INJECTED))
        return None

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
            time.sleep(self.slow)
            handler.close_connection = True
            return
        if kind in ("http_500", "http_429"):
            status = 500 if kind == "http_500" else 429
            return self.send(handler, {"error": {"message": kind}}, status, {"Retry-After": "0"})
        answer, logprobs = self.answer(path, body, key)
        asked = body.get("logprobs") or body.get("logprob_token_ids")
        if (
            kind in ("no_logprobs", "nan") and not asked
        ):  # nothing to leave out: a reply without choices instead
            with self.lock:
                self.injected[kind] -= 1
                self.injected["empty_choices"] += 1
            kind = "empty_choices"
        if kind == "not_json":
            return self.send(handler, None, raw=b"<html>upstream error</html>")
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
        elif kind == "two_samples":
            answer["choices"].append(dict(answer["choices"][0], index=1))
        else:  # an answer
            with self.lock:
                self.successes[key] += 1
                self.served[key] = logprobs
        self.send(handler, answer)

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

    @staticmethod
    def send(
        handler, payload, status: int = 200, headers: dict | None = None, raw: bytes | None = None
    ) -> None:
        data = raw if raw is not None else json.dumps(payload).encode()
        handler.send_response(status)
        for k, v in (headers or {}).items():
            handler.send_header(k, v)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def expected_client_kinds(self) -> Counter[str]:
        """The failed attempts the client must count, by its kinds."""
        out: Counter[str] = Counter()
        for kind, n in self.injected.items():
            out[INJECTED[kind]] += n
        return out


class BatchServer(FaultyServer):
    """A stand-in of OpenAI's Batch API (``/files``, ``/batches``, ``/files/<id>/content``) over the same answers: a
    batch completes after ``polls`` polls; in the first batch, seeded, a share of the lines fail (a 500 in the error
    file, a body that is not an answer, a line left out); later batches answer every line."""

    def __init__(self, polls: int = 2, share: float = 0.3, seed: int = 0):
        super().__init__(share=0.0, seed=seed)
        self.polls, self.line_share = polls, share
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.created: list[str] = []
        self.line_failures: Counter[str] = Counter()
        server = self
        handler = self.http.RequestHandlerClass

        def do_get(h):
            server.get(h)

        def do_post(h):
            server.post(h)

        handler.do_GET = do_get
        handler.do_POST = do_post

    def post(self, h) -> None:
        length = int(h.headers["Content-Length"])
        raw = h.rfile.read(length)
        if h.path.endswith("/files"):
            from email.parser import BytesParser

            message = BytesParser().parsebytes(
                f"Content-Type: {h.headers['Content-Type']}\r\n\r\n".encode() + raw
            )
            content = next(p.get_payload(decode=True) for p in message.get_payload() if p.get_filename())
            with self.lock:
                file_id = f"file-{len(self.files)}"
                self.files[file_id] = content
            return self.send(h, {"id": file_id, "object": "file", "purpose": "batch"})
        body = json.loads(raw)
        with self.lock:
            batch_id = f"batch-{len(self.batches)}"
            self.batches[batch_id] = {"id": batch_id, "status": "in_progress", "input_file_id": body["input_file_id"],
                                      "endpoint": body["endpoint"], "polled": 0}  # fmt: skip
            self.created.append(batch_id)
        self.send(h, dict(self.batches[batch_id]))

    def get(self, h) -> None:
        parts = h.path.strip("/").split("/")  # v1 batches <id> | v1 files <id> content
        if parts[1] == "batches":
            with self.lock:
                batch = self.batches[parts[2]]
                batch["polled"] += 1
                if batch["polled"] >= self.polls and batch["status"] != "completed":
                    self.complete(batch)
                shown = {k: v for k, v in batch.items() if k != "polled"}
            return self.send(h, shown)
        return self.send(h, None, raw=self.files[parts[2]])

    def complete(self, batch: dict) -> None:
        """Answer every line of the batch's input file (the first batch with its seeded failures)."""
        first = batch["id"] == "batch-0"
        out, err = [], []
        for raw in self.files[batch["input_file_id"]].decode().splitlines():
            line = json.loads(raw)
            path = line["url"]
            key = prompt_key(path, line["body"])
            rng = random.Random(f"{self.seed}:{key}")
            fail = first and rng.random() < self.line_share
            kind = rng.choice(["http_500", "no_logprobs", "missing"]) if fail else None
            if kind == "missing":
                self.line_failures[kind] += 1
                continue
            if kind == "http_500":
                self.line_failures[kind] += 1
                err.append(
                    {
                        "custom_id": line["custom_id"],
                        "response": {"status_code": 500, "body": {}},
                        "error": None,
                    }
                )
                continue
            answer, logprobs = self.answer(path, line["body"], key)
            if kind == "no_logprobs":
                self.line_failures[kind] += 1
                answer["choices"][0].pop("logprobs")
            else:
                self.successes[key] += 1
                self.served[key] = logprobs
            out.append(
                {
                    "custom_id": line["custom_id"],
                    "response": {"status_code": 200, "body": answer},
                    "error": None,
                }
            )
        for name, rows in (("output_file_id", out), ("error_file_id", err)):
            file_id = f"file-{len(self.files)}"
            self.files[file_id] = "".join(json.dumps(r) + "\n" for r in rows).encode()
            batch[name] = file_id
        batch["status"] = "completed"
