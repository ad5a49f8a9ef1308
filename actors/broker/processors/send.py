"""The send group: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320),
CONSUMER_SEND_MSG_BACK (36), END_TRANSACTION (37) and SEND_REPLY_MESSAGE (324/325), on THE
single store writer, which also serves the admin codes that change the store
(actors.broker.processors.admin_store).

Mirrors broker/processor/SendMessageProcessor.java + AbstractSendMessageProcessor.java and
ReplyMessageProcessor.java, RocketMQ 4.9.x (spec §9.1, §9.6). SYNC_FLUSH is a group commit:
a send that must wait for the flush returns None; the runtime calls `flush_and_release(now_ms)`
after each batch (and tick does too), which flushes once and answers every waiting send whose
record is covered, or FLUSH_DISK_TIMEOUT (10) after syncFlushTimeout. Delay levels are
rewritten to SCHEDULE_TOPIC_XXXX inside the store; actors.broker.schedule.ScheduleMessageService
delivers them, driven by tick() only (a master's writer; the request path never touches it).
"""

from __future__ import annotations

import logging
import os
import random
from dataclasses import dataclass
from typing import Any, Final

from actors.broker.context import BrokerContext
from actors.broker.events import (
    BrokerConfigChanged,
    HaMasterChanged,
    OffsetMoved,
    SubscriptionGroupChanged,
)
from actors.broker.ha import HAClient
from actors.broker.processors.abstract_send import (
    CACHE_LIMIT,
    RW,
    V3_4_9,
    AbstractSendMessageProcessor,
    _Reject,
)
from actors.broker.processors.admin_store import STORE_ADMIN_CODES, StoreAdminProcessor
from actors.broker.schedule import ScheduleMessageService, read_persisted_offsets
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
from actors.broker.transaction import TransactionalMessageService
from actors.core import FAQ_SUFFIX, Request
from actors.runtime.wake import HA_ACKED, HA_TRANSFER, WakeReader, WakeWriter
from protocol.bodies import MessageQueue, dumps_compact
from protocol.codes import (
    CURRENT_VERSION,
    OFFSET_MOVED_EVENT,
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
    EndTransactionRequestHeader,
    ReplyMessageRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    decode_send_header,
    send_v2_fields,
)
from protocol.message import (
    MULTI_TAGS_FLAG,
    PROPERTY_CLUSTER,
    PROPERTY_KEYS,
    PROPERTY_MESSAGE_REPLY_TO_CLIENT,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_PUSH_REPLY_TIME,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_TAGS,
    parse_properties,
)
from protocol.message import PROPERTY_DELAY_TIME_LEVEL as PROPERTY_DELAY
from protocol.message import PROPERTY_REAL_QUEUE_ID as PROPERTY_REAL_QID
from protocol.message import PROPERTY_TRANSACTION_PREPARED as PROPERTY_TRAN_MSG
from protocol.message import PROPERTY_WAIT_STORE_MSG_OK as PROPERTY_WAIT
from protocol.record import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    java_string_hash,
    pack_host,
    properties_to_string,
)
from store.message_ext_broker_inner import MessageExtBatch, MessageExtBrokerInner
from store.message_store import DefaultMessageStore
from store.put_message_result import PutMessageStatus, offset_msg_id
from store.state_page import OFF_HA_ACKED, OFF_HA_SLAVES

log = logging.getLogger(__name__)

TRANSACTION_TYPE_MASK: Final = 0xC
JAVA: Final = int(Lang.JAVA)
_SEND_V2: Final = int(RC.SEND_MESSAGE_V2)
_SEND_BACK: Final = int(RC.CONSUMER_SEND_MSG_BACK)
_END_TX: Final = int(RC.END_TRANSACTION)
_RESUME_CHECK: Final = int(RC.RESUME_CHECK_HALF_MESSAGE)
_ALL_DELAY_OFFSET: Final = int(RC.GET_ALL_DELAY_OFFSET)
_REPLY_CODES: Final = frozenset({int(RC.SEND_REPLY_MESSAGE), int(RC.SEND_REPLY_MESSAGE_V2)})
PUSH_REPLY_TIMEOUT_MS: Final = 10_000  # Broker2Client.callClient's invokeSync timeout

# SendMessageResponseHeader wire keys; the hot path builds this dict inline (tests pin it).
RESPONSE_KEYS: Final = tuple(f.key for f in SendMessageResponseHeader.FIELDS)

# store PutMessageStatus -> (response code, remark or None)
_SNA = (
    "service not available now. It may be caused by one of the following reasons: the broker's"
    " disk is full, messages are put to the slave, message store has been shut down, etc."
)
_PS = PutMessageStatus
PUT_STATUS_CODES: Final[dict[PutMessageStatus, tuple[int, str | None]]] = {
    _PS.PUT_OK: (RS.SUCCESS, None),
    _PS.FLUSH_DISK_TIMEOUT: (RS.FLUSH_DISK_TIMEOUT, None),
    _PS.FLUSH_SLAVE_TIMEOUT: (RS.FLUSH_SLAVE_TIMEOUT, None),
    _PS.SLAVE_NOT_AVAILABLE: (RS.SLAVE_NOT_AVAILABLE, None),
    _PS.CREATE_MAPEDFILE_FAILED: (RS.SYSTEM_ERROR, "create mapped file failed"),
    _PS.MESSAGE_ILLEGAL: (RS.MESSAGE_ILLEGAL, "the message is illegal"),
    _PS.PROPERTIES_SIZE_EXCEEDED: (RS.MESSAGE_ILLEGAL, "the message properties exceed 32k"),
    _PS.SERVICE_NOT_AVAILABLE: (RS.SERVICE_NOT_AVAILABLE, _SNA),
    _PS.OS_PAGECACHE_BUSY: (
        RS.SYSTEM_ERROR,
        "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    ),
    _PS.UNKNOWN_ERROR: (RS.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}
# Codes whose response carries msgId/queueId/queueOffset (§9.1).
_WITH_IDS: Final = frozenset(
    {RS.SUCCESS, RS.FLUSH_DISK_TIMEOUT, RS.FLUSH_SLAVE_TIMEOUT, RS.SLAVE_NOT_AVAILABLE}
)


@dataclass(slots=True)
class _Waiting:
    end_offset: int
    deadline_ms: int  # SYNC_FLUSH: syncFlushTimeout
    conn_id: int
    resp: RemotingCommand
    need_flush: bool = True
    slave_deadline_ms: int = 0  # SYNC_MASTER: slaveTimeout (0: no slave wait)
    keep_code: bool = False  # a replier's answer: its code is the push's, whatever the wait


@dataclass(slots=True)
class _PushWait:
    """A reply message pushed to its requester: the replier's response waits for the answer."""

    conn_id: int  # the replier's connection (None response for a oneway replier: not kept)
    resp: RemotingCommand
    client_id: str
    target_conn: int
    deadline_ms: int
    end_offset: int = 0  # where the stored reply ends (0: not stored): SYNC_FLUSH waits for it


def _delay_level(props: dict[str, str]) -> int:
    """getDelayTimeLevel: the DELAY property as an int (0 when absent or not a number)."""
    try:
        return int(props.get(PROPERTY_DELAY, "0"))
    except ValueError:
        return 0


class SendMessageProcessor(AbstractSendMessageProcessor):
    """The send group core (ProcessorCore)."""

    def __init__(self, ctx: BrokerContext, rng: random.Random | None = None) -> None:
        super().__init__(ctx, rng)
        bc = self.bc
        self.store = ctx.store
        self.store_host = pack_host(bc.brokerIP1, bc.listenPort)
        sc = ctx.store_config
        self.sync_flush = str(getattr(sc, "flushDiskType", "ASYNC_FLUSH")).upper() == "SYNC_FLUSH"
        # SYNC_MASTER: a WAIT send is answered once a slave has it (GroupTransferService)
        self.sync_master = str(getattr(bc, "brokerRole", "")).upper() == "SYNC_MASTER"
        self.slave_timeout_ms = int(getattr(sc, "slaveTimeout", 3000))
        self.slave_fallbehind_max = int(getattr(sc, "haSlaveFallbehindMax", 256 << 20))
        self.sync_flush_timeout_ms = int(getattr(sc, "syncFlushTimeout", 5000))
        self.waiting: list[_Waiting] = []
        self.push_waits: dict[int, _PushWait] = {}  # opaque of a reply push -> its replier
        self._closed_conns: set[int] = set()  # connections closed (ids are never reused)
        self._read_config()
        self._tag_codes: dict[str, int] = {}  # TAGS value -> Java hash (the fast path)
        ctx.on_event(OffsetMoved, self._on_offset_moved)
        ctx.on_event(BrokerConfigChanged, lambda _ev, _now: self._read_config())
        self.store_admin = StoreAdminProcessor(ctx)  # the admin codes that change the store
        self.schedule = self._start_schedule()
        self.tx = self._start_transactions()
        # TOPIC_PUT_NUMS / TOPIC_PUT_SIZE / BROKER_PUT_NUMS / SNDBCK_PUT_NUMS (BrokerStatsManager);
        # the hot path adds to a per-topic [messages, bytes, calls] list, folded in at samples
        root = getattr(sc, "storePathRootDir", "")
        self.stats = (
            StatsPublisher(root, "send", fold_puts(self.cluster))
            if root and isinstance(self.store, DefaultMessageStore) else None
        )  # fmt: skip
        # the hot path's put counts (topic -> [messages, bytes, calls]), folded at samples
        self._puts: dict[Any, list[int]] = self.stats.counts if self.stats is not None else {}
        # a slave's store writer replicates from its master (HAService.HAClient)
        self.ha_client: HAClient | None = None
        if self._is_slave() and isinstance(self.store, DefaultMessageStore):
            self.ha_client = HAClient(self.store)
            configured = str(getattr(sc, "haMasterAddress", "") or "")
            if configured:
                self.ha_client.set_master(configured, 0)
            ctx.on_event(HaMasterChanged, self._on_ha_master)
        # SYNC_MASTER: wake the HA service for a waiting send, be woken by a slave's ack
        self._transfer_wake: WakeWriter | None = None
        self._acked_wake: WakeReader | None = None
        self._poke_transfer = False
        self._woken = False  # the last transfer poke reached the HA service: acks will wake us
        wake_dir = getattr(ctx, "runtime_dir", "")
        if self.sync_master and wake_dir and isinstance(self.store, DefaultMessageStore):
            self._transfer_wake = WakeWriter(os.path.join(wake_dir, HA_TRANSFER))
            self._acked_wake = WakeReader(os.path.join(wake_dir, HA_ACKED))

    def _read_config(self) -> None:
        """The broker config values this core keeps (again after UPDATE_BROKER_CONFIG)."""
        bc = self.bc
        self.region = bc.regionId
        self.cluster = bc.brokerClusterName
        self.trace_on = "true" if bc.traceOn else "false"
        self.broker_writable = is_writeable(bc.brokerPermission)
        self._cluster_prop = f"{PROPERTY_CLUSTER}{NAME_VALUE_SEPARATOR}{self.cluster}"
        # SUCCESS responses: the JSON header pre-rendered, only these three values vary
        self._ok_template = ResponseTemplate(
            self._base_ext(), ("msgId", "queueId", "queueOffset")
        )

    def _start_schedule(self) -> ScheduleMessageService | None:
        """The delay-level delivery service, on a master's writer store only."""
        store = self.store
        if not isinstance(store, DefaultMessageStore):
            return None
        if str(getattr(self.bc, "brokerRole", "ASYNC_MASTER")).upper() == "SLAVE":
            return None
        return ScheduleMessageService(store, self.ctx.store_config)

    def _start_transactions(self) -> TransactionalMessageService | None:
        """END_TRANSACTION and the check-back, on a master's writer store only."""
        if not isinstance(self.store, DefaultMessageStore) or self._is_slave():
            return None
        return TransactionalMessageService(self.ctx, self.store_host, self._emit_topic)

    def _is_slave(self) -> bool:
        return str(getattr(self.bc, "brokerRole", "ASYNC_MASTER")).upper() == "SLAVE"

    def before_store_shutdown(self, now_ms: int) -> None:
        """Clean shutdown, just before the store closes: persist the delay offsets (and the
        stats)."""
        if self.schedule is not None:
            self.schedule.shutdown()
        if self.stats is not None:
            self.stats.close()
        if self.ha_client is not None:
            self.ha_client.close()
        for end in (self._transfer_wake, self._acked_wake):
            if end is not None:
                end.close()

    # --- HA: a slave's replication client (fds watched by the runtime) ------------------------

    def watch_fds(self) -> list[int]:
        """Descriptors besides the channels the runtime watches for this core."""
        fds = self.ha_client.fds() if self.ha_client is not None else []
        if self._acked_wake is not None:
            fds += self._acked_wake.fds()
        return fds

    def on_fd_ready(self, fds: list[int], now_ms: int) -> None:
        """One of watch_fds() is readable (the runtime then runs flush_and_release)."""
        acked = self._acked_wake
        if acked is not None and acked.fd in fds:
            acked.drain()  # a slave acked more: the waiting sends are looked at after this
        if self.ha_client is not None:
            self.ha_client.on_ready(now_ms)

    def _on_ha_master(self, ev: HaMasterChanged, now_ms: int) -> None:
        """updateHaMasterAddress, unless haMasterAddress is configured."""
        if self.ha_client is not None and not getattr(self.ctx.store_config, "haMasterAddress",
                                                      ""):  # fmt: skip
            self.ha_client.set_master(ev.ha_addr, now_ms)

    def _slave_ok(self, end_offset: int) -> bool:
        """HAService.isSlaveOK: a slave is connected and not too far behind."""
        st = getattr(self.store, "state", None)
        if st is None or st.get(OFF_HA_SLAVES) <= 0:
            return False
        return end_offset - st.get(OFF_HA_ACKED) < self.slave_fallbehind_max

    def _slave_acked(self) -> int:
        st = getattr(self.store, "state", None)
        return st.get(OFF_HA_ACKED) if st is not None else -1

    def _count_put(self, topic: str, msgs: int, size: int) -> None:
        """handlePutMessageResult's stats, for the topic the record went to (SCHEDULE_TOPIC_XXXX
        for a delayed one, as in Java)."""
        count(self._puts, topic, msgs, size)

    def _base_ext(self) -> dict[str, str]:
        """MSG_REGION and TRACE_ON: on every send response (§9.1)."""
        return {"MSG_REGION": self.region, "TRACE_ON": self.trace_on}

    # --- ProcessorCore --------------------------------------------------------------------

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Handle one send request."""
        cmd = req.cmd
        resp: RemotingCommand | None
        try:
            if cmd.code == _SEND_BACK:
                resp = self._send_back(req, now_ms)
            elif cmd.code == _END_TX:
                resp = self._end_transaction(req, now_ms)
            elif cmd.code in _REPLY_CODES:
                resp = self._send_reply(req, now_ms)
            elif cmd.code == _RESUME_CHECK:
                resp = self._resume_check(req, now_ms)
            elif cmd.code == _ALL_DELAY_OFFSET:
                resp = self._all_delay_offset(cmd)
            elif cmd.code in STORE_ADMIN_CODES:
                resp = self.store_admin.process(req, now_ms)
            else:
                resp = self._send(req, now_ms)
        except HeaderFieldError as e:
            resp = cmd.make_response(e.code, e.remark, self._base_ext())
        if resp is None or cmd.flag & 2:  # RPC_ONEWAY
            return None
        return resp

    def _all_delay_offset(self, cmd: RemotingCommand) -> RemotingCommand:
        """GET_ALL_DELAY_OFFSET (AdminBrokerProcessor.getAllDelayOffset): the live table of
        the ScheduleMessageService running here; a slave, which runs none, answers the copy
        of its master's that SlaveSynchronize wrote."""
        if self.schedule is not None:
            body = self.schedule.encode().encode()
        else:
            body = read_persisted_offsets(self.ctx.store_config)
        return cmd.make_response(RS.SUCCESS, None, None, body)

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """A requester gone while its reply push is open: that push failed (waiting sends'
        replies to a closed connection are dropped by the outbox)."""
        for opaque in [o for o, w in self.push_waits.items() if w.target_conn == conn_id]:
            self._push_failed(self.push_waits.pop(opaque), now_ms)
        self.store_admin.on_connection_closed(conn_id)
        # client_manage's ProducerGroupChanged for it may come later: skip it until then
        closed = self._closed_conns
        closed.add(conn_id)
        if len(closed) > CACHE_LIMIT:
            live = {c for conns in self.ctx.producer_channels.values() for c in conns}
            closed.intersection_update(live)

    def tick(self, now_ms: int) -> int | None:
        """Release flushed sync sends, run the store's periodic work and the services hosted
        here; ms until the earliest of them wants the next tick (None: no timer)."""
        self.flush_and_release(now_ms)
        waits = [self.store.tick(now_ms) if self.store is not None else None]
        if self.schedule is not None:
            waits.append(self.schedule.tick(now_ms))
        if self.tx is not None:
            waits.append(self.tx.tick(now_ms))
        look = self.next_look_ms(now_ms)
        if look is not None:
            waits.append(look)
        if self.stats is not None:
            waits.append(self.stats.tick(now_ms))
        if self.ha_client is not None:
            waits.append(self.ha_client.tick(now_ms))
        waits.append(self.store_admin.tick(now_ms))
        if self.push_waits:
            for opaque in [o for o, w in self.push_waits.items() if now_ms >= w.deadline_ms]:
                self._push_failed(self.push_waits.pop(opaque), now_ms)
            if self.push_waits:
                waits.append(min(w.deadline_ms for w in self.push_waits.values()) - now_ms)
        wanted = [w for w in waits if w is not None]
        return min(wanted) if wanted else None

    def next_look_ms(self, now_ms: int) -> int | None:
        """When the waiting sends want their next look (None: none waits). A slave's ack wakes
        this core through the acked pipe once the HA service got the transfer poke, so then
        only the earliest deadline needs a timer; otherwise (no pipe, a flush to wait for)
        every millisecond."""
        if not self.waiting:
            return None
        if not self._woken or any(w.need_flush for w in self.waiting):
            return 1
        due = min(w.slave_deadline_ms or w.deadline_ms for w in self.waiting)
        return max(1, due - now_ms)

    def flush_and_release(self, now_ms: int) -> int:
        """Group commit: one flush (SYNC_FLUSH), a look at what the slaves have (SYNC_MASTER),
        then answer every waiting send they cover or whose time is up; the count."""
        if not self.waiting:
            return 0
        if self._poke_transfer:  # one wake-up of the HA service per batch that parked sends
            self._poke_transfer = False
            self._woken = self._transfer_wake is not None and self._transfer_wake.poke()
        flushed = self.store.flush(now_ms) if self.sync_flush else 1 << 62
        acked = self._slave_acked() if self.sync_master else 1 << 62
        keep: list[_Waiting] = []
        n = 0
        outbox = self.ctx.outbox
        for w in self.waiting:
            # both outcomes settle first (asyncPutMessage's thenCombine); the slave's wins
            disk_late = w.need_flush and w.end_offset > flushed
            slave_late = bool(w.slave_deadline_ms) and w.end_offset > acked
            if (disk_late and now_ms < w.deadline_ms) or (
                slave_late and now_ms < w.slave_deadline_ms
            ):
                keep.append(w)
                continue
            if slave_late:
                log.warning("slave timeout end_offset=%d acked=%d", w.end_offset, acked)
                if not w.keep_code:
                    w.resp.code = RS.FLUSH_SLAVE_TIMEOUT
            elif disk_late and w.resp.code != RS.SLAVE_NOT_AVAILABLE:
                log.warning("sync flush timeout end_offset=%d flushed=%d", w.end_offset, flushed)
                if not w.keep_code:
                    w.resp.code = RS.FLUSH_DISK_TIMEOUT
            n += 1
            if outbox is not None:
                outbox.send(w.conn_id, w.resp)
        self.waiting = keep
        return n

    # --- the fast path: plain SEND_MESSAGE_V2 straight from the frame ------------------------

    def fast_send(
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
        store_host = self.store_host
        msg = MessageExtBrokerInner(
            topic, body, flag, {}, queue_id, sys_flag, born_timestamp,
            self._hosts.get(peer) or self._born_host(peer), store_host, reconsume,
            tags_code=tags_code, properties_string=pb,  # bytes: the store takes them as is
        )  # fmt: skip
        result = self.store.put_message(msg, now_ms)
        if result.status is _PS.PUT_OK:
            count(self._puts, topic, 1, result.wrote_bytes)
            return self._ok_template.frame_plain(  # a hex id and two numbers: nothing to escape
                st,
                opaque,
                (
                    offset_msg_id(store_host, result.wrote_offset),
                    str(queue_id),
                    str(result.logics_offset),
                ),
            )
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
                    raise _Reject(
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
        except _Reject as r:
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

    # --- SEND_REPLY_MESSAGE / V2 (ReplyMessageProcessor) -------------------------------------

    def _send_reply(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """Store the reply in its topic (storeReplyMessageEnable) and push it to the producer
        named by REPLY_TO_CLIENT (PUSH_REPLY_MESSAGE_TO_CLIENT); the replier's response waits
        for the push's answer and is SYSTEM_ERROR when the push fails. As in Java, the record
        keeps the request's properties text as it came and sysFlag 0."""
        cmd = req.cmd
        h = decode_send_header(cmd.code, cmd.ext_fields)
        try:
            _tc, queue_id = self._msg_check(cmd, h.topic, h.queue_id, req.peer)
        except _Reject as r:
            return cmd.make_response(r.code, r.remark, self._base_ext())
        text = h.properties or ""
        props = parse_properties(text) if text else {}
        ext = self._base_ext()
        end_offset = 0
        if self.bc.storeReplyMessageEnable:
            result = self.store.put_message(
                MessageExtBrokerInner(
                    h.topic, cmd.body, h.flag, {}, queue_id, 0, h.born_timestamp,
                    self._born_host(req.peer), self.store_host, h.reconsume_times or 0,
                    properties_string=text,
                ),
                now_ms,
            )  # fmt: skip
            if result.status in (_PS.PUT_OK, _PS.FLUSH_DISK_TIMEOUT, _PS.FLUSH_SLAVE_TIMEOUT,
                                 _PS.SLAVE_NOT_AVAILABLE):  # fmt: skip
                end_offset = result.end_offset
                self._count_put(h.topic, 1, result.wrote_bytes)
                ext.update(msgId=offset_msg_id(self.store_host, result.wrote_offset),
                           queueId=str(queue_id), queueOffset=str(result.logics_offset))
            else:
                log.warning("reply message not stored: %s", result.status.name)
        if "msgId" not in ext:  # Java writes zeros when the push went out and nothing stored
            ext_ok = {**ext, "msgId": "0", "queueId": str(queue_id), "queueOffset": "0"}
        else:
            ext_ok = ext
        resp = cmd.make_response(RS.SUCCESS, None, ext_ok)
        client_id = props.get(PROPERTY_MESSAGE_REPLY_TO_CLIENT)
        if client_id is None:
            log.warning("%s is null, can not reply message", PROPERTY_MESSAGE_REPLY_TO_CLIENT)
            return self._reply_stored(req.conn_id, cmd.make_response(
                RS.SYSTEM_ERROR, f"reply message properties[{PROPERTY_MESSAGE_REPLY_TO_CLIENT}]"
                " is null", ext), end_offset, now_ms)  # fmt: skip
        target = self._producer_conn(client_id)
        outbox = self.ctx.outbox
        if target is None or outbox is None:
            remark = f"push reply message fail, channel of <{client_id}> not found."
            log.warning(remark)
            return self._reply_stored(req.conn_id, cmd.make_response(RS.SYSTEM_ERROR, remark, ext),
                                      end_offset, now_ms)  # fmt: skip
        props[PROPERTY_PUSH_REPLY_TIME] = str(now_ms)
        peer = req.peer
        push = RemotingCommand.request(
            RC.PUSH_REPLY_MESSAGE_TO_CLIENT,
            ReplyMessageRequestHeader(
                h.producer_group, h.topic, h.default_topic, h.default_topic_queue_nums,
                h.queue_id, h.sys_flag, h.born_timestamp, h.flag,
                f"/{peer[0]}:{peer[1]}", f"/{self.bc.brokerIP1}:{self.bc.listenPort}", now_ms,
                properties_to_string(props), h.reconsume_times, bool(h.unit_mode),
            ).to_ext(),
            cmd.body,  # encode() joins the view: no copy here
        )  # fmt: skip
        if not cmd.is_oneway:
            self.push_waits[push.opaque] = _PushWait(
                req.conn_id, resp, client_id, target, now_ms + PUSH_REPLY_TIMEOUT_MS, end_offset
            )
        outbox.call(target, push)
        return None

    def _producer_conn(self, client_id: str) -> int | None:
        """ProducerManager.findChannel: the connection of a producer client by its id."""
        closed = self._closed_conns
        for conn_id in self.ctx.producer_channels.get(client_id, ()):
            if conn_id not in closed:
                return conn_id
        return None

    def on_client_response(self, resp: RemotingCommand, now_ms: int) -> None:
        """The requester answered a reply push: the replier learns how it went."""
        wait = self.push_waits.pop(resp.opaque, None)
        if wait is None:
            log.info("client response opaque=%d code=%d matches no push", resp.opaque, resp.code)
            return
        if resp.code != RS.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s",
                        wait.client_id, resp.remark)  # fmt: skip
            self._push_failed(wait, now_ms)
        else:
            self._send_reply_response(wait, now_ms)

    def _reply_stored(self, conn_id: int, resp: RemotingCommand, end_offset: int, now_ms: int
                      ) -> RemotingCommand | None:  # fmt: skip
        """The replier's answer once the stored reply is as durable as a WAIT send's
        (ReplyMessageProcessor's putMessage waits for the flush and the slave alike); None
        while it waits. end_offset 0: nothing was stored, nothing to wait for."""
        if not end_offset:
            return resp
        return self._maybe_wait(conn_id, False, resp, end_offset, True, now_ms, keep_code=True)

    def _send_reply_response(self, wait: _PushWait, now_ms: int) -> None:
        resp = self._reply_stored(wait.conn_id, wait.resp, wait.end_offset, now_ms)
        if resp is not None and self.ctx.outbox is not None:
            self.ctx.outbox.send(wait.conn_id, resp)

    def _push_failed(self, wait: _PushWait, now_ms: int) -> None:
        """Answer the replier SYSTEM_ERROR (the message stays stored, as in Java)."""
        wait.resp.code = RS.SYSTEM_ERROR
        wait.resp.remark = f"push reply message to {wait.client_id}fail."  # Java's text
        self._send_reply_response(wait, now_ms)

    def _send_batch(
        self, req: Request, h: SendMessageRequestHeader, now_ms: int
    ) -> RemotingCommand | None:
        cmd = req.cmd
        try:  # sendBatchMessage: msgCheck first (its topic check answers a long name first)
            tc, queue_id = self._msg_check(cmd, h.topic, h.queue_id, req.peer)
            if len(h.topic) > 127:
                raise _Reject(RS.MESSAGE_ILLEGAL, f"message topic length too long {len(h.topic)}")
            if h.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise _Reject(
                    RS.MESSAGE_ILLEGAL, f"batch request does not support retry group {h.topic}"
                )
        except _Reject as r:
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
        result = self.store.put_messages(batch, now_ms)
        return self._put_response(req, result, queue_id, wait, now_ms, h.topic)

    def _put_response(
        self, req: Request, result: Any, queue_id: int, wait: bool, now_ms: int,
        topic: str | None = None,
    ) -> RemotingCommand | None:
        """The response for any put status (batches, errors); a stored one is counted for
        `topic` in the stats."""
        code, remark = PUT_STATUS_CODES.get(result.status, (RS.SYSTEM_ERROR, result.status.name))
        ext = self._base_ext()
        if code in _WITH_IDS:
            if topic is not None:
                self._count_put(topic, result.msg_num, result.wrote_bytes)
            ext["msgId"] = ",".join(result.msg_ids)
            ext["queueId"] = str(queue_id)
            ext["queueOffset"] = str(result.logics_offset)
        resp = req.cmd.make_response(code, remark, ext)
        if code != RS.SUCCESS:
            return resp
        return self._maybe_wait(req.conn_id, req.cmd.is_oneway, resp, result.end_offset, wait,
                                   now_ms)

    def _maybe_wait(
        self, conn_id: int, oneway: bool, resp: RemotingCommand, end_offset: int, wait: bool,
        now_ms: int, *, keep_code: bool = False,
    ) -> RemotingCommand | None:
        """WAIT sends: SYNC_FLUSH parks the reply until a flush covers end_offset, SYNC_MASTER
        until a slave has it (CommitLog.handleDiskFlush / handleHA); None while parked. With no
        slave, or one too far behind, a SYNC_MASTER send is answered SLAVE_NOT_AVAILABLE at
        once (the message stays stored). keep_code (ReplyMessageProcessor): wait the same, but
        the answer's code stays the push result's."""
        if not wait or oneway:
            return resp
        need_flush = self.sync_flush and end_offset > self.store.flushed_offset
        slave_deadline = 0
        if self.sync_master:
            if self._slave_ok(end_offset):
                slave_deadline = now_ms + self.slave_timeout_ms
                self._poke_transfer = True
            elif not keep_code:
                resp.code = RS.SLAVE_NOT_AVAILABLE
        if need_flush or slave_deadline:
            self.waiting.append(_Waiting(end_offset, now_ms + self.sync_flush_timeout_ms,
                                         conn_id, resp, need_flush, slave_deadline, keep_code))
            return None
        return resp

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

    # --- END_TRANSACTION -------------------------------------------------------------------

    def _end_transaction(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """EndTransactionProcessor: commit or roll back a half message (mostly oneway)."""
        cmd = req.cmd
        h = EndTransactionRequestHeader.from_ext(cmd.ext_fields)
        if self.tx is None:
            return cmd.make_response(RS.SLAVE_NOT_AVAILABLE, "Can't process transaction on slave")
        res = self.tx.end_transaction(h, now_ms)
        if res is None:
            return None
        code, remark = res
        if code != RS.SUCCESS:
            log.warning("END_TRANSACTION group=%s offset=%d from %s:%d: %s", h.producer_group,
                        h.commit_log_offset, req.peer[0], req.peer[1], remark)  # fmt: skip
        return cmd.make_response(code, remark)

    def _resume_check(self, req: Request, now_ms: int) -> RemotingCommand:
        """RESUME_CHECK_HALF_MESSAGE (AdminBrokerProcessor.resumeCheckHalfMessage): a put, so
        the writer serves it."""
        cmd = req.cmd
        if self.tx is None:  # a slave: Java's put fails there
            return cmd.make_response(
                RS.SYSTEM_ERROR, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.")
        h = ResumeCheckHalfMessageRequestHeader.from_ext(cmd.ext_fields)
        code, remark = self.tx.resume_check(h.msg_id, now_ms)
        return cmd.make_response(code, remark)

    def release(self, token: int, now_ms: int) -> bool:
        """The controller registered after a delete held under `token` (admin_store)."""
        return self.store_admin.release(token)

    # --- OFFSET_MOVED_EVENT (from the pull actor) ------------------------------------------------

    def _on_offset_moved(self, ev: OffsetMoved, now_ms: int) -> None:
        """PullMessageProcessor.generateOffsetMovedEvent, run by the single writer."""
        body = dumps_compact(
            {
                "consumerGroup": ev.group,
                "messageQueue": MessageQueue(ev.topic, ev.broker_name, ev.queue_id).to_obj(),
                "offsetNew": ev.offset_new,
                "offsetRequest": ev.offset_request,
            }
        )
        props = {PROPERTY_TAGS: ev.group, PROPERTY_DELAY: "0", PROPERTY_KEYS: ev.group}
        result = self.store.put_message(
            MessageExtBrokerInner(
                OFFSET_MOVED_EVENT,
                body,
                0,
                props,
                0,
                0,
                now_ms,
                self.store_host,
                self.store_host,
                0,
            ),
            now_ms,
        )
        if result.status is not _PS.PUT_OK:
            log.warning(
                "offset moved event not stored group=%s topic=%s qid=%d status=%s",
                ev.group,
                ev.topic,
                ev.queue_id,
                result.status.name,
            )
