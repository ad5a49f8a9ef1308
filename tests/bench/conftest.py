"""Fixtures of the benchmark's own tests: the integration tests' real cluster factory."""

from tests.integration.conftest import local_cluster  # noqa: F401 (a fixture, used by name)
