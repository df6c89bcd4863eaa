"""How a value read from a user's records (JSON) is taken as an identifier or a number: one reading for the inputs
(:mod:`pipeline.data.records`) and the verdicts brought from elsewhere (:mod:`pipeline.judge.recorded.layout`); and
how a name taken (a judge's, a model's, a data set's, an id) is written into a file name or an MLflow key: one
function each (:func:`name_part`, :func:`tracking_key`), that makes any accepted name valid and keeps names apart."""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata

# The longest identifier or name taken (an id of 20 MB would be a 20 MB error message, key and file name).
MAX_ID_CHARS = 512
_MAX_INT = 10**MAX_ID_CHARS
# The characters of one segment of a file name or an MLflow key (which takes '/' between parts): MLflow's own set.
_CHARS = re.compile(r"[^\w.\- :]")
# MLflow's longest key.
MAX_KEY_CHARS = 250


def identifier(value: object) -> str | None:
    """An integer as its digits, or a non-blank string of at most :data:`MAX_ID_CHARS` characters without control
    characters (tabs, line breaks, unit separators) or lone surrogates; else None (booleans are not identifiers,
    though Python counts them as integers)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value) if abs(value) < _MAX_INT else None
    if not (isinstance(value, str) and value.strip() and len(value) <= MAX_ID_CHARS):
        return None
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in value):
        return None
    return value


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` for a message, cut to about ``limit`` characters (a 20 MB value is not repeated back)."""
    text = repr(value) if not isinstance(value, str) or len(value) <= 4 * limit else repr(value[: 4 * limit])
    return text if len(text) <= limit else f"{text[: limit - 12]}... ({len(str(value))} chars)"


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=4).hexdigest()


def name_part(name: str, limit: int = 80) -> str:
    """``name`` as one segment of a file name or a tracking key: itself when it is already one (letters, digits,
    ``_ - . :`` and spaces, not ``.`` or ``..``, at most ``limit`` characters); else its allowed characters and a
    digest of the whole name, so two names never become one segment."""
    if name and name not in (".", "..") and len(name) <= limit and not _CHARS.search(name):
        return name
    kept = _CHARS.sub("_", name)[: limit - 9].strip(".") or "name"
    return f"{kept}-{_digest(name)}"


def tracking_key(key: str) -> str:
    """An MLflow metric, param or tag key made of parts joined by ``/`` (``card/<attribute>/<judge>/...``), valid
    whatever names the parts hold: each part kept when MLflow takes it, else made one by :func:`name_part`; a key
    too long for MLflow is cut and keeps a digest of the whole. Every key logged goes through it."""
    fixed = "/".join(name_part(part, MAX_KEY_CHARS) for part in key.split("/"))
    return fixed if len(fixed) <= MAX_KEY_CHARS else f"{fixed[: MAX_KEY_CHARS - 9]}-{_digest(key)}"


def finite_number(value: object) -> float | None:
    """A finite number, or None (a boolean, a string, an infinity or NaN, an integer beyond a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None
