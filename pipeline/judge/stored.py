"""The judgement store in front of a step's workers, on the driver: the prompts any run has asked before are
answered here from the store (:mod:`pipeline.storage.judgements`) and never sent to a worker; the workers' answers
are kept as they come back. One process (the driver) opens the store, so no worker on another node needs its file
(nor a file system with working locks); a stream whose prompts are all stored starts no engine.

It is a :class:`pipeline.runtime.Front`: the executor calls :meth:`StoreFront.answer` on every chunk of prompts
before batching the rest for the workers, and :meth:`StoreFront.keep` on every batch that comes back. Only
reproducible requests are kept (greedy, or sampled with a seed): an unseeded sample would freeze one draw.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from pipeline.config.backends import Trait, backend
from pipeline.contracts.engine import ANSWER_FIELDS, Result
from pipeline.contracts.keys import PROMPT_KEY
from pipeline.judge.hosting.worker import Task, responses
from pipeline.prompts.labels import Labels
from pipeline.storage.judgements import JudgementStore

# The worker column of the answers from the store: this process (the driver).
DRIVER = f"{socket.gethostname()}:{os.getpid()}"


class StoreFront:
    """The judgement store at ``path``, under the task's judge's identity, in front of the workers that answer
    ``task``. Opened on first use, closed by :meth:`close`."""

    def __init__(self, path: str | Path, task: Task):
        self.path = Path(path)
        self.task = task
        self._store: JudgementStore | None = None

    @property
    def store(self) -> JudgementStore:
        if self._store is None:
            self._store = JudgementStore(self.path, self.task.judge.identity())
        return self._store

    def _rows(self, batch: pa.Table) -> dict[str, list[int]]:
        """The rows of each template whose request is reproducible (the rest are never stored)."""
        by_template: dict[str, list[int]] = {}
        for k, template_id in enumerate(batch.column("template_id").to_pylist()):
            if self.task.request(template_id).reproducible:
                by_template.setdefault(template_id, []).append(k)
        return by_template

    def answer(self, batch: pa.Table) -> tuple[pa.Table | None, pa.Table]:
        """(RESPONSES rows of the prompts the store holds, the PROMPTS rows still to send)."""
        prompts = batch.column("prompt").to_pylist()
        found: dict[int, Result] = {}
        for template_id, rows in self._rows(batch).items():
            stored = self.store.get([prompts[k] for k in rows], self.task.request(template_id))
            found |= {k: r for k, r in zip(rows, stored, strict=True) if r is not None}
        if not found:
            return None, batch
        answered = sorted(found)
        rest = pa.array([k for k in range(batch.num_rows) if k not in found], pa.int64())
        done = responses(
            batch.take(pa.array(answered, pa.int64())),
            self.task.judge.name,
            [found[k] for k in answered],
            [0.0] * len(answered),
            DRIVER,
        )
        return done, batch.take(rest)

    def keep(self, sent: pa.Table, out: pa.Table) -> None:
        """Store the answers ``out`` (RESPONSES, row for row) to the prompts ``sent`` (PROMPTS); those with an error
        are not kept (a rerun asks them again)."""
        if sent.select(list(PROMPT_KEY)) != out.select(list(PROMPT_KEY)):
            raise ValueError(
                f"judgement store {self.path}: a worker's answers are not row for row the prompts it was sent"
            )
        prompts = sent.column("prompt").to_pylist()
        rows_out = out.to_pylist()
        for template_id, rows in self._rows(sent).items():
            kept = [k for k in rows if rows_out[k]["error"] is None]
            if kept:
                self.store.put(
                    [prompts[k] for k in kept],
                    self.task.request(template_id),
                    [as_result(rows_out[k]) for k in kept],
                )

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None


def as_result(row: dict) -> Result:
    """A RESPONSES row's answer as the engine's :class:`Result` (the fields a store keeps)."""
    fields = {name: row[name] for name in ANSWER_FIELDS}
    fields["reasoning_tokens"] = fields["reasoning_tokens"] or 0
    return Result(**fields)


def on_the_driver(task: Task, store: str | Path | None, labels: Labels | None = None) -> dict[str, Any]:
    """What the driver does for a step of ``task``'s engine (the step's ``front`` and ``on_driver``), as its backend
    registers it (:mod:`pipeline.config.backends`): a judge that answers by key (recorded verdicts) answers every row
    there, read with the plan's ``labels``, and no worker starts; an endpoint's client runs there whole, its reply
    cache opened by the driver alone (the judgement store is not an endpoint's); an engine of this machine's has the
    judgement ``store`` (None: off) in front of its workers."""
    entry = backend(task.judge.backend)
    if entry.answers:
        if labels is None:
            raise ValueError(f"judge {task.judge.name} answers by key: its step needs the plan's label words")
        return {"front": entry.answerer()(task.judge, labels), "on_driver": True}
    if Trait.ENDPOINT in entry.traits:
        return {"front": None, "on_driver": True}
    return {"front": StoreFront(store, task) if store is not None else None, "on_driver": False}


@contextmanager
def closing_front(step: Any) -> Iterator[None]:
    """Close the step's front (the judgement store, a judge's answers by key) when its stream ends, however it ends."""
    try:
        yield
    finally:
        close = getattr(getattr(step, "front", None), "close", None)
        if callable(close):
            close()
