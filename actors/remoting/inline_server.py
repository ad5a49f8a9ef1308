"""A request core served inline by the actor that owns its listen socket.

Mirrors remoting/netty/NettyRemotingServer.java with its processor run on the I/O thread, as the
name server runs DefaultRequestProcessor (RocketMQ 4.9.x): low-traffic roles (the name server,
the Spark bridge) answer on their own FrameServer, with no channel hop to a processor actor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from actors.core import Request
from actors.runtime.tcp import Conn, FrameServer
from actors.runtime.watch import now_ms
from protocol.codes import RPC_ONEWAY, RPC_TYPE_RESPONSE
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError, ProtocolError

log = logging.getLogger(__name__)

Process = Callable[[Request, int], RemotingCommand | None]  # a core's process(req, now_ms)


class ServerOutbox:
    """actors.core.Outbox writing straight to the owning actor's connections."""

    def __init__(self) -> None:
        self.server: FrameServer | None = None

    def send(self, conn_id: int, cmd: RemotingCommand) -> None:
        if self.server is not None:
            self.server.send(conn_id, cmd.encode())

    def call(self, conn_id: int, cmd: RemotingCommand) -> None:
        self.send(conn_id, cmd)

    def close_conn(self, conn_id: int) -> None:
        if self.server is not None:
            self.server.close(conn_id, "processor asked")


def start_server(outbox: ServerOutbox, make: Callable[[], FrameServer], host: str, port: int
                 ) -> tuple[FrameServer, int]:  # fmt: skip
    """Make the server, give it to outbox and listen on host:port: (server, bound port). A
    server that cannot listen is closed and taken back before the error is raised."""
    server = make()
    outbox.server = server
    try:
        return server, server.listen(host, port)
    except BaseException:
        server.close_all()
        outbox.server = None
        raise


def serve_frames(process: Process, server: FrameServer, conn: Conn, frames: list[Any],
                 recv_ns: int, name: str) -> None:  # fmt: skip
    """Decode and answer one read's frames in order (processRequestCommand, inline): an
    undecodable frame closes the connection, a response frame is ignored, a failing request
    is answered SYSTEM_ERROR, a oneway one never."""
    for frame in frames:
        try:
            cmd = RemotingCommand.decode(frame)
        except ProtocolError as exc:
            log.warning("%s conn=%d undecodable request, closing: %s", name, conn.id, exc)
            conn.closed = True
            return
        if cmd.flag & RPC_TYPE_RESPONSE:
            continue
        try:
            resp = process(Request(conn.id, conn.peer, cmd, recv_ns), now_ms())
        except HeaderFieldError as exc:
            resp = cmd.make_response(exc.code, exc.remark)
        except Exception as exc:
            log.exception("%s code=%d failed", name, cmd.code)
            resp = cmd.make_response(RS.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}"[:200])
        if resp is None or cmd.flag & RPC_ONEWAY:
            continue
        try:
            server.send(conn.id, resp.encode())
        except ProtocolError:
            log.exception("%s reply to code=%d not encodable", name, cmd.code)
