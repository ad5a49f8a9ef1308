"""Producer channels registered by heartbeats (used for transaction check-backs).

Mirrors broker/client/ProducerManager.java, RocketMQ 4.9.x. Channels are keyed by conn_id.
"""

from __future__ import annotations

import logging

from actors.broker.consumer_manager import ClientChannel

log = logging.getLogger(__name__)


class ProducerManager:
    """Producer group -> conn_id -> channel."""

    def __init__(self, channel_expired_ms: int = 120_000) -> None:
        self.channel_expired_ms = channel_expired_ms
        self.groups: dict[str, dict[int, ClientChannel]] = {}

    def register(self, group: str, channel: ClientChannel) -> bool:
        """registerProducer: True when the channel is new to the group."""
        chans = self.groups.setdefault(group, {})
        new = channel.conn_id not in chans
        chans[channel.conn_id] = channel
        return new

    def unregister(self, group: str, conn_id: int) -> bool:
        """unregisterProducer: True when removed."""
        chans = self.groups.get(group)
        if chans is None or chans.pop(conn_id, None) is None:
            return False
        if not chans:
            del self.groups[group]
        return True

    def on_connection_closed(self, conn_id: int) -> list[str]:
        """Remove the connection from every group; the groups touched."""
        hit = [g for g, chans in self.groups.items() if conn_id in chans]
        for g in hit:
            self.unregister(g, conn_id)
        return hit

    def scan_expired(self, now_ms: int) -> list[tuple[str, int]]:
        """scanNotActiveChannel: drop channels silent past the expiry."""
        gone = [
            (g, conn_id)
            for g, chans in self.groups.items()
            for conn_id, ch in chans.items()
            if now_ms - ch.last_update_ms > self.channel_expired_ms
        ]
        for g, conn_id in gone:
            log.warning("producer channel expired group=%s conn=%d", g, conn_id)
            self.unregister(g, conn_id)
        return gone
