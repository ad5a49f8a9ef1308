"""Links: the channels between a broker's service actors and the processors they serve.

Mirrors no RocketMQ class: in RocketMQ 4.9.x PullRequestHoldService, GroupTransferService,
ScheduleMessageService and TransactionalMessageCheckService are threads of the broker's JVM
that call the processors and the store directly. Here each is an actor of its own, and a link
joins two actors the controller names (ConnectLink): the opening side connects to the other's
channel listener and writes a LinkHello naming itself first; both sides then exchange typed
LINK records (actors.runtime.link_records) and, from the opening side, REQUEST records whose
REPLY records come back on the link (a service's re-puts to the store writer). The opening
side numbers its requests with a negative connection id of its own (the RemotingServer's are
positive), so the serving processor answers them on the link as it answers any request.

A link's death is the peer's: the side that stays tells its core (on_link_lost), and the
controller has the opening side connect again once the peer's replacement listens.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Final, Protocol

from actors.runtime.channel import (
    LINK,
    Channel,
    ChannelAddr,
    add_link,
    add_request,
    connect_channel,
)
from actors.runtime.link_records import LinkHello, LinkRecord, decode, encode
from protocol.command import RemotingCommand

log = logging.getLogger(__name__)

# the connection id an opening side's requests carry, by its role (below every RemotingServer
# connection id, which start at 1; one per role, so a replacement takes over its predecessor's)
REMOTING_HELLO: Final = "RemotingServer"  # the role a RemotingServer names in its channels' hello
LINK_CONN_IDS: Final = {"schedule": -1, "txcheck": -2}
OTHER_LINK_CONN_ID: Final = -100


class Flushing(Protocol):
    """Where an actor keeps the channels it has to flush (a ChannelOutbox)."""

    dirty: set[Channel]


class ChannelLink:
    """actors.core.Link over one channel (either side)."""

    __slots__ = ("ch", "conn_id", "owner", "peer", "sent_requests")

    def __init__(self, peer: str, ch: Channel, owner: Flushing, conn_id: int) -> None:
        self.peer = peer
        self.ch = ch
        self.owner = owner  # its dirty set is flushed after each batch
        self.conn_id = conn_id  # what this side's requests carry
        self.sent_requests = 0

    def __repr__(self) -> str:
        return f"link={self.peer}"

    @property
    def role(self) -> str:
        """The peer's role."""
        return self.peer

    @property
    def alive(self) -> bool:
        """False once the channel closed."""
        return not self.ch.closed

    def send(self, record: LinkRecord) -> None:
        """Queue a typed record."""
        if self.ch.closed:
            return
        add_link(self.ch.out, encode(record))
        self.owner.dirty.add(self.ch)

    def request(self, cmd: RemotingCommand) -> None:
        """Queue a request (its answer comes back on this link)."""
        if self.ch.closed:
            return
        frame = memoryview(cmd.encode())[4:]
        add_request(self.ch.out, self.conn_id, time.monotonic_ns(), 0, 0, frame)
        self.owner.dirty.add(self.ch)
        self.sent_requests += 1


class LinkTable:
    """An actor's links: those it opened (by peer role) and those opened to it (by fd)."""

    def __init__(self, my_role: str, owner: Flushing) -> None:
        self.my_role = my_role
        self.owner = owner
        self.by_fd: dict[int, ChannelLink] = {}  # every live link, opened or accepted
        self.opened: dict[str, ChannelLink] = {}  # peer role -> the link this actor opened

    def open(self, peer: str, addr: ChannelAddr, token: bytes) -> ChannelLink:
        """Connect to `peer`'s listener and say who we are (raises OSError)."""
        ch = connect_channel(addr, name=f"link-{peer}", token=token)
        link = ChannelLink(peer, ch, self.owner,
                           LINK_CONN_IDS.get(self.my_role, OTHER_LINK_CONN_ID))  # fmt: skip
        link.send(LinkHello(self.my_role))
        self.opened[peer] = link
        self.by_fd[ch.fd] = link
        return link

    def accepted(self, ch: Channel, hello: LinkHello) -> ChannelLink:
        """A channel opened to this actor turned out to be a link (its first record)."""
        link = ChannelLink(hello.role, ch, self.owner, 0)
        ch.name = f"link-{hello.role}"
        self.by_fd[ch.fd] = link
        return link

    def get(self, fd: int) -> ChannelLink | None:
        """The link on descriptor `fd`, if it is one."""
        return self.by_fd.get(fd)

    def is_link(self, ch: Channel) -> bool:
        """Whether `ch` is a link's channel."""
        link = self.by_fd.get(ch.fd)
        return link is not None and link.ch is ch

    def drop(self, link: ChannelLink) -> None:
        """Forget a closed link (the caller unwatches and closes its channel)."""
        if self.by_fd.get(link.ch.fd) is link:
            del self.by_fd[link.ch.fd]
        if self.opened.get(link.peer) is link:
            del self.opened[link.peer]
        self.owner.dirty.discard(link.ch)

    def opened_fds(self) -> list[int]:
        """The descriptors of the links this actor opened (the accepted ones are channels)."""
        return [link.ch.fd for link in self.opened.values() if not link.ch.closed]

    def flush_order(self, dirty: set[Channel]) -> tuple[list[Channel], list[Channel]]:
        """(the other channels, the links) among `dirty`: a processor flushes the first group
        first, so whatever a link record leads to (a service's answer to a client) cannot
        reach the RemotingServer ahead of the events written before it."""
        others: list[Channel] = []
        links: list[Channel] = []
        for ch in dirty:
            (links if self.is_link(ch) else others).append(ch)
        return others, links

    def close(self) -> None:
        """Close every link (the actor stops)."""
        for link in list(self.by_fd.values()):
            link.ch.close()
        self.by_fd.clear()
        self.opened.clear()


def hello_of(records: list[tuple[Any, ...]]) -> LinkHello | None:
    """The LinkHello a new channel's first record carries, if it is a link."""
    if not records or records[0][0] != LINK:
        return None
    rec = decode(records[0][1])
    return rec if isinstance(rec, LinkHello) else None
