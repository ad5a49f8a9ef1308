"""One connection of the client and one request waiting on it.

Mirrors remoting/netty/NettyRemotingClient.ChannelWrapper and ResponseFuture.java, RocketMQ
4.9.x: the state RemotingClient (actors.client.remoting_client) keeps per connection (socket,
TLS session, frame decoder, out buffer, the reader role and its condition, the ONESHOT
registration) and per request (opaque, deadline, callback, answer).
"""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Final

from actors.client.errors import MQClientError
from actors.client.frame_ring import RingReader
from actors.runtime.tls import TlsSession
from protocol.command import RemotingCommand
from protocol.framing import FrameDecoder

MAX_FRAME: Final = 16 * 1024 * 1024

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
                 "poller", "reader", "registered", "ring_reader", "sock", "tls", "waiters",
                 "wlock")

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
