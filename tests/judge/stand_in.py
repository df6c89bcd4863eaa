"""The scaffold of the tests' local stand-ins of endpoints (real HTTP on 127.0.0.1): a threaded server on a free port
that hands each request to its owner, and the JSON replies they send."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Server(ThreadingHTTPServer):
    # a deep accept queue: a connection the stand-in has no time to accept is not one of the failures it injects
    request_queue_size = 256
    daemon_threads = True


def read_json(handler: BaseHTTPRequestHandler) -> Any:
    """The request's body, as JSON."""
    return json.loads(handler.rfile.read(int(handler.headers["Content-Length"])))


def send(
    handler: BaseHTTPRequestHandler,
    payload: Any,
    status: int = 200,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> None:
    """A reply: ``payload`` as JSON (or the bytes ``raw``), with ``status`` and ``headers``."""
    data = raw if raw is not None else json.dumps(payload).encode()
    handler.send_response(status)
    for k, v in (headers or {}).items():
        handler.send_header(k, v)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


class LocalServer:
    """Serves from ``port`` (0: a free one) in threads as soon as it is made: each request goes to :meth:`post` or
    :meth:`get` with its handler (a 404 unless the stand-in answers it); ``url`` is its ``/v1`` root; :meth:`close`
    or the end of a ``with`` block stops it."""

    def __init__(self, port: int = 0) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                owner.post(self)

            def do_GET(self) -> None:
                owner.get(self)

        self.http = Server(("127.0.0.1", port), Handler)
        self.port = self.http.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def post(self, handler: BaseHTTPRequestHandler) -> None:
        send(handler, {"error": {"message": f"no route {handler.path}"}}, 404)

    def get(self, handler: BaseHTTPRequestHandler) -> None:
        send(handler, {"error": {"message": f"no route {handler.path}"}}, 404)

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
