"""The admin group (RocketMQ's default processor): topic and group admin, offsets by queue,
queue locks, runtime info; any other code => REQUEST_CODE_NOT_SUPPORTED.

Mirrors broker/processor/AdminBrokerProcessor.java, RocketMQ 4.9.x (spec §3.4, §9.8, §9.9).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from actors.broker.context import BrokerContext
from actors.broker.events import (
    SubscriptionGroupChanged,
    SubscriptionGroupDeleted,
    TopicConfigChanged,
)
from actors.broker.held_replies import HeldReplies
from actors.broker.lock_manager import MessageQueueKey, RebalanceLockManager
from actors.broker.offsets import TOPIC_GROUP_SEPARATOR
from actors.broker.stats import BrokerStatsSampler
from actors.broker.stats_items import GROUP_GET_NUMS, read_published
from actors.broker.stats_items import window as stats_window
from actors.broker.subscription_group import group_config_from_obj
from actors.broker.topic_config import TopicConfig, validate_topic
from actors.core import BAD_BODY_ERRORS, CodeDispatchCore, Request, properties_update
from protocol.bodies import (
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    UnlockBatchRequestBody,
    dumps_compact,
    dumps_object_map,
    loads_lenient,
    loads_object_map,
)
from protocol.codes import SYSTEM_TOPICS, LanguageCode, is_system_topic
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.headers import (
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetBrokerConfigResponseHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    GetConsumeStatsRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    GetTopicStatsInfoRequestHeader,
    QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader,
    QueryCorrectionOffsetHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    ViewBrokerStatsDataRequestHeader,
)
from protocol.message import decode_offset_msg_id
from protocol.record import RecordError, decode_record_fields
from store.clean_service import disk_usage_ratio
from store.config import properties_text
from store.consume_queue import CQ_UNIT
from store.stats_page import StatsPage, stats_path

log = logging.getLogger(__name__)


def _writable(path: str) -> bool:
    """True when `path` (or, not there yet, the nearest directory that would hold it) may be
    written by this process."""
    probe = path
    while not os.path.exists(probe):
        parent = os.path.dirname(probe)
        if parent == probe:
            return False
        probe = parent
    return os.access(probe, os.W_OK)


def language_name(code: int) -> str:
    """LanguageCode as fastjson writes the enum (its name)."""
    try:
        return LanguageCode(code).name
    except ValueError:
        return "OTHER"


def _mq_keys(mqs: list[MessageQueue]) -> list[MessageQueueKey]:
    return [(m.topic, m.broker_name, m.queue_id) for m in mqs]


CALL_CLIENT_TIMEOUT_MS = 10_000  # Broker2Client.callClient
CONSUMER_STATUS_TIMEOUT_MS = 5_000  # Broker2Client.getConsumeStatus's invokeSync
JAVA_LONG_MAX = (1 << 63) - 1  # Long.MAX_VALUE


@dataclass(slots=True)
class PendingCall:
    """An admin request relayed to a client (callClient), waiting for the client's answer."""

    conn_id: int  # who asked (an admin tool)
    cmd: RemotingCommand  # their request
    deadline_ms: int


@dataclass(slots=True)
class StatusCall:
    """INVOKE_BROKER_TO_GET_CONSUMER_STATUS: GET_CONSUMER_STATUS_FROM_CLIENT asked of each
    client; their queue offset tables, by client id, once all answered or the time is up."""

    conn_id: int
    cmd: RemotingCommand
    deadline_ms: int
    pending: dict[int, str]  # opaque of our request -> the client's id
    tables: dict[str, bytes]  # client id -> its messageQueueTable (fastjson object-keyed map)


class AdminBrokerProcessor(CodeDispatchCore):
    """The admin core (ProcessorCore), also the unknown-code default."""

    BAD_REQUEST_ERRORS = BAD_BODY_ERRORS

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.store = ctx.store
        root = getattr(ctx.store_config, "storePathRootDir", None) or "."
        self.stats = BrokerStatsSampler(StatsPage(stats_path(root), writable=False))
        self.locks = RebalanceLockManager()
        # UPDATE_AND_CREATE_TOPIC / UPDATE_BROKER_CONFIG of brokerPermission: answered once the
        # name servers have the registration (registerIncrementBrokerData / registerBrokerAll)
        self.held = HeldReplies(ctx.outbox, ctx.broker_config.registerBrokerTimeoutMills)
        self.calls: dict[int, PendingCall] = {}  # opaque of our request to the client -> call
        self.status_calls: dict[int, StatusCall] = {}  # opaque of one client's request -> call
        self.handlers = {
            RC.UPDATE_AND_CREATE_TOPIC: self._create_topic,
            RC.GET_ALL_TOPIC_CONFIG: self._all_topic_config,
            RC.GET_BROKER_RUNTIME_INFO: self._runtime_info,
            RC.GET_MAX_OFFSET: self._max_offset,
            RC.GET_MIN_OFFSET: self._min_offset,
            RC.GET_EARLIEST_MSG_STORETIME: self._earliest_time,
            RC.SEARCH_OFFSET_BY_TIMESTAMP: self._search_offset,
            RC.LOCK_BATCH_MQ: self._lock,
            RC.UNLOCK_BATCH_MQ: self._unlock,
            RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self._create_group,
            RC.DELETE_SUBSCRIPTIONGROUP: self._delete_group,
            RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self._all_groups,
            RC.GET_ALL_CONSUMER_OFFSET: self._all_offsets,
            RC.GET_CONSUMER_CONNECTION_LIST: self._connections,
            RC.GET_CONSUME_STATS: self._consume_stats,
            RC.GET_TOPIC_STATS_INFO: self._topic_stats,
            RC.GET_BROKER_CONSUME_STATS: self._broker_consume_stats,
            RC.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: self._system_topics,
            RC.GET_BROKER_CONFIG: self._broker_config,
            RC.UPDATE_BROKER_CONFIG: self._update_broker_config,
            RC.INVOKE_BROKER_TO_RESET_OFFSET: self._reset_offset,
            RC.QUERY_TOPIC_CONSUME_BY_WHO: self._consume_by_who,
            RC.GET_CONSUMER_RUNNING_INFO: self._consumer_running_info,
            RC.CONSUME_MESSAGE_DIRECTLY: self._consume_directly,
            RC.QUERY_CONSUME_QUEUE: self._query_consume_queue,
            RC.CLONE_GROUP_OFFSET: self._clone_group_offset,
            RC.QUERY_CONSUME_TIME_SPAN: self._consume_time_span,
            RC.VIEW_BROKER_STATS_DATA: self._view_stats_data,
            RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self._consumer_status,
            RC.QUERY_CORRECTION_OFFSET: self._query_correction_offset,
        }

    # --- topics ---------------------------------------------------------------------------

    def _create_topic(self, req: Request, now_ms: int) -> RemotingCommand | None:
        cmd = req.cmd
        h = CreateTopicRequestHeader.from_ext(cmd.ext_fields)
        topic = h.topic
        bad = validate_topic(topic)
        if bad is not None:
            return cmd.make_response(RS.SYSTEM_ERROR, bad)
        if is_system_topic(topic) or topic == self.ctx.broker_config.brokerClusterName:
            return cmd.make_response(
                RS.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic."
            )
        tc = TopicConfig(
            topic,
            read_queue_nums=h.read_queue_nums,
            write_queue_nums=h.write_queue_nums,
            perm=h.perm,
            topic_filter_type=h.topic_filter_type,
            topic_sys_flag=h.topic_sys_flag or 0,
            order=h.order,
        )
        resp = cmd.make_response(RS.SUCCESS, None, {})
        if not self.ctx.registration_barrier or cmd.is_oneway:
            self.ctx.emit(TopicConfigChanged(tc, register=True))
            return resp
        # registerIncrementBrokerData is synchronous in Java: answer once the name servers
        # have the route (release), or after registerBrokerTimeoutMills anyway (tick).
        token = self.held.hold(req.conn_id, resp, now_ms)
        self.ctx.emit(TopicConfigChanged(tc, register=True, barrier=token))
        return None

    # --- the registration barrier -------------------------------------------------------------

    def release(self, token: int, now_ms: int) -> bool:
        """The controller re-registered: send the reply held under `token` (False if gone)."""
        return self.held.release(token)

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """Forget replies held for the connection (locks expire by time)."""
        self.held.forget(conn_id)
        for opaque in [o for o, c in self.calls.items() if c.conn_id == conn_id]:
            del self.calls[opaque]
        for opaque in [o for o, c in self.status_calls.items() if c.conn_id == conn_id]:
            del self.status_calls[opaque]

    def tick(self, now_ms: int) -> int | None:
        """Answer held replies and client calls that did not complete in time."""
        held_wait = self.held.expire(now_ms)
        for opaque in [o for o, c in self.calls.items() if now_ms >= c.deadline_ms]:
            call = self.calls.pop(opaque)
            ext = call.cmd.ext_fields or {}
            self._reply(call.conn_id, call.cmd.make_response(  # callConsumer's timeout answer
                RS.CONSUME_MSG_TIMEOUT,
                f"consumer <{ext.get('consumerGroup', '')}> <{ext.get('clientId', '')}> Timeout: "
                f"the client did not answer code {call.cmd.code} in time"))
        for sc in {id(c): c for c in self.status_calls.values()}.values():
            if now_ms >= sc.deadline_ms:  # clients that did not answer are left out, as in Java
                self._finish_status(sc)
        deadlines = [now_ms + held_wait] if held_wait is not None else []
        deadlines += [c.deadline_ms for c in self.calls.values()]
        deadlines += [c.deadline_ms for c in self.status_calls.values()]
        deadlines.append(now_ms + self.stats.sample(now_ms))  # StoreStatsService, each second
        return max(0, min(deadlines) - now_ms)

    def _reply(self, conn_id: int, resp: RemotingCommand) -> None:
        if self.ctx.outbox is not None:
            self.ctx.outbox.send(conn_id, resp)

    # --- requests relayed to a client (Broker2Client.callClient) -------------------------------

    def _client_conn(self, group: str, client_id: str | None) -> int | None:
        info = self.ctx.consumer_groups.get(group)
        if info is None:
            return None
        for cid, conn_id, _addr, _lang, _ver in info.connections:
            if cid == client_id:
                return conn_id
        return None

    def _relay(
        self, req: Request, group: str, client_id: str | None, fwd: RemotingCommand, now_ms: int
    ) -> RemotingCommand | None:
        """Broker2Client.callClient: send fwd to the group's client; its answer (see
        on_client_response) goes back to the asker, unless the asker sent a oneway request."""
        cmd = req.cmd
        conn_id = self._client_conn(group, client_id)
        if conn_id is None:
            return cmd.make_response(
                RS.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online"
            )
        if self.ctx.outbox is None:
            return cmd.make_response(RS.SYSTEM_ERROR, "no connection to the client")
        if not cmd.is_oneway:  # a oneway asker gets nothing back: the answer is dropped
            self.calls[fwd.opaque] = PendingCall(
                req.conn_id, cmd, now_ms + CALL_CLIENT_TIMEOUT_MS
            )
        self.ctx.outbox.call(conn_id, fwd)
        return None

    def on_client_response(self, resp: RemotingCommand, now_ms: int) -> None:
        """A client answered a relayed request: pass code, remark, ext fields and body on."""
        sc = self.status_calls.pop(resp.opaque, None)
        if sc is not None:
            self._status_answer(sc, resp)
            return
        call = self.calls.pop(resp.opaque, None)
        if call is None:
            log.info("client response opaque=%d code=%d matches no call", resp.opaque, resp.code)
            return
        self._reply(call.conn_id, call.cmd.make_response(
            resp.code, resp.remark, resp.ext_fields, resp.body))

    def _consumer_running_info(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """GET_CONSUMER_RUNNING_INFO: ask the consumer itself (mqadmin consumerStatus)."""
        h = GetConsumerRunningInfoRequestHeader.from_ext(req.cmd.ext_fields)
        fwd = RemotingCommand.request(RC.GET_CONSUMER_RUNNING_INFO, h.to_ext())
        return self._relay(req, h.consumer_group, h.client_id, fwd, now_ms)

    def _consumer_status(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """INVOKE_BROKER_TO_GET_CONSUMER_STATUS (mqadmin getConsumerStatus,
        Broker2Client.getConsumeStatus): ask each client of the group (or only clientAddr,
        matched against the client id) for its queue offsets of the topic."""
        cmd = req.cmd
        h = GetConsumerStatusRequestHeader.from_ext(cmd.ext_fields)
        info = self.ctx.consumer_groups.get(h.group)
        if info is None or not info.connections:
            return cmd.make_response(
                RS.SYSTEM_ERROR, f"No Any Consumer online in the consumer group: [{h.group}]")
        only = (h.client_addr or "").strip()
        targets = [(cid, conn) for cid, conn, _a, _l, _v in info.connections
                   if not only or cid == only][:1 if only else None]  # fmt: skip
        sc = StatusCall(req.conn_id, cmd, now_ms + CONSUMER_STATUS_TIMEOUT_MS, {}, {})
        if not targets or self.ctx.outbox is None:
            return self._status_response(sc)
        ext = GetConsumerStatusRequestHeader(h.topic, h.group).to_ext()
        for cid, conn in targets:
            fwd = RemotingCommand.request(RC.GET_CONSUMER_STATUS_FROM_CLIENT, ext)
            sc.pending[fwd.opaque] = cid
            self.status_calls[fwd.opaque] = sc
            self.ctx.outbox.call(conn, fwd)
        return None

    def _status_answer(self, sc: StatusCall, resp: RemotingCommand) -> None:
        cid = sc.pending.pop(resp.opaque, "")
        if resp.code == RS.SUCCESS and resp.body:
            try:
                text = bytes(resp.body).decode("utf-8")
                key = '"messageQueueTable":'
                at = text.find(key)
                pairs, _ = loads_object_map(text, at + len(key)) if at >= 0 else ([], 0)
                sc.tables[cid] = dumps_object_map(pairs)
            except (UnicodeDecodeError, ValueError, IndexError) as e:
                log.warning("consumer status of %s unreadable: %s", cid, e)
        if not sc.pending:
            self._finish_status(sc)

    def _finish_status(self, sc: StatusCall) -> None:
        for opaque in list(sc.pending):
            self.status_calls.pop(opaque, None)
        sc.pending.clear()
        self._reply(sc.conn_id, self._status_response(sc))

    def _status_response(self, sc: StatusCall) -> RemotingCommand:
        """GetConsumerStatusBody: consumerTable {clientId: {MessageQueue: offset}}."""
        table = b",".join(dumps_compact(c) + b":" + m for c, m in sorted(sc.tables.items()))
        body = b'{"consumerTable":{' + table + b'},"messageQueueTable":{}}'
        return sc.cmd.make_response(RS.SUCCESS, None, None, body)

    def _consume_directly(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """CONSUME_MESSAGE_DIRECTLY: hand one stored message (by offset msg id) to a consumer."""
        cmd = req.cmd
        h = ConsumeMessageDirectlyResultRequestHeader.from_ext(cmd.ext_fields)
        try:
            _host, _port, phy = decode_offset_msg_id(h.msg_id or "")
        except ValueError:
            return cmd.make_response(RS.SYSTEM_ERROR, f"bad message id {h.msg_id!r}")
        data = self.store.select_one_message_by_offset(phy)
        if data is None:
            return cmd.make_response(RS.SYSTEM_ERROR, f"no message at offset {phy}")
        h.broker_name = self.ctx.broker_config.brokerName  # the consumer builds its MQ from it
        fwd = RemotingCommand.request(RC.CONSUME_MESSAGE_DIRECTLY, h.to_ext(), bytes(data))
        return self._relay(req, h.consumer_group, h.client_id, fwd, now_ms)

    def _query_correction_offset(self, req: Request, now_ms: int) -> RemotingCommand:
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

    def _topic_wrapper(self) -> dict[str, Any]:
        return {
            "dataVersion": _version_obj(self.ctx.topic_version),
            "topicConfigTable": {n: t.to_json_obj() for n, t in self.ctx.topics.table.items()},
        }

    def _all_topic_config(self, req: Request, now_ms: int) -> RemotingCommand:
        cmd = req.cmd
        if not self.ctx.topics.table:
            return cmd.make_response(RS.SYSTEM_ERROR, "No topic in this broker")
        return cmd.make_response(RS.SUCCESS, None, None, dumps_compact(self._topic_wrapper()))

    def _runtime_info(self, req: Request, now_ms: int) -> RemotingCommand:
        """GET_BROKER_RUNTIME_INFO: a KVTable with the keys mqadmin clusterList / brokerStatus
        read: TPS windows, put / get totals and executor figures from the stats the send and
        pull actors publish (actors.broker.stats), plus the store's own figures."""
        bc = self.ctx.broker_config
        st = self.store
        table = {
            "brokerVersionDesc": "V4_9_8",
            "brokerVersion": "409",
            **self.stats.runtime_table(now_ms),
            "earliestMessageTimeStamp": str(self._earliest_store_time()),
            "commitLogDiskRatio": str(self._disk_ratio()),
            "commitLogMaxOffset": str(getattr(st, "max_phy_offset", 0)),
            "commitLogMinOffset": str(getattr(st, "min_phy_offset", 0)),
            "brokerRole": bc.brokerRole,
            "brokerName": bc.brokerName,
            "brokerAddr": bc.broker_addr,
            "topicCount": str(len(self.ctx.topics.table)),
            "subscriptionGroupCount": str(len(self.ctx.groups.table)),
        }
        return req.cmd.make_response(RS.SUCCESS, None, None, dumps_compact({"table": table}))

    def _earliest_store_time(self) -> int:
        """Store time of the first commit-log record (getEarliestMessageTime), -1 if none."""
        data = self.store.select_one_message_by_offset(int(self.store.min_phy_offset))
        if data is None:
            return -1
        try:
            return decode_record_fields(data).store_timestamp
        except (RecordError, IndexError, ValueError):
            return -1

    def _disk_ratio(self) -> float:
        """Used share (0..1) of the commit log's disk partition, as commitLogDiskRatio."""
        path = self.ctx.store_config.commitlog_path
        return round(disk_usage_ratio(path if os.path.exists(path) else
                                      self.ctx.store_config.storePathRootDir), 4)  # fmt: skip

    # --- offsets by queue -----------------------------------------------------------------

    def _max_offset(self, req: Request, now_ms: int) -> RemotingCommand:
        h = GetMaxOffsetRequestHeader.from_ext(req.cmd.ext_fields)
        off = int(self.store.get_max_offset_in_queue(h.topic, h.queue_id))
        return req.cmd.make_response(RS.SUCCESS, None, GetMaxOffsetResponseHeader(off).to_ext())

    def _min_offset(self, req: Request, now_ms: int) -> RemotingCommand:
        h = GetMinOffsetRequestHeader.from_ext(req.cmd.ext_fields)
        # RocketMQ's findConsumeQueue creates a missing queue, so a queue never written
        # answers 0, not the store's -1 (DefaultMessageStore.getMinOffsetInQueue).
        off = max(0, int(self.store.get_min_offset_in_queue(h.topic, h.queue_id)))
        return req.cmd.make_response(RS.SUCCESS, None, GetMinOffsetResponseHeader(off).to_ext())

    def _earliest_time(self, req: Request, now_ms: int) -> RemotingCommand:
        h = GetEarliestMsgStoretimeRequestHeader.from_ext(req.cmd.ext_fields)
        ts = int(self.store.get_earliest_message_time(h.topic, h.queue_id))
        return req.cmd.make_response(
            RS.SUCCESS, None, GetEarliestMsgStoretimeResponseHeader(ts).to_ext()
        )

    def _search_offset(self, req: Request, now_ms: int) -> RemotingCommand:
        h = SearchOffsetRequestHeader.from_ext(req.cmd.ext_fields)
        off = int(self.store.get_offset_in_queue_by_time(h.topic, h.queue_id, h.timestamp))
        return req.cmd.make_response(RS.SUCCESS, None, SearchOffsetResponseHeader(off).to_ext())

    # --- locks ----------------------------------------------------------------------------

    def _lock(self, req: Request, now_ms: int) -> RemotingCommand:
        body = LockBatchRequestBody.from_json(req.cmd.body)
        ok = self.locks.try_lock_batch(
            body.consumer_group, _mq_keys(body.mq_set), body.client_id, now_ms
        )
        resp_body = LockBatchResponseBody([MessageQueue(t, b, q) for t, b, q in ok]).to_json()
        return req.cmd.make_response(RS.SUCCESS, None, None, resp_body)

    def _unlock(self, req: Request, now_ms: int) -> RemotingCommand:
        body = UnlockBatchRequestBody.from_json(req.cmd.body)
        self.locks.unlock_batch(body.consumer_group, _mq_keys(body.mq_set), body.client_id)
        return req.cmd.make_response(RS.SUCCESS, None, {})

    # --- subscription groups ----------------------------------------------------------------

    def _create_group(self, req: Request, now_ms: int) -> RemotingCommand:
        obj = loads_lenient(req.cmd.body)
        if not isinstance(obj, dict):
            raise ValueError("SubscriptionGroupConfig body is not an object")
        cfg = group_config_from_obj(obj)
        self.ctx.emit(SubscriptionGroupChanged(cfg))
        return req.cmd.make_response(RS.SUCCESS, None, {})

    def _delete_group(self, req: Request, now_ms: int) -> RemotingCommand:
        h = DeleteSubscriptionGroupRequestHeader.from_ext(req.cmd.ext_fields)
        self.ctx.emit(SubscriptionGroupDeleted(h.group_name, h.remove_offset))
        return req.cmd.make_response(RS.SUCCESS, None, {})

    def _all_groups(self, req: Request, now_ms: int) -> RemotingCommand:
        body = {
            "dataVersion": _version_obj(self.ctx.group_version),
            "subscriptionGroupTable": {
                n: g.to_obj() for n, g in self.ctx.groups.table.items()
            },
        }
        return req.cmd.make_response(RS.SUCCESS, None, None, dumps_compact(body))

    def _all_offsets(self, req: Request, now_ms: int) -> RemotingCommand:
        body = self.ctx.offsets.encode().encode()
        return req.cmd.make_response(RS.SUCCESS, None, None, body)

    def _connections(self, req: Request, now_ms: int) -> RemotingCommand:
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

    def _consume_stats(self, req: Request, now_ms: int) -> RemotingCommand:
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

    def _broker_consume_stats(self, req: Request, now_ms: int) -> RemotingCommand:
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

    def _system_topics(self, req: Request, now_ms: int) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER: TopicValidator's system topic set."""
        body = dumps_compact({"topicList": sorted(SYSTEM_TOPICS)})
        return req.cmd.make_response(RS.SUCCESS, None, None, body)

    def _topic_stats(self, req: Request, now_ms: int) -> RemotingCommand:
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

    # --- broker config, delay offsets, reset offset, consumers of a topic --------------------

    def _broker_config(self, req: Request, now_ms: int) -> RemotingCommand:
        """GET_BROKER_CONFIG: every broker and store property as "key=value" lines."""
        body = properties_text(self.ctx.broker_config, self.ctx.store_config).encode()
        version = GetBrokerConfigResponseHeader(self.ctx.config_version.to_json().decode()).to_ext()
        return req.cmd.make_response(RS.SUCCESS, None, version, body)

    def _update_broker_config(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """UPDATE_BROKER_CONFIG: Java properties text; every actor applies it (an event), the
        controller persists it into the broker's config file (the -c file, which the next start
        reads, as RocketMQ's Configuration does) and re-registers on a permission change,
        answered once the name servers have that registration (registerBrokerAll in Java's
        updateBrokerConfig). A name in configBlackList refuses the lot (NO_PERMISSION), as
        4.9.x does. Unknown names are ignored as RocketMQ does; names read only at start
        (RESTART_ONLY) are only persisted, and the remark says where. A value of the wrong
        type refuses the lot."""
        from actors.broker.config import RESTART_ONLY, broker_config_path, split_config_updates
        from actors.broker.events import BrokerConfigChanged

        cmd = req.cmd
        props = properties_update(cmd, self.ctx.broker_config.configBlackList)
        if isinstance(props, RemotingCommand):  # refused
            return props
        try:
            b_vals, s_vals, unknown = split_config_updates(props, type(self.ctx.store_config))
            self.ctx.broker_config.replace(**b_vals).validated()  # what the next start reads
        except ValueError as e:
            return cmd.make_response(RS.SYSTEM_ERROR, f"update broker config failed: {e}")
        known = tuple((k, props[k]) for k in sorted({*b_vals, *s_vals}))
        later = sorted(k for k, _ in known if k in RESTART_ONLY)
        notes = []
        if unknown:
            notes.append(f"ignored unknown {', '.join(unknown)}")
        if later:
            path = broker_config_path(self.ctx.broker_config, self.ctx.store_config)
            if _writable(path):
                notes.append(f"{', '.join(later)} take effect at the next start (saved to {path})")
            else:
                notes.append(f"{', '.join(later)} not kept for the next start: {path} cannot "
                             "be written")  # fmt: skip
        log.info("broker config updated %s %s", dict(known), "; ".join(notes))
        resp = cmd.make_response(RS.SUCCESS, "; ".join(notes) or None)
        if not known:
            return resp
        token = 0
        if "brokerPermission" in b_vals and self.ctx.registration_barrier and not cmd.is_oneway:
            token = self.held.hold(req.conn_id, resp, now_ms)
        self.ctx.emit(BrokerConfigChanged(known, now_ms, token))
        return None if token else resp

    def _reset_offset(self, req: Request, now_ms: int) -> RemotingCommand:
        """INVOKE_BROKER_TO_RESET_OFFSET (Broker2Client.resetOffset): per queue the offset at
        `timestamp` (-1: the max), kept at the consumer's offset unless older or isForce; sent
        to every consumer of the group as RESET_CONSUMER_CLIENT_OFFSET (oneway)."""
        cmd = req.cmd
        h = ResetOffsetRequestHeader.from_ext(cmd.ext_fields)
        tc = self.ctx.topics.get(h.topic)
        if tc is None:
            return cmd.make_response(
                RS.SYSTEM_ERROR,
                f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}",
            )
        bname = self.ctx.broker_config.brokerName
        table: list[tuple[dict[str, Any], int]] = []
        for qid in range(tc.write_queue_nums):
            consumer_off = self.ctx.offsets.query_offset(h.group, h.topic, qid)
            if consumer_off == -1:
                return cmd.make_response(
                    RS.SYSTEM_ERROR, f"THe consumer group <{h.group}> not exist"
                )
            if h.timestamp == -1:
                ts_off = int(self.store.get_max_offset_in_queue(h.topic, qid))
            else:
                ts_off = int(self.store.get_offset_in_queue_by_time(h.topic, qid, h.timestamp))
            off = ts_off if h.is_force or ts_off < consumer_off else consumer_off
            table.append((MessageQueue(h.topic, bname, qid).to_obj(), off))
        info = self.ctx.consumer_groups.get(h.group)
        if info is None or not info.connections:
            return cmd.make_response(
                RS.CONSUMER_NOT_ONLINE,
                "Consumer not online, so can not reset offset, "
                f"Group: {h.group} Topic: {h.topic} Timestamp: {h.timestamp}",
            )
        body = b'{"offsetTable":' + dumps_object_map(table) + b"}"
        outbox = self.ctx.outbox
        if outbox is not None:
            ext = ResetOffsetRequestHeader(h.topic, h.group, h.timestamp, h.is_force).to_ext()
            for _cid, conn_id, _addr, _lang, _ver in info.connections:
                outbox.send(
                    conn_id,
                    RemotingCommand.request(RC.RESET_CONSUMER_CLIENT_OFFSET, ext, body,
                                            oneway=True),
                )  # fmt: skip
        log.info("reset offset group=%s topic=%s timestamp=%d force=%s: %s", h.group, h.topic,
                 h.timestamp, h.is_force, [o for _, o in table])  # fmt: skip
        return cmd.make_response(RS.SUCCESS, None, None, body)

    def _consume_by_who(self, req: Request, now_ms: int) -> RemotingCommand:
        """QUERY_TOPIC_CONSUME_BY_WHO: groups subscribed to the topic or holding its offsets."""
        topic = QueryTopicConsumeByWhoRequestHeader.from_ext(req.cmd.ext_fields).topic
        groups = {
            g for t, _, g in (k.rpartition(TOPIC_GROUP_SEPARATOR) for k in self.ctx.offsets.table)
            if t == topic
        }  # fmt: skip
        groups |= {
            name for name, info in self.ctx.consumer_groups.items()
            if info.find_subscription(topic) is not None
        }  # fmt: skip
        body = dumps_compact({"groupList": sorted(groups)})
        return req.cmd.make_response(RS.SUCCESS, None, None, body)

    # --- consume queue, group offset clone, consume time span, stats items ---------------------

    def _query_consume_queue(self, req: Request, now_ms: int) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE (mqadmin queryCq): up to `count` units of one consume queue from
        `index` (to the end of that index's file, as ConsumeQueue.getIndexBuffer reads), with
        the queue's min / max index and, given a group, its subscription. Java 4.9.x encodes
        its body before filling it in (so its tool prints zeros); this one carries the values."""
        cmd = req.cmd
        h = QueryConsumeQueueRequestHeader.from_ext(cmd.ext_fields)
        cq = self.store._cq(h.topic, h.queue_id)
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

    def _clone_group_offset(self, req: Request, now_ms: int) -> RemotingCommand:
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

    def _consume_time_span(self, req: Request, now_ms: int) -> RemotingCommand:
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

    def _view_stats_data(self, req: Request, now_ms: int) -> RemotingCommand:
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
        root = getattr(self.ctx.store_config, "storePathRootDir", "")
        return read_published(root, ("send", "pull")) if root else {}



def _java_date(ms: int) -> str:
    """UtilAll.formatDate(new Date(ms), "yyyy-MM-dd#HH:mm:ss:SSS") in local time."""
    try:
        t = datetime.fromtimestamp(ms // 1000)
    except (OverflowError, OSError, ValueError):
        return ""
    return t.strftime("%Y-%m-%d#%H:%M:%S:") + f"{ms % 1000:03d}"


def _version_obj(version: tuple[int, int]) -> dict[str, int]:
    """A (counter, timestamp) data version as DataVersion's JSON object."""
    return {"counter": version[0], "timestamp": version[1]}


def _get_tps(published: dict[tuple[str, str], Any], group: str, topic: str) -> float:
    """BrokerStatsManager.tpsGroupGetNums: the GROUP_GET_NUMS minute TPS of topic@group."""
    rings = published.get((GROUP_GET_NUMS, f"{topic}@{group}"))
    return float(stats_window(rings["m"])["tps"]) if rings is not None else 0.0


def _consume_stats_json(rows: list[tuple[dict[str, Any], dict[str, int]]], tps: float) -> bytes:
    """ConsumeStats as fastjson writes it."""
    return (b'{"consumeTps":' + repr(float(tps)).encode() + b',"offsetTable":'
            + dumps_object_map(rows) + b"}")  # fmt: skip
