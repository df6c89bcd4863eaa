"""Who may see and answer what in a review: the review folder's secret, each reviewer's key, the owner's key and the
personal links that carry them (:mod:`pipeline.review.app`)."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from pipeline.contracts.errors import UserError

SECRET_BYTES = 32


def review_secret(folder: Path) -> bytes:
    """The review folder's secret (``.secret``): the key of every form's token and of every reviewer's and the
    owner's key. Made once, whole: written to a file of its own created exclusively with owner-only permissions,
    then linked into place (a crash never leaves an empty ``.secret``; two servers starting together agree on one).
    An existing secret that is short or that others can read is refused with what to do."""
    path = folder / ".secret"
    if not path.exists():
        folder.mkdir(parents=True, exist_ok=True)
        draft = folder / f".secret.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, secrets.token_bytes(SECRET_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(draft, path)
        except FileExistsError:
            pass  # another server made it first: theirs stands
        finally:
            draft.unlink()
    mode = path.stat().st_mode
    if mode & 0o077:
        raise UserError(
            f"{path}: the review's secret is readable by others (mode {mode & 0o777:o}); anyone who can read it can "
            f"compute every reviewer's link and the owner's. Make it private (chmod 600 {path}) and, if others may "
            "have read it, delete it to make a new one (every link given so far stops working)"
        )
    secret = path.read_bytes()
    if len(secret) < SECRET_BYTES:
        raise UserError(
            f"{path}: the review's secret is {len(secret)} byte(s), not {SECRET_BYTES} (a write cut short?); delete "
            "it and start the review again to make a new one (every link given so far stops working)"
        )
    return secret


def same(given: str, expected: str) -> bool:
    """Whether a key or token from a request is the one issued (constant time; any characters: never an error)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode())


def reviewer_key(secret: bytes, reviewer: str) -> str:
    """A reviewer's key: the part of their personal link that says they are who they say."""
    return hmac.new(secret, f"reviewer\x1f{reviewer}".encode(), hashlib.sha256).hexdigest()[:32]


def owner_key(secret: bytes) -> str:
    """The owner's key: the agreement page, and every reviewer's progress and link."""
    return hmac.new(secret, b"owner", hashlib.sha256).hexdigest()[:32]


def personal_links(secret: bytes, base_url: str, reviewers: list[str]) -> dict[str, str]:
    """Every reviewer's personal link, and the owner's (under ``"(owner)"``: the agreement page)."""
    base = base_url.rstrip("/")
    links = {name: f"{base}/r/{name}?key={reviewer_key(secret, name)}" for name in reviewers}
    links["(owner)"] = f"{base}/agreement?key={owner_key(secret)}"
    return links
