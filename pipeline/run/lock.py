"""One run at a time per run folder: the run holds an exclusive lock on ``<run folder>/.run.lock`` from the
moment it opens the folder until it ends (a POSIX record lock, ``lockf``: held by the process alone, never by the
engines and workers it forks). A second run on the same folder (a rerun started while the first still
runs, two jobs given one ``paths.run_dir``) is refused at once, naming the process that holds it, instead of both
judging, creating batches for the same requests and writing the same tables. The lock is the kernel's: a run that
crashes or is killed leaves nothing held, and the next run takes the folder."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from pipeline.contracts.errors import UserError

LOCK_FILE = ".run.lock"


def _take(fd: int) -> str | None:
    """Lock ``fd`` for this process; None once held, else the holder's pid as it wrote it."""
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EAGAIN):
            raise
        return os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
    return None


@contextlib.contextmanager
def run_folder_lock(run_dir: Path) -> Iterator[Path]:
    """Hold the run folder for this process (module docstring); :class:`UserError` if another holds it."""
    path = run_dir / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        other = _take(fd)
        if other is not None:
            raise UserError(
                f"run folder {run_dir} is in use by another run (process {other}); wait for it to end, or give "
                "this run a folder of its own (paths.run_dir)"
            )
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)  # releases the lock


def holder(run_dir: Path) -> str | None:
    """The process holding ``run_dir`` (its pid, as it wrote it), or None when no run holds it (a crashed run's lock
    is released with its process)."""
    path = run_dir / LOCK_FILE
    if not path.exists():
        return None
    fd = os.open(path, os.O_RDWR)
    try:
        other = _take(fd)
        if other is None:
            fcntl.lockf(fd, fcntl.LOCK_UN)
        return other
    finally:
        os.close(fd)
