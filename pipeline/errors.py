"""Errors the user can fix: shown as their message, without a traceback, and the run exits non-zero.

Everything else (a bug, a crashed engine) keeps its traceback. :class:`pipeline.data.errors.InputError` (bad
input data) is a :class:`UserError` too.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem in what the user gave (config, input data, model): the message says what and how to fix it."""


class ConfigError(UserError, ValueError):
    """A config value that is invalid or would have no effect; the message names the key and the valid values."""


class ModelError(UserError, FileNotFoundError):
    """The judge model cannot be found or loaded as configured."""
