"""Hypothesis profiles of the invariance battery: ``battery`` (the default: deterministic draws, a budget that keeps
the battery within the fast tier) and ``explore`` (more and random draws, for a session hunting failures:
``HYPOTHESIS_PROFILE=explore make test-fast PYTEST_ARGS='-k invariance'``)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_COMMON = {
    "deadline": None,
    "database": None,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
    "print_blob": True,
}
settings.register_profile("battery", max_examples=8, derandomize=True, **_COMMON)
settings.register_profile("explore", max_examples=200, **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "battery"))
