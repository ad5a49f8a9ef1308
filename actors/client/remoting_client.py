"""The client side of the RocketMQ remoting protocol: connections, requests, responses.

Mirrors remoting/netty/NettyRemotingClient.java and NettyRemotingAbstract.java, RocketMQ 4.9.x:
one connection per address (connect timeout 3 s), requests matched to responses by opaque,
invokeSync / invokeAsync / invokeOneway, failFast of a closed connection's requests, the
socket closed after a sync timeout (clientCloseSocketIfTimeout, default true), requests the
server starts handed to a processor.

Two drivers (docs/CLIENT.md §3):
- the user's process: an EventLoop thread watches every connection with EPOLLONESHOT, and a
  sync caller reads its own response itself (leader/follower). Each connection has a reader
  role guarded by its condition: a caller that finds it free takes it, writes, and reads
  until its response is in (dispatching whatever else it reads), then frees it and re-arms the
  connection in the loop. While anyone holds the role the loop does not read that connection;
  while the loop or another caller holds it, a sync caller waits on the condition and takes
  the role when it is freed. One request in flight thus never crosses a thread.
- an actor: no loop and no threads; the actor watches fds() with ThespianWatch, calls
  handle_ready(fd) and, on a timer, scan_response_table(); callbacks run inline; invoke_sync
  is refused (it would block the actor).

Async completions run on whichever thread read the response, after it freed the role (so a
callback may itself call invoke_sync on the same connection).
"""

from __future__ import annotations

import errno
import functools
import heapq
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from actors.client.errors import (
    MQClientError,
    RemotingConnectError,
    RemotingSendRequestError,
    RemotingTimeoutError,
)
from actors.client.event_loop import EPOLLIN, EPOLLONESHOT, EPOLLOUT, EventLoop
from actors.client.frame_ring import PullRings, RingReader
from actors.client.remoting_conn import (
    MAX_FRAME,
    READ_CHUNK,
    Callback,
    ChannelWrapper,
    ReadBuffer,
    ResponseFuture,
    TlsPlaintext,
    open_connection,
    wait_drained,
)
from actors.runtime.tls import TlsConfig, TlsError
from protocol.codes import RPC_ONEWAY, RPC_TYPE_RESPONSE
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S: Final = 3.0
OUT_HIGH_WATER: Final = 4 * 1024 * 1024  # a sync writer waits while more is buffered
SCAN_PERIOD_S: Final = 0.02  # async timeouts are noticed within this (Java scans every 1 s)

RequestProcessor = Callable[[str, RemotingCommand], RemotingCommand | None]
Completer = Callable[[list[tuple[ResponseFuture, RemotingCommand | None]]], None]
_LOOP: Final = "loop"  # the reader-role holder when the event loop reads


class RemotingClient:
    """Connections to name servers and brokers; sync, async and oneway requests."""

    def __init__(self, *, loop: EventLoop | None = None,
                 processor: RequestProcessor | None = None,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 close_socket_if_timeout: bool = True,
                 complete: Completer | None = None,
                 tls: TlsConfig | None = None,
                 rings: PullRings | None = None) -> None:  # fmt: skip
        self.loop = loop
        # actor driver: plain connections read their frames straight into these rings; a
        # response's body is then valid only while its callback runs
        self.rings = rings if loop is None else None
        self.tls = tls if tls is not None and tls.enable else None  # useTLS: every connection
        self.processor = processor
        self.connect_timeout_s = connect_timeout_s
        self.close_socket_if_timeout = close_socket_if_timeout
        self._conns: dict[str, ChannelWrapper] = {}
        self._by_fd: dict[int, ChannelWrapper] = {}
        self._table_lock = threading.Lock()
        self._connect_locks: dict[str, threading.Lock] = {}
        self._pending: dict[int, ResponseFuture] = {}
        self._deadlines: list[tuple[float, int]] = []
        self._deadline_lock = threading.Lock()
        self._scan_armed = False
        self._buf = ReadBuffer()
        self._closed = False
        self.on_connection_change: Callable[[], None] | None = None  # the actor re-watches
        self.hold_writes = False  # actor driver: frames wait in the out buffer for flush_all

    # -- connections ----------------------------------------------------------------------------
    def _conn(self, addr: str) -> ChannelWrapper:
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        if self._closed:
            raise RemotingConnectError(addr, "the client is closed")
        with self._table_lock:
            lock = self._connect_locks.setdefault(addr, threading.Lock())
        with lock:
            conn = self._conns.get(addr)
            if conn is not None and not conn.closed:
                return conn
            conn = self._connect(addr)
            if self.loop is not None:  # registered before anyone else can see it
                conn.armed = EPOLLIN if self.processor is not None else 0
                self.loop.register(conn.fd, EPOLLONESHOT | conn.armed,
                                   functools.partial(self._on_loop_event, conn))
                conn.registered = True
            with self._table_lock:
                self._conns[addr] = conn
                self._by_fd[conn.fd] = conn
        if self.loop is None and self.on_connection_change is not None:
            self.on_connection_change()
        return conn

    def _connect(self, addr: str) -> ChannelWrapper:
        conn = open_connection(addr, self.connect_timeout_s, self.tls)
        if self.rings is not None:
            conn.ring_reader = RingReader(self.rings, MAX_FRAME)
        return conn

    def fds(self) -> list[int]:
        """Descriptors of the open connections an actor should watch (not those waiting for
        ring space)."""
        return [c.fd for c in self._conns.values() if not c.closed
                and (c.ring_reader is None or not c.ring_reader.paused)]

    def addrs(self) -> list[str]:
        """Addresses with an open connection."""
        return [a for a, c in self._conns.items() if not c.closed]

    def close_channel(self, addr: str, reason: str = "closed") -> None:
        """Close the connection to addr; its pending requests fail at once (failFast)."""
        conn = self._conns.get(addr)
        if conn is not None:
            self.close_conn(conn, reason)

    def close_conn(self, conn: ChannelWrapper, reason: str) -> None:
        """Close conn if still open; its pending requests fail at once (failFast)."""
        with conn.cond:
            if conn.closed:
                return
            conn.closed = True
            conn.cond.notify_all()
        with self._table_lock:
            if self._conns.get(conn.addr) is conn:
                del self._conns[conn.addr]
            self._by_fd.pop(conn.fd, None)
        if conn.registered and self.loop is not None:
            self.loop.unregister(conn.fd)
        if conn.ring_reader is not None and self.rings is not None:
            self.rings.abandon(conn.ring_reader)  # its half-read frame, its ring
        try:
            conn.sock.close()
        except OSError:
            pass
        log.info("connection to %s closed: %s", conn.addr, reason)
        failed: list[tuple[ResponseFuture, RemotingCommand | None]] = []
        for opaque in list(conn.pending):
            p = self._pending.pop(opaque, None)
            if p is not None and not p.done:
                p.error = RemotingConnectError(conn.addr, reason)
                p.done = True
                failed.append((p, None))
        conn.pending.clear()
        self._complete(failed)
        if self.loop is None and self.on_connection_change is not None:
            self.on_connection_change()

    def close(self) -> None:
        """Close every connection (pending requests fail)."""
        self._closed = True
        for conn in list(self._conns.values()):
            self.close_conn(conn, "client closed")

    # -- writing --------------------------------------------------------------------------------
    def _write(self, conn: ChannelWrapper, data: bytes, direct: bool = True) -> None:
        """Write a frame: straight to the socket (direct, what a sync caller wants), or into
        the out buffer the event loop flushes on EPOLLOUT (async requests: a burst of them
        costs one epoll_ctl and one send per loop pass instead of a send each)."""
        with conn.wlock:
            if conn.closed:
                raise RemotingSendRequestError(conn.addr, "connection closed")
            if conn.tls is not None:
                try:
                    data = conn.tls.encrypt(data)
                except TlsError as exc:
                    self._close_later(conn, str(exc))
                    raise RemotingSendRequestError(conn.addr, str(exc)) from None
            if conn.out or (not direct and self.loop is not None) or self.hold_writes:
                conn.out += data
            else:
                try:
                    sent = conn.sock.send(data)
                except (BlockingIOError, InterruptedError):
                    sent = 0
                except OSError as exc:
                    err = RemotingSendRequestError(conn.addr, str(exc))
                    self._close_later(conn, f"send failed: {exc}")
                    raise err from None
                if sent == len(data):
                    return
                conn.out += memoryview(data)[sent:]
            over = len(conn.out) > OUT_HIGH_WATER
        self._arm(conn)
        if over and direct and self.loop is not None and not self.loop.in_loop():
            wait_drained(conn, OUT_HIGH_WATER)

    def flush(self, conn: ChannelWrapper) -> bool:
        """Write what the out buffer holds; True when it is empty."""
        left, failed = conn.send_out()
        if failed:
            self._close_later(conn, failed)
        return not left

    def flush_all(self) -> bool:
        """Flush every connection's out buffer (actor driver); True when all are empty."""
        return all([self.flush(c) for c in list(self._conns.values())])

    def _close_later(self, conn: ChannelWrapper, reason: str) -> None:
        if self.loop is not None:
            self.loop.call_soon(lambda: self.close_conn(conn, reason))
        else:
            self.close_conn(conn, reason)

    # -- requests -------------------------------------------------------------------------------
    def _register(self, conn: ChannelWrapper, opaque: int, timeout_ms: float,
                  callback: Callback | None) -> ResponseFuture:  # fmt: skip
        p = ResponseFuture(opaque, conn.addr, timeout_ms, callback)
        self._pending[opaque] = p
        conn.pending.add(opaque)
        if callback is not None:
            self._arm(conn)
            with self._deadline_lock:
                heapq.heappush(self._deadlines, (p.deadline, opaque))
                arm = not self._scan_armed and self.loop is not None
                self._scan_armed = self._scan_armed or arm
            if arm:
                assert self.loop is not None
                self.loop.call_later(SCAN_PERIOD_S, self._loop_scan)
        return p

    def invoke_sync(self, addr: str, cmd: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """Send cmd and wait for its response (on this thread); RemotingError on failure."""
        return self.invoke_sync_frame(addr, cmd.opaque, cmd.encode(), timeout_ms)

    def invoke_sync_frame(self, addr: str, opaque: int, frame: bytes, timeout_ms: float
                          ) -> RemotingCommand:  # fmt: skip
        """invoke_sync of an already encoded request frame whose opaque is `opaque`."""
        if self.loop is None:
            raise RuntimeError("invoke_sync needs the event loop driver (not in an actor)")
        conn = self._conn(addr)
        p = self._register(conn, opaque, timeout_ms, None)
        try:
            self._write(conn, frame)
        except MQClientError:
            self._forget(p, conn)
            raise
        self._await(conn, p)
        if p.error is not None:
            raise p.error
        if p.response is None:
            self._forget(p, conn)
            if self.close_socket_if_timeout:
                self.close_conn(conn, f"timeout of opaque={p.opaque}")
            raise RemotingTimeoutError(addr, timeout_ms)
        return p.response

    def invoke_async(self, addr: str, cmd: RemotingCommand, timeout_ms: float,
                     callback: Callback) -> None:  # fmt: skip
        """Send cmd; callback(response, None) or callback(None, error) runs exactly once."""
        self.invoke_async_frame(addr, cmd.opaque, cmd.encode(), timeout_ms, callback)

    def invoke_async_frame(self, addr: str, opaque: int, frame: bytes, timeout_ms: float,
                           callback: Callback) -> None:  # fmt: skip
        """invoke_async of an already encoded request frame whose opaque is `opaque`."""
        try:
            conn = self._conn(addr)
        except MQClientError as exc:
            callback(None, exc)
            return
        p = self._register(conn, opaque, timeout_ms, callback)
        try:
            self._write(conn, frame, direct=False)
        except MQClientError as exc:
            if self._forget(p, conn):
                callback(None, exc)

    def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        """Send cmd with the oneway flag; nothing comes back."""
        cmd.flag |= RPC_ONEWAY
        self._write(self._conn(addr), cmd.encode())

    def send_response(self, addr: str, resp: RemotingCommand) -> None:
        """Answer a request the server sent (dropped when the connection is gone)."""
        conn = self._conns.get(addr)
        if conn is None or conn.closed:
            log.info("answer to %s dropped: connection gone", addr)
            return
        try:
            self._write(conn, resp.encode())
        except MQClientError as exc:
            log.info("answer to %s not written: %s", addr, exc)

    def _forget(self, p: ResponseFuture, conn: ChannelWrapper) -> bool:
        """Drop a pending request; True when it was still pending (nobody completed it)."""
        conn.pending.discard(p.opaque)
        return self._pending.pop(p.opaque, None) is not None

    # -- reading --------------------------------------------------------------------------------
    def _await(self, conn: ChannelWrapper, p: ResponseFuture) -> None:
        """Leader/follower: read ourselves when the role is free, else wait for the reader."""
        me = threading.get_ident()
        cond = conn.cond
        while not p.done:
            left = p.deadline - time.monotonic()
            if left <= 0:
                return
            with cond:
                if p.done:
                    return
                if conn.closed:
                    return
                if conn.reader is not None:
                    conn.waiters += 1
                    cond.wait(left)
                    conn.waiters -= 1
                    continue
                conn.reader = me
            done: list[tuple[ResponseFuture, RemotingCommand | None]] = []
            try:
                self._read_until(conn, p, done)
            finally:
                with cond:
                    conn.reader = None
                    if conn.waiters:
                        cond.notify_all()
                self._arm(conn)
                self._complete(done)

    def _read_until(self, conn: ChannelWrapper, p: ResponseFuture, done: list[Any]) -> None:
        """As reader: block in poll/recv until p is done or its deadline passes."""
        poller = conn.poller
        while not p.done and not conn.closed:
            left = p.deadline - time.monotonic()
            if left <= 0:
                return
            if not poller.poll(left * 1000.0):
                continue
            others = self._read_available(conn, done)
            if others and conn.waiters:
                with conn.cond:
                    conn.cond.notify_all()

    def _read_available(self, conn: ChannelWrapper, done: list[Any]) -> int:
        """Read what the socket has now and dispatch it; how many sync waiters were completed."""
        if conn.ring_reader is not None:
            return self._read_into_ring(conn, conn.ring_reader, done)
        buf = self._buf.view
        woke = 0
        while True:
            try:
                n = conn.sock.recv_into(buf)
            except (BlockingIOError, InterruptedError):
                return woke
            except OSError as exc:
                if exc.errno not in (errno.ECONNRESET, errno.EPIPE, errno.ENOTCONN,
                                     errno.EBADF):  # fmt: skip
                    log.warning("recv from %s failed: %s", conn.addr, exc)
                self._close_later(conn, f"recv failed: {exc}")
                return woke
            if n == 0:
                self._close_later(conn, "closed by peer")
                return woke
            data: Any = buf[:n]
            if conn.tls is not None:
                try:
                    data, back = conn.tls.receive(data)
                except TlsError as exc:
                    log.error("%s from %s", exc, conn.addr)
                    self._close_later(conn, str(exc))
                    return woke
                if back:  # a post-handshake message's answer
                    with conn.wlock:
                        conn.out += back
                    self._arm(conn)
            try:
                frames = conn.decoder.feed(data)
            except ProtocolError as exc:
                log.error("undecodable stream from %s: %s", conn.addr, exc)
                self._close_later(conn, f"bad frame: {exc}")
                return woke
            for frame in frames:
                woke += self._dispatch(conn, frame, done)
            if n < READ_CHUNK:
                return woke

    def _read_into_ring(self, conn: ChannelWrapper, reader: RingReader, done: list[Any]) -> int:
        """_read_available for a connection read into the pull rings (actor driver): each
        frame is dispatched and its callback run while it is rings.current, so the callback
        may claim it; a frame left unclaimed is freed at once."""
        slots, closing = reader.read(conn.sock if conn.tls is None
                                     else TlsPlaintext(conn, self._buf.view))  # fmt: skip
        rings = reader.rings
        woke = 0
        for slot in slots:
            rings.current = slot
            try:
                woke += self._dispatch(conn, slot.ring.view[slot.at : slot.at + slot.size], done)
                self._complete(done)
                done.clear()
            finally:
                rings.current = None
                rings.settle(slot)
        if closing is not None:
            self._close_later(conn, closing)
        return woke

    def resume_ring_reads(self) -> bool:
        """Let connections that waited for ring space read again; True when one did."""
        resumed = False
        for conn in list(self._conns.values()):
            reader = conn.ring_reader
            if reader is not None and reader.paused and reader.resume():
                resumed = True
        return resumed

    def _dispatch(self, conn: ChannelWrapper, frame: Any, done: list[Any]) -> int:
        try:
            cmd = RemotingCommand.decode(frame)
        except ProtocolError as exc:
            log.warning("undecodable frame from %s dropped: %s", conn.addr, exc)
            return 0
        if cmd.flag & RPC_TYPE_RESPONSE:
            p = self._pending.pop(cmd.opaque, None)
            if p is None:
                log.debug("response opaque=%d from %s has no request (timed out?)", cmd.opaque,
                          conn.addr)  # fmt: skip
                return 0
            conn.pending.discard(cmd.opaque)
            p.response = cmd
            p.done = True
            if p.callback is not None:
                done.append((p, cmd))
                return 0
            return 1
        self._serve_request(conn, cmd)
        return 0

    def _serve_request(self, conn: ChannelWrapper, cmd: RemotingCommand) -> None:
        if self.processor is None:
            log.info("request code=%d from %s ignored (no processor)", cmd.code, conn.addr)
            return
        try:
            resp = self.processor(conn.addr, cmd)
        except Exception:
            log.exception("processing request code=%d from %s failed", cmd.code, conn.addr)
            resp = cmd.make_response(1, "client failed to process the request")
        if resp is not None and not cmd.flag & RPC_ONEWAY:
            try:
                self._write(conn, resp.encode())
            except MQClientError as exc:
                log.info("answer to %s not written: %s", conn.addr, exc)

    def _complete(self, done: list[tuple[ResponseFuture, RemotingCommand | None]]) -> None:
        for p, resp in done:
            cb = p.callback
            if cb is None:
                continue
            try:
                cb(resp, p.error)
            except Exception:
                log.exception("response callback for opaque=%d failed", p.opaque)

    # -- the event loop driver ------------------------------------------------------------------
    def _arm(self, conn: ChannelWrapper) -> None:
        """Re-arm the ONESHOT registration: read when nobody holds the role and something
        may arrive (a pending request, or a server that sends requests), write when bytes
        wait in the out buffer. A lone sync call thus costs no epoll_ctl at all."""
        loop = self.loop
        if loop is None or conn.closed:
            return
        with conn.alock:
            events = 0
            if conn.reader is None and (conn.pending or self.processor is not None):
                events |= EPOLLIN  # nothing pending, no server requests: nobody needs to read
            if conn.out:
                events |= EPOLLOUT
            if events and events != conn.armed:
                conn.armed = events
                loop.modify(conn.fd, events | EPOLLONESHOT)

    def _on_loop_event(self, conn: ChannelWrapper, ev: int) -> None:
        with conn.alock:
            conn.armed = 0  # ONESHOT: it fired, so it is disarmed now
        if conn.closed:
            return
        if ev & EPOLLOUT:
            self.flush(conn)
        if ev & ~EPOLLOUT:
            with conn.cond:
                took = conn.reader is None
                if took:
                    conn.reader = _LOOP
            if took:
                done: list[Any] = []
                try:
                    self._read_available(conn, done)
                finally:
                    with conn.cond:
                        conn.reader = None
                        if conn.waiters:
                            conn.cond.notify_all()
                    self._arm(conn)
                    self._complete(done)
                return
        self._arm(conn)

    def _loop_scan(self) -> None:
        with self._deadline_lock:
            self._scan_armed = False
        self.scan_response_table(time.monotonic())
        with self._deadline_lock:
            again = bool(self._deadlines) and not self._scan_armed
            self._scan_armed = self._scan_armed or again
        if again and self.loop is not None:
            self.loop.call_later(SCAN_PERIOD_S, self._loop_scan)

    def scan_response_table(self, now: float) -> None:
        """Fail async requests whose deadline passed (scanResponseTable)."""
        expired: list[tuple[ResponseFuture, RemotingCommand | None]] = []
        with self._deadline_lock:
            heap = self._deadlines
            while heap and heap[0][0] <= now:
                _d, opaque = heapq.heappop(heap)
                p = self._pending.get(opaque)
                if p is None or p.done or p.callback is None:
                    continue
                if self._pending.pop(opaque, None) is not p:
                    continue  # its answer (or its connection's close) claimed it meanwhile
                p.error = RemotingTimeoutError(p.addr, p.timeout_ms)
                p.done = True
                expired.append((p, None))
            if len(heap) > 4096 and len(heap) > 4 * len(self._pending):
                self._deadlines = [(d, o) for d, o in heap if o in self._pending]
                heapq.heapify(self._deadlines)
        for p, _ in expired:
            conn = self._conns.get(p.addr)
            if conn is not None:
                conn.pending.discard(p.opaque)
        self._complete(expired)

    def next_deadline(self) -> float | None:
        """The earliest async deadline (monotonic), or None."""
        with self._deadline_lock:
            return self._deadlines[0][0] if self._deadlines else None

    # -- the actor driver -----------------------------------------------------------------------
    def handle_ready(self, fd: int) -> bool:
        """A watched fd is readable (actor driver); False when it is not ours."""
        conn = self._by_fd.get(fd)
        if conn is None:
            return False
        done: list[Any] = []
        self._read_available(conn, done)
        self._complete(done)
        return True
