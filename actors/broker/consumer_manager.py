"""Consumer groups registered by heartbeats: channels, client ids and subscriptions.

Mirrors broker/client/ConsumerManager.java + ConsumerGroupInfo.java, RocketMQ 4.9.x
(subscriptions are protocol.bodies.SubscriptionData, as heartbeats carry them). Channels are
keyed by the RemotingServer's conn_id. The client_manage actor owns the channels; other actors hold
ConsumerGroupInfo snapshots replicated through events.

Lost channels (ours: a Java broker's sockets live as long as the broker): a connection that
died with the RemotingServer process that owned it, not closed by its client or the broker,
leaves its registration in place, marked `lost`, as a Java broker keeps the channel of a
client whose TCP connection died silently until the channel expires (120 s without a
heartbeat). The group, its subscriptions and its client ids stay, so the client's pulls on its
new connection are served at once; the client's next heartbeat (on the new connection)
replaces its lost entries without a rebalance notice, its UNREGISTER_CLIENT drops them, and
one that never comes back expires as any channel does. Nothing is sent to a lost channel.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from protocol.bodies import EXPRESSION_TYPE_TAG, SubscriptionData

log = logging.getLogger(__name__)


def matches_all(sub: SubscriptionData) -> bool:
    """'*' (or a TAG subscription without tag codes) passes every message."""
    return sub.is_all or (sub.expression_type == EXPRESSION_TYPE_TAG and not sub.code_set)


@dataclass(frozen=True, slots=True)
class ConsumerGroupInfo:
    """A replicable snapshot of one consumer group."""

    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: tuple[SubscriptionData, ...] = ()
    client_ids: tuple[str, ...] = ()
    # (clientId, conn_id, "ip:port", language code, version) per live channel
    connections: tuple[tuple[str, int, str, int, int], ...] = ()

    def find_subscription(self, topic: str) -> SubscriptionData | None:
        """The subscription for a topic, if any."""
        for s in self.subscriptions:
            if s.topic == topic:
                return s
        return None


@dataclass(slots=True)
class ClientChannel:
    """One client connection registered for a group."""

    conn_id: int
    client_id: str
    language: int
    version: int
    last_update_ms: int
    peer: tuple[str, int] = ("", 0)
    lost: bool = False  # its connection died with its RemotingServer (see the module docstring)


@dataclass(slots=True)
class _Group:
    group: str
    consume_type: str
    message_model: str
    consume_from_where: str
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    channels: dict[int, ClientChannel] = field(default_factory=dict)

    def snapshot(self) -> ConsumerGroupInfo:
        ids = tuple(sorted({c.client_id for c in self.channels.values()}))
        conns = tuple(
            sorted(
                (c.client_id, c.conn_id, f"{c.peer[0]}:{c.peer[1]}", c.language, c.version)
                for c in self.channels.values()
            )
        )
        return ConsumerGroupInfo(
            self.group,
            self.consume_type,
            self.message_model,
            self.consume_from_where,
            tuple(self.subscriptions.values()),
            ids,
            conns,
        )


class ConsumerManager:
    """Consumer channel table (authoritative in the client_manage actor)."""

    def __init__(self, channel_expired_ms: int = 120_000) -> None:
        self.channel_expired_ms = channel_expired_ms
        self.groups: dict[str, _Group] = {}

    def register(
        self,
        group: str,
        channel: ClientChannel,
        consume_type: str,
        message_model: str,
        consume_from_where: str,
        subscriptions: list[SubscriptionData],
    ) -> tuple[bool, bool]:
        """registerConsumer: returns (group state changed, consumers should be notified)."""
        g = self.groups.get(group)
        if g is None:
            g = _Group(group, consume_type, message_model, consume_from_where)
            self.groups[group] = g
        before = g.snapshot()
        g.consume_type, g.message_model, g.consume_from_where = (
            consume_type,
            message_model,
            consume_from_where,
        )
        old = g.channels.get(channel.conn_id)
        # another clientId on the channel: replaced, no notify; the client's own lost
        # channels: replaced by this one, no notify either (nobody joined or left)
        replaced = drop_lost(g.channels, channel.client_id)
        new_channel = old is None and not replaced
        g.channels[channel.conn_id] = channel
        # updateSubscription: replace on newer subVersion, drop topics no longer sent.
        topics_changed = False
        new_subs: dict[str, SubscriptionData] = {}
        for sub in subscriptions:
            prev = g.subscriptions.get(sub.topic)
            if prev is None:
                topics_changed = True
                new_subs[sub.topic] = sub
            elif sub.sub_version > prev.sub_version:
                new_subs[sub.topic] = sub
            else:
                new_subs[sub.topic] = prev
        if set(g.subscriptions) - set(new_subs):
            topics_changed = True
        g.subscriptions = new_subs
        changed = before != g.snapshot()
        return changed, new_channel or topics_changed

    def unregister(self, group: str, conn_id: int, client_id: str | None = None) -> bool:
        """unregisterConsumer: True when a channel was removed (the one of conn_id, and with
        `client_id` that client's lost channels: it says goodbye on a new connection)."""
        g = self.groups.get(group)
        if g is None:
            return False
        removed = g.channels.pop(conn_id, None) is not None
        if client_id is not None and drop_lost(g.channels, client_id):
            removed = True
        if not removed:
            return False
        if not g.channels:
            del self.groups[group]
            log.info("consumer group removed group=%s (no channels)", group)
        return True

    def on_connection_closed(self, conn_id: int) -> list[str]:
        """doChannelCloseEvent: the groups that lost a channel."""
        hit = [name for name, g in self.groups.items() if conn_id in g.channels]
        for name in hit:
            self.unregister(name, conn_id)
        return hit

    def on_connection_lost(self, conn_id: int) -> list[str]:
        """The connection died with its RemotingServer: its channels stay, marked lost (see
        the module docstring), and membership does not change. The groups whose snapshot
        changed: where the client had heartbeated on a new connection already, its channel
        of the dead connection is dropped instead."""
        changed = []
        for name, g in self.groups.items():
            ch = g.channels.get(conn_id)
            if ch is None:
                continue
            ch.lost = True
            if any(not c.lost and c.client_id == ch.client_id for c in g.channels.values()):
                del g.channels[conn_id]
                changed.append(name)
        return changed

    def scan_expired(self, now_ms: int) -> list[tuple[str, ClientChannel]]:
        """scanNotActiveChannel: remove channels silent past the expiry (lost ones too);
        (group, channel) list."""
        gone: list[tuple[str, ClientChannel]] = []
        for name, g in list(self.groups.items()):
            for conn_id, ch in list(g.channels.items()):
                if now_ms - ch.last_update_ms > self.channel_expired_ms:
                    log.warning("consumer channel expired group=%s client=%s conn=%d%s", name,
                                ch.client_id, conn_id, " (lost)" if ch.lost else "")  # fmt: skip
                    gone.append((name, ch))
        for name, ch in gone:
            self.unregister(name, ch.conn_id)
        return gone

    def info(self, group: str) -> ConsumerGroupInfo | None:
        """The group's snapshot (None when it has no channels)."""
        g = self.groups.get(group)
        return g.snapshot() if g is not None else None

    def channels(self, group: str) -> list[ClientChannel]:
        """The group's channels, lost ones included."""
        g = self.groups.get(group)
        return list(g.channels.values()) if g is not None else []

    def live_channels(self, group: str) -> list[ClientChannel]:
        """The group's channels that still have a connection (what notices can reach)."""
        return [ch for ch in self.channels(group) if not ch.lost]


def drop_lost(channels: dict[int, ClientChannel], client_id: str) -> bool:
    """Remove the lost channels of `client_id` from a conn_id -> channel table; True when
    there was one."""
    lost = [c for c, ch in channels.items() if ch.lost and ch.client_id == client_id]
    for conn_id in lost:
        del channels[conn_id]
    return bool(lost)
