"""RemotingServer actor: owns the broker's client TCP sockets and routes frames by code.

Mirrors remoting/netty/NettyRemotingServer.java + NettyRemotingAbstract.java, RocketMQ 4.9.x.
Frames are never decoded beyond their request code and never re-encoded: each one travels as
raw bytes in a REQUEST record over the direct channel of its processor group, and REPLY
records come back as encoded frames written to the client as they are.

A group that answers directly (StartRemoting.direct_groups: pull) gets each connection's
socket on its Unix channel the first time the connection sends it a request, and writes its
answers to the client itself (actors.runtime.direct_reply): a shared connection is then
written here only under its lock, and shut down on close so no copy keeps it open. Only
connections from other hosts are shared unless StartRemoting.direct_local: a client on this
host is woken by whoever writes to it, and the kernel moves it onto that writer's CPU; the
busy pull actor then shared a CPU with it (C 0.7x the rate with the RemotingServer writing).

Requests a processor sends to a client (Broker2Client.callClient: consumer running info,
consume-directly, a reply message's push) come as CALL records; the RemotingServer notes
(connection, opaque) -> that processor's channel, and while a connection has calls open, its
frames are decoded far enough to see whether one is the answer (a response with that opaque),
which then goes to the processor that asked instead of the one its code would name.

The VIP ("fast") channel of NettyServerConfig/BrokerStartup: a second listener on
listenPort - 2 serving every code except PULL_MESSAGE (which falls to the default group and is
answered REQUEST_CODE_NOT_SUPPORTED), for Java clients <= 4.4 (spec §1.1). Its connections
travel on the same processor channels with ids offset by FAST_CONN_BASE.

Supervision: the controller replaces a RemotingServer that died (the new one listens on the
same ports, numbers its connections above every earlier one's, and connects to every
processor channel). Its death resets every client connection (FrameServer reset_if_killed:
a Java client then fails the pulls it had pending at once and pulls again on a new
connection), and the client_manage group keeps the registrations those connections carried
(actors.broker.consumer_manager: lost channels), so those pulls are served at once. The
controller tells a live RemotingServer where a replaced processor listens (ConnectProcessor).
While a group has no live channel its requests are answered SYSTEM_BUSY (RocketMQ's answer
when an executor rejects a request), oneway ones dropped; a connection is told to no
processor it never sent to: a connection that sent nothing costs no channel record.
A group that holds requests (StartRemoting.ledger_groups: pull) is the exception: what its
dead processor had taken is answered from the channel's request ledger, and its requests
wait for the replacement meanwhile (actors.runtime.request_ledger).
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any, Final

from actors.remoting.router import RouteError, RouteTable, fast_route_table, request_code
from actors.runtime.channel import (
    CALL,
    CLOSE_CONN,
    CONN_CLOSED,
    CONN_FD,
    EVENTS,
    REPLY,
    Channel,
    add_apply,
    add_conn_record,
    add_link,
    add_locks,
    add_request,
    connect_channel,
)
from actors.runtime.direct_reply import ConnLocks
from actors.runtime.link_records import LinkHello, encode
from actors.runtime.links import REMOTING_HELLO
from actors.runtime.messages import (
    ConnectProcessor,
    EventsApplied,
    EventsSynced,
    RemotingReady,
    RemotingStartFailed,
    RemotingStopped,
    StartRemoting,
    StopRemoting,
    SyncEvents,
)
from actors.runtime.request_ledger import ORPHAN_WAIT_S, ChannelLedgers, GroupGap
from actors.runtime.tcp import REFUSAL_LOG_S, Conn, FrameServer
from actors.runtime.watch import WatchingActor
from protocol.codes import RPC_ONEWAY, ResponseCode
from protocol.command import RemotingCommand, response_opaque
from protocol.errors import ProtocolError

log = logging.getLogger(__name__)

FLUSH_RETRY_MS = 1.0
EVENTS_TO_CONTROLLER_MS = 5.0  # the controller only persists and registers: batch its copies
FAST_CONN_BASE: Final = 1 << 48  # VIP connections' ids on the channels (main ids stay below)
FAST_PORT_OFFSET: Final = 2  # NettyServerConfig: fastListenPort = listenPort - 2
CALL_ANSWER_TTL_S: Final = 60.0  # an open call is forgotten after this (callers wait <= 10 s)
MAX_CALLS_PER_CONN: Final = 1024  # open calls kept per connection (the oldest dropped first)
# a burst of requests for a spin group: its channel is written once the first EARLY_HANDOVER
# of them are routed, so its processor starts on them while the rest are (B, 100 sends a
# burst: the send actor started ~400 us after the burst came in, now ~180 us)
EARLY_HANDOVER: Final = 8
NO_PROCESSOR_REMARK: Final = (
    "[PROCESSOR_RESTARTING]the processor of this request is being replaced, try again")


def fast_port_for(port: int, configured: int | None) -> int | None:
    """The VIP port to bind: `configured` (-1 = off, 0 = free) or port - 2; None = no VIP."""
    if configured is not None:
        return None if configured < 0 else configured
    if port == 0:
        return 0
    fast = port - FAST_PORT_OFFSET
    return fast if 0 < fast <= 65535 else None


class RemotingServer(WatchingActor):
    """TCP gateway of one broker (or any server with processor channels)."""

    LINGER_IDLE_MS = 5.0
    LINGER_CAP_MS = 50.0
    SPIN_US = 50.0  # catches a fast group's reply without sleeping (A: ~+25%, same CPU/msg)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server: FrameServer | None = None
        self.fast: FrameServer | None = None  # the VIP listener, None when off
        self.fast_port = 0
        self.routes: RouteTable | None = None
        self.fast_routes: RouteTable | None = None
        self.group_channel: dict[str, Channel] = {}
        self.by_fd: dict[int, Channel] = {}
        self.dirty: set[Channel] = set()
        self.sweep_ms = 10_000.0
        self.busy_answered = 0  # requests answered SYSTEM_BUSY for want of a processor channel
        self._busy_logged_at = -REFUSAL_LOG_S
        self.controller: Any = None  # who sent StartRemoting: replicated events go there too
        self.to_controller: list[tuple[str, bytes]] = []  # (origin, pickled events) to send
        # conn id -> opaque of a request a processor sent that client -> (channel, forget at)
        self.calls: dict[int, dict[int, tuple[Channel, float]]] = {}
        self.spin_groups: frozenset[str] = frozenset()  # see StartRemoting.spin_groups
        self.direct_groups: frozenset[str] = frozenset()  # see StartRemoting.direct_groups
        self.direct_local = False  # see StartRemoting.direct_local
        self.conn_locks: ConnLocks | None = None  # their lock table, while there are any
        self.locks_sent: set[Channel] = set()  # the channels that have the lock table
        self._spin_armed = False  # this pass routed to (or answered from) a spin group
        self.ledgers = ChannelLedgers()  # of the holding groups (StartRemoting.ledger_groups)

    # -- control ------------------------------------------------------------------------------
    def on_control(self, msg: Any, sender: Any) -> None:
        if isinstance(msg, StartRemoting):
            self.controller = sender
            try:
                port = self._start(msg)
            except Exception as exc:
                log.exception("remoting start failed")
                self._close_everything()
                self.send(sender, RemotingStartFailed(f"{type(exc).__name__}: {exc}"))
                return
            self.send(sender, RemotingReady(port, self.fast_port))
        elif isinstance(msg, StopRemoting):
            self._send_events()
            self._close_everything()
            self.send(sender, RemotingStopped())
        elif isinstance(msg, ConnectProcessor):
            self._connect_group(msg.group, msg.channel_addr, msg.channel_token)
            log.info("processor group=%s reconnected at %s", msg.group, msg.channel_addr)
            if self.server is not None:
                self._flush(time.monotonic())  # what its predecessor owed, and what waited
        elif isinstance(msg, SyncEvents):
            self._send_events()
            self.send(sender, EventsSynced())

    def _start(self, msg: StartRemoting) -> int:
        self.routes = RouteTable(msg.code_groups, msg.default_group)
        self.spin_groups = msg.spin_groups
        self.direct_groups = msg.direct_groups
        self.direct_local = msg.direct_local
        self.ledgers = ChannelLedgers(msg.ledger_groups)
        if self.direct_groups:
            self.conn_locks = ConnLocks.create()
        for group, addr in msg.routes.items():
            self._connect_group(group, addr, msg.channel_token)
        self.server = FrameServer(
            self._on_frames, self._on_closed, max_frame=msg.max_frame, idle_s=msg.idle_s,
            watcher=self, max_connections=msg.max_connections,
            first_conn_id=msg.conn_id_base + 1, reset_if_killed=True, tls=msg.tls,
        )
        port = self.server.listen(msg.host, msg.port)
        self._start_fast(msg, port)
        self.sweep_ms = max(10.0, min(10_000.0, msg.idle_s * 1000.0 / 4))
        self.schedule("idle", self.sweep_ms)
        return port

    def _connect_group(self, group: str, addr: Any, token: bytes) -> None:
        """(Re)connect the channel of a processor group; an old one is read to its end (what
        its dead processor flushed) and closed."""
        old = self.group_channel.pop(group, None)
        if old is not None:
            if not old.closed and self.server is not None:
                self._read_channel(old)
            self._drop_channel(old)
        ch = connect_channel(addr, name=group, token=token)
        add_link(ch.out, encode(LinkHello(REMOTING_HELLO)))  # tells this channel from links
        self.dirty.add(ch)
        self.group_channel[group] = ch
        self.by_fd[ch.fd] = ch
        self.watch(ch.fd)
        self.ledgers.attach(group, ch)
        gap = self.ledgers.gaps.pop(group, None)
        if gap is not None:
            self._close_gap(group, gap, ch)

    def _drop_channel(self, ch: Channel) -> None:
        self.by_fd.pop(ch.fd, None)
        self.dirty.discard(ch)
        self.locks_sent.discard(ch)
        if ch.sock.fileno() >= 0:  # still open: its number is not someone else's yet
            self.unwatch(ch.fd)
        ch.close()
        if self.ledgers.gone(ch, time.monotonic()):
            self.schedule("gap", ORPHAN_WAIT_S * 1000.0 + 1.0)

    # -- a holding group between its processor's death and its replacement --------------------
    def _close_gap(self, group: str, gap: GroupGap, ch: Channel | None) -> None:
        """The replacement's channel `ch` (None: none came in time): the requests kept for it
        go there (else SYSTEM_BUSY), then the dead processor's requests are answered."""
        for conn_id, recv_ns, peer_ip, peer_port, frame in gap.parked:
            if ch is not None:
                self._to_channel(ch, conn_id, recv_ns, peer_ip, peer_port, frame)
            else:
                busy = _busy_answer(frame)
                if busy is not None:
                    self._send_to(conn_id, busy)
        for conn_id, answer in gap.answers:
            self._send_to(conn_id, answer)
        log.info("processor group=%s %s: %d kept request(s) passed on, %d answered", group,
                 "replaced" if ch is not None else "not replaced in time",
                 len(gap.parked) if ch is not None else 0, len(gap.answers))  # fmt: skip

    def _send_to(self, conn_id: int, data: bytes) -> None:
        """Queue an encoded frame for a connection by its channel id (gone: dropped)."""
        if conn_id < FAST_CONN_BASE:
            if self.server is not None:
                self.server.send(conn_id, data)
        elif self.fast is not None:
            self.fast.send(conn_id - FAST_CONN_BASE, data)

    def _to_channel(self, ch: Channel, conn_id: int, recv_ns: int, peer_ip: int, peer_port: int,
                    frame: Any) -> None:  # fmt: skip
        """Queue a REQUEST record for a processor channel (noted in its ledger, if any)."""
        add_request(ch.out, conn_id, recv_ns, peer_ip, peer_port, frame)
        self.dirty.add(ch)
        ledger = self.ledgers.by_channel.get(ch)
        if ledger is not None:
            ledger.routed_one(conn_id, frame)

    def _start_fast(self, msg: StartRemoting, port: int) -> None:
        """Listen on the VIP port. A port already taken stops the start, as it stops a Java
        broker: clients that use the VIP channel (Java <= 4.4, and a Java slave syncing topic
        configs) would otherwise reach whatever else listens there."""
        configured = msg.fast_port
        want = fast_port_for(msg.port, configured)
        if want is None:
            log.info("VIP channel off (listenPort %d, fastListenPort %s)", msg.port, configured)
            return
        free = want == 0
        if free and port > FAST_PORT_OFFSET:
            want = port - FAST_PORT_OFFSET  # any free port, port - 2 if it is free
        assert self.routes is not None
        self.fast_routes = fast_route_table(self.routes)
        fast = FrameServer(self._on_fast_frames, self._on_fast_closed, max_frame=msg.max_frame,
                           idle_s=msg.idle_s, name="remoting-vip", watcher=self,
                           max_connections=msg.max_connections,
                           first_conn_id=msg.conn_id_base + 1, reset_if_killed=True,
                           tls=msg.tls)  # fmt: skip
        try:
            self.fast_port = fast.listen(msg.host, want)
        except OSError as exc:
            if not free:
                which = "fastListenPort" if configured is not None else "listenPort - 2"
                raise OSError(exc.errno, f"{exc.strerror} (the VIP port, {which}; "
                                         "fastListenPort=-1 turns it off)") from exc  # fmt: skip
            self.fast_port = fast.listen(msg.host, 0)
        self.fast = fast

    def on_exit(self) -> None:
        self._send_events()
        self._close_everything()

    def _close_everything(self) -> None:
        for server in (self.server, self.fast):
            if server is not None:
                server.on_closed = lambda conn: None
                server.close_all()
        self.server = self.fast = None
        self.ledgers.close()  # stopping: nobody is owed an answer any more
        for ch in list(self.group_channel.values()):
            self._drop_channel(ch)
        self.group_channel.clear()
        self.by_fd.clear()
        self.set_watch_fds([])
        if self.conn_locks is not None:
            self.conn_locks.close()
            self.conn_locks = None

    # -- data plane -----------------------------------------------------------------------------
    def spin_s(self) -> float:
        """Spin only after a pass that involved a spin group: a pull's answer takes far longer
        than the spin, so spinning for it only takes the CPU from the processors."""
        if self._spin_armed:
            self._spin_armed = False
            return self.SPIN_US / 1e6
        return 0.0

    def on_ready(self, fds: list[int]) -> None:
        server = self.server
        if server is None:
            return
        now = time.monotonic()
        for fd in fds:
            ch = self.by_fd.get(fd)
            if ch is not None:
                self._read_channel(ch)
            elif server.owns(fd):
                server.handle_ready(fd, now, time.monotonic_ns())
            elif self.fast is not None and self.fast.owns(fd):
                self.fast.handle_ready(fd, now, time.monotonic_ns())
        self._flush(now)

    def _on_frames(self, conn: Conn, frames: list[Any], recv_ns: int) -> None:
        assert self.routes is not None and self.server is not None
        self._route(self.server, conn, conn.id, self.routes, frames, recv_ns)

    def _on_fast_frames(self, conn: Conn, frames: list[Any], recv_ns: int) -> None:
        assert self.fast_routes is not None and self.fast is not None
        self._route(self.fast, conn, FAST_CONN_BASE + conn.id, self.fast_routes, frames, recv_ns)

    def _route(self, owner: FrameServer, conn: Conn, conn_id: int, routes: RouteTable,
               frames: list[Any], recv_ns: int) -> None:
        group_channel = self.group_channel
        dirty = self.dirty
        spin_groups = self.spin_groups
        direct_groups = self.direct_groups if owner is self.server else ()
        calls = self.calls.get(conn_id)
        ledgers = self.ledgers.by_channel
        early = EARLY_HANDOVER if len(frames) > EARLY_HANDOVER else 0  # routed before a write
        for frame in frames:
            if calls:
                ch = _answer_channel(calls, frame)
                if ch is not None:
                    if not ch.closed:
                        self._to_channel(ch, conn_id, recv_ns, conn.peer_ip, conn.peer_port,
                                         frame)  # fmt: skip
                    continue
            try:
                code = request_code(frame)
            except RouteError as exc:
                log.warning("conn=%d peer=%s:%d bad header, closing: %s",
                            conn.id, conn.peer[0], conn.peer[1], exc)
                conn.closed = True  # FrameServer closes it after this pass
                return
            group = routes.group_for(code)
            ch = group_channel.get(group)
            if ch is None or ch.closed:
                if not self.ledgers.park(group, conn_id, recv_ns, conn.peer_ip, conn.peer_port,
                                         frame):  # fmt: skip
                    self._no_processor(owner, conn, group, code, frame)
                continue
            if (group in direct_groups and (conn.passed is None or ch not in conn.passed)
                    and (self.direct_local or not _on_this_host(conn))):  # fmt: skip
                self._share(conn, ch)
            add_request(ch.out, conn_id, recv_ns, conn.peer_ip, conn.peer_port, frame)
            dirty.add(ch)
            if ledgers:
                ledger = ledgers.get(ch)
                if ledger is not None:
                    ledger.routed_one(conn_id, frame)
            if group in spin_groups:
                self._spin_armed = True
                if early:
                    early -= 1
                    if not early:
                        ch.flush()  # the rest of the burst follows in this pass's flush
            routed = conn.routed
            if routed is None:
                conn.routed = {ch}
            elif ch not in routed:
                routed.add(ch)

    def _share(self, conn: Conn, ch: Channel) -> None:
        """Pass the connection's socket to a direct-reply group's channel (with the lock table
        the first time), ahead of the request about to be queued; a Unix channel that cannot
        take it now gets it with the connection's next request."""
        locks = self.conn_locks
        # no descriptors over TCP, and a TLS session cannot be written from another process
        if locks is None or ch.sock.family != socket.AF_UNIX or conn.tls is not None:
            conn.passed = {ch} if conn.passed is None else conn.passed | {ch}
            return
        conn.share(locks)
        records = bytearray()
        fds = []
        first = ch not in self.locks_sent
        if first:
            add_locks(records)
            fds.append(locks.fd)
        add_conn_record(records, CONN_FD, conn.id)
        fds.append(conn.fd)
        if not ch.send_with_fds(bytes(records), fds):
            return
        if first:
            self.locks_sent.add(ch)
        conn.passed = {ch} if conn.passed is None else conn.passed | {ch}

    def _no_processor(self, owner: FrameServer, conn: Conn, group: str, code: int,
                      frame: Any) -> None:
        """Answer SYSTEM_BUSY: the group's processor is being replaced (oneway: dropped)."""
        self.busy_answered += 1
        now = time.monotonic()
        if now - self._busy_logged_at >= REFUSAL_LOG_S:
            self._busy_logged_at = now
            log.warning("group=%s has no live processor channel: answering SYSTEM_BUSY "
                        "(code=%d; %d so far)", group, code, self.busy_answered)  # fmt: skip
        try:
            cmd = RemotingCommand.decode(frame)
        except ProtocolError:
            conn.closed = True  # undecodable: closed after this pass, as a processor would
            return
        if not cmd.flag & RPC_ONEWAY:
            owner.send(conn.id, _busy(cmd))

    def _on_closed(self, conn: Conn) -> None:
        self._conn_closed(conn, conn.id)

    def _on_fast_closed(self, conn: Conn) -> None:
        self._conn_closed(conn, FAST_CONN_BASE + conn.id)

    def _conn_closed(self, conn: Conn, conn_id: int) -> None:
        """Tell the processor groups this connection sent to (or was called by) that it is
        gone: the group's live channel (a replaced processor holds its state from the
        controller's snapshot, where the connection may appear)."""
        self.calls.pop(conn_id, None)
        routed = conn.routed
        if not routed:
            return
        live = {old if not old.closed else self.group_channel.get(old.name) for old in routed}
        for ch in live:
            if ch is not None and not ch.closed:
                add_conn_record(ch.out, CONN_CLOSED, conn_id)
                self.dirty.add(ch)

    def _read_channel(self, ch: Channel) -> None:
        server = self.server
        assert server is not None
        records = ch.read_records()
        if records is None:
            log.warning("processor channel %s closed: its requests %s until the processor is "
                        "replaced", ch.name, "wait" if ch in self.ledgers.by_channel
                        else "are answered SYSTEM_BUSY")  # fmt: skip
            self._drop_channel(ch)
            return
        fast = self.fast
        if ch.name in self.spin_groups:
            self._spin_armed = True  # its answers reach clients whose next request is near
        for rec in records:
            rtype = rec[0]
            if rtype == REPLY:
                if rec[1] < FAST_CONN_BASE:
                    server.send(rec[1], rec[2])
                elif fast is not None:
                    fast.send(rec[1] - FAST_CONN_BASE, rec[2])
            elif rtype == CALL:
                if rec[1] < FAST_CONN_BASE:
                    owner: FrameServer | None = server
                    local_id = rec[1]
                else:
                    owner, local_id = fast, rec[1] - FAST_CONN_BASE
                target = owner.conns.get(local_id) if owner is not None else None
                sent = target is not None and owner is not None and owner.send(local_id, rec[3])
                if sent and target is not None:  # its answer will come back to ch
                    if target.routed is None:
                        target.routed = {ch}
                    else:
                        target.routed.add(ch)
                    conn_calls = self.calls.setdefault(rec[1], {})
                    if len(conn_calls) >= MAX_CALLS_PER_CONN:
                        del conn_calls[next(iter(conn_calls))]
                    conn_calls[rec[2]] = (ch, time.monotonic() + CALL_ANSWER_TTL_S)
            elif rtype == CLOSE_CONN:
                if rec[1] < FAST_CONN_BASE:
                    server.close(rec[1], "processor asked")
                elif fast is not None:
                    fast.close(rec[1] - FAST_CONN_BASE, "processor asked")
            elif rtype == EVENTS:
                self._forward_events(rec[1], rec[2], rec[3])
        if ch.closed:
            self._drop_channel(ch)

    def _forward_events(self, origin: str, by_group: dict[str, bytes], full: bytes) -> None:
        """Copy events into their audience's channels (ahead of the replies that follow)."""
        for group, blob in by_group.items():
            ch = self.group_channel.get(group)
            if ch is not None and not ch.closed:
                add_apply(ch.out, blob)
                self.dirty.add(ch)
        self.to_controller.append((origin, bytes(full)))
        self.schedule("events", EVENTS_TO_CONTROLLER_MS)

    def _send_events(self) -> None:
        """One Thespian message for everything gathered since the last one."""
        if self.to_controller and self.controller is not None:
            batch, self.to_controller = self.to_controller, []
            self.send(self.controller, EventsApplied(tuple(batch)))

    def _flush(self, now: float) -> None:
        pending = False
        if self.dirty:
            still: set[Channel] = set()
            for ch in self.dirty:
                if not ch.flush():
                    still.add(ch)
            self.dirty = still
            pending = bool(still)
        if self.server is not None and not self.server.flush(now):
            pending = True
        if self.fast is not None and not self.fast.flush(now):
            pending = True
        if pending:
            self.schedule("flush", FLUSH_RETRY_MS)

    def on_timer(self, key: str) -> None:
        now = time.monotonic()
        if key == "events":
            self._send_events()
        if self.server is None:
            return
        if key == "gap":
            for group, gap in self.ledgers.late(now):
                self._close_gap(group, gap, None)
        if key == "idle":
            closed = self.server.sweep_idle(now)
            if self.fast is not None:
                closed += self.fast.sweep_idle(now)
            if closed:
                log.info("closed %d idle connections", closed)
            self._forget_old_calls(now)
            self.schedule("idle", self.sweep_ms)
        self._flush(now)

    def _forget_old_calls(self, now: float) -> None:
        """Drop open calls nobody answered within CALL_ANSWER_TTL_S."""
        for conn_id in list(self.calls):
            conn_calls = self.calls[conn_id]
            for opaque in [o for o, (_, until) in conn_calls.items() if until <= now]:
                del conn_calls[opaque]
            if not conn_calls:
                del self.calls[conn_id]


def _busy(cmd: RemotingCommand) -> bytes:
    """SYSTEM_BUSY for a request whose group has no processor."""
    return cmd.make_response(int(ResponseCode.SYSTEM_BUSY), NO_PROCESSOR_REMARK).encode()


def _busy_answer(frame: Any) -> bytes | None:
    """_busy for a kept frame (None: oneway, or undecodable: nothing to answer)."""
    try:
        cmd = RemotingCommand.decode(frame)
    except ProtocolError:
        return None
    return None if cmd.flag & RPC_ONEWAY else _busy(cmd)


def _on_this_host(conn: Conn) -> bool:
    """Whether the client connected from this host (from the address it reached us on:
    loopback, or one of our own); decided once per connection."""
    local = conn.local
    if local is None:
        try:
            local = conn.sock.getsockname()[0] == conn.peer[0]
        except OSError:
            local = True  # closing anyway: nothing to share
        conn.local = local
    return local


def _answer_channel(calls: dict[int, tuple[Channel, float]], frame: Any) -> Channel | None:
    """The channel of the processor whose call `frame` answers (popping the call), or None
    when the frame is not a response to an open call (a request takes the code route)."""
    opaque = response_opaque(frame)
    if opaque is None:
        return None
    entry = calls.pop(opaque, None)
    return entry[0] if entry is not None else None
