"""The console's consumer groups: the list with each group's lag, one group's queues,
connections and running info, reset by time, skipping the backlog and deleting a group.

Mirrors apache/rocketmq-dashboard's ConsumerServiceImpl. The list asks every master for its
subscription groups, then every group's consume stats and connections in two pipelined batches
per master: a page of 200 groups is two writes to each broker, not 400 round trips.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from deploy.admin_consumer import ResetQueue, reset_offset_by_time
from deploy.admin_ext import (
    AdminError,
    as_text,
    call,
    cluster_info,
    cluster_masters,
    invoke_all,
    json_object,
    offset_table,
)
from deploy.console.topic_service import ConsoleInputError
from protocol.codes import RETRY_GROUP_TOPIC_PREFIX
from protocol.codes import RequestCode as RC
from protocol.command import RemotingCommand

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
    """A group name as a form or a URL gives it: not blank, at most 255 characters, no
    control character. Looser than the client's rule on purpose: a group a broker created
    with another name (a heartbeat, UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) is still managed."""
    if not group.strip() or len(group) > 255 or any(ord(c) < 32 for c in group):
        raise ConsoleInputError(f"{group!r} is not a consumer group name")
    return group


def _masters(namesrv: str) -> list[tuple[str, str]]:
    return cluster_masters(cluster_info(namesrv), None)


def group_names(masters: list[tuple[str, str]], failed: list[str] | None = None) -> list[str]:
    """Every subscription group of the masters; a master that does not answer is left out
    (and named in `failed` when given)."""
    groups: set[str] = set()
    for name, addr in masters:
        try:
            table = json_object(call(addr, RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).get(
                "subscriptionGroupTable", {})
        except (AdminError, ValueError) as exc:
            if failed is None:
                raise
            failed.append(f"{name}: {exc}")
            continue
        groups.update(str(g) for g in (table if isinstance(table, dict) else {}))
    return sorted(groups)


def _stats_of(resp: RemotingCommand, broker: str) -> tuple[list[GroupQueue], float]:
    """A GET_CONSUME_STATS answer's queues and TPS (none when the broker knows no such
    group)."""
    if resp.code != 0:
        return [], 0.0
    try:
        tps = float(json_object(resp).get("consumeTps", 0) or 0)
    except (TypeError, ValueError):
        tps = 0.0
    queues = [GroupQueue(str(mq.get("topic", "")), str(mq.get("brokerName", broker)),
                         int(mq.get("queueId", 0)), int(off.get("brokerOffset", 0)),
                         int(off.get("consumerOffset", 0)), int(off.get("lastTimestamp", 0)))
              for mq, off in offset_table(resp)
              if isinstance(mq, dict) and isinstance(off, dict)]  # fmt: skip
    return queues, tps


def _stats_cmd(group: str) -> RemotingCommand:
    return RemotingCommand.request(RC.GET_CONSUME_STATS, {"consumerGroup": group})


def _connection_cmd(group: str) -> RemotingCommand:
    return RemotingCommand.request(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group})


def consume_stats(masters: list[tuple[str, str]], group: str,
                  failed: list[str] | None = None) -> tuple[list[GroupQueue], float]:
    """Every queue the group has an offset on, from every master, and its consume TPS."""
    return consume_stats_of(masters, [group], failed)[group]


def consume_stats_of(masters: list[tuple[str, str]], groups: list[str],
                     failed: list[str] | None = None
                     ) -> dict[str, tuple[list[GroupQueue], float]]:  # fmt: skip
    """consume_stats of many groups: one pipelined batch per master; a master that does not
    answer is left out (and named in `failed` when given, else its error raised)."""
    out: dict[str, tuple[list[GroupQueue], float]] = {g: ([], 0.0) for g in groups}
    for broker, addr in masters:
        try:
            answers = invoke_all(addr, [_stats_cmd(g) for g in groups], ok=(0, 17, 206))
        except (AdminError, ValueError) as exc:
            if failed is None:
                raise
            failed.append(f"{broker}: {exc}")
            continue
        for g, resp in zip(groups, answers, strict=True):
            queues, tps = _stats_of(resp, broker)
            have, have_tps = out[g]
            out[g] = (have + queues, have_tps + tps)
    for queues, _tps in out.values():
        queues.sort(key=lambda q: (q.topic, q.broker, q.queue_id))
    return out


def connection_list(masters: list[tuple[str, str]], group: str) -> dict[str, Any]:
    """The group's ConsumerConnection body from the first master that knows it ({} if none)."""
    for _broker, addr in masters:
        try:
            resp = call(addr, RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group},
                        ok=(0, 206))  # fmt: skip
        except AdminError:
            continue  # that master is down: another may know the group
        if resp.code == 0:
            return json_object(resp)
    return {}


def group_rows(namesrv: str) -> list[GroupRow]:
    """One row per subscription group of any master: clients, TPS, lag and topics (two
    pipelined batches per master, whatever the number of groups)."""
    masters = _masters(namesrv)
    failed: list[str] = []
    names = group_names(masters, failed)
    stats = consume_stats_of(masters, names, failed)
    conns: dict[str, dict[str, Any]] = {}
    for broker, addr in masters:
        missing = [g for g in names if g not in conns]
        try:
            answers = invoke_all(addr, [_connection_cmd(g) for g in missing], ok=(0, 206))
        except (AdminError, ValueError) as exc:
            failed.append(f"{broker}: {exc}")
            continue
        conns.update((g, json_object(r)) for g, r in zip(missing, answers, strict=True)
                     if r.code == 0)  # fmt: skip
    error = "; ".join(dict.fromkeys(failed))  # the figures leave these brokers out
    rows = []
    for g in names:
        queues, tps = stats[g]
        conn = conns.get(g, {})
        rows.append(GroupRow(g, len(conn.get("connectionSet", []) or []),
                             str(conn.get("consumeType") or ""),
                             str(conn.get("messageModel") or ""), tps,
                             sum(q.lag for q in queues), sorted({q.topic for q in queues}),
                             error))
    return rows


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
    failed: list[str] = field(default_factory=list)  # masters left out: "broker: why"

    @property
    def lag(self) -> int:
        return sum(q.lag for q in self.queues)

    @property
    def topics(self) -> list[str]:
        """The topics it has offsets on, its retry topic last."""
        return sorted({q.topic for q in self.queues},
                      key=lambda t: (t.startswith(RETRY_GROUP_TOPIC_PREFIX), t))

def group_detail(namesrv: str, group: str) -> GroupDetail:
    checked_group(group)
    masters = _masters(namesrv)
    failed: list[str] = []
    queues, tps = consume_stats(masters, group, failed)
    conn = connection_list(masters, group)
    conns = sorted((Connection(str(c.get("clientId", "")), str(c.get("clientAddr", "")),
                               str(c.get("language", "")), int(c.get("version", 0)))
                    for c in conn.get("connectionSet", []) or []),
                   key=lambda c: c.client_id)  # fmt: skip
    table = conn.get("subscriptionTable", {}) or {}
    subs = sorted((str(t), str((s or {}).get("subString", "*")))
                  for t, s in (table.items() if isinstance(table, dict) else ()))  # fmt: skip
    return GroupDetail(group, queues, tps, conns, subs, str(conn.get("consumeType") or ""),
                       str(conn.get("messageModel") or ""), failed)  # fmt: skip


def running_info(namesrv: str, group: str, client_id: str) -> str:
    """consumerStatus: the client's own running info (JSON text), relayed by a master."""
    checked_group(group)
    for _broker, addr in _masters(namesrv):
        resp = call(addr, RC.GET_CONSUMER_RUNNING_INFO, {
            "consumerGroup": group, "clientId": client_id, "jstackEnable": "false"},
            ok=(0, 1, 206))  # 1: not connected to this broker (4.9.8 and ours): the next one
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
