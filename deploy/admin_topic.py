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
    route_masters,
    targets,
    topic_names,
    topic_route,
)
from protocol.codes import RequestCode as RC


def cmd_topic_list(a: argparse.Namespace) -> int:
    """topicList: every topic the name server knows."""
    for t in topic_names(a.namesrv):
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
    from deploy.console.topic_service import queue_rows

    rows = queue_rows(a.topic, route_masters(topic_route(a.namesrv, a.topic)))
    echo(f"{'#Broker Name':<32} {'#QID':<4} {'#Min Offset':<20} {'#Max Offset':<20} "
         "#Last Updated")  # fmt: skip
    for q in rows:
        when = _format_ms(q.last_update) if q.last_update else ""
        echo(f"{q.broker:<32} {q.queue_id:<4} {q.min_offset:<20} {q.max_offset:<20} {when}")
    return 0


def _format_ms(ms: int) -> str:
    """UtilAll.timeMillisToHumanString2: yyyy-MM-dd HH:mm:ss,SSS (local time)."""
    t = time.localtime(ms / 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", t) + f",{ms % 1000:03d}"
