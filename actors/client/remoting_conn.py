"""One connection of the client and one request waiting on it.

Mirrors remoting/netty/NettyRemotingClient.ChannelWrapper and ResponseFuture.java, RocketMQ
4.9.x: the state RemotingClient (actors.client.remoting_client) keeps per connection (socket,
TLS session, frame decoder or ring reader, out buffer, the reader role and its condition, the
ONESHOT registration) and per request (opaque, deadline, callback, answer); and a TLS
connection's plaintext as a ring reader reads it (TlsPlaintext).
"""

from __future__ import annotations

import logging
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import Final

from actors.client.errors import MQClientError, RemotingConnectError, RemotingSendRequestError
from actors.client.frame_ring import RingReader
from actors.runtime.channel import send_out
from actors.runtime.tcp import split_addr
from actors.runtime.tls import (
    TlsConfig,
    TlsError,
    TlsSession,
    client_session,
    handshake_blocking,
)
from protocol.command import RemotingCommand
from protocol.framing import FrameDecoder

log = logging.getLogger(__name__)

MAX_FRAME: Final = 16 * 1024 * 1024
SOCK_BUF: Final = 4 * 1024 * 1024
READ_CHUNK: Final = 256 * 1024

Callback = Callable[[RemotingCommand | None, MQClientError | None], None]


class ResponseFuture:
    """One request waiting for its response (ResponseFuture)."""

    __slots__ = ("addr", "callback", "deadline", "done", "error", "opaque", "response",
                 "timeout_ms")

    def __init__(self, opaque: int, addr: str, timeout_ms: float, callback: Callback | None
                 ) -> None:  # fmt: skip
        self.opaque = opaque
        self.addr = addr
        self.timeout_ms = timeout_ms
        self.deadline = time.monotonic() + timeout_ms / 1000.0
        self.callback = callback
        self.response: RemotingCommand | None = None
        self.error: MQClientError | None = None
        self.done = False


class ChannelWrapper:
    """One connection: socket, decoder, out buffer, reader role."""

    __slots__ = ("addr", "alock", "armed", "closed", "cond", "decoder", "fd", "out", "pending",
                 "poller", "reader", "registered", "ring_reader", "sock",
                 "tls", "waiters", "wlock")

    def __init__(self, addr: str, sock: socket.socket, tls: TlsSession | None = None) -> None:
        self.addr = addr
        self.sock = sock
        self.tls = tls  # the TLS session (handshake done) when the client uses TLS
        self.fd = sock.fileno()
        self.decoder = FrameDecoder(MAX_FRAME)
        self.ring_reader: RingReader | None = None  # reads frames into the pull rings instead
        self.wlock = threading.Lock()
        self.out = bytearray()
        self.cond = threading.Condition(threading.Lock())
        self.reader: object = None
        self.waiters = 0
        self.pending: set[int] = set()
        self.closed = False
        self.registered = False
        self.armed = 0  # the events the ONESHOT registration is armed for (0: disarmed)
        self.alock = threading.Lock()  # armed and the epoll_ctl that sets it change together
        self.poller = select.poll()  # what a sync reader blocks in (one reader at a time)
        self.poller.register(self.fd, select.POLLIN)

    def send_out(self) -> tuple[int, str]:
        """Write what the out buffer holds: (bytes left, why the socket failed or ""). A failed
        socket's buffer is dropped (its requests fail with the connection)."""
        with self.wlock:
            _empty, err = send_out(self.sock, self.out)
            return len(self.out), "" if err is None else f"send failed: {err}"


def wait_drained(conn: ChannelWrapper, high_water: int, timeout_s: float = 30.0) -> None:
    """Block (a sync writer of the user's process) until conn's out buffer holds at most
    high_water bytes or it closed; RemotingSendRequestError after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        with conn.wlock:
            if len(conn.out) <= high_water or conn.closed:
                return
        if time.monotonic() > deadline:
            raise RemotingSendRequestError(conn.addr,
                                           f"out buffer did not drain in {timeout_s:.0f} s")
        select.select([], [conn.fd], [], 0.05)


class ReadBuffer(threading.local):
    """Each thread's read buffer of a RemotingClient (`view`): what one read takes is decoded,
    or fed to a TLS session, before the next."""

    def __init__(self) -> None:
        self.view = memoryview(bytearray(READ_CHUNK))


class TlsPlaintext:
    """A TLS connection's plaintext as a RingReader reads it: decrypted straight into the
    reader's view, ciphertext read into `scratch` (the client's read buffer) as the session
    needs it (the actor driver's: what the session answers waits in the out buffer for
    flush_all)."""

    __slots__ = ("conn", "scratch")

    def __init__(self, conn: ChannelWrapper, scratch: memoryview) -> None:
        self.conn = conn
        self.scratch = scratch

    def recv_into(self, view: memoryview) -> int:
        conn = self.conn
        tls = conn.tls
        assert tls is not None
        while True:
            try:
                n = tls.read_into(view)
            except TlsError as exc:
                raise OSError(str(exc)) from None
            if n is not None:
                return n
            got = conn.sock.recv_into(self.scratch)  # BlockingIOError: nothing more now
            if not got:
                return 0
            back = tls.feed(self.scratch[:got])
            if back:  # a post-handshake message's answer
                with conn.wlock:
                    conn.out += back


def open_connection(addr: str, timeout_s: float, tls: TlsConfig | None) -> ChannelWrapper:
    """Connect to addr (TCP_NODELAY, large buffers; the TLS handshake when tls is given),
    non-blocking once open; RemotingConnectError when it cannot."""
    try:
        host, port = split_addr(addr)
    except ValueError as exc:
        raise RemotingConnectError(addr, str(exc)) from None
    try:
        sock = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as exc:
        raise RemotingConnectError(addr, str(exc)) from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, SOCK_BUF)
        except OSError:
            pass
    session = None
    if tls is not None:
        try:
            session = client_session(tls)
            assert session is not None
            handshake_blocking(sock, session, timeout_s)
        except (OSError, TlsError, ssl.SSLError) as exc:
            sock.close()
            raise RemotingConnectError(addr, f"TLS: {exc}") from None
    sock.setblocking(False)
    log.debug("connected to %s%s", addr, " (TLS)" if session is not None else "")
    return ChannelWrapper(addr, sock, session)
