"""The client runtime's collector threshold (client_runtime.GcThreshold), without a runtime."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from actors.client.client_runtime import GC_ENV, GC_GEN0_THRESHOLD, GcThreshold


@pytest.fixture(autouse=True)
def _thresholds(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    saved = gc.get_threshold()
    monkeypatch.delenv(GC_ENV, raising=False)
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.set_threshold(*saved)


def test_raised_while_clients_run_and_put_back_after() -> None:
    t = GcThreshold()
    t.raise_()
    assert gc.get_threshold() == (GC_GEN0_THRESHOLD, 10, 10)
    t.raise_()  # a second raise changes nothing and keeps the first "before"
    t.restore()
    assert gc.get_threshold() == (700, 10, 10)


def test_keep_leaves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GC_ENV, "keep")
    t = GcThreshold()
    t.raise_()
    assert gc.get_threshold() == (700, 10, 10)
    t.restore()
    assert gc.get_threshold() == (700, 10, 10)


@pytest.mark.parametrize("user", [(0, 10, 10), (50_000, 5, 5)])
def test_never_lowered_nor_turned_on(user: tuple[int, int, int]) -> None:
    gc.set_threshold(*user)
    t = GcThreshold()
    t.raise_()
    assert gc.get_threshold() == user
    t.restore()
    assert gc.get_threshold() == user


def test_a_change_made_meanwhile_is_not_undone() -> None:
    t = GcThreshold()
    t.raise_()
    gc.set_threshold(20_000, 10, 10)  # the application's own choice, after the client's
    t.restore()
    assert gc.get_threshold() == (20_000, 10, 10)
