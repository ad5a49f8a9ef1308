"""Runs one processor core over channel records: batching, fast failure, errors, outbox.

Mirrors remoting/netty/NettyRemotingAbstract.java processRequestCommand + broker/latency/
BrokerFastFailure.java, RocketMQ 4.9.x: a request that waited in the queue longer than the
group's limit is answered SYSTEM_BUSY "[TIMEOUT_CLEAN_QUEUE]..." without running the
processor; a processor exception becomes SYSTEM_ERROR; oneway requests are never answered
(spec §1.6: both servers have a default processor, so not even an unknown code). No Thespian here.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from actors.core import (
    AccessCheck,
    AccessCheckingCore,
    ClientResponseCore,
    FastPathCore,
    ProcessorCore,
    Request,
)
from actors.runtime.channel import (
    APPLY,
    CLOSE_CONN,
    CONN_CLOSED,
    CONN_FD,
    LEDGER,
    LOCKS,
    REQUEST,
    Channel,
    add_call,
    add_conn_record,
    add_reply,
)
from actors.runtime.direct_reply import DirectReplies
from protocol.codes import RPC_ONEWAY, RPC_TYPE_RESPONSE, ResponseCode
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError, ProtocolError
from store.dispatch_request import DispatchFailed
from store.stats_page import StatsPage

log = logging.getLogger(__name__)

SYSTEM_ERROR: Final = int(ResponseCode.SYSTEM_ERROR)
SYSTEM_BUSY: Final = int(ResponseCode.SYSTEM_BUSY)


class ChannelOutbox:
    """actors.core.Outbox over channels: replies go back where the connection's requests came
    (or, for a direct-reply group, straight to the client: see actors.runtime.direct_reply)."""

    __slots__ = ("conn_channel", "default", "direct", "dirty", "held")

    def __init__(self, direct: DirectReplies | None = None) -> None:
        self.conn_channel: dict[int, Channel] = {}
        self.default: Channel | None = None
        self.dirty: set[Channel] = set()
        self.direct = direct
        # a direct group's replies until the batch's events are known: (channel, conn, frame)
        self.held: list[tuple[Channel, int, bytes]] = []

    def reply(self, ch: Channel, conn_id: int, encoded: bytes) -> None:
        """Answer a request that came on `ch` (a direct group's answer waits for release)."""
        if self.direct is not None:
            self.held.append((ch, conn_id, encoded))
        else:
            add_reply(ch.out, conn_id, encoded)
            self.dirty.add(ch)

    def release(self, direct_ok: bool) -> None:
        """Send the held replies: to the clients themselves when `direct_ok` (the batch
        emitted no events) and the socket takes them, else through their channels."""
        held = self.held
        if not held:
            return
        self.held = []
        direct = self.direct
        for ch, conn_id, encoded in held:
            if direct_ok and direct is not None and direct.write(conn_id, encoded):
                continue
            if not ch.closed:
                add_reply(ch.out, conn_id, encoded)
                self.dirty.add(ch)

    def adopt(self, rtype: int, conn_id: int, fd: int | None) -> None:
        """A CONN_FD or LOCKS record's descriptor (closed at once by a non-direct group)."""
        if fd is None:
            return
        direct = self.direct
        if direct is None:
            os.close(fd)
        elif rtype == LOCKS:
            direct.adopt_locks(fd)
        else:
            direct.adopt(conn_id, fd)

    def _channel(self, conn_id: int) -> Channel | None:
        """The live channel the connection's requests came on (else the default one)."""
        ch = self.conn_channel.get(conn_id) or self.default
        if ch is None or ch.closed:
            return None
        self.dirty.add(ch)
        return ch

    def send(self, conn_id: int, cmd: RemotingCommand) -> None:
        """Queue `cmd` for the connection; dropped when the connection is unknown."""
        ch = self._channel(conn_id)
        if ch is not None:
            self.reply(ch, conn_id, cmd.encode())

    def send_frame(self, conn_id: int, encoded: bytes) -> bool:
        """Queue an encoded frame for the connection (actors.core.FrameOutbox); False when no
        live channel takes it."""
        ch = self._channel(conn_id)
        if ch is None:
            return False
        self.reply(ch, conn_id, encoded)
        return True

    def call(self, conn_id: int, cmd: RemotingCommand) -> None:
        """Queue the request `cmd` for the client; its answer comes back to this processor."""
        ch = self._channel(conn_id)
        if ch is not None:
            add_call(ch.out, conn_id, cmd.opaque, cmd.encode())

    def close_conn(self, conn_id: int) -> None:
        """Ask the RemotingServer to drop a client connection."""
        ch = self._channel(conn_id)
        if ch is not None:
            add_conn_record(ch.out, CLOSE_CONN, conn_id)

    def forget(self, conn_id: int) -> None:
        """The connection is gone."""
        self.conn_channel.pop(conn_id, None)
        if self.direct is not None:
            self.direct.forget(conn_id)


class ProcessorHost:
    """Feeds channel records to a core and collects what goes back (no I/O of its own)."""

    def __init__(
        self,
        group: str,
        core: ProcessorCore,
        outbox: ChannelOutbox,
        max_wait_ms: int,
        shed: frozenset[int] | None = None,
    ) -> None:
        self.group = group
        self.core = core
        self.outbox = outbox
        self.max_wait_ns = int(max_wait_ms) * 1_000_000
        self.shed = shed  # the codes answered SYSTEM_BUSY once waited too long (None: all)
        self.on_apply: Callable[[bytes, int], None] | None = None  # pickled replicated events
        self.on_ledger: Callable[[Channel, int], None] | None = None  # a LEDGER record's page
        # a FastPathCore's fast_path(frame, conn_id, peer, now_ms) -> encoded reply | None
        # (not taken) | b"" (taken, nothing to answer now)
        self.fast = core.fast_path if isinstance(core, FastPathCore) else None
        self.on_response = (
            core.on_client_response if isinstance(core, ClientResponseCore) else None
        )
        # the broker's RPC hook (BrokerController.initialAcl): checks every client request
        # before the core sees it; None = no ACL. With one, requests skip the fast path.
        self.access: AccessCheck | None = None
        self.fast_checks_access = False  # set_access: the core's fast path checks it too
        self.served = 0
        self.busy = 0
        self.errors = 0
        # executor figures for GET_BROKER_RUNTIME_INFO (store.stats_page): where this group's
        # (queue size, head wait ms) pair goes, and whether it also marks its batches' start
        self.stats: StatsPage | None = None
        self.stats_queue_off: int | None = None
        self.stats_lock_off: int | None = None

    def set_access(self, access: AccessCheck) -> None:
        """Check every client request with `access` (ACL) before the core sees it; a core
        whose fast path can check it keeps that fast path (AccessCheckingCore)."""
        self.access = access
        if isinstance(self.core, AccessCheckingCore):
            self.core.access = access
            self.fast_checks_access = True

    def handle(self, ch: Channel, records: list[tuple[Any, ...]], queued_after: int = 0) -> int:
        """Run one batch of records from channel `ch` (queued_after more wait behind it); the
        number of REQUEST records among them.

        The clocks are read once per call (a sub-batch of a few requests): the queue-time
        check is then at most one sub-batch's run time late, where RocketMQ's
        BrokerFastFailure scans its queues only every 10 ms, and the store time of the
        requests of one call is the same millisecond or one earlier.
        """
        outbox = self.outbox
        reply = outbox.reply
        conn_channel = outbox.conn_channel
        process = self.core.process
        decode = RemotingCommand.decode
        out = ch.out
        n = len(records) + queued_after
        mono_ns = time.monotonic_ns()
        now_ms = time.time_ns() // 1_000_000
        oldest_ok_ns = mono_ns - self.max_wait_ns
        access = self.access
        fast = self.fast if access is None or self.fast_checks_access else None
        stats = self.stats
        if stats is not None:
            self._publish_queue(stats, records, n, mono_ns, now_ms)
        requests = 0
        for i, rec in enumerate(records):
            rtype = rec[0]
            if rtype == REQUEST:
                requests += 1
                _, conn_id, recv_ns, peer, frame = rec
                if conn_channel.get(conn_id) is not ch:
                    conn_channel[conn_id] = ch
                if fast is not None and recv_ns >= oldest_ok_ns:
                    try:
                        encoded = fast(frame, conn_id, peer, now_ms)
                    except DispatchFailed:  # the store's state is lost: this process ends
                        raise
                    except Exception as exc:  # after the core took it: answer SYSTEM_ERROR
                        self.errors += 1
                        log.exception("group=%s fast path failed", self.group)
                        encoded = decode(frame).make_response(SYSTEM_ERROR, _short(exc)).encode()
                    if encoded is not None:
                        self.served += 1
                        if encoded:
                            reply(ch, conn_id, encoded)
                        continue
                try:
                    cmd = decode(frame)
                except ProtocolError as exc:
                    log.warning("group=%s conn=%d undecodable request, closing: %s",
                                self.group, conn_id, exc)
                    add_conn_record(out, CLOSE_CONN, conn_id)
                    continue
                flag = cmd.flag
                if flag & RPC_TYPE_RESPONSE:  # a client's answer to a request a core sent it
                    on_response = self.on_response
                    if on_response is not None:
                        try:
                            on_response(cmd, now_ms)
                        except Exception:
                            log.exception("group=%s client response handler failed", self.group)
                    continue
                oneway = flag & RPC_ONEWAY
                if access is not None and conn_id >= 0:  # a link's requests are our own
                    refused = access.check(cmd.code, cmd.ext_fields, cmd.body, peer, now_ms)
                    if refused is not None:
                        if not oneway:
                            reply(ch, conn_id, cmd.make_response(SYSTEM_ERROR, refused).encode())
                        continue
                if recv_ns < oldest_ok_ns and (self.shed is None or cmd.code in self.shed):
                    self.busy += 1
                    if not oneway:
                        remark = (
                            "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
                            f"period in queue: {(mono_ns - recv_ns) // 1_000_000}ms, "
                            f"size of queue: {n - i - 1}"
                        )
                        reply(ch, conn_id, cmd.make_response(SYSTEM_BUSY, remark).encode())
                    continue
                try:
                    resp = process(Request(conn_id, peer, cmd, recv_ns), now_ms)
                except HeaderFieldError as exc:
                    resp = cmd.make_response(exc.code, exc.remark)
                except DispatchFailed:  # the store's state is lost: this process ends
                    raise
                except Exception as exc:
                    self.errors += 1
                    log.exception("group=%s code=%d processor failed", self.group, cmd.code)
                    resp = cmd.make_response(SYSTEM_ERROR, _short(exc))
                self.served += 1
                if resp is not None and not oneway:
                    try:
                        encoded = resp.encode()
                    except ProtocolError as exc:
                        log.exception("group=%s code=%d reply not encodable", self.group, cmd.code)
                        encoded = cmd.make_response(SYSTEM_ERROR, _short(exc)).encode()
                    reply(ch, conn_id, encoded)
            elif rtype == CONN_CLOSED:
                conn_id = rec[1]
                outbox.forget(conn_id)
                try:
                    self.core.on_connection_closed(conn_id, now_ms)
                except Exception:
                    log.exception("group=%s on_connection_closed failed", self.group)
            elif rtype in (CONN_FD, LOCKS):
                outbox.adopt(rtype, rec[1] if rtype == CONN_FD else 0, ch.next_fd())
            elif rtype == LEDGER:
                fd = ch.next_fd()
                if fd is not None:
                    if self.on_ledger is not None:
                        self.on_ledger(ch, fd)
                    else:
                        os.close(fd)
            elif rtype == APPLY:  # a replica that cannot apply them is wrong: the exception
                if self.on_apply is not None:  # ends the actor (its replacement starts fresh)
                    self.on_apply(rec[1], now_ms)
            else:
                log.warning("group=%s unexpected record type %d", self.group, rtype)
        if out:
            outbox.dirty.add(ch)
        if stats is not None and not queued_after:
            self._publish_queue(stats, (), 0, 0, 0)
        return requests

    def _publish_queue(
        self, stats: StatsPage, records: Sequence[tuple[Any, ...]], n: int, mono_ns: int,
        now_ms: int
    ) -> None:
        """(requests waiting, how long the first one has waited) at a batch's start; zeros
        once the queue drained (the thread-pool figures of GET_BROKER_RUNTIME_INFO)."""
        if self.stats_queue_off is not None:
            wait_ms = 0
            for rec in records:
                if rec[0] == REQUEST:
                    wait_ms = max(0, (mono_ns - rec[2]) // 1_000_000)
                    break
            stats.set_pair(self.stats_queue_off, n, wait_ms)
        if self.stats_lock_off is not None:
            stats.set(self.stats_lock_off, now_ms)


def _short(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= 200 else text[:197] + "..."
