"""Producer channels registered by heartbeats (used for transaction check-backs).

Mirrors broker/client/ProducerManager.java, RocketMQ 4.9.x. Channels are keyed by conn_id.
A connection that died with its RemotingServer leaves its channel, marked lost, as
actors.broker.consumer_manager explains: the client's next heartbeat replaces it, its
UNREGISTER_CLIENT drops it, else it expires. Check-backs and reply messages go to live
channels only (live_groups).
"""

from __future__ import annotations

import logging

from actors.broker.consumer_manager import ClientChannel, drop_lost

log = logging.getLogger(__name__)


class ProducerManager:
    """Producer group -> conn_id -> channel."""

    def __init__(self, channel_expired_ms: int = 120_000) -> None:
        self.channel_expired_ms = channel_expired_ms
        self.groups: dict[str, dict[int, ClientChannel]] = {}

    def register(self, group: str, channel: ClientChannel) -> bool:
        """registerProducer: True when the channel is new to the group (replacing the
        client's lost channels, if any)."""
        chans = self.groups.setdefault(group, {})
        new = channel.conn_id not in chans
        drop_lost(chans, channel.client_id)
        chans[channel.conn_id] = channel
        return new

    def unregister(self, group: str, conn_id: int, client_id: str | None = None) -> bool:
        """unregisterProducer: True when removed (with `client_id`, its lost channels too)."""
        chans = self.groups.get(group)
        if chans is None:
            return False
        removed = chans.pop(conn_id, None) is not None
        if client_id is not None and drop_lost(chans, client_id):
            removed = True
        if not removed:
            return False
        if not chans:
            del self.groups[group]
        return True

    def live(self, group: str) -> dict[int, ClientChannel]:
        """The group's channels that still have a connection, by conn_id."""
        return {c: ch for c, ch in self.groups.get(group, {}).items() if not ch.lost}

    def on_connection_closed(self, conn_id: int) -> list[str]:
        """Remove the connection from every group; the groups touched."""
        hit = [g for g, chans in self.groups.items() if conn_id in chans]
        for g in hit:
            self.unregister(g, conn_id)
        return hit

    def on_connection_lost(self, conn_id: int) -> list[str]:
        """The connection died with its RemotingServer: its channels stay, marked lost (or go,
        where the client has a live one already); the groups where it had one."""
        hit = []
        for g, chans in self.groups.items():
            ch = chans.get(conn_id)
            if ch is None:
                continue
            ch.lost = True
            hit.append(g)
            if any(not c.lost and c.client_id == ch.client_id for c in chans.values()):
                del chans[conn_id]  # it heartbeated on a new connection already
        return hit

    def scan_expired(self, now_ms: int) -> list[tuple[str, ClientChannel]]:
        """scanNotActiveChannel: drop channels silent past the expiry (lost ones too)."""
        gone = [
            (g, ch)
            for g, chans in self.groups.items()
            for ch in chans.values()
            if now_ms - ch.last_update_ms > self.channel_expired_ms
        ]
        for g, ch in gone:
            log.warning("producer channel expired group=%s conn=%d%s", g, ch.conn_id,
                        " (lost)" if ch.lost else "")  # fmt: skip
            self.unregister(g, ch.conn_id)
        return gone
