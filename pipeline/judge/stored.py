"""The judgement store in front of an engine: an engine that answers from the store what any run has asked
before, and asks the engine behind it the rest (:mod:`pipeline.storage.judgements`).

It implements :class:`pipeline.contracts.engine.Engine` like the engine it wraps, so the judge worker does not
tell them apart. Only reproducible requests are kept (greedy, or sampled with a seed): an unseeded sample would
freeze one draw.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.contracts.engine import Engine, Request, Result
from pipeline.contracts.frame import PromptFrame
from pipeline.storage.judgements import JudgementStore


class StoredEngine:
    """``engine`` behind the judgement ``store``."""

    def __init__(self, engine: Engine, store: JudgementStore):
        self.engine = engine
        self.store = store
        self.start_seconds = engine.start_seconds
        self.inside = engine.inside

    @property
    def dtype(self) -> str:
        return self.engine.dtype

    def answer(self, prompts: Sequence[str], frame: PromptFrame, request: Request) -> list[Result]:
        """Each prompt's stored answer (``source="store"``), the engine's for the others (then stored)."""
        if not request.reproducible:
            return self.engine.answer(prompts, frame, request)
        found = self.store.get(prompts, request)
        todo = [k for k, f in enumerate(found) if f is None]
        if todo:
            asked = [prompts[k] for k in todo]
            new = self.engine.answer(asked, frame, request)
            self.store.put(asked, request, new)
            for k, result in zip(todo, new, strict=True):
                found[k] = result
        return [f for f in found if f is not None]

    def close(self) -> None:
        self.store.close()
        self.engine.close()
