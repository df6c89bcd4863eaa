"""The multi-node cluster of the node tests (tests/run/nodes.py): a head per test module, worker nodes per test."""

from __future__ import annotations

import contextlib
import os
import signal

import pytest

from tests.run.nodes import Nodes


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    nodes = Nodes(tmp_path_factory.mktemp("ray-nodes"))
    try:
        yield nodes
    finally:
        nodes.stop()


@pytest.fixture
def nodes(head):
    """The head with the worker nodes a test adds, lost again at its end (the next test adds its own)."""
    before = len(head.processes)
    yield head
    for process in head.processes[before:]:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)
    del head.processes[before:]
