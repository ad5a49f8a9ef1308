"""The send group: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and
CONSUMER_SEND_MSG_BACK (36), on THE single store writer.

Mirrors broker/processor/SendMessageProcessor.java + AbstractSendMessageProcessor.java,
RocketMQ 4.9.x (spec §9.1, §9.6). SYNC_FLUSH is a group commit: a send that must wait for the
flush returns None; the runtime calls `flush_and_release(now_ms)` after each batch (and tick
does too), which flushes once and answers every waiting send whose record is covered, or
FLUSH_DISK_TIMEOUT (10) after syncFlushTimeout. Delay levels are rewritten to
SCHEDULE_TOPIC_XXXX inside the store; the ScheduleMessageService that delivers them is a later
issue.
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass
from typing import Any, Final

from actors.broker.context import BrokerContext
from actors.broker.events import SubscriptionGroupChanged, TopicConfigChanged
from actors.broker.fields import opt_bool, opt_int, opt_str, req_int, req_str
from actors.broker.topic_config import (
    PERM_READ,
    PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
    TRANS_HALF_TOPIC,
    TopicConfig,
    dlq_topic,
    is_not_allowed_send_topic,
    is_writeable,
    retry_topic,
    validate_topic,
)
from actors.core import Request
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.errors import HeaderFieldError
from protocol.record import java_string_hash, pack_host, properties_to_string, string_to_properties

log = logging.getLogger(__name__)

V3_4_9: Final = 121
FAQ_SUFFIX: Final = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
PROPERTY_WAIT: Final = "WAIT"
PROPERTY_CLUSTER: Final = "CLUSTER"
PROPERTY_TAGS: Final = "TAGS"
PROPERTY_DELAY: Final = "DELAY"
PROPERTY_TRAN_MSG: Final = "TRAN_MSG"
PROPERTY_REAL_TOPIC: Final = "REAL_TOPIC"
PROPERTY_REAL_QID: Final = "REAL_QID"
PROPERTY_RETRY_TOPIC: Final = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
MULTI_TAGS_FLAG: Final = 0x2
TRANSACTION_TYPE_MASK: Final = 0xC
TRANSACTION_PREPARED_TYPE: Final = 0x4
RW: Final = PERM_READ | PERM_WRITE

# store PutMessageStatus name -> (response code, remark or None)
_SNA = (
    "service not available now. It may be caused by one of the following reasons: the broker's"
    " disk is full, messages are put to the slave, message store has been shut down, etc."
)
PUT_STATUS_CODES: Final[dict[str, tuple[int, str | None]]] = {
    "PUT_OK": (RS.SUCCESS, None),
    "FLUSH_DISK_TIMEOUT": (RS.FLUSH_DISK_TIMEOUT, None),
    "FLUSH_SLAVE_TIMEOUT": (RS.FLUSH_SLAVE_TIMEOUT, None),
    "SLAVE_NOT_AVAILABLE": (RS.SLAVE_NOT_AVAILABLE, None),
    "CREATE_MAPEDFILE_FAILED": (RS.SYSTEM_ERROR, "create mapped file failed"),
    "MESSAGE_ILLEGAL": (RS.MESSAGE_ILLEGAL, "the message is illegal"),
    "PROPERTIES_SIZE_EXCEEDED": (RS.MESSAGE_ILLEGAL, "the message properties exceed 32k"),
    "SERVICE_NOT_AVAILABLE": (RS.SERVICE_NOT_AVAILABLE, _SNA),
    "OS_PAGECACHE_BUSY": (
        RS.SYSTEM_ERROR,
        "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    ),
    "UNKNOWN_ERROR": (RS.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


@dataclass(slots=True)
class SendHeader:
    """SendMessageRequestHeader (V1 long names or V2 one-letter keys)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    properties: str | None
    reconsume_times: int | None
    unit_mode: bool
    max_reconsume_times: int | None
    batch: bool


def decode_send_header(code: int, ext: dict[str, str] | None) -> SendHeader:
    """V2 (one-letter keys) for codes 310/320, V1 for code 10."""
    if code == RC.SEND_MESSAGE:
        return SendHeader(
            req_str(ext, "producerGroup"),
            req_str(ext, "topic"),
            req_str(ext, "defaultTopic"),
            req_int(ext, "defaultTopicQueueNums"),
            req_int(ext, "queueId"),
            req_int(ext, "sysFlag"),
            req_int(ext, "bornTimestamp"),
            req_int(ext, "flag"),
            opt_str(ext, "properties"),
            opt_int(ext, "reconsumeTimes"),
            opt_bool(ext, "unitMode"),
            opt_int(ext, "maxReconsumeTimes"),
            opt_bool(ext, "batch"),
        )
    return SendHeader(
        req_str(ext, "a"),
        req_str(ext, "b"),
        req_str(ext, "c"),
        req_int(ext, "d"),
        req_int(ext, "e"),
        req_int(ext, "f"),
        req_int(ext, "g"),
        req_int(ext, "h"),
        opt_str(ext, "i"),
        opt_int(ext, "j"),
        opt_bool(ext, "k"),
        opt_int(ext, "l"),
        opt_bool(ext, "m"),
    )


@dataclass(slots=True)
class _Waiting:
    end_offset: int
    deadline_ms: int
    conn_id: int
    resp: RemotingCommand


class _Reject(Exception):
    """An early error response."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class SendMessageProcessor:
    """The send group core (ProcessorCore)."""

    def __init__(self, ctx: BrokerContext, rng: random.Random | None = None) -> None:
        self.ctx = ctx
        self.bc = ctx.broker_config
        self.store = ctx.store
        self.rng = rng or random.Random()
        self.store_host = pack_host(self.bc.brokerIP1, self.bc.listenPort)
        sc = ctx.store_config
        self.sync_flush = str(getattr(sc, "flushDiskType", "ASYNC_FLUSH")).upper() == "SYNC_FLUSH"
        self.sync_flush_timeout_ms = int(getattr(sc, "syncFlushTimeout", 5000))
        self.waiting: list[_Waiting] = []
        self._resp_ext_base = {
            "MSG_REGION": self.bc.regionId,
            "TRACE_ON": "true" if self.bc.traceOn else "false",
        }
        from store.message_store import MessageExtBatch, MessageExtBrokerInner

        self._inner_cls: Any = MessageExtBrokerInner
        self._batch_cls: Any = MessageExtBatch

    # --- ProcessorCore --------------------------------------------------------------------

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Handle one send request."""
        cmd = req.cmd
        try:
            if cmd.code == RC.CONSUMER_SEND_MSG_BACK:
                resp = self._send_back(req, now_ms)
            else:
                resp = self._send(req, now_ms)
        except HeaderFieldError as e:
            resp = cmd.make_response(e.code, e.remark, dict(self._resp_ext_base))
        if resp is None or cmd.is_oneway:
            return None
        return resp

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """Nothing per connection (waiting replies are dropped by the outbox)."""

    def tick(self, now_ms: int) -> int | None:
        """Release flushed sync sends and run the store's periodic work."""
        self.flush_and_release(now_ms)
        wait = self.store.tick(now_ms) if self.store is not None else None
        if self.waiting:
            wait = 1 if wait is None else min(wait, 1)
        return wait

    def flush_and_release(self, now_ms: int) -> int:
        """Group commit: one flush, then answer every waiting send it covers; the count."""
        if not self.waiting:
            return 0
        flushed = self.store.flush(now_ms)
        keep: list[_Waiting] = []
        n = 0
        outbox = self.ctx.outbox
        for w in self.waiting:
            if w.end_offset <= flushed:
                n += 1
                if outbox is not None:
                    outbox.send(w.conn_id, w.resp)
            elif now_ms >= w.deadline_ms:
                n += 1
                w.resp.code = RS.FLUSH_DISK_TIMEOUT
                log.warning("sync flush timeout end_offset=%d flushed=%d", w.end_offset, flushed)
                if outbox is not None:
                    outbox.send(w.conn_id, w.resp)
            else:
                keep.append(w)
        self.waiting = keep
        return n

    # --- checks (AbstractSendMessageProcessor.msgCheck) --------------------------------------

    def _emit_topic(self, tc: TopicConfig) -> None:
        self.ctx.emit(TopicConfigChanged(tc, register=True))

    def _msg_check(self, h: SendHeader, peer: tuple[str, int]) -> tuple[TopicConfig, int]:
        topics = self.ctx.topics
        tc = topics.get(h.topic)
        if not is_writeable(self.bc.brokerPermission) and tc is not None and tc.order:
            raise _Reject(
                RS.NO_PERMISSION, f"the broker[{self.bc.brokerIP1}] sending message is forbidden"
            )
        bad = validate_topic(h.topic)
        if bad is not None:
            raise _Reject(RS.SYSTEM_ERROR, bad)
        if is_not_allowed_send_topic(h.topic):
            raise _Reject(RS.NO_PERMISSION, f"Sending message to topic[{h.topic}] is forbidden.")
        if tc is None:
            topic_sys_flag = 0
            tc = topics.create_in_send_message_method(
                h.topic, h.default_topic, h.default_topic_queue_nums, topic_sys_flag
            )
            if tc is None and h.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                tc, _ = topics.create_in_send_back(h.topic, 1, RW, topic_sys_flag)
            if tc is None:
                raise _Reject(
                    RS.TOPIC_NOT_EXIST,
                    f"topic[{h.topic}] not exist, apply first please!{FAQ_SUFFIX}",
                )
            self._emit_topic(tc)
        queue_id = h.queue_id
        id_valid = max(tc.write_queue_nums, tc.read_queue_nums)
        if queue_id >= id_valid:
            raise _Reject(
                RS.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, {tc} Producer: {peer[0]}:{peer[1]}",
            )
        if queue_id < 0:
            queue_id = self.rng.randrange(max(1, tc.write_queue_nums))
        return tc, queue_id

    def _retry_dlq(
        self, h: SendHeader, version: int, topic: str, queue_id: int, props: dict[str, str]
    ) -> tuple[str, int]:
        """handleRetryAndDLQ: redirect a %RETRY% send past max reconsume times to %DLQ%."""
        if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return topic, queue_id
        group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        cfg, created = self.ctx.groups.find_or_create(group)
        if cfg is None:
            raise _Reject(RS.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}")
        if created:
            self.ctx.emit(SubscriptionGroupChanged(cfg))
        max_times = cfg.retry_max_times
        if version >= V3_4_9 and h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        if (h.reconsume_times or 0) >= max_times:
            dlq = dlq_topic(group)
            tc, created = self.ctx.topics.create_in_send_back(dlq, 1, RW)
            if created:
                self._emit_topic(tc)
            props.pop(PROPERTY_DELAY, None)
            log.info("send to DLQ topic=%s reconsume=%s max=%d", dlq, h.reconsume_times, max_times)
            return dlq, 0
        return topic, queue_id

    # --- SEND_MESSAGE / V2 / BATCH -----------------------------------------------------------

    def _send(self, req: Request, now_ms: int) -> RemotingCommand | None:
        cmd = req.cmd
        h = decode_send_header(cmd.code, cmd.ext_fields)
        ext = dict(self._resp_ext_base)
        try:
            if h.batch:
                return self._send_batch(req, h, ext, now_ms)
            tc, queue_id = self._msg_check(h, req.peer)
            props = string_to_properties(h.properties)
            topic, queue_id = self._retry_dlq(h, cmd.version, h.topic, queue_id, props)
            sys_flag = h.sys_flag
            if tc.topic_filter_type == "MULTI_TAG":
                sys_flag |= MULTI_TAGS_FLAG
            wait = props.pop(PROPERTY_WAIT, "true").lower() != "false"
            props[PROPERTY_CLUSTER] = self.bc.brokerClusterName
            resp_qid = queue_id
            if props.get(PROPERTY_TRAN_MSG, "").lower() == "true":
                if self.bc.rejectTransactionMessage:
                    raise _Reject(
                        RS.NO_PERMISSION,
                        f"the broker[{self.bc.brokerIP1}] sending transaction message is forbidden",
                    )
                props[PROPERTY_REAL_TOPIC] = topic
                props[PROPERTY_REAL_QID] = str(queue_id)
                sys_flag &= ~TRANSACTION_TYPE_MASK
                half, created = self.ctx.topics.create_in_send_back(TRANS_HALF_TOPIC, 1, RW)
                if created:
                    self._emit_topic(half)
                topic, queue_id = TRANS_HALF_TOPIC, 0
        except _Reject as r:
            return cmd.make_response(r.code, r.remark, ext)
        tags = props.get(PROPERTY_TAGS)
        inner = self._inner_cls(
            topic=topic,
            body=bytes(cmd.body),
            flag=h.flag,
            properties=props,
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp=h.born_timestamp,
            born_host=pack_host(req.peer[0], req.peer[1]),
            store_host=self.store_host,
            reconsume_times=h.reconsume_times or 0,
            tags_code=java_string_hash(tags) if tags else 0,
        )
        result = self.store.put_message(inner, now_ms)
        return self._put_response(req, result, resp_qid, ext, wait, now_ms)

    def _send_batch(
        self, req: Request, h: SendHeader, ext: dict[str, str], now_ms: int
    ) -> RemotingCommand | None:
        cmd = req.cmd
        try:
            if len(h.topic) > 127:
                raise _Reject(RS.MESSAGE_ILLEGAL, f"message topic length too long {len(h.topic)}")
            if h.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise _Reject(
                    RS.MESSAGE_ILLEGAL, f"batch request does not support retry group {h.topic}"
                )
            tc, queue_id = self._msg_check(h, req.peer)
        except _Reject as r:
            return cmd.make_response(r.code, r.remark, ext)
        props = string_to_properties(h.properties)
        wait = props.get(PROPERTY_WAIT, "true").lower() != "false"
        props[PROPERTY_CLUSTER] = self.bc.brokerClusterName
        sys_flag = h.sys_flag
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        batch = self._batch_cls(
            topic=h.topic,
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp=h.born_timestamp,
            born_host=pack_host(req.peer[0], req.peer[1]),
            store_host=self.store_host,
            reconsume_times=h.reconsume_times or 0,
            body=bytes(cmd.body),
            batch_properties=properties_to_string(props),
        )
        result = self.store.put_messages(batch, now_ms)
        return self._put_response(req, result, queue_id, ext, wait, now_ms)

    def _put_response(
        self, req: Request, result: Any, queue_id: int, ext: dict[str, str], wait: bool, now_ms: int
    ) -> RemotingCommand | None:
        cmd = req.cmd
        status = result.status.name
        code, remark = PUT_STATUS_CODES.get(status, (RS.SYSTEM_ERROR, status))
        if code in (
            RS.SUCCESS,
            RS.FLUSH_DISK_TIMEOUT,
            RS.FLUSH_SLAVE_TIMEOUT,
            RS.SLAVE_NOT_AVAILABLE,
        ):
            ext["msgId"] = ",".join(result.msg_ids)
            ext["queueId"] = str(queue_id)
            ext["queueOffset"] = str(result.logics_offset)
        resp = cmd.make_response(code, remark, ext)
        if (
            code == RS.SUCCESS
            and self.sync_flush
            and wait
            and not cmd.is_oneway
            and result.end_offset > getattr(self.store, "flushed_offset", 0)
        ):
            self.waiting.append(
                _Waiting(result.end_offset, now_ms + self.sync_flush_timeout_ms, req.conn_id, resp)
            )
            return None
        return resp

    # --- CONSUMER_SEND_MSG_BACK ---------------------------------------------------------------

    def _send_back(self, req: Request, now_ms: int) -> RemotingCommand:
        cmd = req.cmd
        ext = cmd.ext_fields
        offset = req_int(ext, "offset")
        group = req_str(ext, "group")
        delay_level = req_int(ext, "delayLevel")
        origin_msg_id = opt_str(ext, "originMsgId")
        max_header = opt_int(ext, "maxReconsumeTimes")
        cfg, created = self.ctx.groups.find_or_create(group)
        if cfg is None:
            return cmd.make_response(
                RS.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group}{FAQ_SUFFIX}",
            )
        if created:
            self.ctx.emit(SubscriptionGroupChanged(cfg))
        if not is_writeable(self.bc.brokerPermission):
            return cmd.make_response(
                RS.NO_PERMISSION, f"the broker[{self.bc.brokerIP1}] sending message is forbidden"
            )
        if cfg.retry_queue_nums <= 0:
            return cmd.make_response(RS.SUCCESS)
        new_topic = retry_topic(group)
        queue_id = self.rng.randrange(cfg.retry_queue_nums)
        tc, created = self.ctx.topics.create_in_send_back(new_topic, cfg.retry_queue_nums, RW)
        if created:
            self._emit_topic(tc)
        if not is_writeable(tc.perm):
            return cmd.make_response(
                RS.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden"
            )
        msg = self.store.look_message_by_offset(offset)
        if msg is None:
            return cmd.make_response(RS.SYSTEM_ERROR, f"look message by offset failed, {offset}")
        props = dict(msg.properties)
        if PROPERTY_RETRY_TOPIC not in props:
            props[PROPERTY_RETRY_TOPIC] = msg.topic
        max_times = cfg.retry_max_times
        if cmd.version >= V3_4_9 and max_header is not None:
            max_times = max_header
        if msg.reconsume_times >= max_times or delay_level < 0:
            new_topic = dlq_topic(group)
            queue_id = 0
            dlq, created = self.ctx.topics.create_in_send_back(new_topic, 1, RW)
            if created:
                self._emit_topic(dlq)
            props.pop(PROPERTY_DELAY, None)
        else:
            if delay_level == 0:
                delay_level = 3 + msg.reconsume_times
            props[PROPERTY_DELAY] = str(delay_level)
        origin = props.get(PROPERTY_ORIGIN_MESSAGE_ID)
        if not origin:
            props[PROPERTY_ORIGIN_MESSAGE_ID] = msg.offset_msg_id or origin_msg_id or ""
        props.pop(PROPERTY_WAIT, None)
        tags = props.get(PROPERTY_TAGS)
        inner = self._inner_cls(
            topic=new_topic,
            body=bytes(msg.body),
            flag=msg.flag,
            properties=props,
            queue_id=queue_id,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_host=self.store_host,
            reconsume_times=msg.reconsume_times + 1,
            tags_code=java_string_hash(tags) if tags else 0,
        )
        result = self.store.put_message(inner, now_ms)
        status = result.status.name
        if status == "PUT_OK":
            return cmd.make_response(RS.SUCCESS)
        return cmd.make_response(RS.SYSTEM_ERROR, status)
