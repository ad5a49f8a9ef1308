"""The console's consumer groups: the list with each group's lag, one group's queues,
connections and running info, reset by time, skipping the backlog and deleting a group.

Mirrors apache/rocketmq-dashboard's ConsumerServiceImpl. The list asks every master for its
subscription groups, then each group's consume stats and connections, a few groups at a time
(the console keeps its connections open, so a page of 200 groups is hundreds of short requests,
not hundreds of connections).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from actors.client.validators import MessageValidationError, check_group
from deploy.admin_consumer import ResetQueue, reset_offset_by_time
from deploy.admin_ext import (
    AdminError,
    as_text,
    call,
    cluster_info,
    cluster_masters,
    json_object,
    offset_table,
)
from deploy.console.topic_service import ConsoleInputError
from protocol.codes import RETRY_GROUP_TOPIC_PREFIX
from protocol.codes import RequestCode as RC

PARALLEL = 8  # groups asked at once

__all__ = ["ConsoleInputError", "ResetQueue", "reset_offset_by_time"]


@dataclass(frozen=True)
class GroupQueue:
    topic: str
    broker: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    last_timestamp: int  # store time of the last consumed message (0: none)

    @property
    def lag(self) -> int:
        return self.broker_offset - self.consumer_offset


@dataclass
class GroupRow:
    group: str
    clients: int = 0
    consume_type: str = ""
    message_model: str = ""
    tps: float = 0.0
    lag: int = 0
    topics: list[str] = field(default_factory=list)
    error: str = ""


def checked_group(group: str) -> str:
    try:
        check_group(group)
    except MessageValidationError as exc:
        raise ConsoleInputError(exc.message) from None
    return group


def _masters(namesrv: str) -> list[tuple[str, str]]:
    return cluster_masters(cluster_info(namesrv), None)


def group_names(masters: list[tuple[str, str]]) -> list[str]:
    groups: set[str] = set()
    for _name, addr in masters:
        table = json_object(call(addr, RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).get(
            "subscriptionGroupTable", {})
        groups.update(str(g) for g in (table if isinstance(table, dict) else {}))
    return sorted(groups)


def consume_stats(masters: list[tuple[str, str]], group: str) -> tuple[list[GroupQueue], float]:
    """Every queue the group has an offset on, from every master, and its consume TPS."""
    queues: list[GroupQueue] = []
    tps = 0.0
    for broker, addr in masters:
        resp = call(addr, RC.GET_CONSUME_STATS, {"consumerGroup": group}, ok=(0, 17, 206))
        if resp.code != 0:
            continue
        try:
            tps += float(json_object(resp).get("consumeTps", 0) or 0)
        except (TypeError, ValueError):
            pass
        for mq, off in offset_table(resp):
            queues.append(GroupQueue(str(mq.get("topic", "")), str(mq.get("brokerName", broker)),
                                     int(mq.get("queueId", 0)), int(off.get("brokerOffset", 0)),
                                     int(off.get("consumerOffset", 0)),
                                     int(off.get("lastTimestamp", 0))))  # fmt: skip
    queues.sort(key=lambda q: (q.topic, q.broker, q.queue_id))
    return queues, tps


def connection_list(masters: list[tuple[str, str]], group: str) -> dict[str, Any]:
    """The group's ConsumerConnection body from the first master that knows it ({} if none)."""
    for _broker, addr in masters:
        resp = call(addr, RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group},
                    ok=(0, 206))  # fmt: skip
        if resp.code == 0:
            return json_object(resp)
    return {}


def _row(masters: list[tuple[str, str]], group: str) -> GroupRow:
    row = GroupRow(group)
    try:
        queues, row.tps = consume_stats(masters, group)
        conn = connection_list(masters, group)
    except AdminError as exc:
        row.error = str(exc)
        return row
    row.lag = sum(q.lag for q in queues)
    row.topics = sorted({q.topic for q in queues})
    row.clients = len(conn.get("connectionSet", []) or [])
    row.consume_type = str(conn.get("consumeType") or "")
    row.message_model = str(conn.get("messageModel") or "")
    return row


def group_rows(namesrv: str) -> list[GroupRow]:
    """One row per subscription group of any master: clients, TPS, lag and topics."""
    masters = _masters(namesrv)
    names = group_names(masters)
    with ThreadPoolExecutor(PARALLEL, thread_name_prefix="console-groups") as pool:
        return list(pool.map(lambda g: _row(masters, g), names))


@dataclass(frozen=True)
class Connection:
    client_id: str
    client_addr: str
    language: str
    version: int


@dataclass(frozen=True)
class GroupDetail:
    group: str
    queues: list[GroupQueue]
    tps: float
    connections: list[Connection]
    subscriptions: list[tuple[str, str]]  # topic, expression
    consume_type: str
    message_model: str

    @property
    def lag(self) -> int:
        return sum(q.lag for q in self.queues)

    @property
    def topics(self) -> list[str]:
        """The topics it has offsets on, its retry topic last."""
        return sorted({q.topic for q in self.queues},
                      key=lambda t: (t.startswith(RETRY_GROUP_TOPIC_PREFIX), t))

    def lag_by_topic(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for q in self.queues:
            out[q.topic] = out.get(q.topic, 0) + q.lag
        return out


def group_detail(namesrv: str, group: str) -> GroupDetail:
    checked_group(group)
    masters = _masters(namesrv)
    queues, tps = consume_stats(masters, group)
    conn = connection_list(masters, group)
    conns = sorted((Connection(str(c.get("clientId", "")), str(c.get("clientAddr", "")),
                               str(c.get("language", "")), int(c.get("version", 0)))
                    for c in conn.get("connectionSet", []) or []),
                   key=lambda c: c.client_id)  # fmt: skip
    table = conn.get("subscriptionTable", {}) or {}
    subs = sorted((str(t), str((s or {}).get("subString", "*")))
                  for t, s in (table.items() if isinstance(table, dict) else ()))  # fmt: skip
    return GroupDetail(group, queues, tps, conns, subs, str(conn.get("consumeType") or ""),
                       str(conn.get("messageModel") or ""))  # fmt: skip


def running_info(namesrv: str, group: str, client_id: str) -> str:
    """consumerStatus: the client's own running info (JSON text), relayed by a master."""
    checked_group(group)
    for _broker, addr in _masters(namesrv):
        resp = call(addr, RC.GET_CONSUMER_RUNNING_INFO, {
            "consumerGroup": group, "clientId": client_id, "jstackEnable": "false"},
            ok=(0, 206))  # fmt: skip
        if resp.code == 0:
            return as_text(resp.body)
    raise AdminError(f"client {client_id} of group {group} is not connected to any master")


def subscribed_topics(namesrv: str, group: str) -> list[str]:
    """The topics a group consumes: what it has offsets on, without its retry topic."""
    queues, _tps = consume_stats(_masters(namesrv), group)
    return sorted({q.topic for q in queues if not q.topic.startswith(RETRY_GROUP_TOPIC_PREFIX)})


def skip_backlog(namesrv: str, group: str) -> list[ResetQueue]:
    """The dashboard's skipAccumulate: every topic of the group reset to its max offset."""
    checked_group(group)
    topics = subscribed_topics(namesrv, group)
    if not topics:
        raise ConsoleInputError(f"group {group} has no offset on any topic: nothing to skip")
    rows = []
    for topic in topics:
        rows += reset_offset_by_time(namesrv, topic, group, -1, True)
    return rows


def delete_group(namesrv: str, group: str) -> list[str]:
    """deleteSubGroup on every master (offsets kept, as mqadmin without -r)."""
    checked_group(group)
    masters = _masters(namesrv)
    for _broker, addr in masters:
        call(addr, RC.DELETE_SUBSCRIPTIONGROUP, {"groupName": group})
    return [name for name, _addr in masters]
