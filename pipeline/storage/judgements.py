"""Judgements kept across runs, by content.

A judgement is decided by the judge (its identity: model, engine settings that change answers, dtype), what is
asked (the label words' token ids, an absolute read, a generation's sampling: a
:class:`pipeline.contracts.engine.Request`) and the exact prompt text. :class:`JudgementStore` keeps the engine's
answer under the SHA-256 of those three, in one SQLite file (``judge.store_path``, default
``paths.cache_dir/judgements.sqlite``) that every run of the project consults before judging: a run that adds
contexts, changes the scorer or is repeated in another folder judges only the prompts no run has judged. Only
the driver opens the file (:class:`pipeline.judge.stored.StoreFront`: it answers what the store holds before
prompts are sent to the workers, and keeps their answers as they come back), so a cluster's workers never need
it: it lives on the driver's disk, never on a network file system.

In-process engines only: a judge behind an API has its own reply cache (:mod:`pipeline.judge.endpoint.client`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pipeline.contracts.engine import ANSWER_FIELDS, Request, Result
from pipeline.storage.parts import NonFiniteError
from pipeline.storage.sqlite import SqliteCache


class JudgementStore:
    """Answers by (judge identity, request, prompt text), in one SQLite file."""

    def __init__(self, path: str | Path, identity: Mapping[str, Any]):
        self.path = Path(path)
        self.cache = SqliteCache(self.path)
        self.identity = json.dumps(identity, sort_keys=True, default=str)

    def key(self, prompt: str, request: Request) -> str:
        asked = asdict(request)
        if asked["reasoning"] is None:
            del asked["reasoning"]  # requests without reasoning keep the keys they had before it existed
        text = json.dumps([self.identity, asked, prompt], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, prompts: Sequence[str], request: Request) -> list[Result | None]:
        """Each prompt's stored answer (``source="store"``), None where no run has judged it."""
        found = self.cache.get_many([self.key(prompt, request) for prompt in prompts])
        return [None if f is None else Result(**f, source="store") for f in found]

    def put(self, prompts: Sequence[str], request: Request, results: Sequence[Result]) -> None:
        """Keep the answers (those without an error), in one transaction; an answer with a read log-probability that
        is not a finite number is refused, naming its prompt (nothing upstream may store a NaN)."""
        for prompt, result in zip(prompts, results, strict=True):
            if result.error is None and not all(math.isfinite(v) for v in result.token_logprobs):
                raise NonFiniteError(
                    f"judgement store {self.path}: an answer holds {list(result.token_logprobs)}, not finite numbers, "
                    f"for the prompt {prompt[-160:]!r}; it is not stored"
                )
        self.cache.put_many(
            [
                (self.key(prompt, request), {k: getattr(result, k) for k in ANSWER_FIELDS})
                for prompt, result in zip(prompts, results, strict=True)
                if result.error is None
            ]
        )

    def close(self) -> None:
        self.cache.close()
