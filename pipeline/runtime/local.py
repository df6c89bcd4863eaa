"""Run a chain of map steps in this process: one instance of each stateful step, no Ray."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import pyarrow as pa

from pipeline.runtime import MapStep, step_key


def batches(chunks: Iterable[pa.Table], batch_size: int | None) -> Iterator[pa.Table]:
    """Re-cut a stream of tables into tables of ``batch_size`` rows (the last one may be shorter)."""
    if batch_size is None:
        yield from (c for c in chunks if c.num_rows)
        return
    pending: list[pa.Table] = []
    rows = 0
    for chunk in chunks:
        pending.append(chunk)
        rows += chunk.num_rows
        while rows >= batch_size:
            table = pa.concat_tables(pending)
            yield table.slice(0, batch_size)
            rest = table.slice(batch_size)
            pending, rows = ([rest], rest.num_rows) if rest.num_rows else ([], 0)
    if rows:
        yield pa.concat_tables(pending)


def _apply(stream: Iterable[pa.Table], call, kwargs: dict, batch_size: int | None) -> Iterator[pa.Table]:
    for batch in batches(stream, batch_size):
        result = call(batch, **kwargs)
        if isinstance(result, pa.Table):
            yield result
        else:
            yield from result


class LocalExecutor:
    def __init__(self) -> None:
        self.kept: dict[str, object] = {}

    def close(self) -> None:
        self._release(but=None)

    def _release(self, but: str | None) -> None:
        """Close the kept workers but those of key ``but``."""
        for key in [k for k in self.kept if k != but]:
            _close(self.kept.pop(key))

    def stream(self, blocks: Sequence[pa.Table], steps: Sequence[MapStep]) -> Iterator[pa.Table]:
        if not blocks:
            return
        made = []
        kwargs: dict[str, object]
        try:
            stream: Iterable[pa.Table] = iter(blocks)
            for step in steps:
                if step.stateful:
                    key = step_key(step)
                    self._release(but=key)  # one engine at a time
                if step.stateful and step.keep_alive:
                    if key not in self.kept:
                        self.kept[key] = step.fn(**step.kwargs)
                    call, kwargs = self.kept[key], dict(step.call_kwargs)
                elif step.stateful:
                    instance = step.fn(**step.kwargs)
                    made.append(instance)
                    call, kwargs = instance, dict(step.call_kwargs)
                else:
                    call, kwargs = step.fn, dict(step.kwargs)
                stream = _apply(stream, call, kwargs, step.batch_size)
            yield from stream
        finally:
            for instance in made:
                _close(instance)


def _close(instance: object) -> None:
    close = getattr(instance, "close", None)
    if callable(close):
        close()
