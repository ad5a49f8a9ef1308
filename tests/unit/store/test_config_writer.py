"""store.config_files.BackgroundWriter: atomic config writes off the caller's thread."""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest

from store import config_files
from store.config_files import BackgroundWriter, read_json_with_bak


def _failing_writes(monkeypatch: pytest.MonkeyPatch, errno: int) -> dict[str, Any]:
    """Make write_text_atomic fail with `errno` while fail["n"] > 0 (once to begin with);
    fail["texts"] lists every text it was asked to write."""
    real = config_files.write_text_atomic
    fail: dict[str, Any] = {"n": 1, "texts": []}

    def flaky(p: str, text: str) -> None:
        fail["texts"].append(text)
        if fail["n"] > 0:
            fail["n"] -= 1
            raise OSError(errno, os.strerror(errno))
        real(p, text)

    monkeypatch.setattr(config_files, "write_text_atomic", flaky)
    return fail

def test_latest_text_wins_and_close_writes_what_is_queued(tmp_path: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = os.path.join(str(tmp_path), "config", "delayOffset.json")
    gate = threading.Event()
    inside = threading.Event()
    real = config_files.write_text_atomic
    written: list[str] = []

    def slow(p: str, text: str) -> None:  # the first write waits like an fsync behind writeback
        inside.set()
        gate.wait(10)
        real(p, text)
        written.append(text)

    monkeypatch.setattr(config_files, "write_text_atomic", slow)
    w = BackgroundWriter()
    try:
        w.submit(path, '{"offsetTable":{1:1}}')
        assert inside.wait(10)  # the caller is back while the write is stuck
        w.submit(path, '{"offsetTable":{1:2}}')
        w.submit(path, '{"offsetTable":{1:3}}')  # replaces the queued text
        assert not w.flush(timeout_s=0.05)
        gate.set()
        assert w.flush()
        assert written == ['{"offsetTable":{1:1}}', '{"offsetTable":{1:3}}']
        assert read_json_with_bak(path) == '{"offsetTable":{1:3}}'
        with open(path + ".bak", encoding="utf-8") as f:
            assert f.read() == '{"offsetTable":{1:1}}'
        w.submit(path, '{"offsetTable":{1:4}}')
    finally:
        gate.set()
        w.close()
    assert read_json_with_bak(path) == '{"offsetTable":{1:4}}'
    assert w.writes == 3


def test_a_failed_write_is_logged_and_the_thread_goes_on(tmp_path: Any) -> None:
    blocker = os.path.join(str(tmp_path), "file")
    with open(blocker, "w", encoding="utf-8") as f:
        f.write("x")
    w = BackgroundWriter()
    try:
        w.submit(os.path.join(blocker, "sub", "a.json"), "{}")  # a file where a dir must be
        assert w.flush()
        good = os.path.join(str(tmp_path), "ok", "a.json")
        w.submit(good, '{"a":1}')
        assert w.flush()
        assert read_json_with_bak(good) == '{"a":1}'
    finally:
        w.close()
    assert w.writes == 1


def test_a_failed_write_is_written_again_even_if_nothing_newer_comes(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ScheduleMessageService marks its table clean when it submits, so a text whose write
    failed (disk full for a moment) must be retried by the writer: at close() at the latest,
    and after retry_s without any new submit."""
    path = os.path.join(str(tmp_path), "config", "delayOffset.json")
    fail = _failing_writes(monkeypatch, 28)  # ENOSPC once
    w = BackgroundWriter()
    try:
        w.submit(path, '{"offsetTable":{3:7}}')
        assert w.flush()
        assert not os.path.exists(path)
    finally:
        w.close()  # a clean shutdown: the failed text is written now
    assert read_json_with_bak(path) == '{"offsetTable":{3:7}}'
    assert w.writes == 1 and w.failures == 1

    fail["n"] = 1
    done = threading.Event()
    w2 = BackgroundWriter(retry_s=0.01)
    try:
        w2.submit(path, '{"offsetTable":{3:8}}')
        for _ in range(2_000):  # bounded: retried after retry_s, no new submit
            if w2.writes == 1:
                done.set()
                break
            threading.Event().wait(0.005)
        assert done.is_set() and w2.failures == 1
        assert read_json_with_bak(path) == '{"offsetTable":{3:8}}'
    finally:
        w2.close()


def test_a_newer_text_replaces_a_failed_one(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = os.path.join(str(tmp_path), "config", "delayOffset.json")
    fail = _failing_writes(monkeypatch, 5)  # EIO once
    seen = fail["texts"]
    w = BackgroundWriter()
    try:
        w.submit(path, '{"offsetTable":{1:1}}')
        assert w.flush()
        w.submit(path, '{"offsetTable":{1:2}}')
        assert w.flush()
    finally:
        w.close()
    assert seen == ['{"offsetTable":{1:1}}', '{"offsetTable":{1:2}}']  # the old one never lands
    assert read_json_with_bak(path) == '{"offsetTable":{1:2}}'
