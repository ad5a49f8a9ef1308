"""Fixtures for the broker core tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from broker_kit import Broker


@pytest.fixture
def broker(tmp_path) -> Iterator[Broker]:
    b = Broker(str(tmp_path / "store"))
    yield b
    b.close()
