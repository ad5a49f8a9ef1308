"""`actormq admin` topic commands: topicList, topicRoute, updateTopic, deleteTopic, topicStatus.

Mirrors tools/command/topic/*SubCommand.java, RocketMQ 4.9.x.
"""

from __future__ import annotations

import argparse
import json
import time

from deploy.admin_ext import (
    call,
    cluster_info,
    cluster_masters,
    echo,
    offset_table,
    route_masters,
    targets,
    topic_route,
)
from protocol.bodies import (
    loads_lenient,
)
from protocol.codes import RequestCode as RC


def cmd_topic_list(a: argparse.Namespace) -> int:
    """topicList: every topic the name server knows."""
    body = loads_lenient(bytes(call(a.namesrv, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body))
    topics = body.get("topicList", []) if isinstance(body, dict) else []
    for t in sorted(topics):
        echo(t)
    return 0


def cmd_topic_route(a: argparse.Namespace) -> int:
    """topicRoute: the route JSON of a topic."""
    echo(json.dumps(topic_route(a.namesrv, a.topic).to_obj(), indent=2, sort_keys=True))
    return 0


def cmd_update_topic(a: argparse.Namespace) -> int:
    """updateTopic: create or update a topic on a broker (-b) or every master of a cluster."""
    ext = {"topic": a.topic, "defaultTopic": "TBW102", "readQueueNums": a.read_queues,
           "writeQueueNums": a.write_queues, "perm": a.perm, "topicFilterType": "SINGLE_TAG",
           "topicSysFlag": 0, "order": "false"}  # fmt: skip
    for name, addr in targets(a):
        call(addr, RC.UPDATE_AND_CREATE_TOPIC, ext)
        echo(f"create topic to {addr} ({name}) success.")
    return 0


def cmd_delete_topic(a: argparse.Namespace) -> int:
    """deleteTopic: delete a topic from every master of a cluster and from the name server."""
    for name, addr in cluster_masters(cluster_info(a.namesrv), a.cluster):
        call(addr, RC.DELETE_TOPIC_IN_BROKER, {"topic": a.topic})
        echo(f"delete topic [{a.topic}] from broker {name} ({addr}) success.")
    for ns in a.all_namesrv.split(";"):
        call(ns, RC.DELETE_TOPIC_IN_NAMESRV, {"topic": a.topic})
    echo(f"delete topic [{a.topic}] from NameServer success.")
    return 0


def cmd_topic_status(a: argparse.Namespace) -> int:
    """topicStatus: per queue of every broker in the route, min / max offset and last store
    time (GET_TOPIC_STATS_INFO)."""
    rows: list[tuple[str, int, int, int, int]] = []
    for name, addr in sorted(route_masters(topic_route(a.namesrv, a.topic)).items()):
        resp = call(addr, RC.GET_TOPIC_STATS_INFO, {"topic": a.topic})
        for mq, st in offset_table(resp):
            rows.append((name, int(mq.get("queueId", 0)), int(st.get("minOffset", 0)),
                         int(st.get("maxOffset", 0)), int(st.get("lastUpdateTimestamp", 0))))
    echo(f"{'#Broker Name':<32} {'#QID':<4} {'#Min Offset':<20} {'#Max Offset':<20} "
         "#Last Updated")  # fmt: skip
    for name, qid, lo, hi, last in sorted(rows):
        when = _format_ms(last) if last else ""
        echo(f"{name:<32} {qid:<4} {lo:<20} {hi:<20} {when}")
    return 0


def _format_ms(ms: int) -> str:
    """UtilAll.timeMillisToHumanString2: yyyy-MM-dd HH:mm:ss,SSS (local time)."""
    t = time.localtime(ms / 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", t) + f",{ms % 1000:03d}"
