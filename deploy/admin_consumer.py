"""`actormq admin` consumer commands: updateSubGroup, deleteSubGroup, consumerProgress,
consumerConnection, producerConnection, resetOffsetByTime, consumerStatus.

Mirrors tools/command/consumer, connection and offset/*SubCommand.java, RocketMQ 4.9.x.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from actors.client import client_requests as rq
from deploy.admin_ext import (
    Usage,
    as_text,
    ask,
    call,
    cluster_info,
    cluster_masters,
    echo,
    group_broker,
    json_object,
    offset_table,
    route_masters,
    targets,
    topic_route,
)
from protocol.bodies import (
    SubscriptionGroupConfig,
)
from protocol.codes import RequestCode as RC


def cmd_update_sub_group(a: argparse.Namespace) -> int:
    """updateSubGroup: create or update a subscription group (SubscriptionGroupConfig) on a
    broker (-b) or every master of a cluster (-c)."""
    body = SubscriptionGroupConfig(
        group_name=a.group, consume_enable=a.consume_enable,
        consume_from_min_enable=a.consume_from_min, consume_broadcast_enable=a.broadcast,
        retry_queue_nums=a.retry_queues, retry_max_times=a.retry_max_times,
    ).to_json()  # fmt: skip
    for name, addr in targets(a, require=True):
        call(addr, RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)
        echo(f"create subscription group to {addr} ({name}) success.")
    return 0


def cmd_delete_sub_group(a: argparse.Namespace) -> int:
    """deleteSubGroup: delete a subscription group (and, with --remove-offset, its offsets)."""
    for name, addr in targets(a, require=True):
        call(addr, RC.DELETE_SUBSCRIPTIONGROUP,
              {"groupName": a.group, "removeOffset": str(a.remove_offset).lower()})  # fmt: skip
        echo(f"delete subscription group [{a.group}] from broker {name} ({addr}) success.")
    return 0


def cmd_consumer_progress(a: argparse.Namespace) -> int:
    """consumerProgress: per queue the broker offset, the group's offset and the lag."""
    rows: list[tuple[str, str, int, int, int]] = []
    for name, addr in cluster_masters(cluster_info(a.namesrv), None):
        resp = call(addr, RC.GET_CONSUME_STATS, {"consumerGroup": a.group, "topic": a.topic})
        for mq, off in offset_table(resp):
            rows.append((mq.get("topic", ""), name, int(mq.get("queueId", 0)),
                         int(off.get("brokerOffset", 0)), int(off.get("consumerOffset", 0))))
    echo(f"{'#Topic':<32} {'#Broker Name':<20} {'#QID':<5} {'#Broker Offset':<15} "
         f"{'#Consumer Offset':<17} #Diff")  # fmt: skip
    total = 0
    for topic, name, qid, b_off, c_off in sorted(rows):
        total += b_off - c_off
        echo(f"{topic:<32} {name:<20} {qid:<5} {b_off:<15} {c_off:<17} {b_off - c_off}")
    echo(f"\nDiff Total: {total}")
    return 0


def cmd_consumer_connection(a: argparse.Namespace) -> int:
    """consumerConnection: the group's clients (GET_CONSUMER_CONNECTION_LIST)."""
    addr = group_broker(a)
    body = json_object(call(addr, RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": a.group}))
    for i, c in enumerate(body.get("connectionSet", []), 1):
        echo(f"{i:03d}  {c.get('clientId', ''):<40} {c.get('clientAddr', ''):<22} "
             f"{c.get('language', '')} {c.get('version', '')}")  # fmt: skip
    echo("\nBelow is subscription:")
    for topic, sub in sorted(body.get("subscriptionTable", {}).items()):
        echo(f"{topic:<40} {sub.get('subString', '')}")
    echo(f"\nConsumeType: {body.get('consumeType')}\nMessageModel: {body.get('messageModel')}"
         f"\nConsumeFromWhere: {body.get('consumeFromWhere')}")  # fmt: skip
    return 0


def cmd_producer_connection(a: argparse.Namespace) -> int:
    """producerConnection: a producer group's clients on each master of the topic."""
    from deploy.console.producer_service import producer_rows

    numbered: dict[str, int] = {}  # numbered per broker, as mqadmin lists each broker's set
    for r in producer_rows(a.namesrv, a.topic, a.group):
        i = numbered[r.broker] = numbered.get(r.broker, 0) + 1
        echo(f"{i:04d}  {r.client_id:<40} {r.client_addr:<22} {r.language} {r.version}")
    return 0


def _timestamp(text: str) -> int:
    """ms since the epoch, "now", or mqadmin's yyyy-MM-dd#HH:mm:ss:SSS (local time)."""
    if text == "now":
        return int(time.time() * 1000)
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        base, _, ms = text.rpartition(":")
        return int(time.mktime(time.strptime(base, "%Y-%m-%d#%H:%M:%S"))) * 1000 + int(ms)
    except ValueError:
        raise Usage(f"bad timestamp {text!r}: ms, now, or yyyy-MM-dd#HH:mm:ss:SSS") from None


@dataclass(frozen=True)
class ResetQueue:
    """Where one queue of a reset left the group (offline: written directly, no client was
    told)."""

    topic: str
    broker: str
    queue_id: int
    offset: int
    offline: bool


def reset_offset_by_time(namesrv: str, topic: str, group: str, ts: int,
                         force: bool) -> list[ResetQueue]:  # fmt: skip
    """resetOffsetByTime (ts -1: each queue's max offset): every master of the topic moves the
    group's clients to the time; a group with no client online has its offsets written
    directly (ResetOffsetByTimeOldCommand)."""
    ext = {"topic": topic, "group": group, "timestamp": ts,
           "isForce": "true" if force else "false"}  # fmt: skip
    route = topic_route(namesrv, topic)
    out: list[ResetQueue] = []
    for name, addr in sorted(route_masters(route).items()):
        resp = call(addr, RC.INVOKE_BROKER_TO_RESET_OFFSET, ext, ok=(0, 206))
        if resp.code == 0:
            out += [ResetQueue(topic, name, int(mq.get("queueId", 0)), int(off), False)
                    for mq, off in sorted(offset_table(resp),
                                          key=lambda p: p[0].get("queueId", 0))]  # fmt: skip
            continue
        queues = next((q.read_queue_nums for q in route.queue_datas if q.broker_name == name), 0)
        for qid in range(queues):  # CONSUMER_NOT_ONLINE
            off = ask(addr, rq.max_offset(topic, qid) if ts == -1
                      else rq.search_offset(topic, qid, ts))  # fmt: skip
            current = ask(addr, rq.query_consumer_offset(group, topic, qid))  # -1: none
            if force or current < 0 or off < current:
                ask(addr, rq.update_consumer_offset(group, topic, qid, off))
            else:
                off = current
            out.append(ResetQueue(topic, name, qid, off, True))
    return out


def cmd_reset_offset(a: argparse.Namespace) -> int:
    """resetOffsetByTime: see reset_offset_by_time."""
    for r in reset_offset_by_time(a.namesrv, a.topic, a.group, _timestamp(a.timestamp), a.force):
        echo(f"{r.topic:<32} {r.broker:<20} queue {r.queue_id}: offset {r.offset}"
             + (" (group offline)" if r.offline else ""))
    return 0


def cmd_consumer_status(a: argparse.Namespace) -> int:
    """consumerStatus: a client's own running info, relayed by the broker."""
    addr = group_broker(a)
    resp = call(addr, RC.GET_CONSUMER_RUNNING_INFO, {
        "consumerGroup": a.group, "clientId": a.client_id, "jstackEnable": "false"})  # fmt: skip
    echo(as_text(resp.body))
    return 0
