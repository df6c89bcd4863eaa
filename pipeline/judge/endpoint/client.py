"""A judge behind an OpenAI-compatible API: bounded concurrency, retries, a persistent cache, token counts,
and the engine that answers the judge worker's prompts through it (:class:`pipeline.judge.openai.engine.ApiEngine`, two paths).

:class:`ApiClient` sends a batch of request bodies to one endpoint with at most ``concurrency`` in flight
(asyncio + httpx), and returns one :class:`Reply` per body, in order:

- **Retries.** 408, 409, 429, every 5xx, timeouts and lost connections are retried with exponential backoff and full jitter
  (``backoff * 2**attempt``, capped at ``backoff_max``, times a uniform draw in [0.5, 1)). A ``Retry-After``
  header (seconds or an HTTP date) is honoured when it asks for longer. Retrying stops after ``max_retries``
  attempts or ``retry_for`` seconds. A server that goes away and comes back within that time costs retries,
  not the run.
- **Replies that are not answers.** A 2xx whose body does not parse, or that the request's check refuses
  (:mod:`pipeline.judge.endpoint.replies`: a reply that does not answer what was asked), is a failed attempt of its kind:
  retried like a 5xx, never cached. A cached reply is checked again when it is served.
- **Failures.** A request that keeps failing, or that the server refuses (another 4xx), comes back as a
  :class:`Reply` with its ``error`` (status and the server's message). The others in the batch are unaffected.
  Every failed attempt's kind is in the reply's ``failures`` (counted per prompt in the run's stats).
- **The cache.** A SQLite file keyed by the SHA-256 of everything that decides a response: the endpoint's
  URL, the path and the exact request body (model, prompt, sampling settings). A cached reply is returned
  without a request; only successful replies are stored.
- **Secrets.** The key is read from the environment variable named in the config, only here, at the moment a
  request is built; it is never part of a cache key, a config, a log line or an error message.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import json
import logging
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.config.judging import EndpointConfig
from pipeline.judge.endpoint.parse import MAX_BYTES, parse_json
from pipeline.judge.endpoint.replies import Check, Refused
from pipeline.judge.spec import ApiEndpoint
from pipeline.storage.sqlite import SqliteCache

log = logging.getLogger(__name__)


# Retried besides every 5xx (a server's error, e.g. Anthropic's 529 "overloaded"): timeouts, conflicts, rate limits.
RETRY_STATUS = frozenset({408, 409, 429})


MAX_RETRY_AFTER = 600.0


# The seed of the retries' jitter (reproducible backoff).
JITTER_SEED = 0


@dataclass
class Reply:
    body: dict[str, Any] | None  # the response's JSON (None when it failed)
    error: str | None = None
    cached: bool = False
    attempts: int = 0
    # the kind of every attempt that failed (pipeline.judge.endpoint.replies.KINDS), the retried ones included
    failures: list[str] = field(default_factory=list)
    # answered as a line of a batch job (judge.endpoint.batch), at the batch price
    batch: bool = False


@dataclass
class ClientStats:
    requests: int = 0  # HTTP requests sent, retries included
    retries: int = 0
    cached: int = 0
    failed: int = 0
    seconds_waiting: float = 0.0  # backing off
    by_status: dict[str, int] = field(default_factory=dict)


def cache_key(base_url: str, path: str, body: dict[str, Any]) -> str:
    text = json.dumps({"url": base_url.rstrip("/"), "path": path, "body": body}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def retry_after(value: str | None) -> float | None:
    """Seconds asked for by a ``Retry-After`` header (delta seconds or an HTTP date), None if absent or bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff_delay(attempt: int, settings: EndpointConfig, rng: random.Random, asked: float | None) -> float:
    """Exponential backoff with jitter for retry ``attempt`` (0-based), or what the server asked if longer."""
    delay = min(settings.backoff_max, settings.backoff * 2**attempt) * rng.uniform(0.5, 1.0)
    if asked is not None:
        delay = max(delay, min(asked, MAX_RETRY_AFTER))
    return delay


async def _read(response: Any, limit: int | None) -> bytes | None:
    """The body of a streamed ``response``, or None once it passes ``limit`` bytes (the rest is not read: a reply of
    50 MB is refused after its first :data:`MAX_BYTES`); ``limit=None``: the whole body (a batch's output file)."""
    if limit is None:
        return await response.aread()
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _server_message(content: bytes | None) -> str:
    if content is None:
        return f"a body of more than {MAX_BYTES} bytes"
    try:
        payload = parse_json(content)
    except Refused:
        return content[:500].decode("utf-8", "replace")
    message = payload.get("error", payload) if isinstance(payload, dict) else payload
    if isinstance(message, dict):
        message = message.get("message", message)
    return str(message)[:500]


def _answer(
    content: bytes | None, check: Check | None
) -> tuple[dict[str, Any] | None, tuple[str, str] | None]:
    """A 2xx response's body, or why it is not an answer (a body over the size limit, one that does not parse, or
    one ``check`` refuses)."""
    if content is None:
        return None, ("too_large", f"a body of more than {MAX_BYTES} bytes")
    try:
        body = parse_json(content)
    except Refused as refused:
        return None, (refused.kind, refused.detail)
    if check is not None:
        problem = check(body)
        if problem is not None:
            return None, problem
    return body, None


class ApiClient:
    def __init__(self, endpoint: ApiEndpoint, seed: int = JITTER_SEED):
        self.endpoint = endpoint
        self.settings = endpoint.settings
        self.stats = ClientStats()
        self.cache = SqliteCache(Path(endpoint.cache_path)) if endpoint.cache_path else None
        self._rng = random.Random(seed)

    @property
    def base_url(self) -> str:
        return str(self.settings.base_url)

    def _headers(self, json: bool = True) -> dict[str, str]:
        headers = {"Content-Type": "application/json"} if json else {}
        name = self.settings.api_key_env
        if name:
            secret = self.endpoint.secret
            key = secret.value if secret is not None else os.environ.get(name)
            if not key:
                raise RuntimeError(
                    f"judge.endpoint.api_key_env names {name!r}, but that environment variable is empty"
                )
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def post(
        self,
        path: str,
        bodies: Sequence[dict[str, Any]],
        use_cache: bool = True,
        check: Check | Sequence[Check] | None = None,
    ) -> list[Reply]:
        """POST every body to ``base_url + path`` (at most ``concurrency`` at once); replies in order. ``check``
        (one for all bodies, or one per body; :mod:`pipeline.judge.endpoint.replies`): a 2xx reply it refuses is a failed
        attempt, retried, and never cached."""
        checks: list[Check | None] = list(check) if isinstance(check, Sequence) else [check] * len(bodies)
        return asyncio.run(self._post_all(path, list(bodies), use_cache, checks))

    async def _post_all(
        self, path: str, bodies: list[dict[str, Any]], use_cache: bool, checks: list[Check | None]
    ) -> list[Reply]:
        import httpx

        cache = self.cache if use_cache else None
        replies: list[Reply | None] = [None] * len(bodies)
        keys = [cache_key(self.base_url, path, b) for b in bodies]
        todo = []
        for k, key in enumerate(keys):
            hit = cache.get(key) if cache else None
            check = checks[k]
            # a cached reply that is not an answer (kept by a version before the checks) is asked again
            if hit is not None and (check is None or check(hit) is None):
                replies[k] = Reply(hit, cached=True)
                self.stats.cached += 1
            else:
                todo.append(k)
        if todo:
            headers = self._headers()
            limits = httpx.Limits(max_connections=self.settings.concurrency)
            gate = asyncio.Semaphore(self.settings.concurrency)
            url = self.base_url.rstrip("/") + path
            async with httpx.AsyncClient(
                timeout=self.settings.timeout, limits=limits, headers=headers
            ) as http:

                async def one(k: int) -> None:
                    async with gate:
                        reply = replies[k] = await self._send(http, "POST", url, checks[k], json=bodies[k])
                    if reply.body is not None and cache:
                        cache.put(keys[k], reply.body)

                await asyncio.gather(*(one(k) for k in todo))
        return [r for r in replies if r is not None]

    def call(
        self,
        method: str,
        path: str,
        check: Check | None = None,
        text: bool = False,
        retry: bool = True,
        **request: Any,
    ) -> Reply:
        """One request (``method`` to ``base_url + path``, httpx's ``request`` arguments: ``json``, ``params``,
        ``files``, ``data``) with the same retries and checks as :meth:`post`, never cached; ``text``: the body is not
        JSON, and comes back as ``{"text": ...}`` (a file's content); ``retry=False``: one attempt (a request that must
        not be repeated blindly, such as creating a batch)."""
        import httpx

        async def one() -> Reply:
            async with httpx.AsyncClient(
                timeout=self.settings.timeout, headers=self._headers(json=False)
            ) as http:
                url = self.base_url.rstrip("/") + path
                return await self._send(
                    http, method, url, check, text=text, retries=None if retry else 0, **request
                )

        return asyncio.run(one())

    async def _send(
        self,
        http: Any,
        method: str,
        url: str,
        check: Check | None = None,
        text: bool = False,
        retries: int | None = None,
        **request: Any,
    ) -> Reply:
        """``method`` to ``url`` until an answer (a 2xx whose body parses and ``check`` accepts) or the ``retries``
        (None: ``max_retries``) are spent (module docstring)."""
        import httpx

        started = time.monotonic()
        error = ""
        failures: list[str] = []
        retries = self.settings.max_retries if retries is None else retries
        for attempt in range(retries + 1):
            self.stats.requests += 1
            asked = None
            try:
                async with http.stream(method, url, **request) as response:
                    ok = response.status_code < 300
                    content = await _read(response, None if text and ok else MAX_BYTES)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                failures.append("timeout" if isinstance(exc, httpx.TimeoutException) else "connection")
                self._count("transport")
            else:
                self._count(str(response.status_code))
                if ok:
                    answer, problem = ({"text": response.text}, None) if text else _answer(content, check)
                    if problem is None:
                        return Reply(answer, attempts=attempt + 1, failures=failures)
                    kind, detail = problem
                    failures.append(kind)
                    error = f"a reply that is not an answer ({kind}: {detail})"
                else:
                    error = f"HTTP {response.status_code}: {_server_message(content)}"
                    retried = response.status_code in RETRY_STATUS or response.status_code >= 500
                    failures.append("http_5xx" if retried else "http_4xx")
                    if not retried:
                        break
                    asked = retry_after(response.headers.get("Retry-After"))
            if attempt == retries:
                break
            delay = backoff_delay(attempt, self.settings, self._rng, asked)
            if time.monotonic() + delay - started > self.settings.retry_for:
                break
            self.stats.retries += 1
            self.stats.seconds_waiting += delay
            log.debug("retrying in %.2f s after %s", delay, error)
            await asyncio.sleep(delay)
        self.stats.failed += 1
        return Reply(None, error=error, attempts=attempt + 1, failures=failures)

    def _count(self, status: str) -> None:
        self.stats.by_status[status] = self.stats.by_status.get(status, 0) + 1

    def close(self) -> None:
        if self.cache:
            self.cache.close()
