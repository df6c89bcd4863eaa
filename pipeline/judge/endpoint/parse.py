"""A reply's JSON, parsed within limits set here and nowhere else: whatever a server sends, the result is a value a
reader can take apart or a :class:`pipeline.judge.endpoint.replies.Refused` of a named kind, never another exception.

- ``too_large``: a body (or a batch output line) of more than :data:`MAX_BYTES`;
- ``not_json``: a body that does not parse (JSON nested deeper than the parser goes is one: ``RecursionError``);
- ``too_deep``: a value nested more than :data:`MAX_DEPTH` levels (an answer is five deep);
- ``bad_number``: an integer of more than :data:`MAX_DIGITS` digits (no token count or log-probability needs one; a
  310-digit integer overflows a float, a 4,300-digit one is refused by Python's own parser), or a decimal number
  too large for a float (it would read as an infinity);
- ``bad_text``: a string holding a lone UTF-16 surrogate (``"\\ud800"``): it cannot be encoded, so it could be
  neither cached nor written to a table.

The checks walk the parsed value once, iteratively (no recursion of our own to exhaust).
"""

from __future__ import annotations

import json
import math
from typing import Any

from pipeline.judge.endpoint.replies import Refused

# A reply larger than this is refused (an answer of one token with its alternatives is a few kilobytes).
MAX_BYTES = 4 * 2**20
# The deepest nesting of objects and lists a reply may have (an answer's log-probabilities are five levels down).
MAX_DEPTH = 32
# The most digits an integer of a reply may have (token counts are below 2**31: ten digits).
MAX_DIGITS = 24


def _integer(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise Refused("bad_number", f"an integer of {len(text.lstrip('-'))} digits")
    return int(text)


def _decimal(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise Refused("bad_number", f"a number of {len(text)} characters that overflows a float")
    return value


def parse_json(raw: str | bytes) -> Any:
    """``raw`` parsed as JSON within the limits (module docstring), or :class:`Refused`."""
    size = len(raw) if isinstance(raw, bytes) else len(raw.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise Refused("too_large", f"a body of {size} bytes (at most {MAX_BYTES})")
    try:
        value = json.loads(raw, parse_int=_integer, parse_float=_decimal)
    except Refused:
        raise
    except RecursionError:
        raise Refused("not_json", "JSON nested deeper than it can be parsed") from None
    except ValueError as exc:  # includes UnicodeDecodeError
        raise Refused("not_json", f"{str(exc)[:80]}") from None
    check_value(value)
    return value


def check_value(value: Any) -> None:
    """Refuse a parsed value nested more than :data:`MAX_DEPTH` levels or holding a string that cannot be encoded."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _text(item)
            continue
        if not isinstance(item, dict | list):
            continue
        if depth >= MAX_DEPTH:
            raise Refused("too_deep", f"a value nested more than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            for key, inner in item.items():
                _text(key)
                stack.append((inner, depth + 1))
        else:
            stack.extend((inner, depth + 1) for inner in item)


def _text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Refused("bad_text", f"a string holding a lone surrogate: {text[:40]!r}") from None
