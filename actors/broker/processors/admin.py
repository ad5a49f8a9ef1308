"""The admin group (RocketMQ's default processor): topic and group admin, offsets by queue,
queue locks, runtime info; any other code => REQUEST_CODE_NOT_SUPPORTED.

Mirrors broker/processor/AdminBrokerProcessor.java, RocketMQ 4.9.x (spec §3.4, §9.8, §9.9). Its
consumer offset and stats codes live in admin_consumer_stats.py, the ACL codes in admin_acl.py,
the codes relayed to a client in broker2client.py (Broker2Client), the store-changing codes in
admin_store.py.
"""

from __future__ import annotations

import logging
import os
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
from actors.broker.processors.admin_acl import AclAdmin
from actors.broker.processors.admin_consumer_stats import ConsumerStatsQueries
from actors.broker.processors.broker2client import Broker2Client
from actors.broker.stats import BrokerStatsSampler
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
)
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.codes import is_system_topic
from protocol.command import RemotingCommand
from protocol.headers import (
    CreateTopicRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    GetBrokerConfigResponseHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
)
from protocol.record import RecordError, decode_record_fields
from store.clean_service import disk_usage_ratio
from store.config import properties_text
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




def _mq_keys(mqs: list[MessageQueue]) -> list[MessageQueueKey]:
    return [(m.topic, m.broker_name, m.queue_id) for m in mqs]



class AdminBrokerProcessor(CodeDispatchCore):
    """The admin core (ProcessorCore), also the unknown-code default."""

    BAD_REQUEST_ERRORS = BAD_BODY_ERRORS

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.store = ctx.store
        root = ctx.store_config.storePathRootDir or "."
        self.stats = BrokerStatsSampler(StatsPage(stats_path(root), writable=False))
        self.locks = RebalanceLockManager()
        # UPDATE_AND_CREATE_TOPIC / UPDATE_BROKER_CONFIG of brokerPermission: answered once the
        # name servers have the registration (registerIncrementBrokerData / registerBrokerAll)
        self.held = HeldReplies(ctx.outbox, ctx.broker_config.registerBrokerTimeoutMills)
        self.b2c = Broker2Client(ctx, self.store)  # the requests relayed to clients
        stats = ConsumerStatsQueries(ctx, self.store)  # the offset and stats queries
        acl = AclAdmin(ctx)  # the ACL files' accounts and white list
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
            RC.GET_ALL_CONSUMER_OFFSET: stats.all_offsets,
            RC.GET_CONSUMER_CONNECTION_LIST: stats.connections,
            RC.GET_CONSUME_STATS: stats.consume_stats,
            RC.GET_TOPIC_STATS_INFO: stats.topic_stats,
            RC.GET_BROKER_CONSUME_STATS: stats.broker_consume_stats,
            RC.GET_SYSTEM_TOPIC_LIST_FROM_BROKER: stats.system_topics,
            RC.GET_BROKER_CONFIG: self._broker_config,
            RC.UPDATE_BROKER_CONFIG: self._update_broker_config,
            RC.INVOKE_BROKER_TO_RESET_OFFSET: self._reset_offset,
            RC.QUERY_TOPIC_CONSUME_BY_WHO: self._consume_by_who,
            RC.GET_CONSUMER_RUNNING_INFO: self.b2c.consumer_running_info,
            RC.CONSUME_MESSAGE_DIRECTLY: self.b2c.consume_directly,
            RC.QUERY_CONSUME_QUEUE: stats.query_consume_queue,
            RC.CLONE_GROUP_OFFSET: stats.clone_group_offset,
            RC.QUERY_CONSUME_TIME_SPAN: stats.consume_time_span,
            RC.VIEW_BROKER_STATS_DATA: stats.view_stats_data,
            RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: self.b2c.consumer_status,
            RC.QUERY_CORRECTION_OFFSET: stats.query_correction_offset,
            RC.UPDATE_AND_CREATE_ACL_CONFIG: acl.update_access_config,
            RC.DELETE_ACL_CONFIG: acl.delete_access_config,
            RC.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: acl.update_global_white_addrs,
            RC.GET_BROKER_CLUSTER_ACL_INFO: acl.acl_config_version,
            RC.GET_BROKER_CLUSTER_ACL_CONFIG: acl.acl_config,
        }

    # --- topics ---------------------------------------------------------------------------

    def _create_topic(self, req: Request, now_ms: int) -> RemotingCommand | None:
        cmd = req.cmd
        h = CreateTopicRequestHeader.from_ext(cmd.ext_fields)
        if h.topic_filter_type not in ("SINGLE_TAG", "MULTI_TAG"):  # checkFields: valueOf
            return cmd.make_response(
                RS.SYSTEM_ERROR, f"topicFilterType = [{h.topic_filter_type}] value invalid"
            )
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

    def on_client_response(self, resp: RemotingCommand, now_ms: int) -> None:
        """A client answered a request relayed to it (Broker2Client)."""
        self.b2c.on_client_response(resp, now_ms)

    def release(self, token: int, now_ms: int) -> bool:
        """The controller re-registered: send the reply held under `token` (False if gone)."""
        return self.held.release(token)

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """Forget replies held for the connection (locks expire by time)."""
        self.held.forget(conn_id)
        self.b2c.forget(conn_id)

    def tick(self, now_ms: int) -> int | None:
        """Answer held replies and client calls that did not complete in time."""
        held_wait = self.held.expire(now_ms)
        deadlines = [now_ms + held_wait] if held_wait is not None else []
        deadlines += self.b2c.expire(now_ms)
        deadlines.append(now_ms + self.stats.sample(now_ms))  # StoreStatsService, each second
        return max(0, min(deadlines) - now_ms)

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
            "commitLogMaxOffset": str(st.max_phy_offset if st is not None else 0),
            "commitLogMinOffset": str(st.min_phy_offset if st is not None else 0),
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
            b_vals, _store_vals, unknown = split_config_updates(props, type(self.ctx.store_config))
            self.ctx.broker_config.replace(**b_vals).validated()  # what the next start reads
        except ValueError as e:
            return cmd.make_response(RS.SYSTEM_ERROR, f"update broker config failed: {e}")
        known = tuple((k, v) for k, v in sorted(props.items()) if k not in unknown)
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




def _version_obj(version: tuple[int, int]) -> dict[str, int]:
    """A (counter, timestamp) data version as DataVersion's JSON object."""
    return {"counter": version[0], "timestamp": version[1]}
