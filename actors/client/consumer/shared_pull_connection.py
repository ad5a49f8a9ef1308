"""The reading half of the pull connections: what the user's process reads of them.

Mirrors NettyRemotingClient's NettyClientHandler / processResponseCommand for the connections
pulls go on, RocketMQ 4.9.x, cut between the two processes that play Java's threads. The pull
actor (PullMessageService's thread) connects to each broker and writes the PULL_MESSAGE
frames, each with its request id as the opaque, through its RemotingClient (whose `share` hook
hands a plain connection over and never reads it); the socket crosses to the user's process
once (ConnShared, SCM_RIGHTS), whose I/O thread (Netty's I/O thread) reads the answers from it
itself and hands them to the PullCallbacks. An answer so crosses no process: read by the pull
actor into a shared ring and announced over the channel, it arrived 77 us later at the median
(p90 110 us) in D, session 29.

Who closes: the side that sees a connection fail (the reader: an end of stream, a read error, a
frame that does not decode; the writer: a write error) closes its copy and tells the other with
ConnClosed, in order with the records it writes. The user's process then fails the pulls it has
out on that broker at once (failFast: pulled again pullTimeDelayMillsWhenException later) and
times out the others (scanResponseTable, every second). Over TLS a session cannot be shared:
the pull actor reads those connections itself, into the rings of frame_ring.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import time
from collections.abc import Callable
from typing import Final

from actors.client.client_config import ClientConfig
from actors.client.client_requests import process_pull_response
from actors.client.consumer import consumer_channel as cc
from actors.client.errors import MQClientError
from actors.client.event_loop import EPOLLIN, EventLoop
from actors.client.remoting_conn import MAX_FRAME
from protocol.codes import RPC_TYPE_RESPONSE
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError
from protocol.framing import frame_size

log = logging.getLogger(__name__)

READ_BUF: Final = 1024 * 1024  # a reader's buffer; a longer frame gets a larger one
READ_ROOM: Final = 64 * 1024  # below this much free room the unread tail moves to the front
_LEN = struct.Struct(">i")  # the frame length, signed as Java's int

Answers = list[tuple[cc.PullAnswer, memoryview]]


def shares_connections(config: ClientConfig) -> bool:
    """True when pull connections are shared with the user's process (not over TLS)."""
    return config.tls is None or not config.tls.enable


# -- the reading half: the user's process ------------------------------------------------------
def answer_of(cmd: RemotingCommand, addr: str) -> tuple[cc.PullAnswer, memoryview]:
    """A pull's response as the PullCallback takes it (processPullResponse)."""
    try:
        answer, tail = cc.pull_answer(cmd.opaque, process_pull_response(cmd, addr), None)
    except MQClientError as exc:
        answer, tail = cc.pull_answer(cmd.opaque, None, exc)
    return answer, tail if isinstance(tail, memoryview) else memoryview(tail)


class _In:
    """One shared connection the user's process reads: its socket and its read buffer. The
    answers of one read are views of the buffer, valid until the pass over them returns."""

    __slots__ = ("addr", "buf", "conn_id", "end", "sock", "start", "view")

    def __init__(self, conn_id: int, addr: str, sock: socket.socket) -> None:
        self.conn_id = conn_id
        self.addr = addr
        self.sock = sock
        self.buf = bytearray(READ_BUF)
        self.view = memoryview(self.buf)
        self.start = 0  # the first byte not handed over yet
        self.end = 0  # the end of what was read

    def room_for(self, need: int) -> None:
        """Make room after a pass: the next frame (`need` bytes with its length) must fit
        from start, and a read deserves READ_ROOM. The unread tail moves to the front, into a
        larger buffer when the frame is longer than this one (views of the old one stay
        valid)."""
        held = self.end - self.start
        if held == 0:
            self.start = self.end = 0
            if len(self.buf) > READ_BUF:  # a long answer's buffer goes with it
                self.buf = bytearray(READ_BUF)
                self.view = memoryview(self.buf)
            return
        if need > len(self.buf):
            buf = bytearray(max(need, 2 * len(self.buf)))
            buf[:held] = self.view[self.start : self.end]
            self.buf, self.view = buf, memoryview(buf)
        elif self.start and (len(self.buf) - self.start < need
                             or len(self.buf) - self.end < READ_ROOM):  # fmt: skip
            self.buf[:held] = self.view[self.start : self.end]
        else:
            return
        self.start, self.end = 0, held


class PullAnswerReader:
    """The shared pull connections, read on the user's I/O thread.

    `on_answers(answers)` gets every answer of one read, as (PullAnswer, pull body or remark)
    in arrival order; the bodies are views of the read buffer, valid until it returns.
    `on_lost(conn_id, addr, reason)` is told when a connection fails on this side (it is
    closed already)."""

    def __init__(self, loop: EventLoop, on_answers: Callable[[Answers], None],
                 on_lost: Callable[[int, str, str], None]) -> None:  # fmt: skip
        self.loop = loop
        self._on_answers = on_answers
        self._on_lost = on_lost
        self.conns: dict[int, _In] = {}

    def adopt(self, conn_id: int, addr: str, fd: int) -> None:
        """Read the connection the pull actor shared (the descriptor is this reader's now);
        OSError when it cannot be watched (the descriptor is closed)."""
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            os.close(fd)
            raise
        try:
            sock.setblocking(False)
            r = _In(conn_id, addr, sock)
            self.conns[conn_id] = r
            self.loop.register(sock.fileno(), EPOLLIN, lambda _ev: self._read(r))
        except OSError:
            self.conns.pop(conn_id, None)
            sock.close()
            raise

    def close(self, conn_id: int) -> str | None:
        """Stop reading a connection and close this copy; its address (None: not known)."""
        r = self.conns.pop(conn_id, None)
        if r is None:
            return None
        try:
            self.loop.unregister(r.sock.fileno())
        except (OSError, ValueError, KeyError):
            pass
        r.sock.close()
        return r.addr

    def close_all(self) -> None:
        """Close every connection (the services stop)."""
        for conn_id in list(self.conns):
            self.close(conn_id)

    def _lost(self, r: _In, reason: str) -> None:
        if self.close(r.conn_id) is not None:
            log.info("pull connection %d to %s closed: %s", r.conn_id, r.addr, reason)
            self._on_lost(r.conn_id, r.addr, reason)

    def _read(self, r: _In) -> None:
        """One read of a readable connection, its whole frames handed over in one pass."""
        if self.conns.get(r.conn_id) is not r:
            return
        try:
            n = r.sock.recv_into(r.view[r.end :])
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(r, f"recv failed: {exc}")
            return
        if n == 0:
            self._lost(r, "closed by peer")
            return
        r.end += n
        answers: Answers = []
        bad = self._split(r, answers)
        if answers:
            try:
                self._on_answers(answers)
            finally:
                answers.clear()  # no view of the buffer outlives the pass
        if bad is not None:
            self._lost(r, bad)
            return
        # the next frame's size (its length was checked by _split), or its length field's
        need = _LEN.unpack_from(r.buf, r.start)[0] + 4 if r.end - r.start >= 4 else 4
        r.room_for(need)

    @staticmethod
    def _split(r: _In, answers: Answers) -> str | None:
        """Append the answers of r's whole frames; why the stream is unreadable, or None."""
        buf, view, pos, end = r.buf, r.view, r.start, r.end
        try:
            while end - pos >= 4:
                size = frame_size(_LEN.unpack_from(buf, pos)[0], MAX_FRAME)
                if end - pos < size:
                    break
                frame = view[pos + 4 : pos + size]
                pos += size
                cmd = RemotingCommand.decode(frame)
                if not cmd.flag & RPC_TYPE_RESPONSE:
                    log.info("request code=%d on pull connection to %s ignored", cmd.code, r.addr)
                    continue
                answers.append(answer_of(cmd, r.addr))
        except ProtocolError as exc:
            return f"bad frame: {exc}"
        finally:
            r.start = pos
        return None


class PullDeadlines:
    """The pulls out on shared connections: failed when their connection fails, timed out
    when their time passes (the user's process is their only reader). I/O thread, except
    `sent`, which any thread may call (one dict store)."""

    def __init__(self) -> None:
        self.out: dict[int, tuple[str, float]] = {}  # request id -> (broker, deadline)

    def sent(self, rid: int, addr: str, timeout_ms: float) -> None:
        """A pull was queued for addr."""
        self.out[rid] = (addr, time.monotonic() + timeout_ms / 1000.0)

    def answered(self, rid: int) -> None:
        """Its answer arrived."""
        self.out.pop(rid, None)

    def of_broker(self, addr: str) -> list[int]:
        """Take the pulls out on addr (its connection failed)."""
        rids = [rid for rid, (a, _d) in list(self.out.items()) if a == addr]
        for rid in rids:
            self.out.pop(rid, None)
        return rids

    def expired(self, now: float) -> list[int]:
        """Take the pulls whose deadline passed."""
        rids = [rid for rid, (_a, d) in list(self.out.items()) if d <= now]
        for rid in rids:
            self.out.pop(rid, None)
        return rids

    def all(self) -> list[int]:
        """Take every pull out."""
        rids = list(self.out)
        self.out.clear()
        return rids
