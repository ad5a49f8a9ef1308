"""`actormq admin <command>`: cluster, topic, consumer and message tools in the spirit of mqadmin.

Mirrors tools/command/*SubCommand.java over tools/admin/DefaultMQAdminExt.java, RocketMQ 4.9.x:
clusterList, brokerStatus, topicList, topicRoute, updateTopic, deleteTopic, consumerProgress,
consumerConnection, consumerStatus, producerConnection, resetOffsetByTime, queryMsgByKey,
queryMsgById, sendMessage, consumeMessage, updateBrokerConfig, getBrokerConfig. Each command
talks to the name server (-n, or the NAMESRV_ADDR environment variable as mqadmin does) and to
the brokers it names, over the RocketMQ protocol (JSON headers), so it works against any
RocketMQ 4.x cluster as well.
Bad arguments: a message and exit code 2; a server that cannot be reached or refuses: a message
and exit code 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from deploy.wire import BlockingClient, parse_addr
from protocol.bodies import (
    ClusterInfo,
    SubscriptionGroupConfig,
    TopicRouteData,
    loads_lenient,
    loads_object_map,
)
from protocol.codes import RequestCode as RC
from protocol.codes import is_system_topic
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError
from protocol.message import (
    decode_messages,
    decode_offset_msg_id,
)

EXIT_FAILED = 1
EXIT_USAGE = 2
RPC_TIMEOUT_S = 10.0


class AdminError(Exception):
    """A server refused or could not be reached: printed, exit code 1."""


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def _call(addr: str, code: int, ext: dict[str, Any] | None = None, body: bytes = b"",
          ok: tuple[int, ...] = (0,)) -> RemotingCommand:
    """One request on a fresh connection; AdminError unless the code is in `ok`."""
    fields = {k: str(v) for k, v in (ext or {}).items() if v is not None}
    try:
        with BlockingClient(addr) as cl:
            resp = cl.invoke(RemotingCommand.request(code, fields or None, body), RPC_TIMEOUT_S)
    except (OSError, TimeoutError, ProtocolError) as exc:
        raise AdminError(f"{addr}: {exc}") from None
    if resp.code not in ok:
        raise AdminError(f"{addr} answered code {resp.code}: {resp.remark or ''}")
    return resp


def _cluster(ns: str) -> ClusterInfo:
    return ClusterInfo.from_json(bytes(_call(ns, RC.GET_BROKER_CLUSTER_INFO).body))


def _route(ns: str, topic: str) -> TopicRouteData:
    resp = _call(ns, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}, ok=(0, 17))
    if resp.code == 17:
        raise AdminError(f"topic {topic!r} has no route on {ns} (TOPIC_NOT_EXIST)")
    return TopicRouteData.from_json(bytes(resp.body))


def _masters(info: ClusterInfo, cluster: str | None) -> list[tuple[str, str]]:
    """(brokerName, master address) of a cluster (every cluster when None)."""
    names = (
        info.cluster_addr_table.get(cluster, []) if cluster is not None
        else sorted(info.broker_addr_table)
    )  # fmt: skip
    out = []
    for name in names:
        bd = info.broker_addr_table.get(name)
        if bd is not None and bd.master_addr:
            out.append((name, bd.master_addr))
    if not out:
        raise AdminError(f"no master broker found for cluster {cluster!r}")
    return out


def _route_masters(route: TopicRouteData) -> dict[str, str]:
    return {bd.broker_name: bd.master_addr for bd in route.broker_datas if bd.master_addr}


def _object(resp: RemotingCommand) -> dict[str, Any]:
    """A JSON object body, or ValueError (reported as an unreadable reply)."""
    body = loads_lenient(bytes(resp.body))
    if not isinstance(body, dict):
        raise ValueError("the body is not a JSON object")
    return body


def _offset_table(resp: RemotingCommand) -> list[tuple[Any, Any]]:
    """The offsetTable member of a ConsumeStats / ResetOffsetBody reply: a map keyed by
    MessageQueue objects as fastjson writes it, read as (queue, value) pairs."""
    text = _text(resp.body)
    at = text.find('"offsetTable":')
    if at < 0:
        return []
    return loads_object_map(text, at + len('"offsetTable":'))[0]


def _text(b: Any) -> str:
    return bytes(b).decode("utf-8", "replace")


# --- commands -----------------------------------------------------------------------------------


def cmd_cluster_list(a: argparse.Namespace) -> int:
    """clusterList: every cluster's brokers with their id and address."""
    info = _cluster(a.namesrv)
    _out(f"{'#Cluster':<20} {'#Broker':<20} {'#BID':<5} {'#Addr':<24} #Version")
    for cluster in sorted(info.cluster_addr_table):
        for name in sorted(info.cluster_addr_table[cluster]):
            bd = info.broker_addr_table.get(name)
            for bid, addr in sorted((bd.broker_addrs if bd else {}).items()):
                version = "?"
                try:
                    rt = _call(addr, RC.GET_BROKER_RUNTIME_INFO)
                    table = loads_lenient(bytes(rt.body))
                    if isinstance(table, dict):
                        version = str(table.get("table", {}).get("brokerVersionDesc", "?"))
                except AdminError:
                    version = "unreachable"
                _out(f"{cluster:<20} {name:<20} {bid:<5} {addr:<24} {version}")
    return 0


def cmd_topic_list(a: argparse.Namespace) -> int:
    """topicList: every topic the name server knows."""
    body = loads_lenient(bytes(_call(a.namesrv, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body))
    topics = body.get("topicList", []) if isinstance(body, dict) else []
    for t in sorted(topics):
        _out(t)
    return 0


def cmd_topic_route(a: argparse.Namespace) -> int:
    """topicRoute: the route JSON of a topic."""
    _out(json.dumps(_route(a.namesrv, a.topic).to_obj(), indent=2, sort_keys=True))
    return 0


def cmd_update_topic(a: argparse.Namespace) -> int:
    """updateTopic: create or update a topic on a broker (-b) or every master of a cluster."""
    ext = {"topic": a.topic, "defaultTopic": "TBW102", "readQueueNums": a.read_queues,
           "writeQueueNums": a.write_queues, "perm": a.perm, "topicFilterType": "SINGLE_TAG",
           "topicSysFlag": 0, "order": "false"}  # fmt: skip
    for name, addr in _targets(a):
        _call(addr, RC.UPDATE_AND_CREATE_TOPIC, ext)
        _out(f"create topic to {addr} ({name}) success.")
    return 0


def cmd_delete_topic(a: argparse.Namespace) -> int:
    """deleteTopic: delete a topic from every master of a cluster and from the name server."""
    for name, addr in _masters(_cluster(a.namesrv), a.cluster):
        _call(addr, RC.DELETE_TOPIC_IN_BROKER, {"topic": a.topic})
        _out(f"delete topic [{a.topic}] from broker {name} ({addr}) success.")
    for ns in a.all_namesrv.split(";"):
        _call(ns, RC.DELETE_TOPIC_IN_NAMESRV, {"topic": a.topic})
    _out(f"delete topic [{a.topic}] from NameServer success.")
    return 0


def cmd_topic_status(a: argparse.Namespace) -> int:
    """topicStatus: per queue of every broker in the route, min / max offset and last store
    time (GET_TOPIC_STATS_INFO)."""
    rows: list[tuple[str, int, int, int, int]] = []
    for name, addr in sorted(_route_masters(_route(a.namesrv, a.topic)).items()):
        resp = _call(addr, RC.GET_TOPIC_STATS_INFO, {"topic": a.topic})
        for mq, st in _offset_table(resp):
            rows.append((name, int(mq.get("queueId", 0)), int(st.get("minOffset", 0)),
                         int(st.get("maxOffset", 0)), int(st.get("lastUpdateTimestamp", 0))))
    _out(f"{'#Broker Name':<32} {'#QID':<4} {'#Min Offset':<20} {'#Max Offset':<20} "
         "#Last Updated")  # fmt: skip
    for name, qid, lo, hi, last in sorted(rows):
        when = _format_ms(last) if last else ""
        _out(f"{name:<32} {qid:<4} {lo:<20} {hi:<20} {when}")
    return 0


def _format_ms(ms: int) -> str:
    """UtilAll.timeMillisToHumanString2: yyyy-MM-dd HH:mm:ss,SSS (local time)."""
    t = time.localtime(ms / 1000)
    return time.strftime("%Y-%m-%d %H:%M:%S", t) + f",{ms % 1000:03d}"


def _targets(a: argparse.Namespace, *, require: bool = False) -> list[tuple[str, str]]:
    """(name, address) of the -b broker, else of every master of the -c cluster (of every
    cluster when no -c is given, unless `require` asks for one of the two)."""
    if getattr(a, "broker", None):
        return [(a.broker, a.broker)]
    cluster = getattr(a, "cluster", None)
    if require and not cluster:
        raise _Usage("pass -c cluster or -b broker address")
    return _masters(_cluster(a.namesrv), cluster)


def cmd_update_sub_group(a: argparse.Namespace) -> int:
    """updateSubGroup: create or update a subscription group (SubscriptionGroupConfig) on a
    broker (-b) or every master of a cluster (-c)."""
    body = SubscriptionGroupConfig(
        group_name=a.group, consume_enable=a.consume_enable,
        consume_from_min_enable=a.consume_from_min, consume_broadcast_enable=a.broadcast,
        retry_queue_nums=a.retry_queues, retry_max_times=a.retry_max_times,
    ).to_json()  # fmt: skip
    for name, addr in _targets(a, require=True):
        _call(addr, RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)
        _out(f"create subscription group to {addr} ({name}) success.")
    return 0


def cmd_delete_sub_group(a: argparse.Namespace) -> int:
    """deleteSubGroup: delete a subscription group (and, with --remove-offset, its offsets)."""
    for name, addr in _targets(a, require=True):
        _call(addr, RC.DELETE_SUBSCRIPTIONGROUP,
              {"groupName": a.group, "removeOffset": str(a.remove_offset).lower()})  # fmt: skip
        _out(f"delete subscription group [{a.group}] from broker {name} ({addr}) success.")
    return 0


def cmd_consumer_progress(a: argparse.Namespace) -> int:
    """consumerProgress: per queue the broker offset, the group's offset and the lag."""
    rows: list[tuple[str, str, int, int, int]] = []
    for name, addr in _masters(_cluster(a.namesrv), None):
        resp = _call(addr, RC.GET_CONSUME_STATS, {"consumerGroup": a.group, "topic": a.topic})
        for mq, off in _offset_table(resp):
            rows.append((mq.get("topic", ""), name, int(mq.get("queueId", 0)),
                         int(off.get("brokerOffset", 0)), int(off.get("consumerOffset", 0))))
    _out(f"{'#Topic':<32} {'#Broker Name':<20} {'#QID':<5} {'#Broker Offset':<15} "
         f"{'#Consumer Offset':<17} #Diff")  # fmt: skip
    total = 0
    for topic, name, qid, b_off, c_off in sorted(rows):
        total += b_off - c_off
        _out(f"{topic:<32} {name:<20} {qid:<5} {b_off:<15} {c_off:<17} {b_off - c_off}")
    _out(f"\nDiff Total: {total}")
    return 0


def _print_messages(msgs: list[Any]) -> None:
    for m in msgs:
        props = m.properties
        _out(f"msgId={m.msg_id} offsetMsgId={m.offset_msg_id} topic={m.topic} "
             f"queueId={m.queue_id} queueOffset={m.queue_offset} tags={props.get('TAGS', '')} "
             f"keys={props.get('KEYS', '')} storeTimestamp={m.store_timestamp} "
             f"body={_text(m.body)!r}")  # fmt: skip


def cmd_query_by_key(a: argparse.Namespace) -> int:
    """queryMsgByKey: messages indexed under a key (KEYS or UNIQ_KEY) on every broker."""
    found = []
    for addr in sorted(set(_route_masters(_route(a.namesrv, a.topic)).values())):
        resp = _call(addr, RC.QUERY_MESSAGE, {
            "topic": a.topic, "key": a.key, "maxNum": a.max, "beginTimestamp": 0,
            "endTimestamp": int(time.time() * 1000) + 60_000}, ok=(0, 22))  # fmt: skip
        if resp.code == 0 and resp.body:
            found += [m for m in decode_messages(bytes(resp.body))
                      if a.key in m.properties.get("KEYS", "").split(" ")
                      or m.properties.get("UNIQ_KEY") == a.key]  # fmt: skip
    if not found:
        raise AdminError(f"no message with key {a.key!r} in topic {a.topic!r}")
    _print_messages(found)
    return 0


def cmd_query_by_id(a: argparse.Namespace) -> int:
    """queryMsgById: one message by its offset message id (it names the broker)."""
    try:
        host, port, phy = decode_offset_msg_id(a.msg_id)
    except ValueError as exc:
        raise _Usage(f"bad message id: {exc}") from None
    resp = _call(f"{host}:{port}", RC.VIEW_MESSAGE_BY_ID, {"offset": phy})
    _print_messages(decode_messages(bytes(resp.body)))
    return 0


def cmd_send(a: argparse.Namespace) -> int:
    """sendMessage: one message through the Producer (auto-created topic if the broker allows;
    -b / -q pick the broker name / queue id)."""
    from actors.client import Message, MessageQueue, MQClientError, Producer

    try:
        with Producer("CLI_SEND_GROUP", namesrv=a.all_namesrv) as p:
            msg = Message(a.topic, a.body.encode(), tags=a.tags, keys=a.keys)
            queue = None
            if a.broker is not None or a.queue is not None:
                qs = [q for q in p.publish_queues(a.topic)
                      if a.broker is None or q.broker_name == a.broker]
                if not qs:
                    raise AdminError(f"broker {a.broker!r} has no writable queue for {a.topic!r}")
                qid = a.queue if a.queue is not None else qs[0].queue_id
                queue = MessageQueue(a.topic, qs[0].broker_name, qid)
            r = p.send(msg, queue=queue)
    except MQClientError as exc:
        raise AdminError(exc.message) from None
    _out(f"SendResult [sendStatus={r.status}, msgId={r.msg_id}, offsetMsgId={r.offset_msg_id}, "
         f"brokerName={r.queue.broker_name}, queueId={r.queue.queue_id}, "
         f"queueOffset={r.queue_offset}]")
    return 0


def cmd_consume(a: argparse.Namespace) -> int:
    """consumeMessage: print messages of every queue of the topic through a LitePullConsumer
    (assigned every queue: no rebalance), from the group's offsets (from each queue's start with
    --from-start or without -g); with -g the offsets reached are committed."""
    from actors.client import MQClientError
    from actors.client.consumer import LitePullConsumer

    group = a.group or "CLI_CONSUME_GROUP"
    printed = 0
    try:
        with LitePullConsumer(group, namesrv=a.namesrv, consume_from="first",
                              auto_commit=False, pull_batch=32) as c:
            queues = c.fetch_message_queues(a.topic)
            start = c.beginning_offsets(queues) if a.from_start or not a.group else None
            c.assign(queues, a.subscription, offsets=start)
            idle = 0
            unprinted: dict[Any, int] = {}  # queue -> first offset polled but not printed
            while printed < a.count and idle < 2:  # two quiet polls: every queue is read
                msgs = c.poll(0.5)
                idle = 0 if msgs else idle + 1
                for m in msgs[a.count - printed :]:
                    unprinted[m.queue] = min(unprinted.get(m.queue, m.queue_offset),
                                             m.queue_offset)  # fmt: skip
                msgs = msgs[: a.count - printed]
                _print_messages(msgs)
                printed += len(msgs)
            if a.group:
                c.commit({q: unprinted.get(q, c.position(q)) for q in queues})
    except MQClientError as exc:
        raise AdminError(exc.message) from None
    _out(f"consumed {printed} message(s)")
    return 0


def _group_broker(a: argparse.Namespace) -> str:
    """-b if given, else the master of the group's retry topic, else the first master."""
    if getattr(a, "broker", None):
        return str(a.broker)
    try:
        masters = _route_masters(_route(a.namesrv, f"%RETRY%{a.group}"))
        if masters:
            return sorted(masters.values())[0]
    except AdminError:
        pass
    return _masters(_cluster(a.namesrv), None)[0][1]


def cmd_broker_status(a: argparse.Namespace) -> int:
    """brokerStatus: a broker's runtime table (GET_BROKER_RUNTIME_INFO)."""
    for _name, addr in _targets(a):
        body = loads_lenient(bytes(_call(addr, RC.GET_BROKER_RUNTIME_INFO).body))
        table = body.get("table", {}) if isinstance(body, dict) else {}
        _out(f"# {addr}")
        for k in sorted(table):
            _out(f"{k:<36}: {table[k]}")
    return 0


def cmd_consumer_connection(a: argparse.Namespace) -> int:
    """consumerConnection: the group's clients (GET_CONSUMER_CONNECTION_LIST)."""
    addr = _group_broker(a)
    body = _object(_call(addr, RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": a.group}))
    for i, c in enumerate(body.get("connectionSet", []), 1):
        _out(f"{i:03d}  {c.get('clientId', ''):<40} {c.get('clientAddr', ''):<22} "
             f"{c.get('language', '')} {c.get('version', '')}")  # fmt: skip
    _out("\nBelow is subscription:")
    for topic, sub in sorted(body.get("subscriptionTable", {}).items()):
        _out(f"{topic:<40} {sub.get('subString', '')}")
    _out(f"\nConsumeType: {body.get('consumeType')}\nMessageModel: {body.get('messageModel')}"
         f"\nConsumeFromWhere: {body.get('consumeFromWhere')}")  # fmt: skip
    return 0


def cmd_producer_connection(a: argparse.Namespace) -> int:
    """producerConnection: a producer group's clients on each master of the topic."""
    for addr in sorted(set(_route_masters(_route(a.namesrv, a.topic)).values())):
        resp = _call(addr, RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": a.group},
                     ok=(0, 1))  # fmt: skip
        if resp.code != 0:
            continue
        body = _object(resp)
        for i, c in enumerate(body.get("connectionSet", []), 1):
            _out(f"{i:04d}  {c.get('clientId', ''):<40} {c.get('clientAddr', ''):<22} "
                 f"{c.get('language', '')} {c.get('version', '')}")  # fmt: skip
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
        raise _Usage(f"bad timestamp {text!r}: ms, now, or yyyy-MM-dd#HH:mm:ss:SSS") from None


def cmd_reset_offset(a: argparse.Namespace) -> int:
    """resetOffsetByTime: every master of the topic moves the group's clients to a time; for a
    group with no client online the offsets are written directly (ResetOffsetByTimeOldCommand)."""
    ts = _timestamp(a.timestamp)
    ext = {"topic": a.topic, "group": a.group, "timestamp": ts,
           "isForce": "true" if a.force else "false"}  # fmt: skip
    route = _route(a.namesrv, a.topic)
    masters = _route_masters(route)
    for name, addr in sorted(masters.items()):
        resp = _call(addr, RC.INVOKE_BROKER_TO_RESET_OFFSET, ext, ok=(0, 206))
        if resp.code == 206:  # CONSUMER_NOT_ONLINE
            queues = next((q.read_queue_nums for q in route.queue_datas
                           if q.broker_name == name), 0)  # fmt: skip
            for qid in range(queues):
                q = {"topic": a.topic, "queueId": qid}
                off = int(_call(addr, RC.SEARCH_OFFSET_BY_TIMESTAMP,
                                dict(q, timestamp=ts)).ext_fields["offset"])  # fmt: skip
                r = _call(addr, RC.QUERY_CONSUMER_OFFSET, dict(q, consumerGroup=a.group),
                          ok=(0, 22))  # fmt: skip
                current = int(r.ext_fields["offset"]) if r.code == 0 else -1
                if a.force or current < 0 or off < current:
                    _call(addr, RC.UPDATE_CONSUMER_OFFSET,
                          dict(q, consumerGroup=a.group, commitOffset=off))  # fmt: skip
                else:
                    off = current
                _out(f"{a.topic:<32} {name:<20} queue {qid}: offset {off} (group offline)")
            continue
        for mq, off in sorted(_offset_table(resp), key=lambda p: p[0].get("queueId", 0)):
            _out(f"{a.topic:<32} {name:<20} queue {mq.get('queueId')}: offset {off}")
    return 0


def cmd_update_broker_config(a: argparse.Namespace) -> int:
    """updateBrokerConfig: set one property on a broker (-b) or every master of a cluster."""
    if "\n" in a.key or "=" in a.key or "\n" in a.value:
        raise _Usage("key and value must be one line, and the key without '='")
    for _name, addr in _targets(a):
        resp = _call(addr, RC.UPDATE_BROKER_CONFIG, None, f"{a.key}={a.value}\n".encode())
        note = f" ({resp.remark})" if resp.remark else ""
        _out(f"update broker config success, {addr}{note}")
    return 0


def cmd_get_broker_config(a: argparse.Namespace) -> int:
    """getBrokerConfig: a broker's properties (-b) or every master's of a cluster."""
    for _name, addr in _targets(a):
        _out(f"============{addr}============")
        for line in sorted(_text(_call(addr, RC.GET_BROKER_CONFIG).body).splitlines()):
            k, _, v = line.partition("=")
            _out(f"{k:<50}=  {v}")
    return 0


def cmd_consumer_status(a: argparse.Namespace) -> int:
    """consumerStatus: a client's own running info, relayed by the broker."""
    addr = _group_broker(a)
    resp = _call(addr, RC.GET_CONSUMER_RUNNING_INFO, {
        "consumerGroup": a.group, "clientId": a.client_id, "jstackEnable": "false"})  # fmt: skip
    _out(_text(resp.body))
    return 0


def _maybe(addr: str, code: int, ext: dict[str, Any]) -> RemotingCommand | None:
    """The reply when it is a success, else None (statsAll skips what a broker lacks)."""
    try:
        return _call(addr, code, ext)
    except AdminError:
        return None


def _stats(addr: str, name: str, key: str) -> tuple[float, int]:
    """(minute TPS, 24-hour sum) of a broker stats item; (0, 0) when the broker has none
    (StatsAllSubCommand: the day's sum, else the hour's, else the minute's)."""
    resp = _maybe(addr, RC.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key})
    if resp is None:
        return 0.0, 0
    data = _object(resp)
    sums = [int(data.get(w, {}).get("sum", 0)) for w in ("statsDay", "statsHour", "statsMinute")]
    return float(data.get("statsMinute", {}).get("tps", 0.0)), next((x for x in sums if x), 0)


def cmd_stats_all(a: argparse.Namespace) -> int:
    """statsAll: per topic and consumer group, the in / out TPS of the last minute, the
    messages in / out over 24 hours, and the group's accumulation (its lag)."""
    body = loads_lenient(bytes(_call(a.namesrv, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body))
    topics = body.get("topicList", []) if isinstance(body, dict) else []
    _out(f"{'#Topic':<32} {'#Consumer Group':<32} {'#Accumulation':>13} {'#InTPS':>11} "
         f"{'#OutTPS':>11} {'#InMsg24Hour':>13} {'#OutMsg24Hour':>14}")  # fmt: skip
    for topic in sorted(t for t in topics if not is_system_topic(t)):
        if a.topic and topic != a.topic:
            continue
        try:
            masters = _route_masters(_route(a.namesrv, topic))
        except AdminError:
            continue
        in_tps, in_day = 0.0, 0
        groups: set[str] = set()
        for addr in masters.values():
            tps, day = _stats(addr, "TOPIC_PUT_NUMS", topic)
            in_tps, in_day = in_tps + tps, in_day + day
            who = _maybe(addr, RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
            if who is not None:
                groups.update(_object(who).get("groupList", []))
        if not groups:
            _out(f"{topic:<32} {'':<32} {0:>13} {in_tps:>11.2f} {0.0:>11.2f} {in_day:>13} "
                 f"{0:>14}")  # fmt: skip
        for group in sorted(groups):
            out_tps, out_day, lag = 0.0, 0, 0
            for addr in masters.values():
                tps, day = _stats(addr, "GROUP_GET_NUMS", f"{topic}@{group}")
                out_tps, out_day = out_tps + tps, out_day + day
                cs = _maybe(addr, RC.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic})
                for _mq, off in _offset_table(cs) if cs is not None else []:
                    lag += int(off.get("brokerOffset", 0)) - int(off.get("consumerOffset", 0))
            _out(f"{topic:<32} {group:<32} {lag:>13} {in_tps:>11.2f} {out_tps:>11.2f} "
                 f"{in_day:>13} {out_day:>14}")  # fmt: skip
    return 0


class _Usage(Exception):
    """A bad argument found after parsing: exit code 2."""


COMMANDS: dict[str, tuple[Callable[[argparse.Namespace], int], str]] = {
    "clusterList": (cmd_cluster_list, "list clusters and their brokers"),
    "topicList": (cmd_topic_list, "list every topic of the name server"),
    "topicRoute": (cmd_topic_route, "show a topic's route"),
    "updateTopic": (cmd_update_topic, "create or update a topic"),
    "deleteTopic": (cmd_delete_topic, "delete a topic from a cluster and the name server"),
    "topicStatus": (cmd_topic_status, "a topic's min / max offset per queue"),
    "consumerProgress": (cmd_consumer_progress, "a consumer group's offsets and lag"),
    "updateSubGroup": (cmd_update_sub_group, "create or update a subscription group"),
    "deleteSubGroup": (cmd_delete_sub_group, "delete a subscription group"),
    "queryMsgByKey": (cmd_query_by_key, "find messages by key"),
    "queryMsgById": (cmd_query_by_id, "show a message by its offset message id"),
    "sendMessage": (cmd_send, "send one message"),
    "consumeMessage": (cmd_consume, "pull and print messages"),
    "brokerStatus": (cmd_broker_status, "a broker's runtime figures"),
    "consumerConnection": (cmd_consumer_connection, "a consumer group's clients"),
    "producerConnection": (cmd_producer_connection, "a producer group's clients"),
    "resetOffsetByTime": (cmd_reset_offset, "move a consumer group to a point in time"),
    "consumerStatus": (cmd_consumer_status, "a consumer client's own running info"),
    "updateBrokerConfig": (cmd_update_broker_config, "set a broker property at runtime"),
    "getBrokerConfig": (cmd_get_broker_config, "a broker's properties"),
    "statsAll": (cmd_stats_all, "per topic and group: TPS in / out, 24 h counts, lag"),
}


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"not true or false: {text!r}")
    return text.lower() == "true"


def _positive(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    """The parser of `actormq admin`."""
    p = argparse.ArgumentParser(prog="actormq admin", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="admin_command", required=True)
    for name, (_fn, help_text) in COMMANDS.items():
        s = sub.add_parser(name, help=help_text)
        s.add_argument("-n", "--namesrv", default=os.environ.get("NAMESRV_ADDR"),
                       help="name server host:port (default: $NAMESRV_ADDR)")  # fmt: skip
        if name in ("topicRoute", "updateTopic", "deleteTopic", "queryMsgByKey",
                    "sendMessage", "consumeMessage", "producerConnection",
                    "resetOffsetByTime", "topicStatus"):  # fmt: skip
            s.add_argument("-t", "--topic", required=True)
        if name in ("consumerConnection", "producerConnection", "resetOffsetByTime",
                    "consumerStatus", "updateSubGroup", "deleteSubGroup"):  # fmt: skip
            s.add_argument("-g", "--group", required=True)
        if name in ("brokerStatus", "consumerConnection", "consumerStatus",
                    "updateBrokerConfig", "getBrokerConfig", "updateSubGroup",
                    "deleteSubGroup"):  # fmt: skip
            s.add_argument("-b", "--broker", default=None, help="broker address host:port")
        if name in ("updateBrokerConfig", "getBrokerConfig", "updateSubGroup", "deleteSubGroup"):
            s.add_argument("-c", "--cluster", default=None)
        if name == "updateSubGroup":
            s.add_argument("-r", "--retry-max-times", type=int, default=16)
            s.add_argument("-q", "--retry-queues", type=int, default=1)
            s.add_argument("-s", "--consume-enable", type=_bool, default=True)
            s.add_argument("-m", "--consume-from-min", type=_bool, default=True)
            s.add_argument("-d", "--broadcast", type=_bool, default=True)
        if name == "deleteSubGroup":
            s.add_argument("--remove-offset", action="store_true",
                           help="also drop the group's consumer offsets")  # fmt: skip
        if name == "updateBrokerConfig":
            s.add_argument("-k", "--key", required=True)
            s.add_argument("-v", "--value", required=True)
        if name == "resetOffsetByTime":
            s.add_argument("-s", "--timestamp", required=True,
                           help="ms, now, or yyyy-MM-dd#HH:mm:ss:SSS")  # fmt: skip
            s.add_argument("-f", "--force", type=lambda v: v.lower() == "true", default=True)
        if name == "consumerStatus":
            s.add_argument("-i", "--client-id", required=True)
        if name == "updateTopic":
            s.add_argument("-c", "--cluster", default=None)
            s.add_argument("-b", "--broker", default=None, help="broker address host:port")
            s.add_argument("-r", "--read-queues", type=_positive, default=8)
            s.add_argument("-w", "--write-queues", type=_positive, default=8)
            s.add_argument("-p", "--perm", type=int, choices=(2, 4, 6), default=6)
        if name == "deleteTopic":
            s.add_argument("-c", "--cluster", required=True)
        if name == "consumerProgress":
            s.add_argument("-g", "--group", required=True)
            s.add_argument("-t", "--topic", default=None)
        if name == "statsAll":
            s.add_argument("-t", "--topic", default=None, help="only this topic")
        if name == "queryMsgByKey":
            s.add_argument("-k", "--key", required=True)
            s.add_argument("--max", type=_positive, default=64)
        if name == "queryMsgById":
            s.add_argument("-i", "--msg-id", required=True)
        if name == "sendMessage":
            s.add_argument("-p", "--body", required=True)
            s.add_argument("--tags", default=None)
            s.add_argument("--keys", default=None)
            s.add_argument("-b", "--broker", default=None, help="broker name")
            s.add_argument("-q", "--queue", type=int, default=None)
        if name == "consumeMessage":
            s.add_argument("-g", "--group", default=None)
            s.add_argument("-s", "--subscription", default="*")
            s.add_argument("-c", "--count", type=_positive, default=32)
            s.add_argument("--from-start", action="store_true")
    return p


def main(argv: list[str]) -> int:
    """Run one admin command; the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)  # exits 2 with a message on bad arguments
    try:
        if not args.namesrv:
            raise _Usage("no name server: pass -n host:port or set NAMESRV_ADDR")
        for ns in args.namesrv.split(";"):
            parse_addr(ns)
        if getattr(args, "broker", None) and args.admin_command in (
            "updateTopic", "brokerStatus", "consumerConnection", "consumerStatus",
            "updateBrokerConfig", "getBrokerConfig", "updateSubGroup", "deleteSubGroup",
        ):
            parse_addr(args.broker)
    except (_Usage, ValueError) as exc:
        sys.stderr.write(f"actormq admin: {exc}\n")
        return EXIT_USAGE
    args.all_namesrv = args.namesrv
    args.namesrv = args.namesrv.split(";")[0]
    try:
        return COMMANDS[args.admin_command][0](args)
    except _Usage as exc:
        sys.stderr.write(f"actormq admin: {exc}\n")
        return EXIT_USAGE
    except AdminError as exc:
        sys.stderr.write(f"actormq admin {args.admin_command}: {exc}\n")
        return EXIT_FAILED
    except ValueError as exc:  # a reply that does not parse
        sys.stderr.write(f"actormq admin {args.admin_command}: unreadable reply: {exc}\n")
        return EXIT_FAILED
