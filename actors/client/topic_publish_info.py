"""A topic's writable queues as a producer sees them, with its round-robin index.

Mirrors client/impl/producer/TopicPublishInfo.java and MQClientInstance.
topicRouteData2TopicPublishInfo, RocketMQ 4.9.x: queues of writable queue datas whose broker
has a master, brokers in name order (or the order topic's "broker:num;..." configuration).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from actors.client.records import MessageQueue
from protocol.bodies import TopicRouteData
from protocol.codes import MASTER_ID, PermName


@dataclass(slots=True)
class TopicPublishInfo:
    """The queues a producer may send a topic's messages to."""

    topic: str
    message_queue_list: list[MessageQueue] = field(default_factory=list)
    route: TopicRouteData | None = None
    order_topic: bool = False
    _index: itertools.count = field(  # type: ignore[type-arg]
        default_factory=lambda: itertools.count(random.randrange(1 << 16)))

    def ok(self) -> bool:
        """True when there is at least one queue."""
        return bool(self.message_queue_list)

    def next_index(self) -> int:
        """The shared round-robin counter (ThreadLocalIndex: a random start)."""
        return next(self._index) & 0x7FFFFFFF

    def select_one_message_queue(self, last_broker_name: str | None = None) -> MessageQueue:
        """Round robin, avoiding last_broker_name when another broker has a queue."""
        mqs = self.message_queue_list
        n = len(mqs)
        if last_broker_name is not None:
            for _ in range(n):
                mq = mqs[self.next_index() % n]
                if mq.broker_name != last_broker_name:
                    return mq
        return mqs[self.next_index() % n]

    def write_queue_nums(self, broker_name: str) -> int:
        """The writable queue count of broker_name (-1 when it has none)."""
        if self.route is not None:
            for qd in self.route.queue_datas:
                if qd.broker_name == broker_name and PermName.is_writeable(qd.perm):
                    return qd.write_queue_nums
        return -1

    @classmethod
    def from_route(cls, topic: str, route: TopicRouteData) -> TopicPublishInfo:
        """topicRouteData2TopicPublishInfo."""
        info = cls(topic, route=route)
        if route.order_topic_conf:
            for part in route.order_topic_conf.split(";"):
                name, _, num = part.partition(":")
                if name and num.isdigit():
                    info.message_queue_list += [MessageQueue(topic, name, i)
                                                for i in range(int(num))]
            info.order_topic = True
            return info
        masters = {b.broker_name for b in route.broker_datas if MASTER_ID in b.broker_addrs}
        for qd in sorted(route.queue_datas, key=lambda q: q.broker_name):
            if PermName.is_writeable(qd.perm) and qd.broker_name in masters:
                info.message_queue_list += [MessageQueue(topic, qd.broker_name, i)
                                            for i in range(qd.write_queue_nums)]
        return info
