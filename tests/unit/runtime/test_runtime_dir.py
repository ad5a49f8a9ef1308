"""deploy.runtime_dir: a run's runtime directory names its owner; a start removes only those
whose owner is dead (gone, or its pid reused by another process) and whose admin port nobody
listens on; a directory without an owner file is never touched."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from deploy import procinfo, runtime_dir


def _dir(base, name: str, owner: str | None) -> str:  # type: ignore[no-untyped-def]
    path = os.path.join(base, runtime_dir.PREFIX + name)
    os.mkdir(path, 0o700)
    with open(os.path.join(path, "broker-a-0.sock"), "w"):
        pass
    if owner is not None:
        with open(os.path.join(path, runtime_dir.OWNER_FILE), "w", encoding="ascii") as f:
            f.write(owner)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_create_records_this_process_as_owner(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    path = runtime_dir.create(4321)
    assert os.path.dirname(path) == str(tmp_path)
    assert os.stat(path).st_mode & 0o777 == 0o700
    me = os.getpid()
    assert runtime_dir.read_owner(path) == (me, procinfo.start_time(me), 4321)
    assert runtime_dir.clean_dead(str(tmp_path)) == []  # its owner lives


def test_clean_dead_removes_only_the_dead_runs(tmp_path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_pid, dead_start = child.pid, procinfo.start_time(child.pid)
    child.wait()
    me = os.getpid()
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen(1)
    try:
        live_port = listening.getsockname()[1]
        dead = _dir(tmp_path, "dead", f"{dead_pid} {dead_start} {_free_port()}\n")
        reused = _dir(tmp_path, "reused", f"{me} {procinfo.start_time(me) + 1} {_free_port()}\n")
        live = _dir(tmp_path, "live", f"{me} {procinfo.start_time(me)} {_free_port()}\n")
        orphans = _dir(tmp_path, "orphans", f"{dead_pid} {dead_start} {live_port}\n")
        legacy = _dir(tmp_path, "legacy", None)
        garbled = _dir(tmp_path, "garbled", "not numbers\n")
        other = tmp_path / "not-ours"
        other.mkdir()
        removed = runtime_dir.clean_dead(str(tmp_path))
    finally:
        listening.close()
    assert sorted(removed) == sorted([dead, reused])
    for kept in (live, orphans, legacy, garbled, str(other)):
        assert os.path.isdir(kept)
