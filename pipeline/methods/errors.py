"""Errors raised by the methods library."""

from __future__ import annotations

__all__ = ["ComparisonError"]


class ComparisonError(ValueError):
    """A comparison table that a method cannot use.

    Raised for malformed input (shapes, dtypes, indices out of range, an item compared with itself,
    probabilities that are NaN or outside [0, 1], forbidden duplicates) and for comparison graphs on
    which a score is not identified (an item in no comparison, a disconnected graph). The message names
    the offending comparison index, the items involved and the field, e.g.
    ``"comparison 17 (i=3, j=5): p=nan is not a probability in [0, 1]"``.

    ``items`` holds the indices of the items at fault where there are some (an item in no comparison, the
    smallest component of a disconnected graph), so a caller can name them by their own ids.
    """

    def __init__(self, message: str, items: tuple[int, ...] = ()):
        super().__init__(message)
        self.items = tuple(int(k) for k in items)
