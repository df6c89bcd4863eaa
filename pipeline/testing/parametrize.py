"""pytest's parametrisation of the scorer checks (:mod:`pipeline.testing`), as scikit-learn's
``parametrize_with_checks`` is of an estimator's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pipeline.testing.scorers import scorer_checks


def parametrize_with_checks(entries: Sequence[Any]) -> Any:
    """A pytest decorator: one case per (scorer entry, check), its id ``<scorer>-<check>``; the test takes ``entry``
    and ``check`` and calls ``check(entry)``. (A backend's checks need its spec: :func:`pipeline.testing.backends.check_backend`.)"""
    import pytest

    cases, ids = [], []
    for entry in entries:
        checks = scorer_checks(entry) if hasattr(entry, "score") else []
        if not checks:
            raise TypeError(
                f"{entry!r}: parametrize_with_checks takes scorer entries (backends: backend_checks)"
            )
        for name, check in checks:
            cases.append((entry, check))
            ids.append(f"{entry.name}-{name}")
    return pytest.mark.parametrize(("entry", "check"), cases, ids=ids)
