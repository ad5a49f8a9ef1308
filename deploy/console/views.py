"""What the console's pages show, fetched through the admin codes (no Flask here).

Mirrors the data side of apache/rocketmq-dashboard's TopicController, ConsumerController and
MessageTraceController: the topic list with each topic's queues and offsets, the consumer
groups with their lag per topic, and one message's trace records.
"""

from __future__ import annotations

from dataclasses import dataclass

from deploy.admin_ext import (
    AdminError,
    call,
    cluster_info,
    cluster_masters,
    json_object,
    offset_table,
    route_masters,
    topic_route,
)
from deploy.admin_trace import trace_views
from protocol.bodies import loads_lenient
from protocol.codes import RequestCode as RC
from protocol.codes import is_system_topic
from protocol.trace import TRACE_TOPIC, TraceView


@dataclass(frozen=True)
class TopicRow:
    name: str
    system: bool
    brokers: int
    queues: int
    messages: int  # the sum of max offsets: what was ever written to it


@dataclass(frozen=True)
class GroupRow:
    group: str
    topic: str
    lag: int
    consumer_offset: int
    broker_offset: int


def topic_rows(namesrv: str) -> list[TopicRow]:
    """Every topic of the name server with its route's size and written total."""
    body = loads_lenient(bytes(call(namesrv, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body or b""))
    names = sorted(str(t) for t in (body.get("topicList", []) if isinstance(body, dict) else []))
    rows = []
    for name in names:
        try:
            route = topic_route(namesrv, name)
        except AdminError:
            rows.append(TopicRow(name, is_system_topic(name), 0, 0, 0))
            continue
        masters = route_masters(route)
        total = 0
        for addr in masters.values():
            stats = call(addr, RC.GET_TOPIC_STATS_INFO, {"topic": name}, ok=(0, 17))
            if stats.code == 0:
                total += sum(int(o.get("maxOffset", 0)) for _mq, o in offset_table(stats))
        queues = sum(q.write_queue_nums for q in route.queue_datas)
        rows.append(TopicRow(name, is_system_topic(name), len(masters), queues, total))
    return rows


def group_rows(namesrv: str) -> list[GroupRow]:
    """Every subscription group known to the masters, per topic it has offsets for."""
    masters = cluster_masters(cluster_info(namesrv), None)
    groups: set[str] = set()
    for _name, addr in masters:
        body = json_object(call(addr, RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        table = body.get("subscriptionGroupTable", {})
        groups.update(str(g) for g in (table if isinstance(table, dict) else {}))
    rows = []
    for group in sorted(groups):
        per_topic: dict[str, tuple[int, int]] = {}
        for _name, addr in masters:
            resp = call(addr, RC.GET_CONSUME_STATS, {"consumerGroup": group}, ok=(0, 17, 206))
            if resp.code != 0:
                continue
            for mq, off in offset_table(resp):
                b, c = per_topic.get(str(mq.get("topic", "")), (0, 0))
                per_topic[str(mq.get("topic", ""))] = (b + int(off.get("brokerOffset", 0)),
                                                       c + int(off.get("consumerOffset", 0)))
        for topic, (b, c) in sorted(per_topic.items()):
            rows.append(GroupRow(group, topic, b - c, c, b))
    return rows


@dataclass(frozen=True)
class QueueRow:
    broker: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update: int  # ms since the epoch (0: never written)


@dataclass(frozen=True)
class TopicDetail:
    name: str
    brokers: list[tuple[str, str, int, int, int]]  # name, master address, read, write, perm
    queues: list[QueueRow]
    groups: list[str]


def topic_detail(namesrv: str, topic: str) -> TopicDetail:
    """A topic's route, each queue's offsets and the groups that consume it."""
    route = topic_route(namesrv, topic)
    masters = route_masters(route)
    brokers = [(q.broker_name, masters.get(q.broker_name, ""), q.read_queue_nums,
                q.write_queue_nums, q.perm) for q in sorted(route.queue_datas,
                                                            key=lambda q: q.broker_name)]
    queues: list[QueueRow] = []
    groups: set[str] = set()
    for broker, addr in sorted(masters.items()):
        stats = call(addr, RC.GET_TOPIC_STATS_INFO, {"topic": topic}, ok=(0, 17))
        for mq, o in offset_table(stats) if stats.code == 0 else []:
            queues.append(QueueRow(broker, int(mq.get("queueId", 0)), int(o.get("minOffset", 0)),
                                   int(o.get("maxOffset", 0)),
                                   int(o.get("lastUpdateTimestamp", 0))))  # fmt: skip
        who = call(addr, RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic}, ok=(0, 1, 17))
        if who.code == 0:
            groups.update(str(g) for g in json_object(who).get("groupList", []))
    queues.sort(key=lambda q: (q.broker, q.queue_id))
    return TopicDetail(topic, brokers, queues, sorted(groups))


@dataclass(frozen=True)
class ProducerRow:
    broker: str
    client_id: str
    client_addr: str
    language: str
    version: int


def producer_rows(namesrv: str, topic: str, group: str) -> list[ProducerRow]:
    """A producer group's connections on each master of a topic (mqadmin producerConnection)."""
    rows = []
    for broker, addr in sorted(route_masters(topic_route(namesrv, topic)).items()):
        resp = call(addr, RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group}, ok=(0, 1))
        if resp.code != 0:
            continue
        for c in json_object(resp).get("connectionSet", []):
            rows.append(ProducerRow(broker, str(c.get("clientId", "")),
                                    str(c.get("clientAddr", "")), str(c.get("language", "")),
                                    int(c.get("version", 0))))  # fmt: skip
    return sorted(rows, key=lambda r: (r.broker, r.client_id))


def message_trace(namesrv: str, msg_id: str, trace_topic: str = TRACE_TOPIC) -> list[TraceView]:
    """One message's trace records, oldest first."""
    return trace_views(namesrv, msg_id, trace_topic)
