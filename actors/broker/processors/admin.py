"""The admin group (RocketMQ's default processor): topic and group admin, offsets by queue,
queue locks, runtime info; any other code => REQUEST_CODE_NOT_SUPPORTED.

Mirrors broker/processor/AdminBrokerProcessor.java, RocketMQ 4.9.x (spec §3.4, §9.8, §9.9).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from actors.broker.context import BrokerContext
from actors.broker.events import (
    SubscriptionGroupChanged,
    SubscriptionGroupDeleted,
    TopicConfigChanged,
    TopicsDeleted,
)
from actors.broker.fields import opt_bool, opt_int, req_int, req_str
from actors.broker.lock_manager import MessageQueueKey, RebalanceLockManager
from actors.broker.subscription_group import SubscriptionGroupConfig
from actors.broker.topic_config import TopicConfig, is_system_topic, validate_topic
from actors.core import Request
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError

log = logging.getLogger(__name__)


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _loads(body: Any) -> Any:
    text = bytes(body).decode("utf-8")
    try:
        return json.loads(text)
    except ValueError:
        from protocol.bodies import loads_lenient

        return loads_lenient(text)


def _mq_list(obj: Any) -> list[MessageQueueKey]:
    return [(str(m["topic"]), str(m["brokerName"]), int(m["queueId"])) for m in obj or []]


def _mq_json(mq: MessageQueueKey) -> dict[str, Any]:
    return {"brokerName": mq[1], "queueId": mq[2], "topic": mq[0]}


class AdminBrokerProcessor:
    """The admin core (ProcessorCore), also the unknown-code default."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.store = ctx.store
        self.locks = RebalanceLockManager()
        self.handlers: dict[int, Callable[[RemotingCommand, int], RemotingCommand]] = {
            RC.UPDATE_AND_CREATE_TOPIC: self._create_topic,
            RC.DELETE_TOPIC_IN_BROKER: self._delete_topic,
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
        }

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Dispatch on the request code; unknown codes get code 3 (even when oneway)."""
        cmd = req.cmd
        handler = self.handlers.get(cmd.code)
        if handler is None:
            log.warning("request type %d not supported", cmd.code)
            return cmd.make_response(
                RS.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
            )
        try:
            resp = handler(cmd, now_ms)
        except HeaderFieldError as e:
            resp = cmd.make_response(e.code, e.remark)
        except (ValueError, KeyError, TypeError) as e:
            log.warning("bad admin request code=%d: %s", cmd.code, e)
            resp = cmd.make_response(RS.SYSTEM_ERROR, f"bad request body: {e}")
        return None if cmd.is_oneway else resp

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """Nothing per connection (locks expire by time)."""

    def tick(self, now_ms: int) -> int | None:
        """No timers."""
        return None

    # --- topics ---------------------------------------------------------------------------

    def _create_topic(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        ext = cmd.ext_fields
        topic = req_str(ext, "topic")
        bad = validate_topic(topic)
        if bad is not None:
            return cmd.make_response(RS.SYSTEM_ERROR, bad)
        if is_system_topic(topic) or topic == self.ctx.broker_config.brokerClusterName:
            return cmd.make_response(
                RS.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic."
            )
        req_str(ext, "defaultTopic")
        tc = TopicConfig(
            topic,
            read_queue_nums=req_int(ext, "readQueueNums"),
            write_queue_nums=req_int(ext, "writeQueueNums"),
            perm=req_int(ext, "perm"),
            topic_filter_type=req_str(ext, "topicFilterType"),
            topic_sys_flag=opt_int(ext, "topicSysFlag", 0) or 0,
            order=opt_bool(ext, "order"),
        )
        self.ctx.emit(TopicConfigChanged(tc, register=True))
        return cmd.make_response(RS.SUCCESS, None, {})

    def _delete_topic(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        topic = req_str(cmd.ext_fields, "topic")
        if is_system_topic(topic):
            return cmd.make_response(
                RS.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic."
            )
        self.ctx.emit(TopicsDeleted((topic,)))
        return cmd.make_response(RS.SUCCESS, None, {})

    def _topic_wrapper(self) -> dict[str, Any]:
        return {
            "dataVersion": {"counter": 0, "timestamp": 0},
            "topicConfigTable": {n: t.to_json_obj() for n, t in self.ctx.topics.table.items()},
        }

    def _all_topic_config(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        if not self.ctx.topics.table:
            return cmd.make_response(RS.SYSTEM_ERROR, "No topic in this broker")
        return cmd.make_response(RS.SUCCESS, None, None, _dumps(self._topic_wrapper()))

    def _runtime_info(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        bc = self.ctx.broker_config
        st = self.store
        table = {
            "brokerVersionDesc": "V4_9_8",
            "brokerVersion": "409",
            "msgPutTotalTodayNow": str(getattr(st, "put_message_total", 0)),
            "msgGetTotalTodayNow": "0",
            "commitLogMaxOffset": str(getattr(st, "max_phy_offset", 0)),
            "commitLogMinOffset": str(getattr(st, "min_phy_offset", 0)),
            "brokerRole": bc.brokerRole,
            "brokerName": bc.brokerName,
            "brokerAddr": bc.broker_addr,
            "topicCount": str(len(self.ctx.topics.table)),
            "subscriptionGroupCount": str(len(self.ctx.groups.table)),
        }
        return cmd.make_response(RS.SUCCESS, None, None, _dumps({"table": table}))

    # --- offsets by queue -----------------------------------------------------------------

    def _max_offset(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        ext = cmd.ext_fields
        off = self.store.get_max_offset_in_queue(req_str(ext, "topic"), req_int(ext, "queueId"))
        return cmd.make_response(RS.SUCCESS, None, {"offset": str(int(off))})

    def _min_offset(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        ext = cmd.ext_fields
        off = self.store.get_min_offset_in_queue(req_str(ext, "topic"), req_int(ext, "queueId"))
        return cmd.make_response(RS.SUCCESS, None, {"offset": str(int(off))})

    def _earliest_time(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        ext = cmd.ext_fields
        ts = self.store.get_earliest_message_time(req_str(ext, "topic"), req_int(ext, "queueId"))
        return cmd.make_response(RS.SUCCESS, None, {"timestamp": str(int(ts))})

    def _search_offset(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        ext = cmd.ext_fields
        off = self.store.get_offset_in_queue_by_time(
            req_str(ext, "topic"), req_int(ext, "queueId"), req_int(ext, "timestamp")
        )
        return cmd.make_response(RS.SUCCESS, None, {"offset": str(int(off))})

    # --- locks ----------------------------------------------------------------------------

    def _lock(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        body = _loads(cmd.body)
        ok = self.locks.try_lock_batch(
            str(body["consumerGroup"]), _mq_list(body.get("mqSet")), str(body["clientId"]), now_ms
        )
        return cmd.make_response(
            RS.SUCCESS, None, None, _dumps({"lockOKMQSet": [_mq_json(m) for m in ok]})
        )

    def _unlock(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        body = _loads(cmd.body)
        self.locks.unlock_batch(
            str(body["consumerGroup"]), _mq_list(body.get("mqSet")), str(body["clientId"])
        )
        return cmd.make_response(RS.SUCCESS, None, {})

    # --- subscription groups ----------------------------------------------------------------

    def _create_group(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        cfg = SubscriptionGroupConfig.from_json_obj(_loads(cmd.body))
        self.ctx.emit(SubscriptionGroupChanged(cfg))
        return cmd.make_response(RS.SUCCESS, None, {})

    def _delete_group(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        ext = cmd.ext_fields
        self.ctx.emit(
            SubscriptionGroupDeleted(req_str(ext, "groupName"), opt_bool(ext, "removeOffset"))
        )
        return cmd.make_response(RS.SUCCESS, None, {})

    def _all_groups(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        body = {
            "dataVersion": {"counter": 0, "timestamp": 0},
            "subscriptionGroupTable": {
                n: g.to_json_obj() for n, g in self.ctx.groups.table.items()
            },
        }
        return cmd.make_response(RS.SUCCESS, None, None, _dumps(body))

    def _all_offsets(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        return cmd.make_response(RS.SUCCESS, None, None, self.ctx.offsets.encode().encode())

    def _connections(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        group = req_str(cmd.ext_fields, "consumerGroup")
        info = self.ctx.consumer_groups.get(group)
        if info is None or not info.client_ids:
            return cmd.make_response(
                RS.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
            )
        body = {
            "connectionSet": [{"clientId": c} for c in info.client_ids],
            "consumeFromWhere": info.consume_from_where,
            "consumeType": info.consume_type,
            "messageModel": info.message_model,
            "subscriptionTable": {s.topic: s.to_json_obj() for s in info.subscriptions},
        }
        return cmd.make_response(RS.SUCCESS, None, None, _dumps(body))

    def _consume_stats(self, cmd: RemotingCommand, now_ms: int) -> RemotingCommand:
        ext = cmd.ext_fields
        group = req_str(ext, "consumerGroup")
        only = ext.get("topic") if ext else None
        topics = [only] if only else sorted(self.ctx.offsets.topics_of_group(group))
        offset_table = []
        total_diff = 0
        for topic in topics:
            tc = self.ctx.topics.get(topic)
            if tc is None:
                continue
            for qid in range(tc.write_queue_nums):
                broker_off = int(self.store.get_max_offset_in_queue(topic, qid))
                consumer_off = max(0, self.ctx.offsets.query_offset(group, topic, qid))
                total_diff += broker_off - consumer_off
                offset_table.append(
                    {
                        "mq": {
                            "brokerName": self.ctx.broker_config.brokerName,
                            "queueId": qid,
                            "topic": topic,
                        },
                        "offset": {
                            "brokerOffset": broker_off,
                            "consumerOffset": consumer_off,
                            "lastTimestamp": 0,
                        },
                    }
                )
        body = {"consumeTps": 0.0, "offsetTable": offset_table, "totalDiff": total_diff}
        return cmd.make_response(RS.SUCCESS, None, None, _dumps(body))
