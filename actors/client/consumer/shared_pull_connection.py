"""The pull connections of the user's process: it writes the pulls and reads their answers.

Mirrors NettyRemotingClient's channel of the pulls, RocketMQ 4.9.x: Netty's I/O thread writes
each PULL_MESSAGE a PullMessageService's pullMessage asks for (writeAndFlush from another
thread is a task on the channel's event loop) and reads its answer (NettyClientHandler /
processResponseCommand), then runs the PullCallback. Here that I/O thread is the user's: over
plain TCP it writes the pulls the consumer core makes, each with its request id as the opaque,
and reads the answers, with no process between. Until session 31 the pull actor wrote them:
every pull crossed the pull channel and woke the pull actor, ~185 us at the mean and 481 at
p90 from the core's write to the broker's socket, and 1.1 us of client CPU a message in C.

The pull actor (PullMessageService's actor) makes the connections: asked for a broker
(ConnWanted), it connects and hands the socket over (ConnShared, SCM_RIGHTS) and keeps no copy,
or says it could not (ConnFailed). The user's process owns the connection from then on: it is
its one writer and its one reader. A pull for a broker without a connection waits for it, in
order, and one whose connection fails gets no answer (failFast: pulled again
pullTimeDelayMillsWhenException later); the others time out (scanResponseTable, every second).
Over TLS a session cannot cross a process: the pull actor writes and reads those connections
itself, and hands the answers over through the shared rings of frame_ring.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Final

from actors.client.client_config import ClientConfig
from actors.client.client_requests import pull_response_head
from actors.client.consumer import consumer_channel as cc
from actors.client.consumer.pooled_body_buffers import take
from actors.client.errors import MQClientError
from actors.client.event_loop import EPOLLIN, EPOLLOUT, EventLoop
from actors.client.records import PullStatus
from actors.client.remoting_conn import MAX_FRAME
from actors.runtime.channel import send_out
from protocol.codes import RPC_TYPE_RESPONSE
from protocol.command import RemotingCommand, split_header_word
from protocol.errors import ProtocolError
from protocol.framing import frame_size

log = logging.getLogger(__name__)

FRAMES_PER_READ: Final = 64  # whole frames read in one turn of a readable connection
_NO_BODY: Final = memoryview(b"")
_PREFIX = struct.Struct(">iI")  # the frame length (signed, as Java's int), the header length word
HEAD_KEPT: Final = 4096  # a connection's header buffer; a longer header is read into its own

Answers = list[tuple[cc.PullAnswer, cc.PullBody]]


def shares_connections(config: ClientConfig) -> bool:
    """True when pull connections are shared with the user's process (not over TLS)."""
    return config.tls is None or not config.tls.enable


# -- the reading half: the user's process ------------------------------------------------------
def answer_of(cmd: RemotingCommand, addr: str, owned: bytearray | None = None
              ) -> tuple[cc.PullAnswer, cc.PullBody]:  # fmt: skip
    """A pull's response as the PullCallback takes it (processPullResponse); a FOUND's pull
    body is `owned` when the command's body is a view of that buffer, read for this frame
    alone (the receiver may keep it)."""
    try:
        status, head = pull_response_head(cmd, addr)
    except MQClientError as exc:
        answer, tail = cc.pull_answer(cmd.opaque, None, exc)
        return answer, tail if isinstance(tail, memoryview) else memoryview(tail)
    answer = cc.PullAnswer(cmd.opaque, status.value, head.next_begin_offset, head.min_offset,
                           head.max_offset, head.suggest_which_broker_id)  # fmt: skip
    if status is not PullStatus.FOUND:
        return answer, _NO_BODY
    if owned is not None:
        return answer, owned
    body = cmd.body
    return answer, body if isinstance(body, memoryview) else memoryview(body)


class _Conn:
    """One broker connection of the user's process: its socket, the frame being read (its
    header into a buffer of the connection's, its body into a buffer of its own) and what is
    waiting to be written (pulls the socket did not take yet)."""

    __slots__ = ("addr", "body", "conn_id", "got", "head", "hlen", "need", "out", "pre",
                 "pre_n", "pre_view", "sock", "st")  # fmt: skip

    def __init__(self, conn_id: int, addr: str, sock: socket.socket) -> None:
        self.conn_id = conn_id
        self.addr = addr
        self.sock = sock
        self.pre = bytearray(_PREFIX.size)  # the next frame's length and header length words
        self.pre_view = memoryview(self.pre)
        self.pre_n = 0  # how many of them arrived
        self.head = bytearray(HEAD_KEPT)  # the frame's header (a longer one: its own buffer)
        self.body: bytearray | None = None  # the frame's body, while one is being read
        self.need = 0  # its header and body: the frame's length less the header length word
        self.got = 0  # how much of them arrived
        self.hlen = 0  # its header length
        self.st = 0  # its serialize type
        self.out = bytearray()  # written when the socket takes it (EPOLLOUT)

    def start_frame(self) -> None:
        """The length words are in: take the body's buffer. ProtocolError when no frame can
        be that long or its header does not fit."""
        total, word = _PREFIX.unpack(self.pre)
        frame_size(total, MAX_FRAME)
        self.st, hlen = split_header_word(word, total)
        self.hlen = hlen
        self.need = total - 4
        if hlen > HEAD_KEPT:
            self.head = bytearray(hlen)  # this frame's own
        elif len(self.head) != HEAD_KEPT:
            self.head = bytearray(HEAD_KEPT)
        self.body = take(self.need - hlen)
        self.got = self.pre_n = 0

    def read(self) -> bool:
        """Receive what the socket holds of the frame, and the next frame's length words
        after it (one recvmsg: header, body and length words each land in their buffer).
        True when the socket may hold more (it filled every buffer offered); EOFError when
        the peer closed."""
        body = self.body
        assert body is not None
        got, hlen = self.got, self.hlen
        if got < hlen:
            views = [memoryview(self.head)[got:hlen], memoryview(body), self.pre_view]
        else:
            views = [memoryview(body)[got - hlen :], self.pre_view]
        want = self.need - got + _PREFIX.size
        n = self.sock.recvmsg_into(views)[0]
        del views  # the body buffer is exported while a view of it lives
        if n == 0:
            raise EOFError
        got += n
        if got > self.need:
            self.pre_n = got - self.need
            got = self.need
        self.got = got
        return n == want

    def end_frame(self) -> tuple[RemotingCommand, bytearray]:
        """The frame is in: its command (its body a view of the body's buffer) and that
        buffer."""
        body = self.body
        assert body is not None
        self.body = None
        header = bytes(memoryview(self.head)[: self.hlen])
        return RemotingCommand.from_header(self.st, header, memoryview(body) if body else b""), body


class SharedPullConnections:
    """The pull connections the pull actor handed over, and the pulls waiting for one:
    written from any thread, read on the user's I/O thread.

    `send(cmds)` writes pulls on their brokers' connections, each broker's in call order, and
    keeps those of a broker without one until it is adopted. `on_answers(answers)` gets the
    answers of one turn of a readable connection, as (PullAnswer, pull body or remark) in
    arrival order; a FOUND body is the buffer its frame was read into, handed over (a
    bytearray holding the body alone), a remark a view. `on_lost(conn_id, addr, reason)` is told
    when a connection fails (a read, a write, a frame that does not decode; it is closed
    already)."""

    def __init__(self, loop: EventLoop, frames: cc.PullCommandFrames, deadlines: PullDeadlines,
                 on_answers: Callable[[Answers], None],
                 on_lost: Callable[[int, str, str], None]) -> None:  # fmt: skip
        self.loop = loop
        self.frames = frames
        self.deadlines = deadlines
        self._on_answers = on_answers
        self._on_lost = on_lost
        self.conns: dict[int, _Conn] = {}  # I/O thread
        self._by_addr: dict[str, _Conn] = {}  # the one each broker's pulls are written on
        self.waiting: dict[str, list[cc.PullCommand]] = {}  # by broker: its connection asked
        self._lock = threading.RLock()  # _by_addr, waiting and the out buffers

    def send(self, cmds: list[cc.PullCommand]) -> list[str]:
        """Write cmds on their brokers' connections, each broker's in order; those of a
        broker without one wait for it, behind those waiting already. The brokers whose
        connection is to be asked for. Any thread."""
        groups: dict[str, list[cc.PullCommand]] = {}
        for c in cmds:
            groups.setdefault(c.addr, []).append(c)
        asks: list[str] = []
        frame = self.frames.frame
        with self._lock:
            for addr, group in groups.items():
                waiting = self.waiting.get(addr)
                if waiting is not None:  # its connection is being made
                    waiting += group
                elif not self.write(addr, [frame(c, c.rid) for c in group]):
                    self.waiting[addr] = group
                    asks.append(addr)
        return asks

    def adopt(self, conn_id: int, addr: str, fd: int) -> None:
        """Own the connection the pull actor handed over (the descriptor is this object's
        now): read it, write addr's pulls on it, those waiting first (but those that timed
        out meanwhile: answered already). A second one for addr is closed. OSError when it
        cannot be watched (the descriptor is closed). I/O thread."""
        try:
            sock = socket.socket(fileno=fd)
        except OSError:
            os.close(fd)
            raise
        if self.has(addr):  # asked again after an ask whose pulls all timed out
            sock.close()
            return
        try:
            sock.setblocking(False)
            r = _Conn(conn_id, addr, sock)
            self.conns[conn_id] = r
            self.loop.register(sock.fileno(), EPOLLIN, lambda ev: self._on_event(r, ev))
        except OSError:
            self.conns.pop(conn_id, None)
            sock.close()
            raise
        out = self.deadlines.out
        with self._lock:
            self._by_addr[addr] = r
            group = [c for c in self.waiting.pop(addr, ()) if c.rid in out]
            if group:
                self.write(addr, [self.frames.frame(c, c.rid) for c in group])

    def no_conn(self, addr: str) -> None:
        """No connection to addr was made: its pulls waiting for one are dropped (the caller
        fails them)."""
        with self._lock:
            self.waiting.pop(addr, None)

    def prune(self) -> None:
        """Drop the waiting pulls that timed out; a broker left with none asks again on its
        next pull."""
        out = self.deadlines.out
        with self._lock:
            for addr, group in list(self.waiting.items()):
                group[:] = [c for c in group if c.rid in out]
                if not group:
                    del self.waiting[addr]

    def has(self, addr: str) -> bool:
        """True when addr has a connection to write on."""
        return addr in self._by_addr

    def write(self, addr: str, frames: list[bytes]) -> bool:
        """Write frames on addr's connection, behind what is written before; False (nothing
        written) when it has none. What the socket does not take now leaves when it can; a
        connection whose write fails is closed on the I/O thread (on_lost). Any thread (the
        lock is reentrant: send and adopt write under it)."""
        with self._lock:
            r = self._by_addr.get(addr)
            if r is None:
                return False
            out = r.out
            if out:  # the socket is full: behind what waits
                for f in frames:
                    out += f
                return True
            for f in frames:
                out += f
            drained, err = send_out(r.sock, out)
            if not drained:  # under the lock: no drain of the I/O thread's undoes it
                self.loop.modify(r.sock.fileno(), EPOLLIN | EPOLLOUT)
        if err is not None:
            self.loop.call_soon(lambda: self._lost(r, f"send failed: {err}"))
        return True

    def close(self, conn_id: int) -> str | None:
        """Stop reading a connection and close it; its address (None: not known). I/O
        thread."""
        r = self.conns.pop(conn_id, None)
        if r is None:
            return None
        with self._lock:
            if self._by_addr.get(r.addr) is r:
                del self._by_addr[r.addr]
            r.out.clear()
        try:
            self.loop.unregister(r.sock.fileno())
        except (OSError, ValueError, KeyError):
            pass
        r.sock.close()
        return r.addr

    def close_all(self) -> None:
        """Close every connection and drop the waiting pulls (the services stop)."""
        for conn_id in list(self.conns):
            self.close(conn_id)
        with self._lock:
            self.waiting.clear()

    def _lost(self, r: _Conn, reason: str) -> None:
        if self.close(r.conn_id) is not None:
            log.info("pull connection %d to %s closed: %s", r.conn_id, r.addr, reason)
            self._on_lost(r.conn_id, r.addr, reason)

    def _on_event(self, r: _Conn, ev: int) -> None:
        if ev & EPOLLOUT:
            self._drain(r)
        if ev & EPOLLIN and self.conns.get(r.conn_id) is r:
            self._read(r)

    def _drain(self, r: _Conn) -> None:
        """The socket takes more: write what waits; stop watching for it once written."""
        with self._lock:
            drained, err = send_out(r.sock, r.out)
            if drained and err is None and self.conns.get(r.conn_id) is r:
                self.loop.modify(r.sock.fileno(), EPOLLIN)
        if err is not None:
            self._lost(r, f"send failed: {err}")

    def _read(self, r: _Conn) -> None:
        """A readable connection: its whole frames (up to FRAMES_PER_READ), handed over in
        one pass."""
        if self.conns.get(r.conn_id) is not r:
            return
        answers: Answers = []
        try:
            bad = self._take_frames(r, answers)
        except OSError as exc:
            bad = f"recv failed: {exc}"
        if answers:
            self._on_answers(answers)
        if bad is not None:
            self._lost(r, bad)

    @staticmethod
    def _take_frames(r: _Conn, answers: Answers) -> str | None:
        """Read r's frames, each into a buffer of its own, and append their answers; why the
        stream ended or is unreadable, or None. Once answers stream, one recv takes a
        frame's header and body and the next frame's length words: each body byte is
        copied once by the kernel, into the buffer the decoder copies its messages from."""
        sock = r.sock
        try:
            for _ in range(FRAMES_PER_READ):
                if r.body is None:
                    if r.pre_n < _PREFIX.size:
                        r.pre_n += _recv(sock, r.pre, r.pre_n)
                        if r.pre_n < _PREFIX.size:
                            return None
                    r.start_frame()
                more = True  # the socket may hold more
                if r.got < r.need:
                    more = r.read()  # short: it had no more (epoll says when it has)
                    if r.got < r.need:
                        return None
                cmd, body = r.end_frame()
                if cmd.flag & RPC_TYPE_RESPONSE:
                    answers.append(answer_of(cmd, r.addr, body))
                else:
                    log.info("request code=%d on pull connection to %s ignored", cmd.code, r.addr)
                if not more:
                    return None
        except (BlockingIOError, InterruptedError):
            return None
        except EOFError:
            return "closed by peer"
        except ProtocolError as exc:
            return f"bad frame: {exc}"
        return None


def _recv(sock: socket.socket, buf: bytearray, start: int) -> int:
    """Receive into buf from start on: how many bytes came; EOFError when the peer closed."""
    n = sock.recv_into(memoryview(buf)[start:])
    if n == 0:
        raise EOFError
    return n


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
