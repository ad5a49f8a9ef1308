"""A Spark task's one connection to its broker: pre-encoded PULL_MESSAGE requests, answers
read in place.

Mirrors remoting/netty/NettyRemotingClient.java invokeAsync for the executors' reader
(requests pipelined on one channel, each answer matched to its request by opaque) with
MQClientAPIImpl.pullMessage's request, built by actors.client.client_requests'
PullRequestTemplate (the push consumer's too): the JSON header is encoded once per range, and
each request only puts queueOffset, maxMsgNums and its opaque in. Answers are received
straight into one buffer (the arena) and stay there: a pull body's records are cut out of it
by the decoder when the batch they belong to is built, so no answer is copied on its way. An
answer read ahead of its turn (a broker answering pulls out of order, as Java's pull thread
pool does) stays in the arena until asked for. The arena is reused once the batch built from
it is handed on; it grows only for an answer larger than itself.
"""

from __future__ import annotations

import itertools
import socket
import struct
import time
from typing import Final, NamedTuple

from actors.client.client_requests import PullFrames
from actors.runtime.tls import TlsConfig, client_context
from protocol.command import RemotingCommand
from protocol.errors import BadFrameLengthError, FrameTooLargeError

ARENA_BYTES: Final = 16 * 1024 * 1024  # a batch's answers and those read ahead
MAX_FRAME: Final = 16 * 1024 * 1024  # as the Java client's frameMaxLength
CONNECT_TIMEOUT_S: Final = 3.0
_I32 = struct.Struct(">i")
_PREFIX = struct.Struct(">ii")  # total length, serialize type << 24 | header length
_RESPONSE: Final = 1  # RPC_TYPE_RESPONSE in the flag


class Answer(NamedTuple):
    """A response: its decoded header (no body) and where its body is in the arena."""

    cmd: RemotingCommand
    lo: int
    hi: int


class PullConnection:
    """The task's socket and the arena its answers are read into."""

    def __init__(self, addr: tuple[str, int], template: PullFrames,
                 arena_bytes: int = ARENA_BYTES, tls: TlsConfig | None = None) -> None:  # fmt: skip
        self.addr = addr
        self.tls = tls if tls is not None and tls.enable else None
        self.template = template
        self.sock: socket.socket | None = None
        self.data = bytearray(arena_bytes)
        self.view = memoryview(self.data)
        self.pos = 0  # the next frame to parse
        self.fill = 0  # bytes received
        self.held: dict[int, tuple[int, int]] = {}  # opaque -> (start, end) of answers ahead
        self.opaques = itertools.count(1)

    def connect(self) -> None:
        """Open the connection (done by the first send)."""
        if self.sock is None:
            sock = socket.create_connection(self.addr, timeout=CONNECT_TIMEOUT_S)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                try:
                    sock = client_context(self.tls).wrap_socket(sock)  # blocking handshake
                except OSError:
                    sock.close()
                    raise
            self.sock = sock

    def close(self) -> None:
        """Close the connection."""
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def send(self, pulls: list[tuple[int, int]]) -> list[int]:
        """Write PULL_MESSAGE requests for (offset, count) pairs in one write; their opaques."""
        self.connect()
        assert self.sock is not None
        opaques = [next(self.opaques) for _ in pulls]
        frame = self.template.frame
        self.sock.sendall(b"".join([frame(o, n, q) for (o, n), q in zip(pulls, opaques)]))
        return opaques

    def answer(self, opaque: int, timeout_s: float) -> Answer | None:
        """The answer to request `opaque`, or None when the arena has no room to read it:
        then hand on the batch built from the arena and call reclaim()."""
        got = self.held.pop(opaque, None)
        if got is not None:
            return self._decode(*got)
        deadline = time.monotonic() + timeout_s
        view = self.view
        while True:
            pos, fill = self.pos, self.fill
            if fill - pos >= 4:
                total = _I32.unpack_from(view, pos)[0]
                if total < 4 or total + 4 > MAX_FRAME:
                    self.close()
                    raise (BadFrameLengthError if total < 4 else FrameTooLargeError)(
                        f"bad frame length {total} from {self.addr}")  # fmt: skip
                end = pos + 4 + total
                if end <= fill:
                    self.pos = end
                    got_answer = self._decode(pos, end)
                    cmd = got_answer.cmd
                    if not cmd.flag & _RESPONSE:
                        continue  # a request from the broker: a reader has nothing to say
                    if cmd.opaque == opaque:
                        return got_answer
                    self.held[cmd.opaque] = (pos, end)
                    continue
                if end > len(self.data):
                    return None
            elif fill == len(self.data):
                return None
            self._receive(deadline)

    def reclaim(self, room: int = 0) -> None:
        """Make room at the arena's end: move what is still needed (answers read ahead, the
        unparsed rest) to its start, in a larger arena if that is not `room` bytes (or the
        next answer's size) short of full. Only once nothing of the arena is referenced."""
        keep = min([self.pos, *(s for s, _ in self.held.values())])
        n = self.fill - keep
        need = max(room, self._next_frame_size())
        if n + need > len(self.data):  # larger: a frame bigger than the arena's free part
            data = bytearray(max(2 * len(self.data), n + need))
            data[:n] = self.view[keep : self.fill]
            self.data, self.view = data, memoryview(data)
        elif keep:
            # the source is behind the destination's end only when they overlap
            rest = self.view[keep : self.fill]
            self.data[:n] = rest if keep >= n else bytes(rest)
        else:
            return
        self.pos -= keep
        self.fill = n
        self.held = {q: (s - keep, e - keep) for q, (s, e) in self.held.items()}

    def settle(self) -> None:
        """After a batch was handed on: reclaim() when less than half the arena is free."""
        if 2 * self.fill > len(self.data):
            self.reclaim()

    def _next_frame_size(self) -> int:
        if self.fill - self.pos < 4:
            return 4
        return 4 + _I32.unpack_from(self.view, self.pos)[0]

    def _decode(self, start: int, end: int) -> Answer:
        meta = _I32.unpack_from(self.view, start + 4)[0]
        lo = start + 8 + (meta & 0xFFFFFF)
        if lo > end:
            lo = end  # decode reports the bad header length
        return Answer(RemotingCommand.decode(self.view[start + 4 : lo]), lo, end)

    def _receive(self, deadline: float) -> None:
        sock = self.sock
        if sock is None:
            raise ConnectionError(f"connection to {self.addr} closed")
        left = deadline - time.monotonic()
        if left <= 0:
            self.close()
            raise TimeoutError(f"no answer from {self.addr} in time")
        sock.settimeout(left)
        try:
            n = sock.recv_into(self.view[self.fill :])
        except TimeoutError:
            return
        if not n:
            self.close()
            raise ConnectionError(f"connection closed by {self.addr}")
        self.fill += n
