"""A request core served inline by the actor that owns its listen socket.

Mirrors remoting/netty/NettyRemotingServer.java with its processor run on the I/O thread, as the
name server runs DefaultRequestProcessor (RocketMQ 4.9.x): low-traffic roles (the name server,
the Spark bridge) answer on their own FrameServer, with no channel hop to a processor actor.
"""

from __future__ import annotations

from collections.abc import Callable

from actors.runtime.tcp import FrameServer
from protocol.command import RemotingCommand


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
