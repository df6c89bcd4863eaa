"""Judgements kept across runs, by content.

A judgement is decided by the judge (its identity: model, engine settings that change answers, dtype), what is
read (the label words' token ids or an absolute read: :class:`pipeline.absolute.Read`) and the exact prompt
text. :class:`JudgementStore` keeps the engine's answer under the SHA-256 of those three, in one SQLite file
(``judge.store_path``, default ``paths.cache_dir/judgements.sqlite``) that every run of the project consults
before judging: a run that adds contexts, changes the scorer or is repeated in another folder judges only the
prompts no run has judged. Each judge worker opens the file itself (WAL, safe across processes on one
machine; on a cluster put it on a file system with working locks, or set ``judge.store=false``).

In-process engines only: a judge behind an API has its own reply cache (:mod:`pipeline.judge.api`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pipeline.contracts.engine import EngineResult, Read
from pipeline.storage.sqlite import SqliteCache as ReplyCache

# EngineResult fields kept (the answer); where it came from and errors are not.
KEPT = ("token_logprobs", "texts", "prompt_tokens", "cached_tokens", "generated_tokens", "finish_reasons")


class JudgementStore:
    def __init__(self, path: str | Path, identity: Mapping[str, Any]):
        self.path = Path(path)
        self.cache = ReplyCache(self.path)
        self.identity = json.dumps(identity, sort_keys=True, default=str)

    def key(self, prompt: str, read: Read) -> str:
        text = json.dumps([self.identity, asdict(read), prompt], sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def get(self, prompts: Sequence[str], read: Read) -> list[EngineResult | None]:
        """Each prompt's stored answer (``source="store"``), None where no run has judged it."""
        found = self.cache.get_many([self.key(prompt, read) for prompt in prompts])
        return [None if f is None else EngineResult(**f, source="store") for f in found]

    def put(self, prompts: Sequence[str], read: Read, results: Sequence[EngineResult]) -> None:
        """Keep the answers (those without an error), in one transaction."""
        self.cache.put_many(
            [
                (self.key(prompt, read), {k: getattr(result, k) for k in KEPT})
                for prompt, result in zip(prompts, results, strict=True)
                if result.error is None
            ]
        )

    def close(self) -> None:
        self.cache.close()
