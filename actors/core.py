"""The contract between the actor runtime and the pure request-processor cores.

Mirrors remoting/netty/NettyRequestProcessor.java + NettyRemotingAbstract.java, RocketMQ 4.9.x:
a processor is registered for a set of request codes; the runtime hands it requests in
batches and carries its replies (and any server-initiated requests) back to the client's
connection. Cores are plain classes: no Thespian, no sockets, time passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from protocol.command import RemotingCommand


@dataclass(slots=True)
class Request:
    """One client request as a processor core sees it."""

    conn_id: int  # the client connection, unique for the life of a RemotingServer
    peer: tuple[str, int]  # the client's (ip, port) as the broker sees it (bornHost)
    cmd: RemotingCommand
    recv_ns: int  # time.monotonic_ns() when the RemotingServer decoded the frame


class Outbox(Protocol):
    """Where a core's output goes: replies and server-initiated requests to a connection."""

    def send(self, conn_id: int, cmd: RemotingCommand) -> None:
        """Queue `cmd` for the connection; dropped silently when the connection is gone."""
        ...


class ProcessorCore(Protocol):
    """A request processor (an isolated executor in RocketMQ terms)."""

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Handle one request; return the reply, or None (oneway, or replied later via outbox)."""
        ...

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """A client connection closed or was dropped for idleness."""
        ...

    def tick(self, now_ms: int) -> int | None:
        """Run due timers; return ms until the next wanted tick, or None for no timer."""
        ...
