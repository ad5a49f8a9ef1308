"""Shared pytest setup: Hypothesis profiles `dev` (default) and `ci` (env CI=true), and the
reference RocketMQ 4.9.8 fixtures."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
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


@pytest.fixture(scope="session")
def reference_build() -> Path:
    """The reference Apache RocketMQ 4.9.8 build (deploy.reference): built once per session.

    Missing on a developer machine: the test is skipped; under CI=true it fails, since the test
    setup (bin/test) builds it and a silent skip would hide a broken setup."""
    from deploy import reference

    try:
        return reference.build()
    except reference.ReferenceUnavailable as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"reference RocketMQ unavailable in CI: {exc}")
        pytest.skip(f"reference RocketMQ unavailable: {exc}")


@pytest.fixture
def reference_cluster(reference_build: Path, tmp_path: Path) -> Iterator[Any]:
    """A running reference name server + broker on free ports, stopped by PID afterwards."""
    from deploy import reference

    with reference.reference_cluster(str(tmp_path / "refstore")) as ref:
        yield ref
