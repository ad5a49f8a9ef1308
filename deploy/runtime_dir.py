"""The private runtime directory of one actor system (its processor channels' Unix sockets and
wake FIFOs), and the removal of those a dead run left behind.

Mirrors nothing in RocketMQ (a JVM broker has no such directory). Each directory is
`<tmp>/amq-XXXXXXXX` (short: a Unix socket path holds at most 107 bytes), mode 0700, with an
`owner` file naming the launching process (pid and its start time, so a reused pid is not taken
for the owner) and the actor system's admin port. A run stopped cleanly removes its own; one
killed (kill -9) cannot, so each start removes the directories whose owner process is gone and
whose admin port nobody listens on. A directory without a readable owner file, or of another
user, is never touched: it may belong to a live run of another version or user.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile

from deploy import procinfo

log = logging.getLogger(__name__)

PREFIX = "amq-"
OWNER_FILE = "owner"


def create(admin_port: int) -> str:
    """A new runtime directory owned by this process (mode 0700); its path."""
    path = tempfile.mkdtemp(prefix=PREFIX)
    os.chmod(path, 0o700)
    pid = os.getpid()
    tmp = os.path.join(path, OWNER_FILE + ".tmp")
    with open(tmp, "w", encoding="ascii") as f:
        f.write(f"{pid} {procinfo.start_time(pid)} {admin_port}\n")
    os.replace(tmp, os.path.join(path, OWNER_FILE))  # whole or absent for a reader
    return path


def read_owner(path: str) -> tuple[int, int, int] | None:
    """(pid, start time, admin port) from a directory's owner file; None when unreadable."""
    try:
        with open(os.path.join(path, OWNER_FILE), encoding="ascii") as f:
            pid, start, port = (int(v) for v in f.read().split())
    except (OSError, ValueError):
        return None
    return pid, start, port


def owner_alive(pid: int, start: int, admin_port: int) -> bool:
    """True while the owning process lives (the same process: its start time matches) or an
    actor system listens on its admin port (a launcher killed alone: its actors are stopping)."""
    if not procinfo.is_zombie(pid) and procinfo.start_time(pid) == start:
        return True
    return any(port == admin_port for _ip, port in procinfo.listening_sockets().values())


def clean_dead(tmp_dir: str | None = None) -> list[str]:
    """Remove this user's runtime directories whose owner is dead; the paths removed."""
    base = tmp_dir or tempfile.gettempdir()
    uid = os.getuid()
    removed: list[str] = []
    try:
        entries = list(os.scandir(base))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(PREFIX):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat().st_uid != uid:
                continue
        except OSError:
            continue
        owner = read_owner(entry.path)
        if owner is None or owner_alive(*owner):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
        if not os.path.exists(entry.path):
            removed.append(entry.path)
    if removed:
        log.info("removed %d runtime directories of dead runs: %s", len(removed), removed)
    return removed
