"""One run at a time per run folder: the run holds an exclusive lock on ``<run folder>/.run.lock`` from the
moment it opens the folder until it ends (a POSIX record lock, ``lockf``: held by the process alone, never by the
engines and workers it forks). A second run on the same folder (a rerun started while the first still
runs, two jobs given one ``paths.run_dir``) is refused at once, naming the process that holds it, instead of both
judging, creating batches for the same requests and writing the same tables. The lock is the kernel's: a run that
crashes or is killed leaves nothing held, and the next run takes the folder.

The lock file is opened without following a link (a link planted there is refused, its target never written), and
asked about read-only (another user's lock is read, not written). A POSIX lock is released when its process closes
*any* descriptor of the file, so this process never opens a lock file it holds: it answers from what it holds."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from pipeline.contracts.errors import UserError
from pipeline.storage.claims import open_lock_file

LOCK_FILE = ".run.lock"
# The run folders this process holds (resolved): asked about here, never opened again while held.
_HELD: set[Path] = set()


def _other(fd: int, kind: int) -> str | None:
    """Lock ``fd`` (``kind``: LOCK_EX or LOCK_SH) for this process; None once held, else the holder's pid as it
    wrote it."""
    try:
        fcntl.lockf(fd, kind | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EACCES, errno.EAGAIN):
            raise
        return os.pread(fd, 64, 0).decode(errors="replace").strip()[:20] or "another process"
    return None


@contextlib.contextmanager
def run_folder_lock(run_dir: Path) -> Iterator[Path]:
    """Hold the run folder for this process (module docstring); :class:`UserError` if another holds it."""
    path = run_dir / LOCK_FILE
    key = run_dir.resolve()
    if key in _HELD:
        raise UserError(f"run folder {run_dir} is in use by another run of this process ({os.getpid()})")
    fd = open_lock_file(path, os.O_RDWR | os.O_CREAT)
    try:
        other = _other(fd, fcntl.LOCK_EX)
        if other is not None:
            raise UserError(
                f"run folder {run_dir} is in use by another run (process {other}); wait for it to end, or give "
                "this run a folder of its own (paths.run_dir)"
            )
        _HELD.add(key)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield path
        finally:
            _HELD.discard(key)
    finally:
        os.close(fd)  # releases the lock


def holder(run_dir: Path) -> str | None:
    """The process holding ``run_dir`` (its pid, as it wrote it; this process's own when it holds it), or None when
    no run holds it (a crashed run's lock is released with its process). Reads the lock file only."""
    if run_dir.resolve() in _HELD:
        return str(os.getpid())
    path = run_dir / LOCK_FILE
    if not path.exists() or path.is_symlink():
        return None
    try:
        fd = open_lock_file(path, os.O_RDONLY)
    except (UserError, OSError):
        return None
    try:
        other = _other(fd, fcntl.LOCK_SH)
        if other is None:
            fcntl.lockf(fd, fcntl.LOCK_UN)
        return other
    finally:
        os.close(fd)
