"""NameServer actor: owns its listen socket and runs the NamesrvProcessor core inline.

Mirrors namesrv/NamesrvController.java + NettyRemotingServer, RocketMQ 4.9.x: requests are
answered by DefaultRequestProcessor (actors.namesrv.processor), the RouteInfoManager scan
runs every 10 s (first after 5 s), and a closed broker connection unregisters that broker
(BrokerHousekeepingService.onChannelClose). Traffic is low, so there is no channel hop.
Client sockets are watched one by one in the actor's epoll (actors.runtime.watch) and capped
by maxConnections (actors.runtime.tcp); nothing is logged per connection.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from actors.remoting.inline_server import ServerOutbox, serve_frames, start_server
from actors.runtime.messages import NamesrvStarted, NamesrvStartFailed, StartNamesrv
from actors.runtime.tcp import Conn, FrameServer
from actors.runtime.watch import WatchingActor, now_ms

if TYPE_CHECKING:
    from actors.namesrv.config import NamesrvConfig
    from actors.namesrv.processor import NamesrvProcessor

log = logging.getLogger(__name__)

SCAN_FIRST_MS = 5000.0
SCAN_PERIOD_MS = 10000.0
FLUSH_RETRY_MS = 1.0


def build_namesrv_core(config: NamesrvConfig | None) -> NamesrvProcessor:
    """Construct the NamesrvProcessor core (None: a config with nothing persisted)."""
    from actors.namesrv.processor import NamesrvProcessor

    return NamesrvProcessor(config=config)


def _max_connections(msg: StartNamesrv) -> int:
    """maxConnections from the name server's config when it has one, else the message's."""
    config = msg.namesrv_config
    return config.maxConnections if config is not None else msg.max_connections


class NameServerActor(WatchingActor):
    """Serves the name server protocol on one TCP port."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server: FrameServer | None = None
        self.core: NamesrvProcessor | None = None
        self.outbox = ServerOutbox()

    def on_control(self, msg: Any, sender: Any) -> None:
        if isinstance(msg, StartNamesrv):
            try:
                self.core = build_namesrv_core(msg.namesrv_config)
                self.server, port = start_server(self.outbox, lambda: FrameServer(
                    self._on_frames, self._on_closed, max_frame=msg.max_frame, idle_s=msg.idle_s,
                    name="namesrv", watcher=self, max_connections=_max_connections(msg),
                    tls=msg.tls),
                    msg.host, msg.port)  # fmt: skip
            except Exception as exc:
                log.exception("name server start failed")
                self.send(sender, NamesrvStartFailed(f"{type(exc).__name__}: {exc}"))
                return
            self.schedule("scan", SCAN_FIRST_MS)
            self.schedule("idle", max(10.0, min(10_000.0, msg.idle_s * 250.0)))
            self.send(sender, NamesrvStarted(port))

    def _on_frames(self, conn: Conn, frames: list[Any], recv_ns: int) -> None:
        assert self.core is not None and self.server is not None
        serve_frames(self.core.process, self.server, conn, frames, recv_ns, "name server")

    def _on_closed(self, conn: Conn) -> None:
        if self.core is not None:
            self.core.on_connection_closed(conn.id, now_ms())

    def on_ready(self, fds: list[int]) -> None:
        server = self.server
        if server is None:
            return
        now = time.monotonic()
        for fd in fds:
            if server.owns(fd):
                server.handle_ready(fd, now, time.monotonic_ns())
        self._flush(now)

    def _flush(self, now: float) -> None:
        if self.server is not None and not self.server.flush(now):
            self.schedule("flush", FLUSH_RETRY_MS)

    def on_timer(self, key: str) -> None:
        server, core = self.server, self.core
        if server is None or core is None:
            return
        now = time.monotonic()
        if key == "scan":
            delay = SCAN_PERIOD_MS
            try:
                nxt = core.tick(now_ms())
                if nxt is not None:
                    delay = max(1.0, float(nxt))
            except Exception:
                log.exception("name server scan failed")
            expired = core.expired_conns
            while expired:
                server.close(expired.pop(), "broker expired")
            self.schedule("scan", delay)
        elif key == "idle":
            server.sweep_idle(now)
            self.schedule("idle", max(10.0, min(10_000.0, server.idle_s * 250.0)))
        self._flush(now)

    def on_exit(self) -> None:
        if self.server is not None:
            self.server.on_closed = lambda conn: None
            self.server.close_all()
            self.server = None
