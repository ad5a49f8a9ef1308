"""MQClientInstance's state: routes, broker addresses, the groups to heartbeat. Pure.

Mirrors client/impl/factory/MQClientInstance.java, RocketMQ 4.9.x: topicRouteTable,
brokerAddrTable, brokerVersionTable, the producer and consumer tables, prepareHeartbeatData,
topicRouteDataIsChange, cleanOfflineBroker, findBrokerAddressInPublish / InSubscribe /
findBrokerAddrByTopic, topicRouteData2TopicSubscribeInfo. No sockets, no timers, no clock:
the actor (mq_client_instance_actor.py) drives it and does the I/O.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from typing import Any

from actors.client.records import MessageQueue
from actors.client.topic_publish_info import TopicPublishInfo
from protocol.bodies import (
    BrokerData,
    ConsumerData,
    HeartbeatData,
    ProducerData,
    QueueData,
    TopicRouteData,
)
from protocol.codes import AUTO_CREATE_TOPIC_KEY_TOPIC, MASTER_ID, PermName

log = logging.getLogger(__name__)

DEFAULT_TOPIC_QUEUE_NUMS = 4  # DefaultMQProducer.defaultTopicQueueNums
REFUSAL_HEARTBEAT_MIN_S = 1.0  # a broker refusing pulls is sent a heartbeat at most this often


@dataclass(frozen=True, slots=True)
class FindBrokerResult:
    """A broker address found for a broker name (FindBrokerResult)."""

    broker_addr: str
    slave: bool
    broker_version: int = 0


def _route_key(route: TopicRouteData | None) -> Any:
    """What topicRouteDataIsChange compares (order-insensitive)."""
    if route is None:
        return None
    return (
        sorted((q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag)
               for q in route.queue_datas),
        sorted((b.broker_name, b.cluster, tuple(sorted(b.broker_addrs.items())))
               for b in route.broker_datas),
        route.order_topic_conf,
    )


def default_route_for(topic_route: TopicRouteData) -> TopicRouteData:
    """The TBW102 route as a new topic's (queue nums capped at defaultTopicQueueNums), as
    updateTopicRouteInfoFromNameServer(topic, isDefault=true) builds it."""
    qds = []
    for q in topic_route.queue_datas:
        n = min(DEFAULT_TOPIC_QUEUE_NUMS, q.read_queue_nums)
        qds.append(QueueData(q.broker_name, n, n, q.perm, q.topic_sys_flag))
    return TopicRouteData(qds, [BrokerData(b.cluster, b.broker_name, dict(b.broker_addrs))
                                for b in topic_route.broker_datas])


class TopicRouteTable:
    """Routes by topic and broker addresses by broker name (a consumer actor keeps a copy)."""

    def __init__(self) -> None:
        self.routes: dict[str, TopicRouteData] = {}
        self.broker_addr_table: dict[str, dict[int, str]] = {}
        self.broker_version_table: dict[str, dict[str, int]] = {}

    def update(self, topic: str, route: TopicRouteData | None) -> bool:
        """Store a topic's route (None: the topic is gone); True when it changed."""
        old = self.routes.get(topic)
        changed = _route_key(old) != _route_key(route)
        if route is None:
            self.routes.pop(topic, None)
            return changed
        self.routes[topic] = route
        for bd in route.broker_datas:
            self.broker_addr_table.setdefault(bd.broker_name, {}).update(bd.broker_addrs)
        return changed

    def route(self, topic: str) -> TopicRouteData | None:
        """A topic's route."""
        return self.routes.get(topic)

    def publish_info(self, topic: str) -> TopicPublishInfo | None:
        """The topic's writable queues (None without a route)."""
        route = self.routes.get(topic)
        return TopicPublishInfo.from_route(topic, route) if route is not None else None

    def subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues (topicRouteData2TopicSubscribeInfo)."""
        route = self.routes.get(topic)
        if route is None:
            return []
        out = []
        for qd in route.queue_datas:
            if PermName.is_readable(qd.perm):
                out += [MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums)]
        return out

    def find_broker_address_in_publish(self, broker_name: str) -> str | None:
        """The master's address."""
        return self.broker_addr_table.get(broker_name, {}).get(MASTER_ID)

    def find_broker_address_in_subscribe(self, broker_name: str, broker_id: int,
                                         only_this_broker: bool) -> FindBrokerResult | None:
        """The id asked for, else id+1 for a slave, else any address (unless only_this)."""
        addrs = self.broker_addr_table.get(broker_name)
        if not addrs:
            return None
        addr = addrs.get(broker_id)
        slave = broker_id != MASTER_ID
        if addr is None and slave:
            addr = addrs.get(broker_id + 1)
        if addr is None and not only_this_broker:
            some_id, addr = next(iter(addrs.items()))
            slave = some_id != MASTER_ID
        if addr is None:
            return None
        version = self.broker_version_table.get(broker_name, {}).get(addr, 0)
        return FindBrokerResult(addr, slave, version)

    def find_broker_addr_by_topic(self, topic: str) -> str | None:
        """Any broker of the topic: a random broker's master, else one of its addresses."""
        route = self.routes.get(topic)
        if route is None or not route.broker_datas:
            return None
        bd = random.choice(route.broker_datas)
        addr = bd.broker_addrs.get(MASTER_ID)
        if addr is None and bd.broker_addrs:
            addr = random.choice(list(bd.broker_addrs.values()))
        return addr

    def broker_addrs(self) -> set[str]:
        """Every known broker address."""
        return {a for m in self.broker_addr_table.values() for a in m.values()}

    def master_addrs(self) -> set[str]:
        """Every known master address."""
        return {m[MASTER_ID] for m in self.broker_addr_table.values() if MASTER_ID in m}

    def clean_offline_brokers(self) -> list[str]:
        """Drop addresses no route names any more (cleanOfflineBroker); the ones dropped."""
        live: dict[str, set[str]] = {}
        for route in self.routes.values():
            for bd in route.broker_datas:
                live.setdefault(bd.broker_name, set()).update(bd.broker_addrs.values())
        dropped = []
        for name in list(self.broker_addr_table):
            addrs = self.broker_addr_table[name]
            for bid, addr in list(addrs.items()):
                if addr not in live.get(name, ()):
                    del addrs[bid]
                    dropped.append(addr)
            if not addrs:
                del self.broker_addr_table[name]
                self.broker_version_table.pop(name, None)
        return dropped


@dataclass(slots=True)
class ConsumerEntry:
    """A registered consumer: its heartbeat data and who serves it (an actor or the user)."""

    data: ConsumerData
    owner: Any = None  # a Thespian address, or None for the user's process


@dataclass
class MQClientInstance:
    """The instance's tables; the actor asks it what to do and feeds it the answers."""

    client_id: str
    table: TopicRouteTable = field(default_factory=TopicRouteTable)
    producers: set[str] = field(default_factory=set)
    consumers: dict[str, ConsumerEntry] = field(default_factory=dict)
    producer_topics: set[str] = field(default_factory=set)

    # -- registration -------------------------------------------------------------------------
    def register_producer(self, group: str) -> bool:
        """Add a producer group; False when it is registered already."""
        if group in self.producers:
            return False
        self.producers.add(group)
        return True

    def unregister_producer(self, group: str) -> None:
        """Remove a producer group (heartbeats stop carrying it)."""
        self.producers.discard(group)

    def register_consumer(self, data: ConsumerData, owner: Any = None) -> bool:
        """Add a consumer group; False when it is registered already."""
        if data.group_name in self.consumers:
            return False
        self.consumers[data.group_name] = ConsumerEntry(data, owner)
        return True

    def update_consumer(self, data: ConsumerData) -> bool:
        """Replace a registered consumer's data; False when it is not registered."""
        entry = self.consumers.get(data.group_name)
        if entry is None:
            return False
        entry.data = data
        return True

    def unregister_consumer(self, group: str) -> ConsumerEntry | None:
        """Remove a consumer group; its entry."""
        return self.consumers.pop(group, None)

    # -- topics and routes --------------------------------------------------------------------
    def topics_in_use(self) -> set[str]:
        """Producer topics and every topic a consumer subscribes (retry topics included)."""
        topics = set(self.producer_topics)
        for entry in self.consumers.values():
            topics.update(s.topic for s in entry.data.subscription_data_set)
        return topics

    def consumers_of(self, topic: str) -> list[ConsumerEntry]:
        """Consumers subscribed to topic."""
        return [e for e in self.consumers.values()
                if any(s.topic == topic for s in e.data.subscription_data_set)]

    def on_route(self, topic: str, route: TopicRouteData | None) -> tuple[bool, set[str]]:
        """Store a fetched route: (changed, broker addresses not known before)."""
        before = self.table.broker_addrs()
        changed = self.table.update(topic, route)
        return changed, self.table.broker_addrs() - before

    # -- heartbeats ---------------------------------------------------------------------------
    def heartbeat_data(self) -> HeartbeatData:
        """prepareHeartbeatData."""
        return HeartbeatData(
            self.client_id,
            [ProducerData(g) for g in sorted(self.producers)],
            [e.data for _, e in sorted(self.consumers.items())],
        )

    def heartbeat_targets(self) -> list[str]:
        """Masters only without consumers, every address with them (sendHeartbeatToAllBroker);
        nothing when no group is registered."""
        if not self.consumers and not self.producers:
            return []
        addrs = self.table.broker_addrs() if self.consumers else self.table.master_addrs()
        return sorted(addrs)


class RefusalHeartbeats:
    """Which pulls refused "the consumer's group info not exist" send their broker a heartbeat
    at once (it lost this client's registration: it restarted, or its connection to us closed):
    one per broker every REFUSAL_HEARTBEAT_MIN_S at most, so a burst of refusals (one per
    queue) sends one. Ours: a Java 4.9.x consumer waits for its 30 s heartbeat timer."""

    def __init__(self, min_interval_s: float = REFUSAL_HEARTBEAT_MIN_S) -> None:
        self.min_interval_s = min_interval_s
        self.last: dict[str, float] = {}  # broker address -> when one was last asked for

    def due(self, addr: str, now: float) -> bool:
        """Whether a refusal from `addr` at `now` (monotonic seconds) asks for a heartbeat."""
        last = self.last.get(addr)
        if last is not None and now - last < self.min_interval_s:
            return False
        self.last[addr] = now
        return True


__all__ = ["AUTO_CREATE_TOPIC_KEY_TOPIC", "ConsumerEntry", "FindBrokerResult", "MQClientInstance",
           "RefusalHeartbeats", "TopicRouteTable", "default_route_for"]
