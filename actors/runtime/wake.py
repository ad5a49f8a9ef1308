"""Wake-ups between two processes of one broker through FIFOs in its runtime directory.

Mirrors the wakeup()/waitForRunning pairs of RocketMQ 4.9.x's ServiceThread as they are used
across the HA roles: CommitLog.submitReplicaRequest wakes HAConnection's WriteSocketService
when a SYNC_MASTER send waits for a slave, and HAService.notifyTransferSome wakes the
GroupTransferService when a slave's ack arrives. Here the two ends live in different
processes, so a one-byte write into a named pipe makes the other side's watched descriptor
readable. The pipe is mode 0600 in the broker's private runtime directory and is checked to be
a FIFO of this user on every open; nothing listens on any socket. A poke carries no data: the
reader looks at the shared state (the mapped commit log, the state page) for what changed.
Every failure only costs the latency the periodic timers already bound: a missing reader, a
full pipe, a file system without FIFOs.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
from typing import Final

log = logging.getLogger(__name__)

HA_TRANSFER: Final = "ha-transfer.wake"  # send actor -> HA service: new data a slave must get
HA_ACKED: Final = "ha-acked.wake"  # HA service -> send actor: a slave acked more
REOPEN_S: Final = 1.0  # a writer without a reader tries to open again after this


def _ensure_fifo(path: str) -> bool:
    """Create the FIFO at `path` (0600) unless something is there; False when it cannot."""
    try:
        os.mkfifo(path, 0o600)
    except FileExistsError:
        pass
    except OSError as exc:
        log.warning("wake pipe %s not created (%s): timers alone bound the latency", path, exc)
        return False
    return True


def _open_fifo(path: str, flags: int) -> int:
    """Open `path` (no symlink followed) and keep it only when it is a FIFO of this user that
    nobody else may open; the descriptor, or -1 (logged)."""
    try:
        fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: a writer finds no reader yet
            log.warning("wake pipe %s not opened: %s", path, exc)
        return -1
    st = os.fstat(fd)
    if not stat.S_ISFIFO(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        os.close(fd)
        log.warning("wake pipe %s is not a FIFO of this user with mode 0600: not used", path)
        return -1
    return fd


class WakeReader:
    """The watched end: `fd` turns readable after a poke; drain() clears it."""

    def __init__(self, path: str) -> None:
        self.path = path
        # read-write: the FIFO never reads EOF (which would stay readable) between writers
        self.fd = _open_fifo(path, os.O_RDWR) if _ensure_fifo(path) else -1

    def fds(self) -> list[int]:
        """[fd] to watch, or [] when the pipe is unusable."""
        return [self.fd] if self.fd >= 0 else []

    def drain(self) -> int:
        """Read every pending poke; their count."""
        n = 0
        while self.fd >= 0:
            try:
                got = os.read(self.fd, 4096)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                log.warning("wake pipe %s read failed: %s", self.path, exc)
                break
            if not got:
                break
            n += len(got)
        return n

    def close(self) -> None:
        """Close the descriptor (the FIFO file stays for the next reader)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class WakeWriter:
    """The poking end: poke() never blocks and never raises."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = -1
        self.usable = _ensure_fifo(path)
        self._retry_at = 0.0
        self.pokes = 0

    def poke(self) -> bool:
        """Make the reader's descriptor readable; False when no reader has the pipe open."""
        if self.fd < 0 and not self._open():
            return False
        try:
            os.write(self.fd, b"\x01")
        except (BlockingIOError, InterruptedError):
            pass  # full: the reader has pokes pending already
        except OSError as exc:  # EPIPE: the reader went away
            if exc.errno != errno.EPIPE:
                log.warning("wake pipe %s write failed: %s", self.path, exc)
            self.close()
            return False
        self.pokes += 1
        return True

    def _open(self) -> bool:
        now = time.monotonic()
        if not self.usable or now < self._retry_at:
            return False
        self.fd = _open_fifo(self.path, os.O_WRONLY)
        if self.fd < 0:  # no reader yet (or any longer), or not a private FIFO
            self._retry_at = now + REOPEN_S
            return False
        return True

    def close(self) -> None:
        """Close the descriptor; the next poke opens it again (at most every REOPEN_S)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            self._retry_at = time.monotonic() + REOPEN_S
