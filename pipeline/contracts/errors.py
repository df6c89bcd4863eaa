"""Errors a user can fix: shown as their message, without a traceback, and the run exits non-zero.

Everything else (a bug, a crashed engine) keeps its traceback. One module for every error the package's layers
share: a config value (:class:`ConfigError`), the judge model (:class:`ModelError`), bad input data
(:class:`InputError`, each :class:`Problem` naming the context, the candidate and the field).
"""

from __future__ import annotations

from dataclasses import dataclass


class UserError(Exception):
    """A problem in what the user gave (config, input data, model): the message says what and how to fix it."""


class ConfigError(UserError, ValueError):
    """A config value that is invalid or would have no effect; the message names the key and the valid values."""


class ModelError(UserError, FileNotFoundError):
    """The judge model cannot be found or loaded as configured."""


MAX_LISTED = 20


@dataclass(frozen=True)
class Problem:
    context: str | None
    candidate: str | None
    field: str | None
    message: str
    # Where in the input (file and line / row) when there is no context id to name yet.
    location: str | None = None

    def __str__(self) -> str:
        where = [self.location] if self.location is not None else []
        if self.context is not None:
            where.append(f"context {self.context!r}")
        if self.candidate is not None:
            where.append(f"candidate {self.candidate!r}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        return f"{', '.join(where)}: {self.message}" if where else self.message


class InputError(UserError, ValueError):
    """Bad input found before any judging starts; lists every problem (the first MAX_LISTED in the message)."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        lines = [f"  - {p}" for p in self.problems[:MAX_LISTED]]
        more = len(self.problems) - MAX_LISTED
        if more > 0:
            lines.append(f"  ... and {more} more")
        super().__init__(f"{len(self.problems)} problem(s) in the input:\n" + "\n".join(lines))
