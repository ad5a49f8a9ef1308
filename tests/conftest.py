"""Shared pytest setup: Hypothesis profiles `dev` (default) and `ci` (env CI=true)."""

from __future__ import annotations

import logging
import os

from hypothesis import HealthCheck, settings

log = logging.getLogger(__name__)

# CI has 2 cores and the whole suite must stay well under 20 minutes: fewer examples there,
# derandomized so a failure reproduces. No deadlines: the machines are shared and noisy.
settings.register_profile(
    "dev",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci",
    max_examples=50,
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(
    os.environ.get(
        "HYPOTHESIS_PROFILE",
        "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev",
    )
)
