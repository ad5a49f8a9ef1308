"""A small blocking RemotingCommand client (no actor system): admin tools, tests, Spark tasks.

Mirrors remoting/netty/NettyRemotingClient.java invokeSync / invokeOneway, RocketMQ 4.9.x,
over one socket (TLS when given a TlsConfig with tls.enable): responses are matched to
requests by opaque, and a timed-out call closes the socket (as the Java client does with
closeSocketIfTimeout).
"""

from __future__ import annotations

import logging
import socket
import time

from actors.runtime.tcp import split_addr
from actors.runtime.tls import TlsConfig, client_context
from protocol.command import RemotingCommand
from protocol.framing import FrameDecoder

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0
RECV_BUF = 256 * 1024


def parse_addr(addr: str | tuple[str, int]) -> tuple[str, int]:
    """'host:port' or (host, port) -> (host, port)."""
    if isinstance(addr, tuple):
        return addr[0], int(addr[1])
    return split_addr(addr)


class BlockingClient:
    """One connection to a name server or broker."""

    def __init__(self, addr: str | tuple[str, int], *, max_frame: int = 16 * 1024 * 1024,
                 tls: TlsConfig | None = None) -> None:  # fmt: skip
        self.addr = parse_addr(addr)
        self.tls = tls if tls is not None and tls.enable else None  # useTLS
        self.max_frame = max_frame
        self.sock: socket.socket | None = None
        self.decoder = FrameDecoder(max_frame)
        self.pending: dict[int, RemotingCommand] = {}  # responses read while waiting for others
        self.requests: list[RemotingCommand] = []  # server-initiated requests received
        self._buf = bytearray(RECV_BUF)  # recv_into: recv(n) would allocate n bytes per call
        self._view = memoryview(self._buf)

    def connect(self) -> None:
        """Open the connection (done lazily by invoke)."""
        if self.sock is not None:
            return
        sock = socket.create_connection(self.addr, timeout=CONNECT_TIMEOUT_S)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.tls is not None:
            try:
                sock = client_context(self.tls).wrap_socket(sock)  # the handshake, blocking
            except OSError:
                sock.close()
                raise
        self.sock = sock
        self.decoder = FrameDecoder(self.max_frame)

    def close(self) -> None:
        """Close the connection (a later invoke reconnects)."""
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None
        self.pending.clear()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        """Send a request with the oneway flag; nothing is awaited."""
        cmd.flag |= 2
        self.connect()
        assert self.sock is not None
        self.sock.sendall(cmd.encode())

    def send_raw(self, data: bytes) -> None:
        """Write raw bytes (tests of bad input)."""
        self.connect()
        assert self.sock is not None
        self.sock.sendall(data)

    def invoke(self, cmd: RemotingCommand, timeout_s: float = 3.0) -> RemotingCommand:
        """Send `cmd` and wait for the response with its opaque; TimeoutError closes the socket."""
        self.connect()
        assert self.sock is not None
        self.sock.sendall(cmd.encode())
        return self.wait_response(cmd.opaque, timeout_s)

    def send(self, *cmds: RemotingCommand) -> None:
        """Write requests (in one write) without waiting; collect each answer with
        wait_response(cmd.opaque)."""
        self.connect()
        assert self.sock is not None
        self.sock.sendall(cmds[0].encode() if len(cmds) == 1 else
                          b"".join(c.encode() for c in cmds))

    def invoke_many(self, cmds: list[RemotingCommand], timeout_s: float = 3.0
                    ) -> list[RemotingCommand]:
        """Pipeline requests in one write and wait for all responses (in request order)."""
        self.connect()
        assert self.sock is not None
        self.sock.sendall(b"".join(c.encode() for c in cmds))
        return [self.wait_response(c.opaque, timeout_s) for c in cmds]

    def wait_response(self, opaque: int, timeout_s: float) -> RemotingCommand:
        """Block until the response with `opaque` arrives."""
        deadline = time.monotonic() + timeout_s
        while True:
            got = self.pending.pop(opaque, None)
            if got is not None:
                return got
            left = deadline - time.monotonic()
            if left <= 0:
                self.close()
                raise TimeoutError(f"no response for opaque={opaque} from {self.addr}")
            self._read_some(left)

    def _read_some(self, timeout_s: float) -> None:
        sock = self.sock
        if sock is None:
            raise ConnectionError("connection closed")
        sock.settimeout(timeout_s)
        try:
            n = sock.recv_into(self._view)
        except TimeoutError:
            return
        if not n:
            self.close()
            raise ConnectionError(f"connection closed by {self.addr}")
        for frame in self.decoder.feed(self._view[:n].tobytes()):
            cmd = RemotingCommand.decode(frame)
            if cmd.flag & 1:
                self.pending[cmd.opaque] = cmd
            else:
                self.requests.append(cmd)

    def read_for(self, seconds: float) -> None:
        """Read whatever arrives during `seconds` (used to prove nothing is answered)."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self._read_some(left)
