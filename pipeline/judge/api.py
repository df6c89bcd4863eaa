"""A judge behind an OpenAI-compatible API: bounded concurrency, retries, a persistent cache, token counts,
and the engine that answers the judge worker's prompts through it (:class:`ApiEngine`, two paths).

:class:`ApiClient` sends a batch of request bodies to one endpoint with at most ``concurrency`` in flight
(asyncio + httpx), and returns one :class:`Reply` per body, in order:

- **Retries.** 429, 5xx, timeouts and lost connections are retried with exponential backoff and full jitter
  (``backoff * 2**attempt``, capped at ``backoff_max``, times a uniform draw in [0.5, 1)). A ``Retry-After``
  header (seconds or an HTTP date) is honoured when it asks for longer. Retrying stops after ``max_retries``
  attempts or ``retry_for`` seconds. A server that goes away and comes back within that time costs retries,
  not the run.
- **Failures.** A request that keeps failing, or that the server refuses (another 4xx), comes back as a
  :class:`Reply` with its ``error`` (status and the server's message). The others in the batch are unaffected.
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
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER = 600.0


class Secret:
    """A key that travels to the judge actors (pickled with the actor's arguments, never in the Ray
    runtime_env) but prints as ``***`` in any repr, str, log line or JSON written with ``default=str``."""

    __slots__ = ("value",)

    def __init__(self, value: str):
        self.value = value

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__


@dataclass(frozen=True)
class ApiSettings:
    """What the client needs (picklable; the key's *name*, never its value)."""

    base_url: str
    api_key_env: str | None = None
    concurrency: int = 8
    timeout: float = 60.0
    max_retries: int = 8
    retry_for: float = 300.0
    backoff: float = 0.5
    backoff_max: float = 30.0
    cache_path: str | None = None
    seed: int = 0  # of the jitter
    # The key read on the driver from api_key_env; None: read api_key_env where the client runs.
    api_key: Secret | None = field(default=None, repr=False, compare=False)


@dataclass
class Reply:
    body: dict[str, Any] | None  # the response's JSON (None when it failed)
    error: str | None = None
    cached: bool = False
    attempts: int = 0


@dataclass
class ClientStats:
    requests: int = 0  # HTTP requests sent, retries included
    retries: int = 0
    cached: int = 0
    failed: int = 0
    seconds_waiting: float = 0.0  # backing off
    by_status: dict[str, int] = field(default_factory=dict)


class ReplyCache:
    """Successful replies by key, in one SQLite file (safe across threads and processes)."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, body TEXT NOT NULL)")
        self._db.commit()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT body FROM replies WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, body: dict[str, Any]) -> None:
        self.put_many([(key, body)])

    def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        """The replies of ``keys`` (None where there is none), in one query per 500 keys."""
        found: dict[str, str] = {}
        with self._lock:
            for k in range(0, len(keys), 500):
                chunk = list(keys[k : k + 500])
                marks = ",".join("?" * len(chunk))
                found.update(
                    self._db.execute(
                        f"SELECT key, body FROM replies WHERE key IN ({marks})", chunk
                    ).fetchall()
                )
        return [json.loads(found[k]) if k in found else None for k in keys]

    def put_many(self, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Keep replies in one transaction (one commit for a whole batch)."""
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO replies VALUES (?, ?)", [(k, json.dumps(b)) for k, b in items]
            )
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()


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


def backoff_delay(attempt: int, settings: ApiSettings, rng: random.Random, asked: float | None) -> float:
    """Exponential backoff with jitter for retry ``attempt`` (0-based), or what the server asked if longer."""
    delay = min(settings.backoff_max, settings.backoff * 2**attempt) * rng.uniform(0.5, 1.0)
    if asked is not None:
        delay = max(delay, min(asked, MAX_RETRY_AFTER))
    return delay


def _server_message(response: Any) -> str:
    try:
        payload = response.json()
        message = payload.get("error", payload)
        if isinstance(message, dict):
            message = message.get("message", message)
        return str(message)[:500]
    except ValueError:
        return response.text[:500]


class ApiClient:
    def __init__(self, settings: ApiSettings):
        self.settings = settings
        self.stats = ClientStats()
        self.cache = ReplyCache(Path(settings.cache_path)) if settings.cache_path else None
        self._rng = random.Random(settings.seed)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        name = self.settings.api_key_env
        if name:
            key = self.settings.api_key.value if self.settings.api_key else os.environ.get(name)
            if not key:
                raise RuntimeError(
                    f"judge.api.api_key_env names {name!r}, but that environment variable is empty"
                )
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def post(self, path: str, bodies: Sequence[dict[str, Any]], use_cache: bool = True) -> list[Reply]:
        """POST every body to ``base_url + path`` (at most ``concurrency`` at once); replies in order."""
        return asyncio.run(self._post_all(path, list(bodies), use_cache))

    async def _post_all(self, path: str, bodies: list[dict[str, Any]], use_cache: bool) -> list[Reply]:
        import httpx

        cache = self.cache if use_cache else None
        replies: list[Reply | None] = [None] * len(bodies)
        keys = [cache_key(self.settings.base_url, path, b) for b in bodies]
        todo = []
        for k, key in enumerate(keys):
            hit = cache.get(key) if cache else None
            if hit is not None:
                replies[k] = Reply(hit, cached=True)
                self.stats.cached += 1
            else:
                todo.append(k)
        if todo:
            headers = self._headers()
            limits = httpx.Limits(max_connections=self.settings.concurrency)
            gate = asyncio.Semaphore(self.settings.concurrency)
            url = self.settings.base_url.rstrip("/") + path
            async with httpx.AsyncClient(
                timeout=self.settings.timeout, limits=limits, headers=headers
            ) as http:

                async def one(k: int) -> None:
                    async with gate:
                        replies[k] = await self._send(http, url, bodies[k])
                    if replies[k].body is not None and cache:
                        cache.put(keys[k], replies[k].body)

                await asyncio.gather(*(one(k) for k in todo))
        return [r for r in replies if r is not None]

    async def _send(self, http: Any, url: str, body: dict[str, Any]) -> Reply:
        import httpx

        started = time.monotonic()
        error = ""
        for attempt in range(self.settings.max_retries + 1):
            self.stats.requests += 1
            asked = None
            try:
                response = await http.post(url, json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                error = f"{type(exc).__name__}: {exc}"
                self._count("transport")
            else:
                self._count(str(response.status_code))
                if response.status_code < 300:
                    return Reply(response.json(), attempts=attempt + 1)
                error = f"HTTP {response.status_code}: {_server_message(response)}"
                if response.status_code not in RETRY_STATUS:
                    break
                asked = retry_after(response.headers.get("Retry-After"))
            if attempt == self.settings.max_retries:
                break
            delay = backoff_delay(attempt, self.settings, self._rng, asked)
            if time.monotonic() + delay - started > self.settings.retry_for:
                break
            self.stats.retries += 1
            self.stats.seconds_waiting += delay
            log.debug("retrying in %.2f s after %s", delay, error)
            await asyncio.sleep(delay)
        self.stats.failed += 1
        return Reply(None, error=error, attempts=attempt + 1)

    def _count(self, status: str) -> None:
        self.stats.by_status[status] = self.stats.by_status.get(status, 0) + 1

    def close(self) -> None:
        if self.cache:
            self.cache.close()


# --- the judge's engine ----------------------------------------------------------------------------------------


TOKEN_PREFIX = "token_id:"


def completion_body(model: str, ids: list[int], read: Any) -> dict[str, Any]:
    """A ``/completions`` body for one prompt as token ids, read as ``read`` (a :class:`pipeline.absolute.Read`)
    says: vLLM's server takes the ids as the prompt and returns the exact first-token log-probability of each
    requested token (``logprob_token_ids``), keyed by id (``return_tokens_as_token_ids``)."""
    body: dict[str, Any] = {
        "model": model,
        "prompt": list(ids),
        "max_tokens": read.max_tokens,
        "n": read.n,
        "temperature": read.temperature,
        "seed": read.seed,
        "top_p": read.top_p,
    }
    if read.stop:
        body["stop"] = list(read.stop)
    if read.token_ids:
        body |= {"logprobs": 1, "logprob_token_ids": list(read.token_ids), "return_tokens_as_token_ids": True}
    return body


def parse_completion(
    body: dict[str, Any], token_ids: Sequence[int]
) -> tuple[list[float], list[str], list[str], int]:
    """(log-probabilities of ``token_ids`` at the first generated token, texts, finish reasons, tokens of the
    requested ids missing from the reply)."""
    choices = sorted(body["choices"], key=lambda c: c.get("index", 0))
    logprobs: list[float] = []
    missing = 0
    if token_ids:
        first = (choices[0].get("logprobs") or {}).get("top_logprobs") or [{}]
        top = {
            int(k.removeprefix(TOKEN_PREFIX)): float(v)
            for k, v in first[0].items()
            if k.startswith(TOKEN_PREFIX)
        }
        floor = min(top.values()) if top else float("-inf")
        for t in token_ids:
            if t in top:
                logprobs.append(top[t])
            else:  # not among the returned alternatives: at most the smallest returned (a counted floor)
                logprobs.append(floor)
                missing += 1
    texts = [str(c.get("text", "")) for c in choices]
    reasons = [str(c.get("finish_reason") or "stop") for c in choices]
    return logprobs, texts, reasons, missing


def split_prompt(prompt: str, frame: Any) -> tuple[str, str]:
    """(the user message, the answer prefix) of a whole prompt ``frame.head + message + frame.tail + prefix``."""
    if not prompt.startswith(frame.head):
        raise ValueError("a prompt does not start with the prompt frame's head")
    rest = prompt[len(frame.head) :]
    at = rest.rfind(frame.tail) if frame.tail else len(rest)
    if at < 0:
        raise ValueError("a prompt does not hold the prompt frame's tail")
    return rest[:at], rest[at + len(frame.tail) :]


def chat_body(
    model: str,
    message: str,
    prefix: str,
    read: Any,
    system_prompt: str | None,
    top_logprobs: int,
    prefill: bool,
) -> dict[str, Any]:
    """A ``/chat/completions`` body: the system prompt and the message, the answer prefix as a final assistant
    message the model continues (``prefill``), and the first token's ``top_logprobs`` alternatives."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.append({"role": "user", "content": message})
    if prefix and prefill:
        messages.append({"role": "assistant", "content": prefix})
    return messages_body(model, messages, read, top_logprobs, continued=bool(prefix and prefill))


def messages_body(
    model: str, messages: list[dict[str, str]], read: Any, top_logprobs: int, continued: bool = False
) -> dict[str, Any]:
    """A ``/chat/completions`` body for a conversation (``continued``: the model continues its last message)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": read.max_tokens,
        "n": read.n,
        "temperature": read.temperature,
        "seed": read.seed,
        "top_p": read.top_p,
    }
    if continued:
        body |= {"continue_final_message": True, "add_generation_prompt": False}
    if read.stop:
        body["stop"] = list(read.stop)
    if read.token_ids:
        body |= {"logprobs": True, "top_logprobs": top_logprobs}
    return body


def first_token_alternatives(body: dict[str, Any]) -> dict[str, float]:
    """The first generated token's alternatives of a chat reply (its ``top_logprobs`` and the token itself),
    text -> log-probability."""
    choices = sorted(body["choices"], key=lambda c: c.get("index", 0))
    first = ((choices[0].get("logprobs") or {}).get("content") or [{}])[0]
    top: dict[str, float] = {}
    for alt in [*(first.get("top_logprobs") or []), first]:
        if "token" in alt and "logprob" in alt:
            top.setdefault(str(alt["token"]), float(alt["logprob"]))
    return top


def parse_chat(body: dict[str, Any], words: Sequence[str]) -> tuple[list[float], list[str], list[str], int]:
    """(log-probabilities of ``words`` among the first token's alternatives, texts, finish reasons, words
    missing from the alternatives: given the smallest returned log-probability, a floor)."""
    choices = sorted(body["choices"], key=lambda c: c.get("index", 0))
    logprobs: list[float] = []
    missing = 0
    if words:
        top = first_token_alternatives(body)
        floor = min(top.values()) if top else float("-inf")
        for word in words:
            if word in top:
                logprobs.append(top[word])
            else:
                logprobs.append(floor)
                missing += 1
    texts = [str((c.get("message") or {}).get("content") or "") for c in choices]
    reasons = [str(c.get("finish_reason") or "stop") for c in choices]
    return logprobs, texts, reasons, missing


def api_client(spec: Any) -> ApiClient:
    """The client of an API judge's spec (its endpoint settings and key)."""
    settings = {k: v for k, v in spec.api.items() if k in ApiSettings.__dataclass_fields__}
    return ApiClient(ApiSettings(**settings, api_key=spec.secret))


@dataclass(frozen=True)
class WordCheck:
    """What a test request showed of the words a prompt's answer is read from."""

    what: str
    words: tuple[str, ...]
    # Each word's best log-probability among the first token's alternatives over the test prompts (None: absent).
    seen: tuple[float | None, ...]
    # The alternatives of the first test prompt, most likely first.
    alternatives: tuple[str, ...]

    @property
    def missing(self) -> list[str]:
        return [w for w, lp in zip(self.words, self.seen, strict=True) if lp is None]


def check_words(
    spec: Any, frame: Any, prompts: Sequence[str], words: Sequence[str], read: Any, what: str
) -> WordCheck:
    """Send ``prompts`` (whole prompt texts, answered as ``read`` says) to the chat endpoint and look for
    ``words`` among the first token's alternatives: a word that is there is one token the judge answers with.
    The replies go to the reply cache, so the run's own identical requests cost nothing more."""
    api = dict(spec.api)
    client = api_client(spec)
    bodies = []
    for prompt in prompts:
        message, prefix = split_prompt(prompt, frame)
        bodies.append(
            chat_body(
                api["model"],
                message,
                prefix,
                read,
                frame.system,
                int(api.get("top_logprobs", 20)),
                bool(api.get("prefill", True)),
            )
        )
    try:
        replies = client.post("/chat/completions", bodies)
    finally:
        client.close()
    failed = [r.error for r in replies if r.error]
    if len(failed) == len(replies):
        from pipeline.errors import UserError

        raise UserError(f"judge {spec.name}: the test request to {api['base_url']} failed: {failed[0]}")
    best: list[float | None] = [None] * len(words)
    alternatives: tuple[str, ...] = ()
    for reply in replies:
        if reply.error:
            continue
        top = first_token_alternatives(reply.body)
        if not alternatives:
            alternatives = tuple(sorted(top, key=top.get, reverse=True))
        for k, word in enumerate(words):
            if word in top and (best[k] is None or top[word] > best[k]):
                best[k] = top[word]
    return WordCheck(what, tuple(words), tuple(best), alternatives)


class ApiEngine:
    """The judge worker's engine for ``judge.backend=api``: ``run_text`` answers a batch of whole prompts
    through the endpoint (``judge.api``), as the in-process engines answer token ids.

    - token-id path: the exact token ids the pipeline builds in-process (the tokenizer loads from
      ``judge.model``, which names the served checkpoint) go to ``/completions``, and the exact
      log-probability of every requested token comes back (vLLM's server reads what the in-process engine
      reads);
    - chat path: the message and the answer prefix (continued as an assistant message) go to
      ``/chat/completions``, and the requested tokens are read, as text, among the first token's
      ``top_logprobs`` alternatives; a token not among them gets a floor and is counted (``missing``).

    ``auto`` probes the server once, at start, with one token-id request.
    """

    def __init__(self, spec: Any):
        from pipeline.judge.tokenizers import is_local, load_tokenizer

        started = time.perf_counter()
        self.spec = spec
        api = dict(spec.api)
        self.model = api.pop("model")
        self.top_logprobs = int(api.pop("top_logprobs", 20))
        self.prefill = bool(api.pop("prefill", True))
        path = str(api.pop("path", "token_ids"))
        self.client = api_client(spec)
        self.tokenizer = load_tokenizer(spec)
        if path == "auto":
            # token ids only with the checkpoint's own tokenizer and chat template on this machine
            path = self.probe() if is_local(self.tokenizer) else "chat"
        self.path = path
        log.info("API judge %s at %s: %s path", self.model, self.client.settings.base_url, self.path)
        self.start_seconds = time.perf_counter() - started

    def probe(self) -> str:
        """``token_ids`` if the server answers a token-id prompt with the exact log-probability of a requested
        token (vLLM's extension), else ``chat``."""
        from pipeline.absolute import Read

        ids = list(self.tokenizer("Hello")["input_ids"]) or [0]
        token = ids[-1]
        body = completion_body(self.model, ids, Read(token_ids=(token,), seed=0))
        [reply] = self.client.post("/completions", [body], use_cache=False)
        if reply.body is not None:
            try:
                _, _, _, missing = parse_completion(reply.body, [token])
                if not missing:
                    return "token_ids"
            except (KeyError, TypeError, ValueError, IndexError):
                pass
        log.info(
            "the server does not take token-id prompts (%s): the chat path",
            reply.error or "no token logprobs",
        )
        return "chat"

    def run_text(self, prompts: list[str], frame: Any, read: Any) -> list[Any]:
        """Answer whole prompt texts by this engine's path: token ids (exact) or chat messages. Conversations
        (:func:`pipeline.prompts.conversation_prompt`, e.g. the judge's reasons) go to the chat endpoint as they
        are, whatever the path."""
        from pipeline.prompts import parse_conversation

        conversations = [parse_conversation(p) for p in prompts]
        if self.path == "token_ids" and not any(conversations):
            from pipeline.prompts import encode_prompts

            return self.run(encode_prompts(self.tokenizer, prompts, frame), read)

        bodies = []
        for prompt, conversation in zip(prompts, conversations, strict=True):
            if conversation is not None:
                bodies.append(messages_body(self.model, conversation, read, self.top_logprobs))
                continue
            message, prefix = split_prompt(prompt, frame)
            bodies.append(
                chat_body(self.model, message, prefix, read, frame.system, self.top_logprobs, self.prefill)
            )
        replies = self.client.post("/chat/completions", bodies)
        words = [self.tokenizer.decode([t]) for t in read.token_ids]
        self._warn_failed(replies)
        results = []
        for reply in replies:
            if reply.error:
                results.append(self._failed(reply))
                continue
            logprobs, texts, reasons, missing = parse_chat(reply.body, words)
            results.append(self._result(reply, logprobs, texts, reasons, missing, 0, "chat"))
        return results

    def _warn_failed(self, replies: list[Reply]) -> None:
        failed = [r for r in replies if r.error]
        if failed:
            log.warning(
                "%d of %d request(s) to %s failed after retries (first: %s)",
                len(failed),
                len(replies),
                self.client.settings.base_url,
                failed[0].error,
            )

    @staticmethod
    def _failed(reply: Reply) -> Any:
        from pipeline.judge.engines import EngineResult

        return EngineResult(
            [], [], 0, 0, 0, [], error=reply.error, source="api/failed", requests=reply.attempts
        )

    def _result(self, reply: Reply, logprobs, texts, reasons, missing: int, n_prompt: int, path: str) -> Any:
        from pipeline.judge.engines import EngineResult

        usage = reply.body.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        return EngineResult(
            token_logprobs=logprobs,
            texts=texts,
            prompt_tokens=int(usage.get("prompt_tokens", n_prompt)),
            cached_tokens=int(details.get("cached_tokens") or 0),
            generated_tokens=int(usage.get("completion_tokens", 0)),
            finish_reasons=reasons,
            source="cache" if reply.cached else f"api/{path}",
            requests=reply.attempts,
            missing=missing,
        )

    @property
    def dtype(self) -> str:
        return "api"

    def run(self, token_ids: list[list[int]], read: Any) -> list[Any]:
        """Answer prompts given as token ids (the token-id path)."""
        replies = self.client.post(
            "/completions", [completion_body(self.model, ids, read) for ids in token_ids]
        )
        self._warn_failed(replies)
        results = []
        for ids, reply in zip(token_ids, replies, strict=True):
            if reply.error:
                results.append(self._failed(reply))
                continue
            logprobs, texts, reasons, missing = parse_completion(reply.body, read.token_ids)
            results.append(self._result(reply, logprobs, texts, reasons, missing, len(ids), "token_ids"))
        return results

    def close(self) -> None:
        self.client.close()
