"""An outbound connection of a server role: the broker's to its name servers, a slave's to its
master, the SparkBridge's to a cluster.

Mirrors the client side of remoting/netty/NettyRemotingClient.java as the broker's
BrokerOuterAPI and SlaveSynchronize use it, RocketMQ 4.9.x: one non-blocking socket in its
owner's poll set, a frame decoder, an out buffer the owner flushes, and TLS when the role's
`tls.enable` says so (the handshake runs as the connection is read).
"""

from __future__ import annotations

import errno
import logging
import socket
from typing import Any

from actors.runtime.channel import OutBuffered, recv_available
from actors.runtime.tcp import DEFAULT_MAX_FRAME, MAX_READ_PER_PASS, split_addr
from actors.runtime.tls import TlsConfig, TlsError, client_session
from protocol.errors import ProtocolError
from protocol.framing import FrameDecoder

log = logging.getLogger(__name__)


def start_connect(addr: tuple[str, int]) -> tuple[socket.socket, int]:
    """A non-blocking TCP_NODELAY socket whose connect to addr is under way: (socket, 0) or
    (socket, errno) when it failed at once (the caller closes it)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    err = sock.connect_ex(addr)
    return sock, 0 if err in (0, errno.EINPROGRESS, errno.EWOULDBLOCK) else err


class ClientConn(OutBuffered):
    """An outbound non-blocking connection (broker -> name server) with a frame decoder;
    TLS when given a client TlsConfig with tls.enable (its handshake runs as it is read)."""

    @classmethod
    def to(cls, addr: str, tls: TlsConfig | None = None) -> ClientConn:
        """A connection to 'host:port' under way (ValueError for a bad address, OSError)."""
        return cls(split_addr(addr), tls=tls)

    def __init__(self, addr: tuple[str, int], max_frame: int = DEFAULT_MAX_FRAME,
                 tls: TlsConfig | None = None) -> None:  # fmt: skip
        self.addr = addr
        self.sock, err = start_connect(addr)
        self.fd = self.sock.fileno()
        self.decoder = FrameDecoder(max_frame)
        self.out = bytearray()
        self.closed = False
        self.sent = 0  # requests written (the owner counts them)
        self.answered = 0  # responses read
        self.tls = client_session(tls)
        if err:
            self.closed = True
        elif self.tls is not None:
            try:
                self.out += self.tls.start()  # the ClientHello, sent once connected
            except TlsError as exc:
                log.warning("%r %s", self, exc)
                self.closed = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        """Queue an encoded frame (flush() writes it)."""
        tls = self.tls
        if tls is None:
            self.out += data
            return
        try:
            self.out += tls.encrypt(data)
        except TlsError as exc:
            log.warning("%r %s", self, exc)
            self.closed = True

    def flush(self) -> bool:
        """Write what the kernel takes; True when nothing is pending (kept while connecting)."""
        while self.out and not self.closed:
            try:
                sent = self.sock.send(self.out)
            except (BlockingIOError, InterruptedError):
                return False
            except OSError as exc:
                if exc.errno == errno.ENOTCONN:  # still connecting
                    return False
                self.closed = True
                return True
            del self.out[:sent]
        return True

    def __repr__(self) -> str:
        return f"namesrv conn={self.addr[0]}:{self.addr[1]}"

    def read_frames(self) -> list[Any] | None:
        """Whole frames available now; None when the connection is gone."""
        chunk, eof, _err = recv_available(self.sock, MAX_READ_PER_PASS)
        if eof and not chunk:
            self.closed = True
            return None
        if not chunk:
            return []
        if self.tls is not None:
            try:
                chunk, back = self.tls.receive(chunk)
            except TlsError as exc:
                log.warning("%r %s", self, exc)
                self.closed = True
                return None
            if back:
                self.out += back
                self.flush()  # the handshake's next flight, or what waited for its end
            if not chunk:
                if eof:
                    self.closed = True
                    return None
                return []
        try:
            frames = self.decoder.feed(chunk)
            if eof:
                self.closed = True
            return frames
        except ProtocolError:
            self.closed = True
            return None
