"""AdminBrokerProcessor's consumer offset and statistics codes.

Mirrors broker/processor/AdminBrokerProcessor.java, RocketMQ 4.9.x: GET_ALL_CONSUMER_OFFSET,
GET_CONSUMER_CONNECTION_LIST, GET_CONSUME_STATS, GET_BROKER_CONSUME_STATS, GET_TOPIC_STATS_INFO,
GET_SYSTEM_TOPIC_LIST_FROM_BROKER, QUERY_CORRECTION_OFFSET, QUERY_CONSUME_QUEUE,
CLONE_GROUP_OFFSET, QUERY_CONSUME_TIME_SPAN and VIEW_BROKER_STATS_DATA.
"""


from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from actors.broker.context import BrokerContext
from actors.broker.offsets import TOPIC_GROUP_SEPARATOR
from actors.broker.stats_items import GROUP_GET_NUMS, read_published
from actors.broker.stats_items import window as stats_window
from actors.broker.topic_config import TopicConfig
from actors.core import Request
from protocol.bodies import (
    MessageQueue,
    dumps_compact,
    dumps_object_map,
)
from protocol.codes import SYSTEM_TOPICS, language_name
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.headers import (
    CloneGroupOffsetRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumeStatsRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetHeader,
    ViewBrokerStatsDataRequestHeader,
)
from store.consume_queue import CQ_UNIT

log = logging.getLogger(__name__)


JAVA_LONG_MAX = (1 << 63) - 1  # Long.MAX_VALUE


class ConsumerStatsQueries:
    """AdminBrokerProcessor's offset and stats queries: read-only over the broker's tables and
    the store, owned by the admin core (which routes these codes here)."""

    def __init__(self, ctx: BrokerContext, store: Any) -> None:
        self.ctx = ctx
        self.store = store

    def query_correction_offset(self, req: Request, now_ms: int) -> RemotingCommand:
        """QUERY_CORRECTION_OFFSET: per queue of the topic, the least committed offset of every
        group but filterGroups (offsets below the queue's min left out), Long.MAX_VALUE where
        compareGroup's offset is behind it (ConsumerOffsetManager.queryMinOffsetInAllGroup);
        a compareGroup among filterGroups compares nothing, as in Java.

        Java's version also deletes filterGroups' offsets from the table as it iterates (it
        removes through the key set); a query here changes nothing."""
        h = QueryCorrectionOffsetHeader.from_ext(req.cmd.ext_fields)
        skip = {g for g in (h.filter_groups or "").split(",") if g.strip()}
        table = self.ctx.offsets.table
        least: dict[int, int] = {}
        for key, queues in table.items():
            topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            if topic != h.topic or group in skip:
                continue
            for qid, off in queues.items():
                if off >= self.store.get_min_offset_in_queue(h.topic, qid):
                    least[qid] = min(off, least.get(qid, off))
        # Java's filter removed a filtered compareGroup's offsets first: then nothing compares
        compare = {} if h.compare_group in skip else table.get(
            self.ctx.offsets.key(h.topic, h.compare_group), {})  # fmt: skip
        for qid, off in compare.items():
            if qid in least and least[qid] > off:
                least[qid] = JAVA_LONG_MAX
        body = b'{"correctionOffsets":' + dumps_object_map(sorted(least.items())) + b"}"
        return req.cmd.make_response(RS.SUCCESS, None, None, body)


    def all_offsets(self, req: Request, now_ms: int) -> RemotingCommand:
        body = self.ctx.offsets.encode().encode()
        return req.cmd.make_response(RS.SUCCESS, None, None, body)

    def connections(self, req: Request, now_ms: int) -> RemotingCommand:
        cmd = req.cmd
        group = GetConsumerConnectionListRequestHeader.from_ext(cmd.ext_fields).consumer_group
        info = self.ctx.consumer_groups.get(group)
        if info is None or not info.client_ids:
            return cmd.make_response(
                RS.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
            )
        conns = [
            {"clientAddr": addr, "clientId": cid, "language": language_name(lang), "version": ver}
            for cid, _conn, addr, lang, ver in info.connections
        ] or [{"clientId": c} for c in info.client_ids]
        body = {
            "connectionSet": conns,
            "consumeFromWhere": info.consume_from_where,
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "subscriptionTable": {s.topic: s.to_obj() for s in info.subscriptions},
        }
        return cmd.make_response(RS.SUCCESS, None, None, dumps_compact(body))

    def consume_stats(self, req: Request, now_ms: int) -> RemotingCommand:
        h = GetConsumeStatsRequestHeader.from_ext(req.cmd.ext_fields)
        group = h.consumer_group
        only = h.topic
        topics = [only] if only else sorted(self.ctx.offsets.topics_of_group(group))
        rows: list[tuple[dict[str, Any], dict[str, int]]] = []
        total_diff = 0
        tps = 0.0
        published = self._published_stats()
        for topic in topics:
            tc = self._stats_topic(group, topic)
            if tc is None:
                continue
            diff = self._offset_rows(group, topic, tc.read_queue_nums, rows)
            total_diff += diff
            tps += _get_tps(published, group, topic)  # tpsGroupGetNums
        # ConsumeStats.offsetTable is a Map<MessageQueue, OffsetWrapper>: fastjson's object keys
        body = (_consume_stats_json(rows, tps)[:-1] + b',"totalDiff":'
                + str(total_diff).encode() + b"}")  # fmt: skip
        return req.cmd.make_response(RS.SUCCESS, None, None, body)

    def broker_consume_stats(self, req: Request, now_ms: int) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS (mqadmin brokerConsumeStats): a ConsumeStatsList with, per
        subscription group, one ConsumeStats per topic it has offsets for (its write queues);
        isOrder=true keeps only order topics."""
        ext = req.cmd.ext_fields or {}
        only_order = str(ext.get("isOrder", "false")).lower() == "true"
        groups = []
        total_diff = 0
        published = self._published_stats()
        for group in sorted(self.ctx.groups.table):
            stats = []
            for topic in sorted(self.ctx.offsets.topics_of_group(group)):
                tc = self._stats_topic(group, topic)
                if tc is None or (only_order and not tc.order):
                    continue
                rows: list[tuple[dict[str, Any], dict[str, int]]] = []
                total_diff += self._offset_rows(group, topic, tc.write_queue_nums, rows)
                stats.append(_consume_stats_json(rows, _get_tps(published, group, topic)))
            groups.append(
                b"{" + dumps_compact(group) + b":[" + b",".join(stats) + b"]}"
            )
        body = (
            b'{"brokerAddr":' + dumps_compact(self.ctx.broker_config.broker_addr)
            + b',"consumeStatsList":[' + b",".join(groups)
            + b'],"totalDiff":' + str(total_diff).encode() + b"}"
        )  # fmt: skip
        return req.cmd.make_response(RS.SUCCESS, None, None, body)

    def _stats_topic(self, group: str, topic: str) -> TopicConfig | None:
        """The topic's config when a group's stats include it: it exists, and an online group
        still subscribes to it."""
        tc = self.ctx.topics.get(topic)
        if tc is None:
            return None
        info = self.ctx.consumer_groups.get(group)
        if info is not None and info.subscriptions and info.find_subscription(topic) is None:
            return None  # online, but no longer subscribed to this topic
        return tc

    def _offset_rows(
        self,
        group: str,
        topic: str,
        queue_nums: int,
        rows: list[tuple[dict[str, Any], dict[str, int]]],
    ) -> int:
        """Append (MessageQueue, OffsetWrapper) of queues 0..queue_nums-1; their total lag."""
        bname = self.ctx.broker_config.brokerName
        diff = 0
        for qid in range(queue_nums):
            broker_off = max(0, int(self.store.get_max_offset_in_queue(topic, qid)))
            consumer_off = max(0, self.ctx.offsets.query_offset(group, topic, qid))
            last_ts = 0
            if consumer_off > 0:
                last_ts = max(0, int(self.store.get_message_store_timestamp(
                    topic, qid, consumer_off - 1)))  # fmt: skip
            diff += broker_off - consumer_off
            offsets = {
                "brokerOffset": broker_off,
                "consumerOffset": consumer_off,
                "lastTimestamp": last_ts,
            }
            rows.append((MessageQueue(topic, bname, qid).to_obj(), offsets))
        return diff

    def system_topics(self, req: Request, now_ms: int) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER: TopicValidator's system topic set."""
        body = dumps_compact({"topicList": sorted(SYSTEM_TOPICS)})
        return req.cmd.make_response(RS.SUCCESS, None, None, body)

    def topic_stats(self, req: Request, now_ms: int) -> RemotingCommand:
        """GET_TOPIC_STATS_INFO (mqadmin topicStatus): min/max offset and last store time of
        each write queue, as a MessageQueue-keyed TopicStatsTable."""
        cmd = req.cmd
        topic = GetTopicStatsInfoRequestHeader.from_ext(cmd.ext_fields).topic
        tc = self.ctx.topics.get(topic)
        if tc is None:
            return cmd.make_response(RS.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        bname = self.ctx.broker_config.brokerName
        table: list[tuple[dict[str, Any], dict[str, int]]] = []
        for qid in range(tc.write_queue_nums):
            lo = max(0, int(self.store.get_min_offset_in_queue(topic, qid)))
            hi = max(0, int(self.store.get_max_offset_in_queue(topic, qid)))
            last = int(self.store.get_message_store_timestamp(topic, qid, hi - 1)) if hi else 0
            offsets = {"lastUpdateTimestamp": last, "maxOffset": hi, "minOffset": lo}
            table.append((MessageQueue(topic, bname, qid).to_obj(), offsets))
        body = b'{"offsetTable":' + dumps_object_map(table) + b"}"
        return cmd.make_response(RS.SUCCESS, None, None, body)


    # --- consume queue, group offset clone, consume time span, stats items ---------------------

    def query_consume_queue(self, req: Request, now_ms: int) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE (mqadmin queryCq): up to `count` units of one consume queue from
        `index` (to the end of that index's file, as ConsumeQueue.getIndexBuffer reads), with
        the queue's min / max index and, given a group, its subscription. Java 4.9.x encodes
        its body before filling it in (so its tool prints zeros); this one carries the values."""
        cmd = req.cmd
        h = QueryConsumeQueueRequestHeader.from_ext(cmd.ext_fields)
        cq = self.store.consume_queue(h.topic, h.queue_id)
        if cq is None:
            return cmd.make_response(RS.SYSTEM_ERROR, f"{h.queue_id}@{h.topic} is not exist!")
        body: dict[str, Any] = {
            "maxQueueIndex": int(cq.get_max_offset_in_queue()),
            "minQueueIndex": int(cq.get_min_offset_in_queue()),
        }
        if h.consumer_group is not None:
            info = self.ctx.consumer_groups.get(h.consumer_group)
            sub = info.find_subscription(h.topic) if info is not None else None
            if sub is None:
                body["filterData"] = f"{h.consumer_group}@{h.topic} is not online!"
            else:
                body["subscriptionData"] = sub.to_obj()
                # ConsumerFilterManager keeps filter data for SQL92 groups only: a tag
                # subscription's is null, which JSON.toJSONString writes as "null"
                body["filterData"] = "null"
        found = cq.get_index_buffer(h.index)
        if found is None:
            return cmd.make_response(
                RS.SUCCESS, f"Index {h.index} of {h.queue_id}@{h.topic} is not exist!", None,
                dumps_compact(body))  # fmt: skip
        units, n = found
        body["queueData"] = [
            {"eval": False, "physicOffset": phy, "physicSize": size, "tagsCode": tags}
            for phy, size, tags in (
                CQ_UNIT.unpack_from(units, i * CQ_UNIT.size) for i in range(min(n, h.count))
            )
        ]  # no consume-queue extension here: no extendDataJson / bitMap, eval stays false
        return cmd.make_response(RS.SUCCESS, None, None, dumps_compact(body))

    def clone_group_offset(self, req: Request, now_ms: int) -> RemotingCommand:
        """CLONE_GROUP_OFFSET (mqadmin cloneGroupOffset): copy srcGroup's offsets of the topic
        (every topic it has offsets for when none is named) to destGroup. Unless offline, a
        topic the online srcGroup no longer subscribes to is skipped."""
        cmd = req.cmd
        h = CloneGroupOffsetRequestHeader.from_ext(cmd.ext_fields)
        topics = (
            [h.topic] if h.topic and h.topic.strip()
            else sorted(self.ctx.offsets.topics_of_group(h.src_group))
        )  # fmt: skip
        info = self.ctx.consumer_groups.get(h.src_group)
        for topic in topics:
            if self.ctx.topics.get(topic) is None:
                log.warning("[cloneGroupOffset], topic config not exist, %s", topic)
                continue
            if (not h.offline and info is not None and info.subscriptions
                    and info.find_subscription(topic) is None):  # fmt: skip
                log.warning("[cloneGroupOffset], the consumer group[%s], topic[%s] not exist",
                            h.src_group, topic)  # fmt: skip
                continue
            table = self.ctx.offsets.table.get(self.ctx.offsets.key(topic, h.src_group))
            for qid, off in sorted((table or {}).items()):
                self.ctx.offsets.commit_offset(h.dest_group, topic, qid, off)
        return cmd.make_response(RS.SUCCESS, None, {})

    def consume_time_span(self, req: Request, now_ms: int) -> RemotingCommand:
        """QUERY_CONSUME_TIME_SPAN (DefaultMQAdminExt.queryConsumeTimeSpan): per write queue the
        first and last store times, the store time at the group's offset and its delay."""
        cmd = req.cmd
        h = QueryConsumeTimeSpanRequestHeader.from_ext(cmd.ext_fields)
        topic = h.topic
        tc = self.ctx.topics.get(topic)
        if tc is None:
            return cmd.make_response(RS.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        st = self.store
        bname = self.ctx.broker_config.brokerName
        spans = []
        for qid in range(tc.write_queue_nums):
            min_time = int(st.get_earliest_message_time(topic, qid))
            max_off = int(st.get_max_offset_in_queue(topic, qid))
            max_time = int(st.get_message_store_timestamp(topic, qid, max_off - 1))
            consumer_off = self.ctx.offsets.query_offset(h.group, topic, qid)
            consume_time = (
                int(st.get_message_store_timestamp(topic, qid, consumer_off - 1))
                if consumer_off > 0 else min_time
            )  # fmt: skip
            delay = 0
            if consumer_off < max_off:
                delay = now_ms - int(st.get_message_store_timestamp(topic, qid, consumer_off))
            spans.append({
                "consumeTimeStamp": consume_time,
                "consumeTimeStampStr": _java_date(consume_time),
                "delayTime": delay,
                "maxTimeStamp": max_time,
                "maxTimeStampStr": _java_date(max_time),
                "messageQueue": MessageQueue(topic, bname, qid).to_obj(),
                "minTimeStamp": min_time,
                "minTimeStampStr": _java_date(min_time),
            })  # fmt: skip
        body = dumps_compact({"consumeTimeSpanSet": spans})
        return cmd.make_response(RS.SUCCESS, None, None, body)

    def view_stats_data(self, req: Request, now_ms: int) -> RemotingCommand:
        """VIEW_BROKER_STATS_DATA (mqadmin statsAll, the dashboard's topic TPS): one stats
        item's minute / hour / day windows, as the send and pull actors last published them."""
        cmd = req.cmd
        h = ViewBrokerStatsDataRequestHeader.from_ext(cmd.ext_fields)
        rings = self._published_stats().get((h.stats_name, h.stats_key))
        if rings is None:
            return cmd.make_response(
                RS.SYSTEM_ERROR, f"The stats <{h.stats_name}> <{h.stats_key}> not exist")
        body = {"statsDay": stats_window(rings["d"]), "statsHour": stats_window(rings["h"]),
                "statsMinute": stats_window(rings["m"])}  # fmt: skip
        return cmd.make_response(RS.SUCCESS, None, None, dumps_compact(body))

    def _published_stats(self) -> dict[tuple[str, str], Any]:
        """The stats items the send and pull actors published last."""
        root = self.ctx.store_config.storePathRootDir
        return read_published(root, ("send", "pull")) if root else {}





def _java_date(ms: int) -> str:
    """UtilAll.formatDate(new Date(ms), "yyyy-MM-dd#HH:mm:ss:SSS") in local time."""
    try:
        t = datetime.fromtimestamp(ms // 1000)
    except (OverflowError, OSError, ValueError):
        return ""
    return t.strftime("%Y-%m-%d#%H:%M:%S:") + f"{ms % 1000:03d}"




def _get_tps(published: dict[tuple[str, str], Any], group: str, topic: str) -> float:
    """BrokerStatsManager.tpsGroupGetNums: the GROUP_GET_NUMS minute TPS of topic@group."""
    rings = published.get((GROUP_GET_NUMS, f"{topic}@{group}"))
    return float(stats_window(rings["m"])["tps"]) if rings is not None else 0.0


def _consume_stats_json(rows: list[tuple[dict[str, Any], dict[str, int]]], tps: float) -> bytes:
    """ConsumeStats as fastjson writes it."""
    return (b'{"consumeTps":' + repr(float(tps)).encode() + b',"offsetTable":'
            + dumps_object_map(rows) + b"}")  # fmt: skip
