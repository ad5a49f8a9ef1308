"""The broker state every processor actor replicates and the controller owns.

Mirrors the tables behind BrokerController.getTopicConfigManager(), getSubscriptionGroupManager(),
getConsumerOffsetManager() and getConsumerManager() (broker/BrokerController.java, RocketMQ
4.9.x). BrokerContext (a replica per processor actor) and BrokerControllerCore (the
authoritative copy) both apply events through BrokerState.apply_state. The consumer offsets are
one table every actor maps (the controller makes it; the snapshot names it), not a replica.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from actors.broker.config import BrokerConfig
from actors.broker.consumer_manager import ConsumerGroupInfo
from actors.broker.events import (
    BrokerConfigChanged,
    BrokerEvent,
    ConsumerGroupChanged,
    ConsumerGroupRemoved,
    HaMasterChanged,
    OffsetMoved,
    ProducerGroupChanged,
    SubscriptionGroupChanged,
    SubscriptionGroupDeleted,
    TableVersions,
    TopicConfigChanged,
    TopicsDeleted,
)
from actors.broker.offsets import ConsumerOffsetManager
from actors.broker.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from actors.broker.topic_config import TopicConfig, TopicConfigManager
from protocol.bodies import DataVersion
from store.config import StoreConfig

TOPICS_CHANGED: Final = 1  # apply_state bits: which persisted table changed
GROUPS_CHANGED: Final = 2
CONFIG_CHANGED: Final = 4


@dataclass(frozen=True, slots=True)
class BrokerSnapshot:
    """The controller's state sent to each processor actor at startup."""

    topics: tuple[TopicConfig, ...] = ()
    groups: tuple[SubscriptionGroupConfig, ...] = ()
    offset_table: str = ""  # the shared consumer offset table's file ("": none)
    consumer_groups: tuple[ConsumerGroupInfo, ...] = ()
    topic_version: tuple[int, int] = (0, 0)  # (counter, timestamp): the tables' DataVersion
    group_version: tuple[int, int] = (0, 0)
    # the producer groups' live connections (ProducerManager): a replaced actor that calls
    # producers (transaction check-backs, reply pushes) has them at once, not after a heartbeat
    producer_groups: tuple[tuple[str, tuple[int, ...]], ...] = ()
    producer_clients: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()


class BrokerState:
    """Topic configs, subscription groups, consumer offsets and registered consumer groups."""

    def __init__(self, broker_config: BrokerConfig, store_config: StoreConfig) -> None:
        self.broker_config = broker_config
        self.store_config = store_config
        self.topics = TopicConfigManager(broker_config)
        self.groups = SubscriptionGroupManager(broker_config)
        self.offsets = ConsumerOffsetManager()
        self.consumer_groups: dict[str, ConsumerGroupInfo] = {}
        self.producer_groups: dict[str, tuple[int, ...]] = {}  # group -> live conn ids
        # group -> (client id, conn id) of its live channels
        self.producer_clients: dict[str, tuple[tuple[str, int], ...]] = {}
        self._producer_channels: dict[str, list[int]] | None = {}  # None: to rebuild
        self.config_version = DataVersion()  # Configuration's data version: one per update
        # (counter, timestamp) of the topic and group tables: the controller bumps them once per
        # batch that changed a table and tells the replicas that answer with them (TableVersions)
        self.topic_version: tuple[int, int] = (0, 0)
        self.group_version: tuple[int, int] = (0, 0)

    def apply_state(self, ev: BrokerEvent) -> int | None:
        """Apply one event; TOPICS_CHANGED | GROUPS_CHANGED bits, None for an unknown event."""
        changed = 0
        if isinstance(ev, TopicConfigChanged):
            if self.topics.get(ev.config.topic_name) != ev.config:
                self.topics.put(ev.config)
                changed = TOPICS_CHANGED
        elif isinstance(ev, TopicsDeleted):
            for t in ev.topics:
                if self.topics.delete(t):
                    changed = TOPICS_CHANGED
        elif isinstance(ev, SubscriptionGroupChanged):
            if self.groups.get(ev.config.group_name) != ev.config:
                self.groups.put(ev.config)
                changed = GROUPS_CHANGED
        elif isinstance(ev, SubscriptionGroupDeleted):
            if self.groups.delete(ev.group):
                changed = GROUPS_CHANGED
        elif isinstance(ev, ConsumerGroupChanged):
            self.consumer_groups[ev.info.group] = ev.info
        elif isinstance(ev, ConsumerGroupRemoved):
            self.consumer_groups.pop(ev.group, None)
        elif isinstance(ev, BrokerConfigChanged):
            from actors.broker.config import apply_config_updates

            if apply_config_updates(self.broker_config, self.store_config, ev.updates):
                changed = CONFIG_CHANGED
            self.config_version.next_version(ev.at_ms)
        elif isinstance(ev, TableVersions):
            self.topic_version = ev.topics
            self.group_version = ev.groups
        elif isinstance(ev, ProducerGroupChanged):
            if ev.conn_ids:
                self.producer_groups[ev.group] = ev.conn_ids
                self.producer_clients[ev.group] = ev.clients
            else:
                self.producer_groups.pop(ev.group, None)
                self.producer_clients.pop(ev.group, None)
            self._producer_channels = None  # rebuilt when read (the send core only)
        elif not isinstance(ev, OffsetMoved | HaMasterChanged):
            # (no table for those: the send core acts)
            return None
        return changed

    @property
    def producer_channels(self) -> dict[str, list[int]]:
        """Client id -> its live conn ids over every group (ProducerManager's
        clientChannelTable), rebuilt from producer_clients after a membership change."""
        channels = self._producer_channels
        if channels is None:
            channels = {}
            for clients in self.producer_clients.values():
                for client_id, conn_id in clients:
                    conns = channels.setdefault(client_id, [])
                    if conn_id not in conns:
                        conns.append(conn_id)
            self._producer_channels = channels
        return channels

    def snapshot(self) -> BrokerSnapshot:
        """The state as a snapshot (the controller sends it to every processor actor)."""
        return BrokerSnapshot(
            topics=tuple(self.topics.table.values()),
            groups=tuple(self.groups.table.values()),
            offset_table=self.offsets.shared_path,
            consumer_groups=tuple(self.consumer_groups.values()),
            topic_version=self.topic_version,
            group_version=self.group_version,
            producer_groups=tuple(self.producer_groups.items()),
            producer_clients=tuple(self.producer_clients.items()),
        )

    def load_snapshot(self, snapshot: BrokerSnapshot) -> None:
        """Take over a snapshot's tables (built-in topics and groups stay)."""
        for t in snapshot.topics:
            self.topics.put(t)
        for g in snapshot.groups:
            self.groups.put(g)
        if snapshot.offset_table:
            self.offsets.attach(snapshot.offset_table)
        self.consumer_groups = {c.group: c for c in snapshot.consumer_groups}
        self.topic_version = snapshot.topic_version
        self.group_version = snapshot.group_version
        self.producer_groups = dict(snapshot.producer_groups)
        self.producer_clients = dict(snapshot.producer_clients)
        self._producer_channels = None
