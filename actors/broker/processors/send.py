"""The send group: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and
CONSUMER_SEND_MSG_BACK (36) on THE single store writer, which also serves END_TRANSACTION (37,
actors.broker.transaction), SEND_REPLY_MESSAGE (324/325, actors.broker.processors.reply) and
the admin codes that change the store (actors.broker.processors.admin_store), and the puts of
the service actors (actors.broker.processors.service_put).

Mirrors broker/processor/SendMessageProcessor.java, RocketMQ 4.9.x (spec §9.1, §9.6); the
checks and the put's answer and wait (SYNC_FLUSH group commit, SYNC_MASTER) are in its base,
actors.broker.processors.abstract_send. Delay levels are rewritten to SCHEDULE_TOPIC_XXXX inside
the store; the ScheduleMessageService actor (actors.broker.schedule) delivers them through this
writer, and the TransactionalMessageCheckService actor puts its half messages back through it.
"""

from __future__ import annotations

import logging
import random
from typing import Final

from actors.broker.context import BrokerContext
from actors.broker.events import HaMasterChanged, OffsetMoved, SubscriptionGroupChanged
from actors.broker.ha import HAClient
from actors.broker.processors.abstract_send import (
    CACHE_LIMIT,
    RW,
    V3_4_9,
    Reject,
)
from actors.broker.processors.admin_store import STORE_ADMIN_CODES, StoreAdminProcessor
from actors.broker.processors.pull import offset_moved_message
from actors.broker.processors.reply import REPLY_CODES, ReplyMessageProcessor
from actors.broker.processors.service_put import SERVICE_CODES, ServicePutProcessor
from actors.broker.stats_items import (
    SNDBCK_PUT_NUMS,
    StatsPublisher,
    count,
    fold_puts,
    stats_key,
)
from actors.broker.topic_config import (
    TRANS_HALF_TOPIC,
    is_writeable,
)
from actors.broker.transaction import (
    TransactionalMessageService,
    process_end_transaction,
    resume_check_half_message,
)
from actors.core import FAQ_SUFFIX, AccessCheck, Request
from protocol.codes import (
    CURRENT_VERSION,
    RETRY_GROUP_TOPIC_PREFIX,
    RPC_TYPE_RESPONSE,
    TopicSysFlag,
    dlq_topic,
    retry_topic,
)
from protocol.codes import LanguageCode as Lang
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import (
    RemotingCommand,
    ResponseTemplate,
    TemplatedResponse,
    request_parts,
)
from protocol.errors import HeaderFieldError
from protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    decode_send_header,
    send_v2_fields,
)
from protocol.message import (
    MULTI_TAGS_FLAG,
    PROPERTY_CLUSTER,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TAGS,
    parse_properties,
)
from protocol.message import PROPERTY_DELAY_TIME_LEVEL as PROPERTY_DELAY
from protocol.message import PROPERTY_REAL_QUEUE_ID as PROPERTY_REAL_QID
from protocol.message import PROPERTY_TRANSACTION_PREPARED as PROPERTY_TRAN_MSG
from protocol.message import PROPERTY_WAIT_STORE_MSG_OK as PROPERTY_WAIT
from protocol.message_properties import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    java_parse_int,
    properties_to_string,
)
from protocol.record import java_string_hash
from store.message_ext_batch_encoder import MalformedBatchError
from store.message_ext_broker_inner import MessageExtBatch, MessageExtBrokerInner
from store.message_store import DefaultMessageStore
from store.put_message_result import PutMessageResult, PutMessageStatus, offset_msg_id

log = logging.getLogger(__name__)

TRANSACTION_TYPE_MASK: Final = 0xC
JAVA: Final = int(Lang.JAVA)
_SEND_V2: Final = int(RC.SEND_MESSAGE_V2)
_SEND_BACK: Final = int(RC.CONSUMER_SEND_MSG_BACK)
_END_TX: Final = int(RC.END_TRANSACTION)
_RESUME_CHECK: Final = int(RC.RESUME_CHECK_HALF_MESSAGE)

# SendMessageResponseHeader wire keys; the hot path builds this dict inline (tests pin it).
RESPONSE_KEYS: Final = tuple(f.key for f in SendMessageResponseHeader.FIELDS)

_PS = PutMessageStatus


def _delay_level(props: dict[str, str]) -> int:
    """getDelayTimeLevel: the DELAY property as Integer.parseInt reads it (0 when absent or
    not a number: the store refuses such a put)."""
    v = props.get(PROPERTY_DELAY)
    level = java_parse_int(v.encode()) if v else 0
    return level if level is not None else 0


class SendMessageProcessor(ReplyMessageProcessor):
    """The send group core (ProcessorCore): the send codes over the reply codes' processor."""

    def __init__(self, ctx: BrokerContext, rng: random.Random | None = None) -> None:
        super().__init__(ctx, rng)
        self.access: AccessCheck | None = None  # ACL: checked in the fast path too
        sc = ctx.store_config
        self._tag_codes: dict[str, int] = {}  # TAGS value -> Java hash (the fast path)
        ctx.on_event(OffsetMoved, self._on_offset_moved)
        self.store_admin = StoreAdminProcessor(ctx)  # the admin codes that change the store
        self.service_put = ServicePutProcessor(ctx, self._emit_topic)  # the services' puts
        self.tx = self._start_transactions()
        # TOPIC_PUT_NUMS / TOPIC_PUT_SIZE / BROKER_PUT_NUMS / SNDBCK_PUT_NUMS (BrokerStatsManager);
        # the hot path adds to a per-topic [messages, bytes, calls] list, folded in at samples
        root = sc.storePathRootDir
        self.stats = (
            StatsPublisher(root, "send", fold_puts(self.cluster))
            if root and isinstance(self.store, DefaultMessageStore) else None
        )  # fmt: skip
        # the hot path's put counts (topic -> [messages, bytes, calls]), folded at samples
        if self.stats is not None:
            self._puts = self.stats.counts
        # a slave's store writer replicates from its master (HAService.HAClient)
        self.ha_client: HAClient | None = None
        if self._is_slave() and isinstance(self.store, DefaultMessageStore):
            self.ha_client = HAClient(self.store)
            configured = sc.haMasterAddress
            if configured:
                self.ha_client.set_master(configured, 0)
            ctx.on_event(HaMasterChanged, self._on_ha_master)

    def _read_config(self) -> None:
        """The broker config values this core keeps (again after UPDATE_BROKER_CONFIG)."""
        super()._read_config()
        self._cluster_prop = f"{PROPERTY_CLUSTER}{NAME_VALUE_SEPARATOR}{self.cluster}"
        # SUCCESS responses: the JSON header pre-rendered, only these three values vary
        self._ok_template = ResponseTemplate(
            self._base_ext(), ("msgId", "queueId", "queueOffset")
        )

    def _start_transactions(self) -> TransactionalMessageService | None:
        """END_TRANSACTION and the check-back, on a master's writer store only."""
        if not isinstance(self.store, DefaultMessageStore) or self._is_slave():
            return None
        return TransactionalMessageService(self.ctx, self.store_host, self._emit_topic)

    def _is_slave(self) -> bool:
        return self.bc.is_slave

    def before_store_shutdown(self, now_ms: int) -> None:
        """Clean shutdown, just before the store closes: the stats, the HA connection."""
        if self.stats is not None:
            self.stats.close()
        if self.ha_client is not None:
            self.ha_client.close()
        if self._transfer_wake is not None:
            self._transfer_wake.close()

    # --- HA: a slave's replication client (fds watched by the runtime) ------------------------

    def watch_fds(self) -> list[int]:
        """Descriptors besides the channels the runtime watches for this core."""
        return self.ha_client.fds() if self.ha_client is not None else []

    def on_fd_ready(self, fds: list[int], now_ms: int) -> None:
        """The HA connection of a slave's writer is readable."""
        if self.ha_client is not None:
            self.ha_client.on_ready(now_ms)

    def _on_ha_master(self, ev: HaMasterChanged, now_ms: int) -> None:
        """updateHaMasterAddress, unless haMasterAddress is configured."""
        if self.ha_client is not None and not self.ctx.store_config.haMasterAddress:
            self.ha_client.set_master(ev.ha_addr, now_ms)

    # --- ProcessorCore --------------------------------------------------------------------

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Handle one send request."""
        cmd = req.cmd
        resp: RemotingCommand | None
        try:
            if cmd.code == _SEND_BACK:
                resp = self._send_back(req, now_ms)
            elif cmd.code == _END_TX:
                resp = process_end_transaction(self.tx, req, now_ms)
            elif cmd.code in REPLY_CODES:
                resp = self.process_reply(req, now_ms)
            elif cmd.code == _RESUME_CHECK:
                resp = resume_check_half_message(self.tx, cmd, now_ms)
            elif cmd.code in SERVICE_CODES:
                resp = self.service_put.process(req, now_ms)
            elif cmd.code in STORE_ADMIN_CODES:
                resp = self.store_admin.process(req, now_ms)
            else:
                resp = self._send(req, now_ms)
        except HeaderFieldError as e:
            resp = cmd.make_response(e.code, e.remark, self._base_ext())
        if resp is None or cmd.flag & 2:  # RPC_ONEWAY
            return None
        return resp

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """A requester gone while its reply push is open: that push failed (waiting sends'
        replies to a closed connection are dropped by the outbox)."""
        self.fail_pushes_to(conn_id, now_ms)
        self.store_admin.on_connection_closed(conn_id)

    def tick(self, now_ms: int) -> int | None:
        """Release flushed sync sends, run the store's periodic work; ms until the earliest of
        them wants the next tick (None: no timer)."""
        self.flush_and_release(now_ms)
        waits = [self.store.tick(now_ms) if self.store is not None else None]
        look = self.next_look_ms(now_ms)
        if look is not None:
            waits.append(look)
        if self.stats is not None:
            waits.append(self.stats.tick(now_ms))
        if self.ha_client is not None:
            waits.append(self.ha_client.tick(now_ms))
        waits.append(self.store_admin.tick(now_ms))
        waits.append(self.expire_pushes(now_ms))
        wanted = [w for w in waits if w is not None]
        return min(wanted) if wanted else None

    # --- the fast path: plain SEND_MESSAGE_V2 straight from the frame ------------------------

    def fast_path(
        self, frame: memoryview, conn_id: int, peer: tuple[str, int], now_ms: int
    ) -> bytes | None:
        """The encoded reply of a plain two-way SEND_MESSAGE_V2 to an existing topic, or None
        (nothing done: the request takes process()).

        Same result as process() for the requests it takes: no RemotingCommand, Request or
        properties dict is built, the stored properties are the request's text with WAIT taken
        out and CLUSTER appended, the reply comes from the response template. It takes no
        request that would emit an event, wait for a flush, or be rejected.
        """
        parts = request_parts(frame, _SEND_V2)
        if parts is None or self.sync_flush or self.sync_master or not self.broker_writable:
            return None
        opaque, ext, body, st = parts
        fields = send_v2_fields(ext)
        if fields is None:
            return None
        topic, queue_id, sys_flag, born_timestamp, flag, props_string, reconsume = fields
        tc = self.ctx.topics.table.get(topic)
        if tc is None or self._checked.get(topic, False) is not None:
            return None  # unknown (auto-create emits an event) or never checked / refused
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return None
        if queue_id < 0:
            queue_id = self.rng.randrange(max(1, tc.write_queue_nums))
        elif queue_id >= tc.write_queue_nums and queue_id >= tc.read_queue_nums:
            return None
        stored = self._stored_properties(props_string)
        if stored is None:
            return None
        pb, tags_code = stored
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        access = self.access  # last, once the fast path takes it: a decline is not checked twice
        if access is not None and access.check(_SEND_V2, ext, body, peer, now_ms) is not None:
            return None  # refused: process() answers it (the host checks it there again)
        store_host = self.store_host
        # the store's put from the fields: no message nor result object per send
        put = self.store.put_message_fields(
            topic, queue_id, body, pb, sys_flag, flag, born_timestamp,
            self._hosts.get(peer) or self._born_host(peer), store_host, reconsume, tags_code,
            now_ms,
        )  # fmt: skip
        if put.__class__ is tuple:
            phy, size, qoff = put  # type: ignore[misc]
            count(self._puts, topic, 1, size)
            return self._ok_template.frame_plain(  # a hex id and two numbers: nothing to escape
                st, opaque, (offset_msg_id(store_host, phy), str(queue_id), str(qoff))
            )
        result = PutMessageResult(put)  # type: ignore[arg-type]
        cmd = RemotingCommand(_SEND_V2, opaque=opaque, serialize_type=st)
        resp = self._put_response(Request(conn_id, peer, cmd, 0), result, queue_id, True, now_ms)
        return b"" if resp is None else resp.encode()

    def _stored_properties(self, text: str | None) -> tuple[bytes, int] | None:
        """(what the general path stores for these request properties, as bytes, and the
        TAGS hash), worked out on the text; None when the text is not one name=value per
        segment with unique names, or names CLUSTER, TRAN_MSG or DELAY (the general path
        decides)."""
        cluster = self._cluster_prop
        if not text:
            return cluster.encode(), 0
        if text[-1] == PROPERTY_SEPARATOR:  # Java clients end the text with a separator
            text = text[:-1]
        props = parse_properties(text)
        if (
            len(props) != text.count(PROPERTY_SEPARATOR) + 1
            or PROPERTY_CLUSTER in props
            or PROPERTY_TRAN_MSG in props
            or PROPERTY_DELAY in props  # parked: the general path keeps WAIT for it
        ):
            return None
        wait = props.get(PROPERTY_WAIT)
        if wait is not None:
            seg = f"{PROPERTY_WAIT}{NAME_VALUE_SEPARATOR}{wait}"
            if text == seg:
                text = ""
            elif text.startswith(seg + PROPERTY_SEPARATOR):
                text = text[len(seg) + 1 :]
            else:
                text = text.replace(PROPERTY_SEPARATOR + seg, "", 1)
        pb = (f"{text}{PROPERTY_SEPARATOR}{cluster}" if text else cluster).encode()
        tags = props.get(PROPERTY_TAGS)
        if not tags:
            return pb, 0
        code = self._tag_codes.get(tags)
        if code is None:
            if len(self._tag_codes) >= CACHE_LIMIT:
                self._tag_codes.clear()
            code = self._tag_codes[tags] = java_string_hash(tags)
        return pb, code

    # --- SEND_MESSAGE / V2 / BATCH -----------------------------------------------------------

    def _send(self, req: Request, now_ms: int) -> RemotingCommand | None:
        cmd = req.cmd
        ext = cmd.ext_fields
        fields = send_v2_fields(ext) if cmd.code == _SEND_V2 and ext is not None else None
        if fields is None:  # V1, a batch, or something send_v2_fields leaves to the header
            h = decode_send_header(cmd.code, ext)
            if h.batch:
                return self._send_batch(req, h, now_ms)
            fields = (
                h.topic,
                h.queue_id,
                h.sys_flag,
                h.born_timestamp,
                h.flag,
                h.properties,
                h.reconsume_times or 0,
            )
        topic, queue_id, sys_flag, born_timestamp, flag, props_string, reconsume = fields
        try:
            tc, queue_id = self._msg_check(cmd, topic, queue_id, req.peer)
            props = parse_properties(props_string) if props_string else {}
            resp_qid = queue_id  # the answer names the queue asked for, even after a DLQ turn
            if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                h = decode_send_header(cmd.code, ext)
                topic, queue_id = self._retry_dlq(h, cmd.version, topic, queue_id, props)
            if tc.topic_filter_type == "MULTI_TAG":
                sys_flag |= MULTI_TAGS_FLAG
            w = props.pop(PROPERTY_WAIT, None)
            wait = w is None or w.lower() != "false"
            if w is not None and _delay_level(props) > 0:
                # CommitLog renders a delayed message's text again from the map, where
                # SendMessageProcessor put WAIT back: the parked record keeps it
                props[PROPERTY_WAIT] = w
            props[PROPERTY_CLUSTER] = self.cluster
            tran = props.get(PROPERTY_TRAN_MSG)
            if tran is not None and tran.lower() == "true":
                if self.bc.rejectTransactionMessage:
                    raise Reject(
                        RS.NO_PERMISSION,
                        f"the broker[{self.bc.brokerIP1}] sending transaction message is forbidden",
                    )
                if w is not None:  # parseHalfMessageInner writes the map again, WAIT put back
                    props[PROPERTY_WAIT] = w
                props[PROPERTY_REAL_TOPIC] = topic
                props[PROPERTY_REAL_QID] = str(queue_id)
                sys_flag &= ~TRANSACTION_TYPE_MASK
                half, created = self.ctx.topics.create_in_send_back(TRANS_HALF_TOPIC, 1, RW)
                if created:
                    self._emit_topic(half)
                topic, queue_id = TRANS_HALF_TOPIC, 0
        except Reject as r:
            return cmd.make_response(r.code, r.remark, self._base_ext())
        peer = req.peer
        born_host = self._hosts.get(peer) or self._born_host(peer)
        # tags_code None: the store hashes TAGS itself (with a per-tag cache)
        inner = MessageExtBrokerInner(
            topic,
            cmd.body,  # copied into the commit log by the put; not kept
            flag,
            props,
            queue_id,
            sys_flag,
            born_timestamp,
            born_host,
            self.store_host,
            reconsume,
        )
        result = self.store.put_message(inner, now_ms)
        topic = inner.topic  # where the record went (SCHEDULE_TOPIC_XXXX, the half topic)
        if result.status is _PS.PUT_OK:
            self._count_put(topic, 1, result.wrote_bytes)
            # SendMessageResponseHeader.to_ext(), inlined: msgId, queueId, queueOffset + 2
            resp = TemplatedResponse(
                RS.SUCCESS,
                JAVA,
                CURRENT_VERSION,
                cmd.opaque,
                RPC_TYPE_RESPONSE,
                None,
                {
                    "msgId": offset_msg_id(self.store_host, result.wrote_offset),
                    "queueId": str(resp_qid),
                    "queueOffset": str(result.logics_offset),
                    "MSG_REGION": self.region,
                    "TRACE_ON": self.trace_on,
                },
                b"",
                cmd.serialize_type,
            )
            resp.template = self._ok_template
            if not (self.sync_flush or self.sync_master):
                return resp
            return self._maybe_wait(req.conn_id, req.cmd.is_oneway, resp, result.end_offset, wait,
                                   now_ms)
        return self._put_response(req, result, resp_qid, wait, now_ms, topic)

    def _send_batch(
        self, req: Request, h: SendMessageRequestHeader, now_ms: int
    ) -> RemotingCommand | None:
        cmd = req.cmd
        try:  # sendBatchMessage: msgCheck first (its topic check answers a long name first)
            tc, queue_id = self._msg_check(cmd, h.topic, h.queue_id, req.peer)
            if len(h.topic) > 127:
                raise Reject(RS.MESSAGE_ILLEGAL, f"message topic length too long {len(h.topic)}")
            if h.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise Reject(
                    RS.MESSAGE_ILLEGAL, f"batch request does not support retry group {h.topic}"
                )
        except Reject as r:
            return cmd.make_response(r.code, r.remark, self._base_ext())
        props = parse_properties(h.properties) if h.properties else {}
        wait = props.get(PROPERTY_WAIT, "true").lower() != "false"
        props[PROPERTY_CLUSTER] = self.cluster
        sys_flag = h.sys_flag
        if tc.topic_filter_type == "MULTI_TAG":
            sys_flag |= MULTI_TAGS_FLAG
        batch = MessageExtBatch(
            topic=h.topic,
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp=h.born_timestamp,
            born_host=self._born_host(req.peer),
            store_host=self.store_host,
            reconsume_times=h.reconsume_times or 0,
            body=cmd.body,
            batch_properties=properties_to_string(props),
        )
        try:
            result = self.store.put_messages(batch, now_ms)
        except MalformedBatchError as exc:  # the encoder's exception ends the request there
            return cmd.make_response(RS.SYSTEM_ERROR, f"the batch body does not decode: {exc}",
                                     self._base_ext())  # fmt: skip
        return self._put_response(req, result, queue_id, wait, now_ms, h.topic)

    # --- CONSUMER_SEND_MSG_BACK ---------------------------------------------------------------

    def _send_back(self, req: Request, now_ms: int) -> RemotingCommand:
        cmd = req.cmd
        h = ConsumerSendMsgBackRequestHeader.from_ext(cmd.ext_fields)
        group = h.group
        delay_level = h.delay_level
        cfg, created = self.ctx.groups.find_or_create(group)
        if cfg is None:
            return cmd.make_response(
                RS.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group not exist, {group}{FAQ_SUFFIX}",
            )
        if created:
            self.ctx.emit(SubscriptionGroupChanged(cfg))
        if not self.broker_writable:
            return cmd.make_response(
                RS.NO_PERMISSION, f"the broker[{self.bc.brokerIP1}] sending message is forbidden"
            )
        if cfg.retry_queue_nums <= 0:
            return cmd.make_response(RS.SUCCESS)
        new_topic = retry_topic(group)
        queue_id = self.rng.randrange(cfg.retry_queue_nums)
        unit = TopicSysFlag.FLAG_UNIT_SUB if h.unit_mode else 0  # buildSysFlag(false, true)
        tc, created = self.ctx.topics.create_in_send_back(
            new_topic, cfg.retry_queue_nums, RW, int(unit)
        )
        if created:
            self._emit_topic(tc)
        if not is_writeable(tc.perm):
            return cmd.make_response(
                RS.NO_PERMISSION, f"the topic[{new_topic}] sending message is forbidden"
            )
        msg = self.store.look_message_by_offset(h.offset)
        if msg is None:
            return cmd.make_response(RS.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
        props = dict(msg.properties)
        if PROPERTY_RETRY_TOPIC not in props:
            props[PROPERTY_RETRY_TOPIC] = msg.topic
        max_times = cfg.retry_max_times
        if cmd.version >= V3_4_9 and h.max_reconsume_times is not None:
            max_times = h.max_reconsume_times
        if msg.reconsume_times >= max_times or delay_level < 0:
            new_topic = dlq_topic(group)
            queue_id = 0
            dlq, created = self.ctx.topics.create_in_send_back(new_topic, 1, RW)
            if created:
                self._emit_topic(dlq)
            props[PROPERTY_DELAY] = "0"  # setDelayTimeLevel(0): stored as DELAY=0
        else:
            if delay_level == 0:
                delay_level = 3 + msg.reconsume_times
            props[PROPERTY_DELAY] = str(delay_level)
        if not props.get(PROPERTY_ORIGIN_MESSAGE_ID):
            props[PROPERTY_ORIGIN_MESSAGE_ID] = msg.offset_msg_id or h.origin_msg_id or ""
        props[PROPERTY_WAIT] = "false"  # msgExt.setWaitStoreMsgOK(false), stored with the rest
        result = self.store.put_message(
            MessageExtBrokerInner.from_stored(
                msg, new_topic, queue_id, props,
                store_host=self.store_host, reconsume_times=msg.reconsume_times + 1,
            ),
            now_ms,
        )  # fmt: skip
        if result.status is _PS.PUT_OK:
            if self.stats is not None:  # incSendBackNums(group, the message's RETRY_TOPIC)
                back = props.get(PROPERTY_RETRY_TOPIC) or msg.topic
                self.stats.items.add(SNDBCK_PUT_NUMS, stats_key(back, h.group), 1)
            return cmd.make_response(RS.SUCCESS)
        return cmd.make_response(RS.SYSTEM_ERROR, result.status.name)

    def release(self, token: int, now_ms: int) -> bool:
        """The controller registered after a delete held under `token` (admin_store)."""
        return self.store_admin.release(token)

    # --- OFFSET_MOVED_EVENT (from the pull actor) ------------------------------------------------

    def _on_offset_moved(self, ev: OffsetMoved, now_ms: int) -> None:
        """Store the OFFSET_MOVED_EVENT message a pull answered 21 for (the single writer)."""
        result = self.store.put_message(offset_moved_message(ev, self.store_host, now_ms), now_ms)
        if result.status is not _PS.PUT_OK:
            log.warning("offset moved event not stored group=%s topic=%s qid=%d status=%s",
                        ev.group, ev.topic, ev.queue_id, result.status.name)  # fmt: skip
