"""Prometheus metrics of a RocketMQ 4.x cluster, by rocketmq-exporter's names and labels.

Mirrors apache/rocketmq-exporter's RMQMetricsCollector and MetricsCollectTask: every family a
gauge, `rocketmq_` names (`rocketmq_brokeruntime_` for the broker runtime figures, the missing
"t" included) with the exporter's help texts and label orders, so a Grafana dashboard built for
the exporter reads ours unchanged. The figures come from the admin codes any RocketMQ 4.x
broker serves (cluster info, VIEW_BROKER_STATS_DATA, GET_BROKER_RUNTIME_INFO, topic stats,
consume stats, consumer connections, producer info), so it works against actormq and the
reference broker alike. Each scrape asks the cluster afresh (no cache): a broker that does not
answer is left out of that scrape. The consumer clients' own figures (rocketmq_client_*) come
from each online client's running info, relayed by a master (GET_CONSUMER_RUNNING_INFO), in the
same scrape (the exporter caches them between its own tasks). Left out: the always-empty
families of the exporter (group_consume_tps, group_consume_total_offset, group_dlqdiff).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from deploy.admin_ext import (
    AdminError,
    call,
    cluster_info,
    json_object,
    offset_table,
    route_masters,
    topic_names,
    topic_route,
)
from deploy.console.consumer_service import connection_list
from deploy.console.message_service import pull_range
from deploy.console.topic_service import consumed_by, queue_rows
from protocol.bodies import loads_lenient
from protocol.codes import RequestCode as RC

log = logging.getLogger(__name__)

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
CLUSTERING = "1"  # MessageModel.CLUSTERING.ordinal(), as the exporter writes msgModel
RUNTIME_LABELS = ("cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version")
GROUP_DIFF_LABELS = ("group", "topic", "countOfOnlineConsumers", "msgModel")
TOPIC_LABELS = ("cluster", "broker", "topic")
GROUP_LABELS = ("cluster", "broker", "topic", "group")
BROKER_LABELS = ("cluster", "brokerIP", "broker")


@dataclass
class Family:
    """One metric family: name, help, label names and its samples (label values, value)."""

    name: str
    help: str
    labels: tuple[str, ...]
    samples: dict[tuple[str, ...], float] = field(default_factory=dict)

    def set(self, values: Iterable[Any], value: float) -> None:
        self.samples[tuple(str(v) for v in values)] = float(value)


# the exporter's families, in its order: (name, help, labels)
FAMILIES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("rocketmq_group_diff", "GroupDiff", GROUP_DIFF_LABELS),
    ("rocketmq_group_retrydiff", "GroupRetryDiff", GROUP_DIFF_LABELS),
    ("rocketmq_group_count", "GroupCount", ("caddr", "localaddr", "group")),
    ("rocketmq_producer_count", "producer instance counter", ("cluster", "broker", "group")),
    ("rocketmq_producer_offset", "TopicOffset", TOPIC_LABELS),
    ("rocketmq_topic_retry_offset", "TopicRetryOffset", TOPIC_LABELS),
    ("rocketmq_topic_dlq_offset", "TopicRetryOffset", ("cluster", "broker", "group")),
    ("rocketmq_producer_tps", "TopicPutNums", TOPIC_LABELS),
    ("rocketmq_producer_message_size", "TopicPutMessageSize", TOPIC_LABELS),
    ("rocketmq_consumer_tps", "GroupGetNums", GROUP_LABELS),
    ("rocketmq_consumer_offset", "GroupBrokerTotalOffset", GROUP_LABELS),
    ("rocketmq_consumer_message_size", "GroupGetMessageSize", GROUP_LABELS),
    ("rocketmq_send_back_nums", "SendBackNums", GROUP_LABELS),
    ("rocketmq_group_get_latency_by_storetime", "GroupGetLatencyByStoreTime", GROUP_LABELS),
    ("rocketmq_broker_tps", "BrokerPutNums", BROKER_LABELS),
    ("rocketmq_broker_qps", "BrokerGetNums", BROKER_LABELS),
    ("rocketmq_broker_commitlog_diff", "brokerCommitLogDiffGauge", BROKER_LABELS),
)
CLIENT_LABELS = ("clientAddr", "clientId", "group", "topic")
# the consumer clients' own figures, from their running info's statusTable (ConsumeStatus):
# (name, help, ConsumeStatus field)
CLIENT_FAMILIES: tuple[tuple[str, str, str], ...] = (
    ("rocketmq_client_consume_fail_msg_count", "consumerClientFailedMsgCounts",
     "consumeFailedMsgs"),
    ("rocketmq_client_consume_fail_msg_tps", "consumerClientFailedTPS", "consumeFailedTPS"),
    ("rocketmq_client_consume_ok_msg_tps", "consumerClientOKTPS", "consumeOKTPS"),
    ("rocketmq_client_consume_rt", "consumerClientRT", "consumeRT"),
    ("rocketmq_client_consumer_pull_rt", "consumerClientPullRT", "pullRT"),
    ("rocketmq_client_consumer_pull_tps", "consumerClientPullTPS", "pullTPS"),
)  # fmt: skip

# rocketmq_brokeruntime_<suffix>: (suffix, help, runtime-info key, field of a TPS triple)
RUNTIME_VALUES: tuple[tuple[str, str, str, int | None], ...] = (
    ("msg_put_total_today_now", "brokerRuntimeMsgPutTotalTodayNow", "msgPutTotalTodayNow", None),
    ("msg_gettotal_today_now", "brokerRuntimeMsgGetTotalTodayNow", "msgGetTotalTodayNow", None),
    ("put_message_size_total", "brokerRuntimePutMessageSizeTotal", "putMessageSizeTotal", None),
    ("put_message_average_size", "brokerRuntimePutMessageAverageSize", "putMessageAverageSize",
     None),
    ("earliest_message_timestamp", "brokerRuntimeEarliestMessageTimeStamp",
     "earliestMessageTimeStamp", None),
    ("putmessage_times_total", "brokerRuntimePutMessageTimesTotal", "putMessageTimesTotal", None),
    ("pagecache_lock_time_mills", "brokerRuntimePageCacheLockTimeMills", "pageCacheLockTimeMills",
     None),
    ("commitlog_disk_ratio", "brokerRuntimeCommitLogDiskRatio", "commitLogDiskRatio", None),
    ("getfound_tps600", "brokerRuntimeGetFoundTps600", "getFoundTps", 2),
    ("getfound_tps60", "brokerRuntimeGetFoundTps60", "getFoundTps", 1),
    ("getfound_tps10", "brokerRuntimeGetFoundTps10", "getFoundTps", 0),
    ("gettotal_tps600", "brokerRuntimeGetTotalTps600", "getTotalTps", 2),
    ("gettotal_tps60", "brokerRuntimeGetTotalTps60", "getTotalTps", 1),
    ("gettotal_tps10", "brokerRuntimeGetTotalTps10", "getTotalTps", 0),
    ("gettransfered_tps600", "brokerRuntimeGetTransferedTps600", "getTransferedTps", 2),
    ("gettransfered_tps60", "brokerRuntimeGetTransferedTps60", "getTransferedTps", 1),
    ("gettransfered_tps10", "brokerRuntimeGetTransferedTps10", "getTransferedTps", 0),
    ("getmiss_tps600", "brokerRuntimeGetMissTps600", "getMissTps", 2),
    ("getmiss_tps60", "brokerRuntimeGetMissTps60", "getMissTps", 1),
    ("getmiss_tps10", "brokerRuntimeGetMissTps10", "getMissTps", 0),
    ("put_tps600", "brokerRuntimePutTps600", "putTps", 2),
    ("put_tps60", "brokerRuntimePutTps60", "putTps", 1),
    ("put_tps10", "brokerRuntimePutTps10", "putTps", 0),
    ("msg_gettotal_yesterdaymorning", "brokerRuntimeMsgGetTotalYesterdayMorning",
     "msgGetTotalYesterdayMorning", None),
    ("msg_puttotal_yesterdaymorning", "brokerRuntimeMsgPutTotalYesterdayMorning",
     "msgPutTotalYesterdayMorning", None),
    ("msg_gettotal_todaymorning", "brokerRuntimeMsgGetTotalTodayMorning",
     "msgGetTotalTodayMorning", None),
    ("msg_puttotal_todaymorning", "brokerRuntimeMsgPutTotalTodayMorning",
     "msgPutTotalTodayMorning", None),
    ("commitlog_maxoffset", "brokerRuntimeCommitLogMaxOffset", "commitLogMaxOffset", None),
    ("commitlog_minoffset", "brokerRuntimeCommitLogMinOffset", "commitLogMinOffset", None),
    ("put_latency_99", "brokerRuntimePutLatency99", "putLatency99", None),
    ("put_latency_999", "brokerRuntimePutLatency999", "putLatency999", None),
)  # fmt: skip


def _number(text: Any, index: int | None) -> float | None:
    """A runtime-info value as a number (`index`: that field of a "10s 60s 600s" triple)."""
    if text is None:
        return None
    parts = str(text).split()
    try:
        return float(parts[index] if index is not None else parts[0])
    except (IndexError, ValueError):
        return None


def _fixed(value: float) -> float:
    """Utils.getFixedDouble: two decimals (DecimalFormat "#.##", half-even)."""
    return round(value, 2)


class MetricsCollector:
    """One scrape of a cluster through its name server (admin codes only)."""

    def __init__(self, namesrv: str) -> None:
        self.namesrv = namesrv

    def collect(self) -> list[Family]:
        fams = {name: Family(name, help_text, labels) for name, help_text, labels in FAMILIES}
        fams.update((name, Family(name, help_text, CLIENT_LABELS))
                    for name, help_text, _field in CLIENT_FAMILIES)  # fmt: skip
        runtime = {s: Family(f"rocketmq_brokeruntime_{s}", h, RUNTIME_LABELS)
                   for s, h, _k, _i in RUNTIME_VALUES}  # fmt: skip
        info = cluster_info(self.namesrv)
        first_cluster = next(iter(info.cluster_addr_table), "")
        broker_cluster: dict[str, str] = {}
        for name, bd in info.broker_addr_table.items():
            cluster = bd.cluster
            broker_cluster[name] = cluster
            master = bd.broker_addrs.get(0)
            if master is None:
                continue
            try:
                self._broker(fams, runtime, cluster, name, master, bd.broker_addrs)
            except (AdminError, ValueError) as exc:
                log.warning("metrics: broker %s (%s) skipped: %s", name, master, exc)
        try:
            topics = topic_names(self.namesrv)
        except AdminError as exc:
            log.warning("metrics: no topic list: %s", exc)
            topics = []
        connections: dict[str, tuple[int, str, list[dict[str, Any]]]] = {}
        for topic in topics:
            try:
                self._topic(fams, topic, first_cluster, broker_cluster, connections)
            except (AdminError, ValueError) as exc:
                log.warning("metrics: topic %s skipped: %s", topic, exc)
        for group, (count, _model, conns) in sorted(connections.items()):
            fams["rocketmq_group_count"].set((
                ",".join(str(c.get("clientAddr", "")) for c in conns),
                ",".join(str(c.get("clientId", "")) for c in conns), group), count)
        masters = sorted(bd.broker_addrs[0] for bd in info.broker_addr_table.values()
                         if 0 in bd.broker_addrs)  # fmt: skip
        for group, (_count, _model, conns) in sorted(connections.items()):
            for conn in conns:
                try:
                    self._client(fams, group, conn, masters)
                except (AdminError, ValueError) as exc:
                    log.warning("metrics: client %s of %s skipped: %s", conn.get("clientId"),
                                group, exc)  # fmt: skip
        return list(fams.values()) + list(runtime.values())

    def _client(self, fams: dict[str, Family], group: str, conn: dict[str, Any],
                masters: list[str]) -> None:  # fmt: skip
        """One consumer client's running info (relayed by a master it is connected to): each
        subscribed topic's ConsumeStatus."""
        client_id = str(conn.get("clientId", ""))
        for addr in masters:
            resp = call(addr, RC.GET_CONSUMER_RUNNING_INFO, {
                "consumerGroup": group, "clientId": client_id, "jstackEnable": "false"},
                ok=(0, 1, 206))  # fmt: skip
            if resp.code != 0:
                continue
            table = status_table(bytes(resp.body or b"").decode("utf-8", "replace"))
            for topic, status in (table.items() if isinstance(table, dict) else ()):
                if not isinstance(status, dict):
                    continue
                labels = (conn.get("clientAddr", ""), client_id, group, topic)
                for name, _help, key in CLIENT_FAMILIES:
                    value = status.get(key)
                    if isinstance(value, int | float):
                        fams[name].set(labels, value)
            return

    # -- brokers ------------------------------------------------------------------------------
    def _stats(self, addr: str, name: str, key: str) -> dict[str, Any] | None:
        try:
            resp = call(addr, RC.VIEW_BROKER_STATS_DATA, {"statsName": name, "statsKey": key},
                        ok=(0, 1))  # fmt: skip
        except AdminError:
            return None
        if resp.code != 0:
            return None  # not counted yet
        minute = json_object(resp).get("statsMinute")
        return minute if isinstance(minute, dict) else None

    def _broker(self, fams: dict[str, Family], runtime: dict[str, Family], cluster: str,
                name: str, master: str, addrs: dict[int, str]) -> None:  # fmt: skip
        for fam, stats in (("rocketmq_broker_tps", "BROKER_PUT_NUMS"),
                           ("rocketmq_broker_qps", "BROKER_GET_NUMS")):  # fmt: skip
            minute = self._stats(master, stats, cluster)
            fams[fam].set((cluster, master, name), _fixed(float(minute.get("tps", 0.0)))
                          if minute else 0.0)  # fmt: skip
        try:
            table = self._runtime(master)
        except (AdminError, ValueError) as exc:  # 4.9.8 fails it until its stats have a sample
            log.info("metrics: no runtime info of %s yet: %s", master, exc)
            table = {}
        labels = (cluster, master, "", table.get("brokerVersionDesc", ""),
                  table.get("bootTimestamp", ""), table.get("brokerVersion", ""))
        for suffix, _help, key, index in RUNTIME_VALUES:
            value = _number(table.get(key), index)
            if value is not None:
                runtime[suffix].set(labels, value)
        master_max = _number(table.get("commitLogMaxOffset"), None) or 0.0
        for bid, addr in sorted(addrs.items()):
            if bid == 0:
                continue
            try:
                slave_max = _number(self._runtime(addr).get("commitLogMaxOffset"), None) or 0.0
            except (AdminError, ValueError):
                continue
            fams["rocketmq_broker_commitlog_diff"].set((cluster, addr, name),
                                                       master_max - slave_max)  # fmt: skip
        body = loads_lenient(bytes(call(master, RC.GET_ALL_PRODUCER_INFO).body or b"{}"))
        table_p = body.get("data", {}) if isinstance(body, dict) else {}
        for group, conns in sorted(table_p.items()):
            fams["rocketmq_producer_count"].set((cluster, name, group),
                                                len(conns) if isinstance(conns, list) else -1)

    def _runtime(self, addr: str) -> dict[str, Any]:
        table = json_object(call(addr, RC.GET_BROKER_RUNTIME_INFO)).get("table", {})
        return table if isinstance(table, dict) else {}

    # -- topics and groups --------------------------------------------------------------------
    def _topic(self, fams: dict[str, Family], topic: str, first_cluster: str,
               broker_cluster: dict[str, str],
               connections: dict[str, tuple[int, str, list[dict[str, Any]]]]) -> None:  # fmt: skip
        masters = route_masters(topic_route(self.namesrv, topic))
        written: dict[str, int] = {}
        for q in queue_rows(topic, masters):
            written[q.broker] = written.get(q.broker, 0) + q.max_offset
        for broker, addr in sorted(masters.items()):
            total = written.get(broker, 0)
            if topic.startswith(DLQ_PREFIX):
                fams["rocketmq_topic_dlq_offset"].set(
                    (first_cluster, broker, topic[len(DLQ_PREFIX):]), total)
                continue
            family = "rocketmq_topic_retry_offset" if topic.startswith(RETRY_PREFIX) else \
                "rocketmq_producer_offset"  # fmt: skip
            fams[family].set((first_cluster, broker, topic), total)
            if topic.startswith(RETRY_PREFIX):
                continue
            cluster = broker_cluster.get(broker, first_cluster)
            for fam, name in (("rocketmq_producer_tps", "TOPIC_PUT_NUMS"),
                              ("rocketmq_producer_message_size", "TOPIC_PUT_SIZE")):  # fmt: skip
                minute = self._stats(addr, name, topic)
                if minute is not None:
                    fams[fam].set((cluster, broker, topic), _fixed(float(minute.get("tps", 0))))
        if topic.startswith(DLQ_PREFIX):
            return
        for group in consumed_by(topic, masters):
            self._group(fams, topic, group, masters, first_cluster, broker_cluster, connections)

    def _store_time(self, addr: str, topic: str, queue_id: int, offset: int) -> int | None:
        """The store time of the message at `offset` (the group's first unconsumed one): one
        non-committing pull of one message under mqadmin's TOOLS_CONSUMER group (the
        exporter's queryMsgByOffset), so the group's own stats are not touched; None when
        the queue has no message there (moved, or not found)."""
        msgs = pull_range(addr, topic, queue_id, offset, offset + 1, 1)
        return msgs[0].store_timestamp if msgs else None

    def _connection(self, group: str, addr: str,
                    connections: dict[str, tuple[int, str, list[dict[str, Any]]]]
                    ) -> tuple[int, str]:  # fmt: skip
        known = connections.get(group)
        if known is None:
            body = connection_list([("", addr)], group)
            conns = [c for c in body.get("connectionSet", []) or [] if isinstance(c, dict)]
            model = "0" if str(body.get("messageModel")) == "BROADCASTING" else CLUSTERING
            known = connections[group] = (len(conns), model, conns)
        return known[0], known[1]

    def _group(self, fams: dict[str, Family], topic: str, group: str, masters: dict[str, str],
               first_cluster: str, broker_cluster: dict[str, str],
               connections: dict[str, tuple[int, str, list[dict[str, Any]]]]) -> None:  # fmt: skip
        any_addr = next(iter(masters.values()))
        online, model = self._connection(group, any_addr, connections)
        diff = 0
        now = int(time.time() * 1000)
        for broker, addr in sorted(masters.items()):
            cs = call(addr, RC.GET_CONSUME_STATS, {"consumerGroup": group, "topic": topic},
                      ok=(0, 17, 206))  # fmt: skip
            offsets = offset_table(cs) if cs.code == 0 else []
            consumed = sum(int(o.get("consumerOffset", 0)) for _mq, o in offsets)
            diff += sum(int(o.get("brokerOffset", 0)) - int(o.get("consumerOffset", 0))
                        for _mq, o in offsets)  # fmt: skip
            cluster = broker_cluster.get(broker, first_cluster)
            fams["rocketmq_consumer_offset"].set((first_cluster, broker, topic, group), consumed)
            latency = 0
            for mq, o in offsets:
                consumer_offset = int(o.get("consumerOffset", 0))
                if int(o.get("brokerOffset", 0)) > consumer_offset:
                    stored = self._store_time(addr, topic, int(mq.get("queueId", 0)),
                                              consumer_offset)  # fmt: skip
                    if stored is not None:
                        latency = max(latency, now - stored)
            if model == CLUSTERING:
                fams["rocketmq_group_get_latency_by_storetime"].set(
                    (first_cluster, broker, topic, group), latency)
            key = f"{topic}@{group}"
            for fam, name, field_name in (
                    ("rocketmq_consumer_tps", "GROUP_GET_NUMS", "tps"),
                    ("rocketmq_consumer_message_size", "GROUP_GET_SIZE", "tps"),
                    ("rocketmq_send_back_nums", "SNDBCK_PUT_NUMS", "sum")):  # fmt: skip
                minute = self._stats(addr, name, key)
                if minute is not None:
                    value = float(minute.get(field_name, 0))
                    fams[fam].set((cluster, broker, topic, group),
                                  _fixed(value) if field_name == "tps" else value)  # fmt: skip
        if model == CLUSTERING:
            family = "rocketmq_group_retrydiff" if topic.startswith(RETRY_PREFIX) else \
                "rocketmq_group_diff"  # fmt: skip
            fams[family].set((group, topic, online, model), diff)


def status_table(text: str) -> dict[str, Any]:
    """A ConsumerRunningInfo's statusTable ({topic: ConsumeStatus}). The whole body is not
    JSON (fastjson writes mqTable with MessageQueue objects as keys), so only this member is
    read."""
    at = text.find('"statusTable":')
    if at < 0:
        return {}
    try:
        table, _end = json.JSONDecoder().raw_decode(text, at + len('"statusTable":'))
    except ValueError:
        return {}
    return table if isinstance(table, dict) else {}


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format_value(value: float) -> str:
    if value != value:  # NaN
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else f"{value:.1f}"


def exposition(families: Iterable[Family]) -> str:
    """The Prometheus text format (version 0.0.4) of these families."""
    lines: list[str] = []
    for fam in families:
        lines.append(f"# HELP {fam.name} {fam.help.replace(chr(92), chr(92) * 2)}")
        lines.append(f"# TYPE {fam.name} gauge")
        for values, value in fam.samples.items():
            labels = ",".join(f'{k}="{_escape_label(v)}"' for k, v in zip(fam.labels, values,
                                                                           strict=True))
            lines.append(f"{fam.name}{{{labels}}} {_format_value(value)}" if labels else
                         f"{fam.name} {_format_value(value)}")  # fmt: skip
    return "\n".join(lines) + "\n"
