"""What the send codes share: msgCheck, the retry / dead letter redirect, the put's answer.

Mirrors broker/processor/AbstractSendMessageProcessor.java (msgCheck: broker and topic
permission, topic name, auto-creation, queue id; the born host), the handleRetryAndDLQ and
handlePutMessageResult steps of SendMessageProcessor.java, and the waits of
store/CommitLog.java handleDiskFlush / handleHA (GroupCommitService, GroupTransferService),
RocketMQ 4.9.x. ReplyMessageProcessor (actors.broker.processors.reply) and
SendMessageProcessor (actors.broker.processors.send) are built on it.

SYNC_FLUSH is a group commit: a send that must wait for the flush is parked (`_maybe_wait`
returns None); the runtime calls `flush_and_release(now_ms)` after each batch (and tick does
too), which flushes once and answers every waiting send whose record is covered, or
FLUSH_DISK_TIMEOUT (10) after syncFlushTimeout. A SYNC_MASTER send that must wait for a slave
goes, once stored (and flushed), to the GroupTransferService actor (actors.broker.
group_transfer), which answers it; while none is linked (it is being replaced) it waits here,
answered from the acked offset the HAService publishes in the state page.
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
    SubscriptionGroupChanged,
    TopicConfigChanged,
)
from actors.broker.group_transfer import GroupTransferRequests
from actors.broker.notify_message_arriving_listener import ArrivalNotifier
from actors.broker.stats_items import count
from actors.broker.topic_config import (
    PERM_READ,
    PERM_WRITE,
    TopicConfig,
    is_not_allowed_send_topic,
    is_writeable,
    validate_topic,
)
from actors.core import FAQ_SUFFIX, Link, Request
from actors.runtime.link_records import HoldsChanged, TransferDone
from actors.runtime.wake import HA_TRANSFER, WakeWriter
from protocol.codes import RETRY_GROUP_TOPIC_PREFIX, dlq_topic
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.headers import SendMessageRequestHeader, decode_send_header
from protocol.record import pack_host
from store.clean_service import disk_util
from store.config import StoreConfig
from store.message_store import DefaultMessageStore
from store.put_message_result import PutMessageStatus
from store.state_page import OFF_HA_ACKED, OFF_HA_SLAVES

log = logging.getLogger(__name__)

HOLD_SERVICE: Final = "hold"  # the groups of the services the writer links to
TRANSFER_SERVICE: Final = "transfer"
V3_4_9: Final = 121  # MQVersion ordinal from which a send carries maxReconsumeTimes
RW: Final = PERM_READ | PERM_WRITE

CACHE_LIMIT: Final = 10_000  # entries in each per-core lookup cache before it is reset

# store PutMessageStatus -> (response code, remark or None); SERVICE_NOT_AVAILABLE's remark
# names the disk usage of the moment (service_not_available_remark)
_SNA = (
    "service not available now. It may be caused by one of the following reasons: the broker's"
    " disk is full [{}], messages are put to the slave, message store has been shut down, etc."
)
_PS = PutMessageStatus
PUT_STATUS_CODES: Final[dict[PutMessageStatus, tuple[int, str | None]]] = {
    _PS.PUT_OK: (RS.SUCCESS, None),
    _PS.FLUSH_DISK_TIMEOUT: (RS.FLUSH_DISK_TIMEOUT, None),
    _PS.FLUSH_SLAVE_TIMEOUT: (RS.FLUSH_SLAVE_TIMEOUT, None),
    _PS.SLAVE_NOT_AVAILABLE: (RS.SLAVE_NOT_AVAILABLE, None),
    _PS.CREATE_MAPEDFILE_FAILED: (
        RS.SYSTEM_ERROR,
        "create mapped file failed, server is busy or broken.",
    ),
    _PS.MESSAGE_ILLEGAL: (RS.MESSAGE_ILLEGAL, "the message is illegal"),
    _PS.PROPERTIES_SIZE_EXCEEDED: (RS.MESSAGE_ILLEGAL, "the message properties exceed 32k"),
    _PS.SERVICE_NOT_AVAILABLE: (RS.SERVICE_NOT_AVAILABLE, _SNA),
    _PS.OS_PAGECACHE_BUSY: (
        RS.SYSTEM_ERROR,
        "[PC_SYNCHRONIZED]broker busy, start flow control for a while",
    ),
    _PS.UNKNOWN_ERROR: (RS.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


def service_not_available_remark(store_config: object) -> str:
    """SendMessageProcessor's SERVICE_NOT_AVAILABLE remark, with diskUtil's figures."""
    util = (
        disk_util(store_config)
        if isinstance(store_config, StoreConfig)
        else "CL: %5.2f CQ: %5.2f INDEX: %5.2f" % (-1.0, -1.0, -1.0)  # noqa: UP031
    )
    return _SNA.format(util)


# Codes whose response carries msgId/queueId/queueOffset (§9.1).
_WITH_IDS: Final = frozenset(
    {RS.SUCCESS, RS.FLUSH_DISK_TIMEOUT, RS.FLUSH_SLAVE_TIMEOUT, RS.SLAVE_NOT_AVAILABLE}
)


@dataclass(slots=True)
class _Waiting:
    """A parked WAIT send's reply (CommitLog.GroupCommitRequest)."""

    end_offset: int
    deadline_ms: int  # SYNC_FLUSH: syncFlushTimeout
    conn_id: int
    resp: RemotingCommand
    need_flush: bool = True
    slave_deadline_ms: int = 0  # SYNC_MASTER: slaveTimeout (0: no slave wait)
    keep_code: bool = False  # a replier's answer: its code is the push's, whatever the wait


class Reject(Exception):
    """An early error response."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class AbstractSendMessageProcessor:
    """The checks every send code runs before it touches the store, and the put's answer."""

    def __init__(self, ctx: BrokerContext, rng: random.Random | None = None) -> None:
        self.ctx = ctx
        self.bc = bc = ctx.broker_config
        self.rng = rng or random.Random()
        self.store = ctx.store
        self.store_host = pack_host(bc.brokerIP1, bc.listenPort)
        self._hosts: dict[tuple[str, int], bytes] = {}  # peer -> packed bornHost
        self._checked: dict[str, tuple[int, str] | None] = {}  # topic -> name check verdict
        sc = ctx.store_config
        self.sync_flush = sc.is_sync_flush
        # SYNC_MASTER: a WAIT send is answered once a slave has it (GroupTransferService)
        self.sync_master = bc.brokerRole.upper() == "SYNC_MASTER"
        self.slave_timeout_ms = sc.slaveTimeout
        self.slave_fallbehind_max = sc.haSlaveFallbehindMax
        self.sync_flush_timeout_ms = sc.syncFlushTimeout
        self.waiting: list[_Waiting] = []
        # the put counts (topic -> [messages, bytes, calls]); a subclass may publish them
        self._puts: dict[Any, list[int]] = {}
        self._read_config()
        ctx.on_event(BrokerConfigChanged, lambda _ev, _now: self._read_config())
        # the hold service's arrival notices (NotifyMessageArrivingListener)
        self.notifier = ArrivalNotifier()
        # SYNC_MASTER: the GroupTransferService answers the sends that wait for a slave, and
        # the HA service is woken to feed the slaves when one waits
        self.transfer = GroupTransferRequests()
        self._transfer_wake: WakeWriter | None = None
        self._poke_transfer = False
        wake_dir = ctx.runtime_dir
        if self.sync_master and wake_dir and isinstance(self.store, DefaultMessageStore):
            self._transfer_wake = WakeWriter(os.path.join(wake_dir, HA_TRANSFER))

    def _read_config(self) -> None:
        """The broker config values this core keeps (again after UPDATE_BROKER_CONFIG)."""
        bc = self.bc
        self.region = bc.regionId
        self.cluster = bc.brokerClusterName
        self.trace_on = "true" if bc.traceOn else "false"
        self.broker_writable = is_writeable(bc.brokerPermission)

    def _base_ext(self) -> dict[str, str]:
        """MSG_REGION and TRACE_ON: on every send response (§9.1)."""
        return {"MSG_REGION": self.region, "TRACE_ON": self.trace_on}

    def _count_put(self, topic: str, msgs: int, size: int) -> None:
        """handlePutMessageResult's stats, for the topic the record went to (SCHEDULE_TOPIC_XXXX
        for a delayed one, as in Java)."""
        count(self._puts, topic, msgs, size)

    # --- checks (AbstractSendMessageProcessor.msgCheck) --------------------------------------

    def _emit_topic(self, tc: TopicConfig) -> None:
        self.ctx.emit(TopicConfigChanged(tc, register=True))

    def _born_host(self, peer: tuple[str, int]) -> bytes:
        host = self._hosts.get(peer)
        if host is None:
            if len(self._hosts) >= CACHE_LIMIT:
                self._hosts.clear()
            host = self._hosts[peer] = pack_host(peer[0], peer[1])
        return host

    def _check_name(self, topic: str) -> tuple[int, str] | None:
        """TopicValidator checks, cached per topic name: None or (code, remark)."""
        try:
            return self._checked[topic]
        except KeyError:
            pass
        verdict: tuple[int, str] | None = None
        bad = validate_topic(topic)
        if bad is not None:
            verdict = (RS.SYSTEM_ERROR, bad)
        elif is_not_allowed_send_topic(topic):
            verdict = (RS.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        if len(self._checked) >= CACHE_LIMIT:
            self._checked.clear()
        self._checked[topic] = verdict
        return verdict

    def _msg_check(
        self, cmd: RemotingCommand, topic: str, queue_id: int, peer: tuple[str, int]
    ) -> tuple[TopicConfig, int]:
        """msgCheck: broker/topic permission, topic name, auto-create, queue id."""
        topics = self.ctx.topics
        tc = topics.table.get(topic)
        if not self.broker_writable and tc is not None and tc.order:
            raise Reject(
                RS.NO_PERMISSION, f"the broker[{self.bc.brokerIP1}] sending message is forbidden"
            )
        verdict = self._check_name(topic)
        if verdict is not None:
            raise Reject(*verdict)
        if tc is None:
            h = decode_send_header(cmd.code, cmd.ext_fields)
            if h.default_topic is None or h.default_topic_queue_nums is None:  # a V2 header's
                key = "c" if h.default_topic is None else "d"  # (Java dereferences both here)
                raise Reject(RS.SYSTEM_ERROR, f"the custom field <{key}> is null: topic[{topic}] "
                             "cannot be created without the default topic and its queue count")
            tc = topics.create_in_send_message_method(
                topic, h.default_topic, h.default_topic_queue_nums, 0
            )
            if tc is None and topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                tc, _ = topics.create_in_send_back(topic, 1, RW, 0)
            if tc is None:
                raise Reject(
                    RS.TOPIC_NOT_EXIST,
                    f"topic[{topic}] not exist, apply first please!{FAQ_SUFFIX}",
                )
            self._emit_topic(tc)
        if queue_id < 0:
            queue_id = self.rng.randrange(max(1, tc.write_queue_nums))
        elif queue_id >= tc.write_queue_nums and queue_id >= tc.read_queue_nums:
            raise Reject(
                RS.SYSTEM_ERROR,
                f"request queueId[{queue_id}] is illegal, {tc} Producer: {peer[0]}:{peer[1]}",
            )
        return tc, queue_id

    def _retry_dlq(
        self,
        h: SendMessageRequestHeader,
        version: int,
        topic: str,
        queue_id: int,
        props: dict[str, str],
    ) -> tuple[str, int]:
        """handleRetryAndDLQ: redirect a %RETRY% send past max reconsume times to %DLQ%.

        The request's DELAY stays: 4.9.x sets delay level 0 on the message before the request's
        properties replace its map, so a client's fallback send-back (DELAY 3 + reconsume times)
        reaches the dead letter queue through SCHEDULE_TOPIC_XXXX after that delay."""
        group = topic[len(RETRY_GROUP_TOPIC_PREFIX) :]
        cfg, created = self.ctx.groups.find_or_create(group)
        if cfg is None:
            raise Reject(RS.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group not exist, {group}")
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
            log.info("send to DLQ topic=%s reconsume=%s max=%d", dlq, h.reconsume_times, max_times)
            return dlq, 0
        return topic, queue_id


    # --- the put's answer (handlePutMessageResult) and its wait (handleDiskFlush / handleHA) ---

    def _put_response(
        self, req: Request, result: Any, queue_id: int, wait: bool, now_ms: int,
        topic: str | None = None,
    ) -> RemotingCommand | None:
        """The response for any put status (batches, errors); a stored one is counted for
        `topic` in the stats."""
        code, remark = PUT_STATUS_CODES.get(result.status, (RS.SYSTEM_ERROR, result.status.name))
        if result.status is _PS.SERVICE_NOT_AVAILABLE:
            remark = service_not_available_remark(self.ctx.store_config)
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
            w = _Waiting(end_offset, now_ms + self.sync_flush_timeout_ms, conn_id, resp,
                         need_flush, slave_deadline, keep_code)  # fmt: skip
            if need_flush or not self.transfer.hand_over(w):  # else with the batch's output
                self.waiting.append(w)
            return None
        return resp

    def _slave_ok(self, end_offset: int) -> bool:
        """HAService.isSlaveOK: a slave is connected and not too far behind."""
        st = self.store.state if self.store is not None else None
        if st is None or st.get(OFF_HA_SLAVES) <= 0:
            return False
        return end_offset - st.get(OFF_HA_ACKED) < self.slave_fallbehind_max

    def _slave_acked(self) -> int:
        st = self.store.state if self.store is not None else None
        return st.get(OFF_HA_ACKED) if st is not None else -1

    # --- LinkedCore / BatchEndCore: the hold service and the GroupTransferService -----------

    def on_link(self, link: Link, now_ms: int) -> None:
        """This writer linked to a (new) hold service or GroupTransferService."""
        if link.role == HOLD_SERVICE:
            self.notifier.linked(link)
        elif link.role == TRANSFER_SERVICE:
            self.transfer.linked(link)

    def on_link_record(self, link: Link, record: Any, now_ms: int) -> None:
        """HoldsChanged from the hold service, TransferDone from the GroupTransferService."""
        if isinstance(record, HoldsChanged):
            self.notifier.on_holds(link, record.holding)
        elif isinstance(record, TransferDone):
            self.transfer.done(record.tokens)
        else:
            log.warning("writer: unexpected %r from %s", record, link.role)

    def on_link_response(self, link: Link, resp: RemotingCommand, now_ms: int) -> None:
        """The writer sends no requests on its links."""

    def on_link_lost(self, link: Link, now_ms: int) -> None:
        """A service died: notices wait for the next hold service; the sends the
        GroupTransferService had not answered are answered here until the next one links."""
        self.notifier.unlinked(link)
        taken = self.transfer.unlinked(link)
        if taken:
            log.warning("group transfer service gone: %d send(s) wait here for their slave",
                        len(taken))  # fmt: skip
            self.waiting.extend(taken)

    def end_batch(self, now_ms: int) -> None:
        """After each batch: its arrival notices to the hold service."""
        self.notifier.end_batch(self.ctx.drain_arrivals())

    def after_flush(self, now_ms: int) -> None:
        """The batch's output left: the HA service is woken only now, once the sends it parked
        are with the GroupTransferService (woken before, it would take the CPU from this
        actor on a busy host, and the transfer service would learn of the sends after their
        acks)."""
        self.poke_ha()

    def poke_ha(self) -> None:
        """Wake the HA service once per batch that parked sends for a slave (it feeds the
        slaves at once instead of at its next idle pass)."""
        if self._poke_transfer:
            self._poke_transfer = False
            if self._transfer_wake is not None:
                self._transfer_wake.poke()

    def next_look_ms(self, now_ms: int) -> int | None:
        """When the waiting sends want their next look (None: none waits): a flush, or a
        slave's ack while no GroupTransferService is linked, is looked for every millisecond."""
        return 1 if self.waiting else None

    def flush_and_release(self, now_ms: int) -> int:
        """Group commit: one flush (SYNC_FLUSH), a look at what the slaves have (SYNC_MASTER),
        then answer every waiting send they cover or whose time is up; the count. A send whose
        flush is settled and that still waits for a slave goes to the GroupTransferService
        when one is linked."""
        if not self.waiting:
            return 0
        flushed = self.store.flush(now_ms) if self.sync_flush else 1 << 62
        acked = self._slave_acked() if self.sync_master else 1 << 62
        keep: list[_Waiting] = []
        n = 0
        outbox = self.ctx.outbox
        for w in self.waiting:
            # both outcomes settle first (asyncPutMessage's thenCombine); the slave's wins
            disk_late = w.need_flush and w.end_offset > flushed
            slave_late = bool(w.slave_deadline_ms) and w.end_offset > acked
            if disk_late and now_ms < w.deadline_ms:
                keep.append(w)
                continue
            if slave_late and now_ms < w.slave_deadline_ms:
                if w.need_flush:  # the flush is settled: its outcome goes with the answer
                    w.need_flush = False
                    if disk_late and w.resp.code != RS.SLAVE_NOT_AVAILABLE and not w.keep_code:
                        w.resp.code = RS.FLUSH_DISK_TIMEOUT
                if not self.transfer.hand_over(w):
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
