"""What the checks of every kind share: their failure, running a list of them, and pytest's parametrisation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Check = tuple[str, Callable[..., None]]


class ConformanceError(AssertionError):
    """A part that breaks a promise of the product: which part, which check, what was seen."""


def fail(part: str, check: str, seen: str) -> None:
    raise ConformanceError(f"{part} fails {check}: {seen}")


def run_all(part: str, checks: Sequence[Check], *args: Any) -> None:
    """Run every check on ``args``; one :class:`ConformanceError` naming each that failed."""
    failed = []
    for name, check in checks:
        try:
            check(*args)
        except ConformanceError as exc:
            failed.append(str(exc))
        except Exception as exc:  # a check the part crashed in is a failed check, named
            failed.append(f"{part} fails {name}: it raised {type(exc).__name__}: {exc}")
    if failed:
        raise ConformanceError("\n".join(failed))
