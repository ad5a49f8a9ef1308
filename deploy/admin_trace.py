"""`actormq admin queryMsgTraceById`: one message's trace, as mqadmin prints it.

Mirrors tools/command/message/QueryMsgTraceByIdSubCommand.java, RocketMQ 4.9.x: the trace
topic's messages indexed under the message id (QUERY_MESSAGE on every master of the trace
topic, at most 64 each), their records about that id (protocol/trace.views_of), printed as a
Pub block and one block of Sub lines per consumer group (from the SubAfter records).
"""

from __future__ import annotations

import argparse
import time

from deploy.admin_ext import AdminError, call, echo, route_masters, topic_route
from protocol.codes import RequestCode as RC
from protocol.message import decode_messages
from protocol.record import unpack_host
from protocol.trace import TRACE_TOPIC, TraceView, views_of

MAX_PER_BROKER = 64


def trace_views(namesrv: str, msg_id: str, trace_topic: str = TRACE_TOPIC) -> list[TraceView]:
    """Every record about msg_id in the trace topic (AdminError when the topic has no route)."""
    views: list[TraceView] = []
    for addr in sorted(set(route_masters(topic_route(namesrv, trace_topic)).values())):
        resp = call(addr, RC.QUERY_MESSAGE, {
            "topic": trace_topic, "key": msg_id, "maxNum": MAX_PER_BROKER, "beginTimestamp": 0,
            "endTimestamp": int(time.time() * 1000) + 60_000}, ok=(0, 22))  # fmt: skip
        if resp.code != 0 or not resp.body:
            continue
        for m in decode_messages(bytes(resp.body)):
            host, _port = unpack_host(m.born_host)  # getBornHostString: the address only
            views += views_of(msg_id, bytes(m.body), host)
    return sorted(views, key=lambda v: v.time_stamp)


def _line(kind: str, v: TraceView) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(v.time_stamp / 1000))
    return (f"{kind:<10s} {v.group_name:<20s} {v.client_host:<20s} {when:<20s} "
            f"{str(v.cost_time) + 'ms':<10s} {v.status:<10s}")


def cmd_query_trace_by_id(a: argparse.Namespace) -> int:
    """queryMsgTraceById -i <msgId> [-t traceTopic]."""
    views = trace_views(a.namesrv, a.msg_id, a.trace_topic)
    if not views:
        raise AdminError(f"no trace of message {a.msg_id} in {a.trace_topic}")
    consumers: dict[str, list[TraceView]] = {}
    for v in views:
        if v.trace_type == "Pub":
            echo(f"{'#Type':<10s} {'#ProducerGroup':<20s} {'#ClientHost':<20s} "
                 f"{'#SendTime':<20s} {'#CostTimes':<10s} {'#Status':<10s}")
            echo(_line("Pub", v))
            echo()
        elif v.trace_type == "SubAfter":
            consumers.setdefault(v.group_name, []).append(v)
    for group_views in consumers.values():
        echo(f"{'#Type':<10s} {'#ConsumerGroup':<20s} {'#ClientHost':<20s} "
             f"{'#ConsumerTime':<20s} {'#CostTimes':<10s} {'#Status':<10s}")
        for v in group_views:
            echo(_line("Sub", v))
        echo()
    return 0
