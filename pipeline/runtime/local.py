"""Run a chain of map steps in this process: one instance of each stateful step, no Ray."""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from pipeline.runtime import Front, MapStep, step_key


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


class Fronted:
    """The rows of a stream that its step's front does not answer, re-cut into batches of ``batch_size``; the rows
    the front answers wait in ``answered`` for the caller to yield (:meth:`drain`)."""

    def __init__(self, front: Front | None, chunks: Iterable[pa.Table], batch_size: int | None):
        self.front = front
        self.answered: deque[pa.Table] = deque()
        self._chunks = chunks
        self._batches = batches(self._rest(chunks), batch_size)

    def _rest(self, chunks: Iterable[pa.Table]) -> Iterator[pa.Table]:
        for chunk in chunks:
            if self.front is None:
                yield chunk
                continue
            done, todo = self.front.answer(chunk)
            if done is not None and done.num_rows:
                self.answered.append(done)
            if todo.num_rows:
                yield todo

    def __iter__(self) -> Iterator[pa.Table]:
        return self

    def __next__(self) -> pa.Table:
        return next(self._batches)

    def close(self) -> None:
        """Close the batches and the stream under them (a stream of Ray Data tasks shuts down while Ray is up);
        only from the thread that reads them."""
        _close(self._batches)
        _close(self._chunks)

    def drain(self) -> Iterator[pa.Table]:
        while self.answered:
            yield self.answered.popleft()

    def keep(self, sent: pa.Table, out: pa.Table) -> None:
        if self.front is not None:
            self.front.keep(sent, out)


def as_table(result: pa.Table | Iterable[pa.Table]) -> pa.Table:
    return result if isinstance(result, pa.Table) else pa.concat_tables(list(result))


def _serve(stream: Iterable[pa.Table], step: MapStep, instance: Callable[[], object]) -> Iterator[pa.Table]:
    """A stateful step in this process: the front's answers, then each remaining batch answered by the step's
    instance (made on the first batch: a stream the front answers whole makes none)."""
    work = Fronted(step.front, stream, step.batch_size)
    for batch in work:
        yield from work.drain()
        out = as_table(instance()(batch, **step.call_kwargs))  # type: ignore[operator]
        work.keep(batch, out)
        yield out
    yield from work.drain()


def apply(stream: Iterable[pa.Table], call, kwargs: dict, batch_size: int | None) -> Iterator[pa.Table]:
    """A stateless step in this process: ``call`` on every batch of ``stream``, its tables yielded as it makes them."""
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

    def serve(self, stream: Iterable[pa.Table], step: MapStep) -> Iterator[pa.Table]:
        """The stateful ``step`` on ``stream`` in this process (another executor's step that runs on the driver)."""
        made: list[object] = []
        try:
            self._release(but=step_key(step))
            yield from _serve(stream, step, self._instance(step, made))
        finally:
            for instance in made:
                _close(instance)

    def stream(self, blocks: Sequence[pa.Table], steps: Sequence[MapStep]) -> Iterator[pa.Table]:
        if not blocks:
            return
        made: list[object] = []
        try:
            stream: Iterable[pa.Table] = iter(blocks)
            for step in steps:
                if step.stateful:
                    self._release(but=step_key(step))  # one engine at a time
                    stream = _serve(stream, step, self._instance(step, made))
                else:
                    stream = apply(stream, step.fn, dict(step.kwargs), step.batch_size)
            yield from stream
        finally:
            for instance in made:
                _close(instance)

    def _instance(self, step: MapStep, made: list[object]) -> Callable[[], object]:
        """The step's instance, made when first asked for: kept for later streams (``keep_alive``) or closed at
        the end of this one (``made``)."""
        key = step_key(step)
        own: list[object] = []

        def get() -> object:
            if step.keep_alive:
                if key not in self.kept:
                    self.kept[key] = step.fn(**step.kwargs)
                return self.kept[key]
            if not own:
                own.append(step.fn(**step.kwargs))
                made.append(own[0])
            return own[0]

        return get


def _close(instance: object) -> None:
    close = getattr(instance, "close", None)
    if callable(close):
        close()


class Feeder:
    """The batches of a stream read ahead in a thread of their own, so that the pool's loop never waits on the
    step's upstream tasks: a stream whose tasks get no CPU slot is seen and said, not waited on in silence.

    The thread that reads the stream is the one that closes it (a generator running in one thread cannot be closed
    from another: the close would raise ``generator already executing`` over the error that stopped the pool).
    :meth:`close` asks it to stop and waits for it a moment."""

    END = object()
    POLL = 0.1  # seconds between looks at the stop flag while the queue is full

    def __init__(self, work: Iterator[pa.Table], ahead: int):
        self.queue: queue.Queue = queue.Queue(maxsize=max(1, ahead))
        self.error: BaseException | None = None
        self.last = time.monotonic()  # when the last batch arrived
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(work,), name="pool-feeder", daemon=True)
        self._thread.start()

    def _read(self, work: Iterator[pa.Table]) -> None:
        try:
            for batch in work:
                if not self._put(batch):
                    break
        except BaseException as exc:  # the upstream's error, raised in the pool's loop
            self.error = exc
        finally:
            try:
                _close(work)
            except BaseException as exc:  # a stream that fails to shut down: said in the pool's loop
                self.error = self.error or exc
            self._put(self.END)

    def _put(self, item: Any) -> bool:
        """Queue ``item`` unless the reader has been told to stop (then False)."""
        while not self._stop.is_set():
            try:
                self.queue.put(item, timeout=self.POLL)
                return True
            except queue.Full:
                continue
        return False

    def close(self, wait: float = 10.0) -> bool:
        """Stop reading, the stream closed by the reading thread; whether it ended within ``wait`` seconds (if not,
        it is waiting on the upstream's next batch and closes the stream once it arrives)."""
        self._stop.set()
        self._thread.join(timeout=wait)
        return not self._thread.is_alive()

    def take(self, wait: float) -> Any:
        """The next batch, ``END`` after the last, or None when none arrived within ``wait`` seconds."""
        try:
            batch = self.queue.get(timeout=wait) if wait > 0 else self.queue.get_nowait()
        except queue.Empty:
            return None
        if batch is self.END:
            self.queue.put(self.END)  # it stays the end for later calls
            if self.error is not None:
                raise self.error
            return self.END
        self.last = time.monotonic()
        return batch
