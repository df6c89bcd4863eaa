"""One creation per key across the processes and hosts that share a folder (a reply cache's): :meth:`Claims.hold`
takes the key's lock (a POSIX lock on a file of its own, released by the kernel when its holder dies, so a crash
leaves nothing held), and inside it the holder reads what an earlier holder made (:meth:`Claims.get`) or makes it and
writes it (:meth:`Claims.put`, whole or not at all) before letting go.

On storage without POSIX locks (some network file systems; NFS v4 and local disks have them) the lock is not taken,
once with a warning: the processes then rely on what each finds written, which a second process started within the
same seconds may not see yet."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from pipeline.contracts.errors import UserError

log = logging.getLogger(__name__)

_UNSUPPORTED = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


def open_lock_file(path: Path, flags: int, mode: int = 0o644) -> int:
    """A lock file opened without following a link (one planted there would have its target written);
    :class:`UserError` for a link or anything but a plain file."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"{path} is a symbolic link, not a lock file; remove it") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserError(f"{path} is not a plain file, not a lock file; remove it")
    return fd


class Claims:
    """Values made once per key, by whichever process holds the key first (module docstring)."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.warned = False

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        """Hold ``key`` (waiting while another process holds it)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = open_lock_file(self.folder / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX)
            except OSError as exc:
                if exc.errno not in _UNSUPPORTED:
                    raise
                if not self.warned:
                    self.warned = True
                    log.warning(
                        "%s cannot be locked (%s): claims are not shared between processes", self.folder, exc
                    )
            yield
        finally:
            os.close(fd)

    def get(self, key: str) -> str | None:
        path = self.folder / f"{key}.value"
        try:
            return path.read_text().strip() or None
        except FileNotFoundError:
            return None

    def put(self, key: str, value: str) -> None:
        path = self.folder / f"{key}.value"
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(value + "\n")
        tmp.replace(path)
