"""Client-facing TCP: listen socket, connections, frame splitting, idle close, out buffers.

Mirrors remoting/netty/NettyRemotingServer.java (+ NettyDecoder, NettyConnectManageHandler),
RocketMQ 4.9.x: one length-field frame decoder per connection (max frame 16 MiB, any decode
error closes the channel), TCP_NODELAY, and a channel with no read and no write for
serverChannelMaxIdleTimeSeconds (120 s) is closed. No Thespian here: the owning actor feeds
readiness in and flushes once per pass.

Connections are cheap to open and close: nothing is logged per connection (an accept or a
close is a few syscalls and dict updates), and the owner's watch set changes by one
descriptor at a time (Watcher.watch / unwatch). `maxConnections` (ours: RocketMQ 4.9.x has no
such setting; default 10,000) caps the open connections: one more is accepted and closed at
once, and the refusals are logged at most once per REFUSAL_LOG_S with their count.

`reset_if_killed` (the broker's RemotingServer): every accepted socket gets SO_LINGER {on, 0},
so when the process dies (SIGKILL; its descriptors closed by the kernel, or by the last
processor holding a duplicate, actors.runtime.direct_reply) each client sees its connection
reset, not closed. A Java NettyRemotingClient fails the requests pending on a connection at
once only when it closes the channel itself, which a reset makes it do (exceptionCaught ->
closeChannel -> failFast); a FIN only ends the channel (channelInactive), and a long-polling
pull held on it waits out its 30 s timeout. Every close the server makes itself (idle, bad
input, asked by a processor, shutdown) turns linger off first: a graceful close, whose last
bytes still reach the client.
"""

from __future__ import annotations

import logging
import resource
import socket
import struct
import time
from collections.abc import Callable
from typing import Any, Final, Protocol

from actors.runtime.channel import (
    PEER_GONE,
    OutBuffered,
    ip_to_int,
    listen_channel,
    recv_available,
)
from actors.runtime.direct_reply import ConnLocks
from actors.runtime.tls import (
    ServerTls,
    TlsConfig,
    TlsError,
    TlsMode,
    TlsSession,
)
from protocol.errors import ProtocolError
from protocol.framing import FrameDecoder

log = logging.getLogger(__name__)

DEFAULT_MAX_FRAME: Final = 16 * 1024 * 1024
DEFAULT_IDLE_S: Final = 120.0
MAX_READ_PER_PASS: Final = 4 * 1024 * 1024
MAX_PENDING_OUT: Final = 64 * 1024 * 1024  # a client that reads nothing gets dropped
MAX_ACCEPT_PER_PASS: Final = 256
MAX_IOV: Final = 64  # frames gathered into one sendmsg (more: copied into the out buffer)
DEFAULT_MAX_CONNECTIONS: Final = 10_000
REFUSAL_LOG_S: Final = 10.0  # at most one "refused" line per this many seconds
FD_RESERVE: Final = 256  # descriptors kept beyond maxConnections (channels, files, Thespian)
LINGER_RESET: Final = struct.pack("ii", 1, 0)  # SO_LINGER {on, 0 s}: close() resets
LINGER_OFF: Final = struct.pack("ii", 0, 0)  # the default: close() sends FIN after the data


class Watcher(Protocol):
    """Who watches the server's sockets for input (a WatchingActor)."""

    def watch(self, fd: int) -> None: ...

    def unwatch(self, fd: int) -> None: ...


def raise_fd_limit(wanted: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE towards `wanted` (up to the hard limit); the
    soft limit now in force."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        return -1
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (OSError, ValueError):
            pass
    return int(soft)


class RefusalLog:
    """Counts refused connections and logs them at most once per REFUSAL_LOG_S."""

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.pending = 0  # refused since the last line
        self.total = 0
        self.next_log = 0.0

    def refused(self, peer: tuple[str, int], now: float) -> None:
        """One connection was refused; log (with the count since the last line) when due."""
        self.pending += 1
        self.total += 1
        if now >= self.next_log:
            log.warning("%s: maxConnections=%d reached: refused %d connection(s) since the "
                        "last report (latest from %s:%d; %d in all)", self.name, self.limit,
                        self.pending, peer[0], peer[1], self.total)  # fmt: skip
            self.pending = 0
            self.next_log = now + REFUSAL_LOG_S


class Conn(OutBuffered):
    """One TCP connection: socket, frame decoder, out buffer, activity time."""

    __slots__ = (
        "closed",
        "decoder",
        "fd",
        "id",
        "iov",
        "last_active",
        "local",
        "locked",
        "locks",
        "out",
        "passed",
        "peer",
        "peer_ip",
        "peer_port",
        "routed",
        "sock",
        "tls",
        "tls_policy",
        "tls_wait",
    )

    def __init__(
        self, conn_id: int, sock: socket.socket, peer: tuple[str, int], max_frame: int, now: float,
        tls: ServerTls | None = None,
    ) -> None:
        self.id = conn_id
        self.sock = sock
        self.fd = sock.fileno()
        self.peer = peer
        self.peer_ip = ip_to_int(peer[0])
        self.peer_port = peer[1] & 0xFFFF
        self.local: bool | None = None  # the peer is on this host (decided when first needed)
        self.decoder = FrameDecoder(max_frame)
        self.out = bytearray()
        # frames queued while `out` is empty, written by one sendmsg without copying them
        # (a pull's 33 KiB answer is a view of the processor channel's read): never both
        self.iov: list[Any] = []
        self.last_active = now
        self.closed = False
        self.routed: Any = None  # the owner's note of where this connection's frames went
        # shared with processors that write to it (actors.runtime.direct_reply): its lock
        # table, whether we hold its lock now, and the channels its socket was passed on
        self.locks: ConnLocks | None = None
        self.locked = False
        self.passed: Any = None
        # TLS: the listener's policy until the first bytes decide, then the session (or None)
        self.tls_policy = tls if tls is not None and tls.mode is not TlsMode.DISABLED else None
        self.tls_wait = self.tls_policy is not None
        self.tls: TlsSession | None = None

    def __repr__(self) -> str:
        return f"conn={self.id}"

    def queue(self, data: Any) -> None:
        """Queue encoded bytes (kept as they are while nothing waits in the out buffer)."""
        tls = self.tls
        if tls is not None:
            try:
                data = tls.encrypt(data)
            except TlsError as exc:
                log.warning("conn=%d peer=%s:%d %s, closing", self.id, self.peer[0],
                            self.peer[1], exc)  # fmt: skip
                self.closed = True
                return
            if not data:
                return
        if self.out or len(self.iov) >= MAX_IOV:
            if self.iov:  # a full gather list goes first: never both (flush appends to out)
                self.out += b"".join(self.iov)
                self.iov = []
            self.out += data
        else:
            self.iov.append(data)

    def flush(self) -> bool:
        """Write the gathered frames, then the out buffer; True when nothing is pending.
        What the kernel did not take of the frames moves into the out buffer, in order.
        A shared connection is written under its lock, held until the buffer is empty
        (False while a processor holds it: the owner retries)."""
        locks = self.locks
        if locks is None:
            return self._write()
        if not self.locked:
            if not self.iov and not self.out:
                return True
            if not locks.try_lock(self.id):
                return False
            self.locked = True
        done = self._write()
        if done:
            locks.unlock(self.id)
            self.locked = False
        return done

    def share(self, locks: ConnLocks) -> None:
        """Processors may write to this connection from now on: write under `locks` (a frame
        partly written already keeps the lock until it is out)."""
        if self.locks is None:
            self.locks = locks
            if self.iov or self.out:
                self.locked = locks.try_lock(self.id)  # nobody else has the socket yet

    def release(self) -> None:
        """The connection closes: shut it down for every holder, drop our lock."""
        if self.locks is None:
            return
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # processors hold duplicates of it
        except OSError:
            pass
        if self.locked:
            self.locks.unlock(self.id)
            self.locked = False

    def _write(self) -> bool:
        iov = self.iov
        if iov:
            self.iov = []
            try:
                sent = self.sock.sendmsg(iov)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self.closed = True
                if exc.errno not in PEER_GONE:
                    log.warning("%r send failed: %s", self, exc)
                return True
            for data in iov:
                n = len(data)
                if sent >= n:
                    sent -= n
                    continue
                self.out += memoryview(data)[sent:] if sent else data
                sent = 0
        return super().flush()  # True at once when the kernel took everything

    def read_frames(self) -> list[Any] | None:
        """Read what is available (bounded) and return whole frames; None = close it."""
        data, eof, _err = recv_available(self.sock, MAX_READ_PER_PASS)
        if not data:
            return None if eof else []
        if self.tls_wait or self.tls is not None:
            plain = self._tls_in(data)
            if plain is None:
                return None
            if not plain:
                return None if eof else []
            data = plain
        try:
            frames = self.decoder.feed(data)
        except ProtocolError as exc:
            log.warning("conn=%d peer=%s:%d undecodable input, closing: %s",
                        self.id, self.peer[0], self.peer[1], exc)
            return None
        if eof:
            # deliver what was complete; the caller closes after this pass
            self.closed = True
        return frames

    def _tls_in(self, data: bytes) -> bytes | None:
        """The plaintext of what was read (the first bytes decide TLS or not, as the
        listener's mode says); the session's answers (handshake) are queued; None = close."""
        policy = self.tls_policy
        try:
            if self.tls_wait and policy is not None:
                self.tls_wait = False
                self.tls = policy.session_for(data[0])
            tls = self.tls
            if tls is None:
                return data
            plain, back = tls.receive(data)
        except TlsError as exc:
            if policy is not None:
                policy.refused(self.peer, str(exc))
            return None
        if back:
            self.out += back
        return plain


class FrameServer:
    """Accepts clients and splits their frames; the owner routes frames and writes replies."""

    def __init__(
        self,
        on_frames: Callable[[Conn, list[Any], int], None],
        on_closed: Callable[[Conn], None],
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        idle_s: float = DEFAULT_IDLE_S,
        name: str = "remoting",
        watcher: Watcher | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        first_conn_id: int = 1,
        reset_if_killed: bool = False,
        tls: TlsConfig | None = None,
    ) -> None:
        self.on_frames = on_frames
        self.on_closed = on_closed
        self.max_frame = max_frame
        self.idle_s = idle_s
        self.name = name
        self.watcher = watcher
        self.max_connections = max(1, int(max_connections))
        self.refusals = RefusalLog(name, self.max_connections)
        self.listener: socket.socket | None = None
        self.listen_fd = -1
        self.conns: dict[int, Conn] = {}  # conn_id -> Conn
        self.by_fd: dict[int, Conn] = {}
        self.dirty: dict[int, Conn] = {}  # conn_id -> Conn with pending output
        self._next_id = first_conn_id
        self.reset_if_killed = reset_if_killed  # see the module docstring
        # tls.server.mode and its context (None: plain only, as `disabled`)
        self.tls = ServerTls(tls, name) if tls is not None else None

    def listen(self, host: str, port: int) -> int:
        """Bind and listen; return the bound port."""
        try:
            sock = listen_channel((host, port), backlog=1024)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from exc
        self.listener = sock
        self.listen_fd = sock.fileno()
        if self.watcher is not None:
            self.watcher.watch(self.listen_fd)
        limit = raise_fd_limit(self.max_connections + FD_RESERVE)
        if 0 <= limit < self.max_connections + FD_RESERVE:
            log.warning("%s: maxConnections=%d but this process may open only %d descriptors",
                        self.name, self.max_connections, limit)  # fmt: skip
        bound: int = sock.getsockname()[1]
        log.info("%s listening on %s:%d (maxConnections=%d)", self.name, host, bound,
                 self.max_connections)  # fmt: skip
        return bound

    def fds(self) -> list[int]:
        """File descriptors to watch."""
        fds = list(self.by_fd)
        if self.listen_fd >= 0:
            fds.append(self.listen_fd)
        return fds

    def owns(self, fd: int) -> bool:
        """True for the listen socket and client sockets."""
        return fd == self.listen_fd or fd in self.by_fd

    def handle_ready(self, fd: int, now: float, recv_ns: int) -> None:
        """Accept or read one ready descriptor."""
        if fd == self.listen_fd:
            self._accept(now)
            return
        conn = self.by_fd.get(fd)
        if conn is None:
            return
        frames = conn.read_frames()
        if frames is None:
            self.close(conn.id, "peer closed or bad input")
            return
        conn.last_active = now
        if conn.out:  # a TLS handshake's answer
            self.dirty[conn.id] = conn
        if frames:
            try:
                self.on_frames(conn, frames, recv_ns)
            except Exception:
                log.exception("conn=%d frame handling failed, closing", conn.id)
                self.close(conn.id, "handler error")
                return
        if conn.closed:
            self.close(conn.id, "peer closed")

    def _accept(self, now: float) -> None:
        assert self.listener is not None
        accept = self.listener.accept
        conns, by_fd, watcher = self.conns, self.by_fd, self.watcher
        for _ in range(MAX_ACCEPT_PER_PASS):
            try:
                sock, addr = accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # EMFILE and friends: try again on the next pass
                log.warning("%s accept failed: %s", self.name, exc)
                return
            if len(conns) >= self.max_connections:
                sock.close()
                self.refusals.refused((addr[0], addr[1]), time.monotonic())
                continue
            sock.setblocking(False)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            if self.reset_if_killed:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
                except OSError:
                    pass  # the peer is gone already: its first read says so
            conn_id = self._next_id
            self._next_id += 1
            conn = Conn(conn_id, sock, (addr[0], addr[1]), self.max_frame, now, self.tls)
            conns[conn_id] = conn
            by_fd[conn.fd] = conn
            if watcher is not None:
                watcher.watch(conn.fd)

    def send(self, conn_id: int, data: Any) -> bool:
        """Queue encoded bytes for a connection (written by flush(): one send per pass)."""
        conn = self.conns.get(conn_id)
        if conn is None:
            return False
        conn.queue(data)
        self.dirty[conn_id] = conn
        if len(conn.out) > MAX_PENDING_OUT:
            log.warning("conn=%d not reading (%d bytes pending), closing", conn_id, len(conn.out))
            self.close(conn_id, "output backlog")
            return False
        return True

    def flush(self, now: float) -> bool:
        """Flush every connection with pending output; True when nothing is left pending."""
        if not self.dirty:
            return True
        pending: dict[int, Conn] = {}
        dead: list[int] = []
        for conn_id, conn in self.dirty.items():
            if not conn.flush():
                pending[conn_id] = conn
            elif conn.closed:
                dead.append(conn_id)
            conn.last_active = now
        self.dirty = pending
        for conn_id in dead:
            self.close(conn_id, "write failed")
        return not pending

    def close(self, conn_id: int, reason: str) -> None:
        """Close a connection and tell the owner (nothing logged: closes are routine)."""
        conn = self.conns.pop(conn_id, None)
        if conn is None:
            return
        self.by_fd.pop(conn.fd, None)
        self.dirty.pop(conn_id, None)
        conn.closed = True
        if self.watcher is not None:
            self.watcher.unwatch(conn.fd)
        if self.reset_if_killed:
            try:  # a deliberate close: graceful, whoever holds the last duplicate
                conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_OFF)
            except OSError:
                pass
        conn.release()
        try:
            conn.sock.close()
        except OSError:
            pass
        try:
            self.on_closed(conn)
        except Exception:
            log.exception("conn=%d close handler failed (%s)", conn_id, reason)

    def sweep_idle(self, now: float) -> int:
        """Close connections idle longer than idle_s; return how many were closed."""
        limit = now - self.idle_s
        idle = [c.id for c in self.conns.values() if c.last_active < limit]
        for conn_id in idle:
            self.close(conn_id, "idle")
        return len(idle)

    def close_all(self) -> None:
        """Close the listener and every connection."""
        for conn_id in list(self.conns):
            self.close(conn_id, "shutdown")
        if self.listener is not None:
            if self.watcher is not None:
                self.watcher.unwatch(self.listen_fd)
            try:
                self.listener.close()
            except OSError:
                pass
            self.listener = None
            self.listen_fd = -1


def split_addr(addr: str) -> tuple[str, int]:
    """'host:port' -> (host, port) (RemotingHelper.string2SocketAddress); ValueError when it
    is not one."""
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bad address {addr!r}, expected host:port")
    return host, int(port)
