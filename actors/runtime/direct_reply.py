"""Answers a processor writes to the client's socket itself, and the lock that keeps frames whole.

Mirrors the response write of remoting/netty/NettyRemotingAbstract.java, RocketMQ 4.9.x: the
executor thread that ran a processor hands the response to the client's channel itself
(processRequestCommand's callback, ctx.writeAndFlush), instead of passing it back through the
I/O thread that read the request. Here the executor is another process, so:

- The RemotingServer passes a client connection's socket (SCM_RIGHTS, a CONN_FD record on the
  group's Unix channel) to each processor group that answers directly (ProcessorGroup.
  direct_replies: pull), the first time the connection sends that group a request; the first
  such record on a channel comes after a LOCKS record carrying the lock table.
- ConnLocks: POSIX record locks (fcntl F_SETLK) on one memfd, one byte per connection id.
  A writer holds its connection's byte while a frame of its is partly written: the
  RemotingServer until its out buffer for the connection is empty, a processor for one
  write. Record locks belong to a process, so the two exclude each other although they share
  the file, and a process's locks go when it dies.
- A processor writes only when it gets the lock at once and the socket's send queue has room
  for the whole frame (SIOCOUTQ against SO_SNDBUF); otherwise the answer takes the channel,
  as every answer did before. A write the kernel still takes only in part is finished within
  STALL_S, holding the lock; past that the connection is shut down (a frame cut short cannot
  be finished by anyone else). A processor that dies between two parts of a frame leaves the
  same cut: its lock is gone with it and the client's decoder drops the connection.
- Causal order (actors.runtime.channel): a batch whose processing emitted events answers
  through the RemotingServer, behind the events, as before.

Measured (C, deploy/bench/consume_bench.py): each 33 KiB pull answer crossed a Unix channel, was
read and copied by the RemotingServer and written again; now it is written once.
"""

from __future__ import annotations

import array
import errno
import fcntl
import logging
import os
import select
import socket
import termios
import time
from typing import Any, Final

log = logging.getLogger(__name__)

STALL_S: Final = 0.5  # a frame the kernel took only in part must be finished within this
ROOM_MARGIN: Final = 64 * 1024  # send-queue room kept beyond twice the frame (skb overhead)
_LOCKED: Final = frozenset((errno.EAGAIN, errno.EACCES))
REFUSAL_LOG_S: Final = 10.0


class ConnLocks:
    """One byte lock per connection id on a shared memfd (POSIX record locks)."""

    __slots__ = ("_refusal_logged_at", "fd", "refused")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.refused = 0  # lock calls the kernel refused (ENOLCK and the like, not a holder)
        self._refusal_logged_at = -REFUSAL_LOG_S

    @classmethod
    def create(cls) -> ConnLocks:
        """A fresh, anonymous lock table (the RemotingServer's)."""
        return cls(os.memfd_create("actormq-conn-locks", os.MFD_CLOEXEC))

    def try_lock(self, conn_id: int) -> bool:
        """Take the connection's lock if nobody else holds it (False too when the kernel
        refuses the lock itself, e.g. ENOLCK: the writer then waits, nothing is torn)."""
        try:
            fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, conn_id)
        except OSError as exc:
            if exc.errno not in _LOCKED:
                self._refused(exc)
            return False
        return True

    def _refused(self, exc: OSError) -> None:
        """Count a lock call the kernel refused; logged at most once per REFUSAL_LOG_S."""
        self.refused += 1
        now = time.monotonic()
        if now - self._refusal_logged_at >= REFUSAL_LOG_S:
            self._refusal_logged_at = now
            log.warning("connection lock refused by the kernel (%d so far): %s", self.refused,
                        exc)  # fmt: skip

    def unlock(self, conn_id: int) -> None:
        """Release the connection's lock."""
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, conn_id)

    def close(self) -> None:
        """Close the table (every lock this process holds on it goes too)."""
        try:
            os.close(self.fd)
        except OSError:
            pass


class _Shared:
    """A client socket a processor writes to, and its last known send buffer size."""

    __slots__ = ("fd", "sndbuf", "sock")

    def __init__(self, fd: int) -> None:
        self.sock = socket.socket(fileno=fd)
        self.sock.setblocking(False)  # already so (one file description with the server's)
        self.fd = fd
        self.sndbuf = 0


class DirectReplies:
    """A processor's shared client sockets: writes a whole answer, or says it did not."""

    def __init__(self) -> None:
        self.locks: ConnLocks | None = None
        self.conns: dict[int, _Shared] = {}
        self._queued = array.array("i", [0])  # TIOCOUTQ's answer
        self.written = 0  # answers written here
        self.declined = 0  # answers left to the channel (lock taken, queue full, socket gone)
        self.cut = 0  # connections shut down because a frame could not be finished

    def adopt_locks(self, fd: int) -> None:
        """The RemotingServer's lock table (a replaced RemotingServer sends a new one)."""
        if self.locks is not None:
            self.locks.close()
        self.locks = ConnLocks(fd)

    def adopt(self, conn_id: int, fd: int) -> None:
        """The socket of connection `conn_id` (a duplicate descriptor, ours to close)."""
        old = self.conns.pop(conn_id, None)
        if old is not None:
            old.sock.close()
        try:
            self.conns[conn_id] = _Shared(fd)
        except OSError as exc:
            os.close(fd)
            log.warning("conn=%d shared socket unusable: %s", conn_id, exc)

    def forget(self, conn_id: int) -> None:
        """The connection is gone: close our descriptor (the server shut the socket down)."""
        shared = self.conns.pop(conn_id, None)
        if shared is not None:
            shared.sock.close()

    def close_all(self) -> None:
        """Close every shared socket and the lock table."""
        for shared in self.conns.values():
            shared.sock.close()
        self.conns.clear()
        if self.locks is not None:
            self.locks.close()
            self.locks = None

    def write(self, conn_id: int, data: Any) -> bool:
        """Write the encoded frame `data` to the client whole; False = not written at all
        (the caller sends it through the channel)."""
        shared = self.conns.get(conn_id)
        locks = self.locks
        if shared is None or locks is None or not locks.try_lock(conn_id):
            self.declined += 1
            return False
        try:
            n = len(data)
            fcntl.ioctl(shared.fd, termios.TIOCOUTQ, self._queued, True)
            need = (self._queued[0] + n) * 2 + ROOM_MARGIN
            if need > shared.sndbuf:
                shared.sndbuf = shared.sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
                if need > shared.sndbuf:
                    self.declined += 1
                    return False
            try:
                sent = shared.sock.send(data)
            except OSError:  # would block, or the connection is gone: the server's to see
                self.declined += 1
                return False
            if sent < n:
                self._finish(conn_id, shared, memoryview(data)[sent:])
            self.written += 1
            return True
        finally:
            locks.unlock(conn_id)

    def _finish(self, conn_id: int, shared: _Shared, rest: memoryview) -> None:
        """Finish a frame the kernel took only in part (lock held), or cut the connection."""
        poller = select.poll()
        poller.register(shared.fd, select.POLLOUT)
        deadline = time.monotonic() + STALL_S
        while rest:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not poller.poll(left * 1000.0):
                continue
            try:
                rest = rest[shared.sock.send(rest):]
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                return  # gone: nothing more can reach that client
        if rest:
            self.cut += 1
            log.warning("conn=%d took no more of an answer for %.1f s: shutting it down "
                        "(%d bytes of the frame unsent)", conn_id, STALL_S, len(rest))  # fmt: skip
            try:
                shared.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
