"""RemotingServer actor: owns the broker's client TCP sockets and routes frames by code.

Mirrors remoting/netty/NettyRemotingServer.java + NettyRemotingAbstract.java, RocketMQ 4.9.x.
Frames are never decoded beyond their request code and never re-encoded: each one travels as
raw bytes in a REQUEST record over the direct channel of its processor group, and REPLY
records come back as encoded frames written to the client as they are.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from actors.remoting.router import RouteError, RouteTable, request_code
from actors.runtime.channel import (
    CLOSE_CONN,
    CONN_CLOSED,
    EVENTS,
    REPLY,
    Channel,
    ChannelError,
    add_apply,
    add_conn_record,
    add_request,
    connect_channel,
)
from actors.runtime.messages import (
    EventsApplied,
    RemotingReady,
    RemotingStartFailed,
    RemotingStopped,
    StartRemoting,
    StopRemoting,
)
from actors.runtime.tcp import Conn, FrameServer
from actors.runtime.watch import WatchingActor

log = logging.getLogger(__name__)

FLUSH_RETRY_MS = 1.0
EVENTS_TO_CONTROLLER_MS = 5.0  # the controller only persists and registers: batch its copies


class RemotingServer(WatchingActor):
    """TCP gateway of one broker (or any server with processor channels)."""

    LINGER_IDLE_MS = 5.0
    LINGER_CAP_MS = 50.0
    SPIN_US = 50.0  # catches a processor's reply without sleeping (A: ~+25%, same CPU/msg)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server: FrameServer | None = None
        self.routes: RouteTable | None = None
        self.group_channel: dict[str, Channel] = {}
        self.by_fd: dict[int, Channel] = {}
        self.dirty: set[Channel] = set()
        self.sweep_ms = 10_000.0
        self._seen_changes = -1
        self.controller: Any = None  # who sent StartRemoting: replicated events go there too
        self.to_controller: list[EventsApplied] = []

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
            self.send(sender, RemotingReady(port))
        elif isinstance(msg, StopRemoting):
            self._send_events()
            self._close_everything()
            self.send(sender, RemotingStopped())

    def _start(self, msg: StartRemoting) -> int:
        self.routes = RouteTable(msg.code_groups, msg.default_group)
        for group, addr in msg.routes.items():
            ch = connect_channel(addr, name=group)
            self.group_channel[group] = ch
            self.by_fd[ch.fd] = ch
        self.server = FrameServer(
            self._on_frames, self._on_closed, max_frame=msg.max_frame, idle_s=msg.idle_s
        )
        port = self.server.listen(msg.host, msg.port)
        self.sweep_ms = max(10.0, min(10_000.0, msg.idle_s * 1000.0 / 4))
        self.schedule("idle", self.sweep_ms)
        self._refresh_fds()
        return port

    def on_exit(self) -> None:
        self._send_events()
        self._close_everything()

    def _close_everything(self) -> None:
        if self.server is not None:
            self.server.on_closed = lambda conn: None
            self.server.close_all()
            self.server = None
        for ch in self.group_channel.values():
            ch.close()
        self.group_channel.clear()
        self.by_fd.clear()
        self.set_watch_fds([])

    def _refresh_fds(self, force: bool = False) -> None:
        server = self.server
        if server is not None and server.changes == self._seen_changes and not force:
            return
        fds = list(self.by_fd)
        if server is not None:
            fds.extend(server.fds())
            self._seen_changes = server.changes
        self.set_watch_fds(fds)

    # -- data plane -----------------------------------------------------------------------------
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
        self._flush(now)
        self._refresh_fds()

    def _on_frames(self, conn: Conn, frames: list[Any], recv_ns: int) -> None:
        routes = self.routes
        assert routes is not None
        group_channel = self.group_channel
        dirty = self.dirty
        for frame in frames:
            try:
                code = request_code(frame)
            except RouteError as exc:
                log.warning("conn=%d peer=%s:%d bad header, closing: %s",
                            conn.id, conn.peer[0], conn.peer[1], exc)
                conn.closed = True  # FrameServer closes it after this pass
                return
            ch = group_channel.get(routes.group_for(code))
            if ch is None or ch.closed:
                log.error("no live processor channel for code=%d, closing conn=%d", code, conn.id)
                conn.closed = True
                return
            add_request(ch.out, conn.id, recv_ns, conn.peer_ip, conn.peer_port, frame)
            dirty.add(ch)

    def _on_closed(self, conn: Conn) -> None:
        for ch in self.group_channel.values():
            if not ch.closed:
                add_conn_record(ch.out, CONN_CLOSED, conn.id)
                self.dirty.add(ch)

    def _read_channel(self, ch: Channel) -> None:
        server = self.server
        assert server is not None
        try:
            records = ch.read_records()
        except ChannelError as exc:
            log.error("channel=%s corrupt stream: %s", ch.name, exc)
            records = None
        if records is None:
            log.error("processor channel %s closed", ch.name)
            ch.close()
            self.by_fd.pop(ch.fd, None)
            self._refresh_fds(force=True)
            return
        for rec in records:
            rtype = rec[0]
            if rtype == REPLY:
                server.send(rec[1], rec[2])
            elif rtype == CLOSE_CONN:
                server.close(rec[1], "processor asked")
            elif rtype == EVENTS:
                self._forward_events(rec[1], rec[2], rec[3])
        if ch.closed:
            self.by_fd.pop(ch.fd, None)
            self._refresh_fds(force=True)

    def _forward_events(self, origin: str, by_group: dict[str, bytes], full: bytes) -> None:
        """Copy events into their audience's channels (ahead of the replies that follow)."""
        for group, blob in by_group.items():
            ch = self.group_channel.get(group)
            if ch is not None and not ch.closed:
                add_apply(ch.out, blob)
                self.dirty.add(ch)
        self.to_controller.append(EventsApplied(origin, bytes(full)))
        self.schedule("events", EVENTS_TO_CONTROLLER_MS)

    def _send_events(self) -> None:
        if self.to_controller and self.controller is not None:
            batch, self.to_controller = self.to_controller, []
            for msg in batch:
                self.send(self.controller, msg)

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
        if pending:
            self.schedule("flush", FLUSH_RETRY_MS)

    def on_timer(self, key: str) -> None:
        now = time.monotonic()
        if key == "events":
            self._send_events()
        if self.server is None:
            return
        if key == "idle":
            closed = self.server.sweep_idle(now)
            if closed:
                log.info("closed %d idle connections", closed)
            self.schedule("idle", self.sweep_ms)
        self._flush(now)
        self._refresh_fds()
