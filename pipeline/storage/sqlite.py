"""Values by key in one SQLite file (WAL: safe across threads and processes on one machine)."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class SqliteCache:
    """Successful replies by key, in one SQLite file (safe across threads and processes)."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, body TEXT NOT NULL)")
        self._db.commit()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT body FROM replies WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, body: dict[str, Any]) -> None:
        self.put_many([(key, body)])

    def get_many(self, keys: Sequence[str]) -> list[dict[str, Any] | None]:
        """The replies of ``keys`` (None where there is none), in one query per 500 keys."""
        found: dict[str, str] = {}
        with self._lock:
            for k in range(0, len(keys), 500):
                chunk = list(keys[k : k + 500])
                marks = ",".join("?" * len(chunk))
                found.update(
                    self._db.execute(
                        f"SELECT key, body FROM replies WHERE key IN ({marks})", chunk
                    ).fetchall()
                )
        return [json.loads(found[k]) if k in found else None for k in keys]

    def put_many(self, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
        """Keep replies in one transaction (one commit for a whole batch)."""
        with self._lock:
            self._db.executemany(
                "INSERT OR REPLACE INTO replies VALUES (?, ?)", [(k, json.dumps(b)) for k, b in items]
            )
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()
