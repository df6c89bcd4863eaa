"""The answer log: ``answers.jsonl`` in the review folder, one JSON line per answer, append-only.

An answer is written before the page moves on: the whole line in one ``write`` on a file opened for appending,
then ``fsync``, under an exclusive ``flock`` (two servers on one folder cannot interleave or both accept the
same answer). A reviewer answers an item once: a second answer to it (a double click, a resubmitted form, a
second tab) is not written, and the first stands. Killing the server loses nothing already answered.

A line that does not parse can only be a write cut short by a crash (its reviewer never saw the page move on);
it is skipped, counted and reported, and the next answer starts on a line of its own.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pipeline.contracts.errors import UserError

CHOICES = ("1", "2", "tie")
REVIEWER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
MAX_NOTE = 2000


def check_reviewer(name: str) -> str:
    if not isinstance(name, str) or not REVIEWER.fullmatch(name):  # whole: "ann\n" is not ann
        raise UserError(
            f"reviewer name {name!r}: use 1-40 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )
    return name


@dataclass
class Answers:
    """What the log holds: answers in the order given, and the lines that could not be read."""

    rows: list[dict] = field(default_factory=list)
    torn: int = 0

    def by_reviewer(self, reviewer: str) -> dict[str, dict]:
        return {a["item_id"]: a for a in self.rows if a["reviewer"] == reviewer}


class AnswerLog:
    def __init__(self, path: Path):
        self.path = path
        self._lock = threading.Lock()
        self._answers = Answers()
        self._offset = 0
        self._keys: set[tuple[str, str]] = set()

    def read(self) -> Answers:
        """Every answer on disk (also those another process wrote since the last read)."""
        with self._lock, self._locked("r") as fd:
            self._catch_up(fd)
            # under the lock no write is under way: a last line without its newline was cut short
            tail = int(os.fstat(fd).st_size > self._offset)
            return Answers(list(self._answers.rows), self._answers.torn + tail)

    def add(self, answer: dict) -> tuple[dict, bool]:
        """Write ``answer`` (reviewer, item_id, ...) unless its reviewer already answered its item; return the
        answer that stands and whether it was written now."""
        key = (answer["reviewer"], answer["item_id"])
        with self._lock, self._locked("a") as fd:
            self._catch_up(fd)
            if key in self._keys:
                first = next(a for a in self._answers.rows if (a["reviewer"], a["item_id"]) == key)
                return first, False
            row = {**answer, "answered_at": datetime.now(UTC).isoformat(timespec="milliseconds")}
            line = json.dumps(row, ensure_ascii=False) + "\n"
            size = os.fstat(fd).st_size
            if size and self._last_byte(fd, size) != b"\n":  # a torn line: start on a line of our own
                line = "\n" + line
            os.write(fd, line.encode())
            os.fsync(fd)
            self._catch_up(fd)
            return row, True

    # --- internals ---------------------------------------------------------------------------------------
    def _locked(self, mode: str):
        log = self

        class _Locked:
            def __enter__(self):
                log.path.parent.mkdir(parents=True, exist_ok=True)
                flags = os.O_RDWR | os.O_CREAT | (os.O_APPEND if mode == "a" else 0)
                self.fd = os.open(log.path, flags, 0o644)
                fcntl.flock(self.fd, fcntl.LOCK_EX if mode == "a" else fcntl.LOCK_SH)
                return self.fd

            def __exit__(self, *exc):
                fcntl.flock(self.fd, fcntl.LOCK_UN)
                os.close(self.fd)

        return _Locked()

    @staticmethod
    def _last_byte(fd: int, size: int) -> bytes:
        return os.pread(fd, 1, size - 1)

    def _catch_up(self, fd: int) -> None:
        """Parse the complete lines written since the last read (a last line without its newline is left: the
        next answer ends it with a newline, and it is then counted as torn)."""
        size = os.fstat(fd).st_size
        if size < self._offset:  # the file was replaced: read it all again
            self._answers, self._offset, self._keys = Answers(), 0, set()
        data = os.pread(fd, size - self._offset, self._offset)
        end = data.rfind(b"\n") + 1
        for raw in data[:end].splitlines():
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
                key = (row["reviewer"], row["item_id"])
            except (ValueError, KeyError, TypeError):
                self._answers.torn += 1
                continue
            if key not in self._keys:  # the first answer stands (a second never gets written; see add)
                self._keys.add(key)
                self._answers.rows.append(row)
        self._offset += end
