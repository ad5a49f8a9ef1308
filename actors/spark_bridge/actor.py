"""SparkBridgeActor: owns the bridge's listen socket and its connections to the cluster.

Mirrors namesrv/NamesrvController.java + NettyRemotingServer / NettyRemotingClient, RocketMQ
4.9.x, for the SparkBridgeCore: Spark drivers connect to its port and speak RemotingCommand
(actormq's SparkBridgeCode requests); the core's lookups go out on one connection per name
server or broker address (opened on demand, requests pipelined, answers matched by opaque).
Traffic is a few requests per micro-batch, so the core runs inline in this actor.
"""

from __future__ import annotations

import logging
import os
import select
import socket
import time
from typing import Any, Final

from actors.remoting.inline_server import ServerOutbox, serve_frames, start_server
from actors.runtime.client_conn import ClientConn
from actors.runtime.tcp import Conn, FrameServer
from actors.runtime.tls import TlsConfig
from actors.runtime.watch import WatchingActor, now_ms
from actors.spark_bridge.core import SparkBridgeCore
from actors.spark_bridge.messages import (
    SparkBridgeStarted,
    SparkBridgeStartFailed,
    SparkBridgeStopped,
    StartSparkBridge,
    StopSparkBridge,
)
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError

log = logging.getLogger(__name__)

CONNECT_RETRY_MS: Final = 5.0
STOP_WAIT_S: Final = 1.0


def advertised(host: str, port: int, name_servers: tuple[str, ...]) -> str:
    """host:port drivers can reach: the listen host, or for a wildcard the address this host
    uses towards the first name server."""
    if host not in ("", "0.0.0.0"):
        return f"{host}:{port}"
    ns_host, _, ns_port = name_servers[0].rpartition(":")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect((ns_host, int(ns_port)))  # no packet: only picks the route
        return f"{s.getsockname()[0]}:{port}"


class SparkBridgeActor(WatchingActor):
    """Serves SparkBridgeCode requests on one TCP port."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server: FrameServer | None = None
        self.core: SparkBridgeCore | None = None
        self.tls: TlsConfig | None = None
        self.outbox = ServerOutbox()
        self.conns: dict[str, ClientConn] = {}  # cluster address -> connection

    def on_control(self, msg: Any, sender: Any) -> None:
        if isinstance(msg, StartSparkBridge):
            self._start(msg, sender)
        elif isinstance(msg, StopSparkBridge):
            self._stop()
            self.send(sender, SparkBridgeStopped())

    def _start(self, msg: StartSparkBridge, sender: Any) -> None:
        self.tls = msg.tls  # tls.enable: the bridge's connections to the cluster use TLS
        try:
            self.server, port = start_server(self.outbox, lambda: FrameServer(
                self._on_frames, lambda conn: None, idle_s=msg.idle_s, name="spark-bridge",
                tls=msg.tls),
                msg.host, msg.port)  # fmt: skip
            advertise = msg.advertise or advertised(msg.host, port, msg.name_servers)
            self.core = SparkBridgeCore(msg.name_servers, advertise, self.outbox,
                                        credentials=msg.credentials)
        except Exception as exc:
            log.exception("spark bridge start failed")
            if self.server is not None:
                self.server.close_all()
                self.server = None
            self.send(sender, SparkBridgeStartFailed(f"{type(exc).__name__}: {exc}"))
            return
        self.schedule("tick", 0)
        self.schedule("idle", 10_000)
        self._pump()
        log.info("spark bridge serving on %s:%d (advertised %s), name servers %s", msg.host,
                 port, advertise, ";".join(msg.name_servers))  # fmt: skip
        self.send(sender, SparkBridgeStarted(port, advertise, os.getpid()))

    # -- Spark side ------------------------------------------------------------------------
    def _on_frames(self, conn: Conn, frames: list[Any], recv_ns: int) -> None:
        assert self.core is not None and self.server is not None
        serve_frames(self.core.process, self.server, conn, frames, recv_ns, "spark bridge")

    # -- cluster side ----------------------------------------------------------------------
    def _pump(self) -> None:
        """Send the core's new calls, flush everything, re-arm the watch."""
        core = self.core
        if core is None:
            return
        while True:
            calls = core.take_calls()
            if not calls:
                break
            for call in calls:
                conn = self._conn(call.addr)
                if conn is None:
                    core.on_conn_lost(call.addr, "cannot connect", now_ms())
                    continue
                conn.write(call.cmd.encode())
        pending = False
        for addr, conn in list(self.conns.items()):
            if not conn.flush():
                pending = True
            if conn.closed:
                self._lost(addr, "connection failed")
        if pending:
            self.schedule("flush", CONNECT_RETRY_MS)
        if self.server is not None:
            self.server.flush(time.monotonic())
            fds = self.server.fds()
        else:
            fds = []
        self.set_watch_fds(fds + [c.fd for c in self.conns.values()])

    def _conn(self, addr: str) -> ClientConn | None:
        conn = self.conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        try:
            conn = ClientConn.to(addr, self.tls)
        except (OSError, ValueError) as exc:
            log.warning("cannot connect to %s: %s", addr, exc)
            return None
        if conn.closed:
            conn.close()
            return None
        self.conns[addr] = conn
        return conn

    def _lost(self, addr: str, reason: str) -> None:
        conn = self.conns.pop(addr, None)
        if conn is not None:
            conn.close()
        if self.core is not None:
            self.core.on_conn_lost(addr, reason, now_ms())

    def _read_cluster(self, addr: str, conn: ClientConn) -> None:
        core = self.core
        assert core is not None
        frames = conn.read_frames()
        if frames is None:
            self._lost(addr, "connection closed")
            return
        for frame in frames:
            try:
                cmd = RemotingCommand.decode(frame)
            except ProtocolError as exc:
                log.warning("undecodable answer from %s: %s", addr, exc)
                self._lost(addr, f"undecodable answer: {exc}")
                return
            if cmd.flag & 1:
                core.on_response(addr, cmd, now_ms())
        if conn.closed:
            self._lost(addr, "connection closed")

    def on_ready(self, fds: list[int]) -> None:
        server = self.server
        if server is None:
            return
        now = time.monotonic()
        by_fd = {c.fd: (a, c) for a, c in self.conns.items()}
        for fd in fds:
            if server.owns(fd):
                server.handle_ready(fd, now, time.monotonic_ns())
            elif fd in by_fd:
                self._read_cluster(*by_fd[fd])
        self._pump()

    def on_timer(self, key: str) -> None:
        if self.core is None or self.server is None:
            return
        if key == "tick":
            self.schedule("tick", self.core.tick(now_ms()))
        elif key == "idle":
            self.server.sweep_idle(time.monotonic())
            self.schedule("idle", 10_000)
        self._pump()

    def _stop(self) -> None:
        """Withdraw the KV entry (waiting at most STOP_WAIT_S for the answers), close all."""
        core = self.core
        if core is not None:
            calls = core.unregister_calls()
            for call in calls:
                conn = self._conn(call.addr)
                if conn is not None:
                    conn.write(call.cmd.encode())
            waiting = {c.cmd.opaque for c in calls}
            deadline = time.monotonic() + STOP_WAIT_S
            while waiting and (left := deadline - time.monotonic()) > 0:
                live = {a: c for a, c in self.conns.items() if not c.closed}
                for c in live.values():
                    c.flush()
                readable, _, _ = select.select([c.fd for c in live.values()], [], [],
                                               min(left, 0.05))  # fmt: skip
                for a, c in live.items():
                    if c.fd in readable:
                        for frame in c.read_frames() or []:
                            waiting.discard(RemotingCommand.decode(frame).opaque)
                        if c.closed:
                            self.conns.pop(a, None)
            self.core = None
        self.on_exit()

    def on_exit(self) -> None:
        for conn in self.conns.values():
            conn.close()
        self.conns.clear()
        if self.server is not None:
            self.server.close_all()
            self.server = None
        self.set_watch_fds([])
