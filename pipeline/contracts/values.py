"""How a value read from a user's records (JSON) is taken as an identifier or a number: one reading for the inputs
(:mod:`pipeline.data.records`) and the verdicts brought from elsewhere (:mod:`pipeline.judge.recorded.layout`)."""

from __future__ import annotations

import math

# Characters an identifier may not hold: they would break the lines and keys it is written into.
_BREAKING = "\t\n\r\x1f"


def identifier(value: object) -> str | None:
    """An integer as its digits, or a non-blank string without tabs, line breaks or unit separators; else None
    (booleans are not identifiers, though Python counts them as integers)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip() and not any(ch in value for ch in _BREAKING):
        return value
    return None


def finite_number(value: object) -> float | None:
    """A finite number, or None (a boolean, a string, an infinity or NaN, an integer beyond a float)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None
