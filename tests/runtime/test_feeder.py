"""The pool's feeder (:class:`pipeline.runtime.local.Feeder`): the thread that reads the step's upstream is the one that
closes it, so an error that stops the pool while that thread waits on the upstream's next batch is the error the run
reports (it was once hidden behind ``ValueError: generator already executing``, raised by the driver closing the
upstream from the pool's thread: a cluster job said only that, with 0 of 24 prompts judged)."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest

from pipeline.runtime.local import Feeder, Fronted


def upstream(gate: threading.Event, closed: threading.Event, batches: int = 3):
    """A stream like the step's tasks: its first batch at once, each later one when ``gate`` opens."""
    try:
        for i in range(batches):
            if i:
                gate.wait(timeout=30)
            yield pa.table({"x": [i]})
    finally:
        closed.set()


def test_an_error_while_the_feeder_waits_on_the_upstream_is_the_error_raised_and_the_stream_is_closed_later():
    gate, closed = threading.Event(), threading.Event()
    stream = upstream(gate, closed)
    with pytest.raises(RuntimeError, match="the pool's own error"):
        feeder = Feeder(Fronted(None, stream, None), ahead=1)
        try:
            first = feeder.take(wait=10)
            assert first is not None and first is not Feeder.END and first.column("x").to_pylist() == [0]
            time.sleep(0.2)  # the feeder's thread is now inside the upstream, waiting for its next batch
            raise RuntimeError("the pool's own error")
        finally:
            assert not feeder.close(wait=0.2)  # it still waits on the upstream
    assert not closed.is_set()
    gate.set()  # the upstream's next batch arrives: the feeder's thread stops reading and closes the stream
    assert closed.wait(timeout=10)


def test_a_feeder_stopped_on_a_full_queue_closes_its_stream_at_once():
    gate, closed = threading.Event(), threading.Event()
    gate.set()
    feeder = Feeder(Fronted(None, upstream(gate, closed, batches=100), None), ahead=1)
    assert feeder.take(wait=10) is not None
    assert feeder.close(wait=10)  # it waited on the full queue, not on the upstream
    assert closed.is_set()


def test_every_batch_then_the_end_and_the_upstream_error_after_the_batches_before_it():
    def failing():
        yield pa.table({"x": [1]})
        raise OSError("the upstream's own error")

    feeder = Feeder(Fronted(None, failing(), None), ahead=4)
    assert feeder.take(wait=10).column("x").to_pylist() == [1]
    with pytest.raises(OSError, match="the upstream's own error"):
        while feeder.take(wait=10) is not Feeder.END:
            pass
    assert feeder.close(wait=10)
