"""Consumer groups registered by heartbeats: channels, client ids and subscriptions.

Mirrors broker/client/ConsumerManager.java + ConsumerGroupInfo.java, RocketMQ 4.9.x
(subscriptions are protocol.bodies.SubscriptionData, as heartbeats carry them). Channels are
keyed by the RemotingServer's conn_id. The client_manage actor owns the channels; other actors hold
ConsumerGroupInfo snapshots replicated through events.
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
        new_channel = old is None  # another clientId on the channel: replaced, no notify
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

    def unregister(self, group: str, conn_id: int) -> bool:
        """unregisterConsumer: True when the channel was removed."""
        g = self.groups.get(group)
        if g is None or g.channels.pop(conn_id, None) is None:
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

    def scan_expired(self, now_ms: int) -> list[tuple[str, int]]:
        """scanNotActiveChannel: remove channels silent past the expiry; (group, conn_id) list."""
        gone: list[tuple[str, int]] = []
        for name, g in list(self.groups.items()):
            for conn_id, ch in list(g.channels.items()):
                if now_ms - ch.last_update_ms > self.channel_expired_ms:
                    log.warning(
                        "consumer channel expired group=%s client=%s conn=%d",
                        name,
                        ch.client_id,
                        conn_id,
                    )
                    gone.append((name, conn_id))
        for name, conn_id in gone:
            self.unregister(name, conn_id)
        return gone

    def info(self, group: str) -> ConsumerGroupInfo | None:
        """The group's snapshot (None when it has no channels)."""
        g = self.groups.get(group)
        return g.snapshot() if g is not None else None

    def channels(self, group: str) -> list[ClientChannel]:
        """The group's live channels."""
        g = self.groups.get(group)
        return list(g.channels.values()) if g is not None else []
