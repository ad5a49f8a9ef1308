"""actors.runtime.wake: FIFO wake-ups between two processes never block, never raise, and
survive either end going away."""

from __future__ import annotations

import fcntl
import os
import select
import stat
from typing import Any

from actors.runtime import wake
from actors.runtime.wake import WakeReader, WakeWriter


def _readable(fd: int) -> bool:
    return bool(select.select([fd], [], [], 0)[0])


def test_poke_makes_the_reader_readable_and_drain_clears_it(tmp_path: Any) -> None:
    path = str(tmp_path / "x.wake")
    r = WakeReader(path)
    w = WakeWriter(path)
    try:
        assert stat.S_ISFIFO(os.stat(path).st_mode)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # only the broker's user
        assert not _readable(r.fd)
        assert w.poke() and w.poke()
        assert _readable(r.fd)
        assert r.drain() == 2
        assert not _readable(r.fd) and r.drain() == 0
    finally:
        w.close()
        r.close()


def test_no_reader_means_no_poke_and_a_later_reader_is_found(tmp_path: Any, monkeypatch) -> None:
    monkeypatch.setattr(wake, "REOPEN_S", 0.0)
    path = str(tmp_path / "x.wake")
    w = WakeWriter(path)
    assert not w.poke()  # ENXIO: nobody reads yet
    r = WakeReader(path)
    try:
        assert w.poke() and r.drain() == 1
        r.close()  # the reader goes away: EPIPE, swallowed
        assert not w.poke()
        r = WakeReader(path)
        assert w.poke() and r.drain() == 1
    finally:
        w.close()
        r.close()


def test_a_full_pipe_does_not_block(tmp_path: Any) -> None:
    path = str(tmp_path / "x.wake")
    r = WakeReader(path)
    w = WakeWriter(path)
    try:
        size = fcntl.fcntl(r.fd, fcntl.F_GETPIPE_SZ)
        for _ in range(size + 100):  # beyond what the pipe holds: the rest is dropped
            w.poke()
        assert r.drain() == size
    finally:
        w.close()
        r.close()


def test_a_path_that_is_not_a_fifo_is_left_alone(tmp_path: Any) -> None:
    path = tmp_path / "x.wake"
    path.write_bytes(b"data")
    r = WakeReader(str(path))
    w = WakeWriter(str(path))
    assert r.fds() == [] and r.drain() == 0
    assert not w.poke()
    assert path.read_bytes() == b"data"
    r.close()
    w.close()


def test_a_missing_directory_costs_only_the_wake_ups(tmp_path: Any) -> None:
    path = str(tmp_path / "gone" / "x.wake")
    r = WakeReader(path)
    w = WakeWriter(path)
    assert r.fds() == [] and not w.poke()


def test_a_fifo_others_may_open_is_refused(tmp_path: Any) -> None:
    path = str(tmp_path / "x.wake")
    os.mkfifo(path, 0o600)
    os.chmod(path, 0o622)
    r = WakeReader(path)
    w = WakeWriter(path)
    assert r.fds() == [] and not w.poke()


def test_a_symlink_is_not_followed(tmp_path: Any) -> None:
    real = str(tmp_path / "real.wake")
    os.mkfifo(real, 0o600)
    keep = WakeReader(real)  # a reader on the real FIFO: a followed link would take pokes
    link = str(tmp_path / "x.wake")
    os.symlink(real, link)
    try:
        assert WakeReader(link).fds() == []
        assert not WakeWriter(link).poke()
        assert keep.drain() == 0
    finally:
        keep.close()
