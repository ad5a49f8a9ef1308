"""`actormq admin` cluster and broker commands: clusterList, brokerStatus, updateBrokerConfig,
getBrokerConfig, statsAll, wipeWritePerm, addWritePerm.

Mirrors tools/command/cluster, broker, namesrv and stats/*SubCommand.java, RocketMQ 4.9.x.
"""

from __future__ import annotations

import argparse
from typing import Any

from deploy.admin_ext import (
    AdminError,
    Usage,
    as_text,
    call,
    cluster_info,
    echo,
    json_object,
    offset_table,
    route_masters,
    targets,
    topic_route,
)
from protocol.bodies import (
    loads_lenient,
)
from protocol.codes import RequestCode as RC
from protocol.codes import is_system_topic
from protocol.command import RemotingCommand


def cmd_cluster_list(a: argparse.Namespace) -> int:
    """clusterList: every cluster's brokers with their id and address."""
    info = cluster_info(a.namesrv)
    echo(f"{'#Cluster':<20} {'#Broker':<20} {'#BID':<5} {'#Addr':<24} #Version")
    for cluster in sorted(info.cluster_addr_table):
        for name in sorted(info.cluster_addr_table[cluster]):
            bd = info.broker_addr_table.get(name)
            for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                version = "?"
                try:
                    rt = call(addr, RC.GET_BROKER_RUNTIME_INFO)
                    table = loads_lenient(bytes(rt.body))
                    if isinstance(table, dict):
                        version = str(table.get("table", {}).get("brokerVersionDesc", "?"))
                except AdminError:
                    version = "unreachable"
                echo(f"{cluster:<20} {name:<20} {bid:<5} {addr:<24} {version}")
    return 0


def cmd_broker_status(a: argparse.Namespace) -> int:
    """brokerStatus: a broker's runtime table (GET_BROKER_RUNTIME_INFO)."""
    for _name, addr in targets(a):
        body = loads_lenient(bytes(call(addr, RC.GET_BROKER_RUNTIME_INFO).body))
        table = body.get("table", {}) if isinstance(body, dict) else {}
        echo(f"# {addr}")
        for k in sorted(table):
            echo(f"{k:<36}: {table[k]}")
    return 0


def cmd_update_broker_config(a: argparse.Namespace) -> int:
    """updateBrokerConfig: set one property on a broker (-b) or every master of a cluster."""
    if "\n" in a.key or "=" in a.key or "\n" in a.value:
        raise Usage("key and value must be one line, and the key without '='")
    for _name, addr in targets(a):
        resp = call(addr, RC.UPDATE_BROKER_CONFIG, None, f"{a.key}={a.value}\n".encode())
        note = f" ({resp.remark})" if resp.remark else ""
        echo(f"update broker config success, {addr}{note}")
    return 0


def cmd_get_broker_config(a: argparse.Namespace) -> int:
    """getBrokerConfig: a broker's properties (-b) or every master's of a cluster."""
    for _name, addr in targets(a):
        echo(f"============{addr}============")
        for line in sorted(as_text(call(addr, RC.GET_BROKER_CONFIG).body).splitlines()):
            k, _, v = line.partition("=")
            echo(f"{k:<50}=  {v}")
    return 0


def _maybe(addr: str, code: int, ext: dict[str, Any]) -> RemotingCommand | None:
    """The reply when it is a success, else None (statsAll skips what a broker lacks)."""
    try:
        return call(addr, code, ext)
    except AdminError:
        return None


def _stats(addr: str, name: str, key: str) -> tuple[float, int]:
    """(minute TPS, 24-hour sum) of a broker stats item; (0, 0) when the broker has none
    (StatsAllSubCommand: the day's sum, else the hour's, else the minute's)."""
    resp = _maybe(addr, RC.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
    if resp is None:
        return 0.0, 0
    data = json_object(resp)
    sums = [int(data.get(w, {}).get("sum", 0)) for w in ("statsDay", "statsHour", "statsMinute")]
    return float(data.get("statsMinute", {}).get("tps", 0.0)), next((x for x in sums if x), 0)


def cmd_stats_all(a: argparse.Namespace) -> int:
    """statsAll: per topic and consumer group, the in / out TPS of the last minute, the
    messages in / out over 24 hours, and the group's accumulation (its lag)."""
    body = loads_lenient(bytes(call(a.namesrv, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body))
    topics = body.get("topicList", []) if isinstance(body, dict) else []
    echo(f"{'#Topic':<32} {'#Consumer Group':<32} {'#Accumulation':>13} {'#InTPS':>11} "
         f"{'#OutTPS':>11} {'#InMsg24Hour':>13} {'#OutMsg24Hour':>14}")  # fmt: skip
    for topic in sorted(t for t in topics if not is_system_topic(t)):
        if a.topic and topic != a.topic:
            continue
        try:
            masters = route_masters(topic_route(a.namesrv, topic))
        except AdminError:
            continue
        in_tps, in_day = 0.0, 0
        groups: set[str] = set()
        for addr in masters.values():
            tps, day = _stats(addr, "TOPIC_PUT_NUMS", topic)
            in_tps, in_day = in_tps + tps, in_day + day
            who = _maybe(addr, RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
            if who is not None:
                groups.update(json_object(who).get("groupList", []))
        if not groups:
            echo(f"{topic:<32} {'':<32} {0:>13} {in_tps:>11.2f} {0.0:>11.2f} {in_day:>13} "
                 f"{0:>14}")  # fmt: skip
        for group in sorted(groups):
            out_tps, out_day, lag = 0.0, 0, 0
            for addr in masters.values():
                tps, day = _stats(addr, "GROUP_GET_NUMS", f"{topic}@{group}")
                out_tps, out_day = out_tps + tps, out_day + day
                cs = _maybe(addr, RC.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic})
                for _mq, off in offset_table(cs) if cs is not None else []:
                    lag += int(off.get("brokerOffset", 0)) - int(off.get("consumerOffset", 0))
            echo(f"{topic:<32} {group:<32} {lag:>13} {in_tps:>11.2f} {out_tps:>11.2f} "
                 f"{in_day:>13} {out_day:>14}")  # fmt: skip
    return 0


def _write_perm(a: argparse.Namespace, code: int, what: str, field: str) -> int:
    """WIPE_ / ADD_WRITE_PERM_OF_BROKER on every name server: how many queue data changed."""
    for ns in a.all_namesrv.split(";"):
        resp = call(ns, code, {"brokerName": a.broker_name})
        count = (resp.ext_fields or {}).get(field, "0")
        echo(f"{what} write perm of broker[{a.broker_name}] in name server[{ns}] OK, {count}")
    return 0


def cmd_wipe_write_perm(a: argparse.Namespace) -> int:
    """wipeWritePerm: take a broker's write permission away on every name server (its topics'
    routes stop taking sends; the broker keeps serving pulls)."""
    return _write_perm(a, RC.WIPE_WRITE_PERM_OF_BROKER, "wipe", "wipeTopicCount")


def cmd_add_write_perm(a: argparse.Namespace) -> int:
    """addWritePerm: give a broker its write permission back on every name server."""
    return _write_perm(a, RC.ADD_WRITE_PERM_OF_BROKER, "add", "addTopicCount")
