"""The pull group: PULL_MESSAGE (11) with long polling.

Mirrors broker/processor/PullMessageProcessor.java, RocketMQ 4.9.x (spec §9.3). A pull that
finds nothing is suspended: handed to the hold service, an actor of its own
(actors.broker.pull_hold_service), over a link; the hold service sends it back when messages
arrive or its hold time is over, and this core runs it again without suspending it
(executeRequestWhenWakeup). actors.broker.suspended_pulls keeps what this actor must answer
if either side dies. The OFFSET_MOVED_EVENT message Java stores on code 21 is written by the
send actor (the single writer): this core emits an OffsetMoved event for it, and
`offset_moved_message` builds it.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import replace
from typing import Any, Final

from actors.broker.context import BrokerContext
from actors.broker.events import (
    BrokerConfigChanged,
    OffsetMoved,
    SubscriptionGroupChanged,
)
from actors.broker.expression_filter import (
    MATCH_ALL,
    SqlSubscriptionFilter,
    SubscriptionFilter,
    describe,
    filter_for,
)
from actors.broker.sql92 import SubscriptionRefused, compile_subscription
from actors.broker.stats_items import StatsPublisher, count, fold_gets
from actors.broker.suspended_pulls import SuspendedPulls
from actors.broker.topic_config import is_readable
from actors.core import FAQ_SUFFIX, AccessCheck, HoldObserver, Link, Request
from actors.runtime.link_records import WakePull
from protocol.bodies import EXPRESSION_TYPE_TAG, MessageQueue, SubscriptionData, dumps_compact
from protocol.codes import (
    CURRENT_VERSION,
    OFFSET_MOVED_EVENT,
    RPC_TYPE_RESPONSE,
    RequestCode,
    SerializeType,
)
from protocol.codes import LanguageCode as _Lang
from protocol.codes import ResponseCode as RS
from protocol.command import (
    RemotingCommand,
    ResponseTemplate,
    TemplatedResponse,
    request_parts,
)
from protocol.errors import HeaderFieldError
from protocol.headers import PullMessageRequestHeader, PullMessageResponseHeader
from protocol.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
)
from store.get_message_result import GetMessageResult, GetMessageStatus
from store.message_ext_broker_inner import MessageExtBrokerInner

log = logging.getLogger(__name__)

FLAG_COMMIT_OFFSET: Final = 0x1
FLAG_SUSPEND: Final = 0x2
FLAG_SUBSCRIPTION: Final = 0x4
MASTER_ID: Final = 0
JAVA: Final = int(_Lang.JAVA)
PULL_MESSAGE: Final = int(RequestCode.PULL_MESSAGE)
JSON_SERIALIZE: Final = int(SerializeType.JSON)
FRAME_PREFIX: Final = struct.Struct(">ii")  # total length, header meta (JSON: the length alone)
CACHE_LIMIT: Final = 10_000  # filters cached per subscription before the cache is reset
HOLD_SERVICE: Final = "hold"  # the group of the hold service (its link's peer)

# PullMessageResponseHeader wire keys; the hot path builds this dict inline (tests pin it).
RESPONSE_KEYS: Final = tuple(f.key for f in PullMessageResponseHeader.FIELDS)
# a FOUND answer's JSON header, pre-rendered: only the opaque and the four numbers change
FOUND_TEMPLATE: Final = ResponseTemplate({}, RESPONSE_KEYS, remark=GetMessageStatus.FOUND.name)

_GS = GetMessageStatus
# GetMessageStatus -> response code (None: 21 when the requested offset != 0, else 19)
GET_STATUS_CODES: Final[dict[GetMessageStatus, int | None]] = {
    _GS.FOUND: RS.SUCCESS,
    _GS.MESSAGE_WAS_REMOVING: RS.PULL_RETRY_IMMEDIATELY,
    _GS.NO_MATCHED_MESSAGE: RS.PULL_RETRY_IMMEDIATELY,
    _GS.NO_MATCHED_LOGIC_QUEUE: None,
    _GS.NO_MESSAGE_IN_QUEUE: None,
    _GS.OFFSET_FOUND_NULL: RS.PULL_NOT_FOUND,
    _GS.OFFSET_OVERFLOW_ONE: RS.PULL_NOT_FOUND,
    _GS.OFFSET_OVERFLOW_BADLY: RS.PULL_OFFSET_MOVED,
    _GS.OFFSET_TOO_SMALL: RS.PULL_OFFSET_MOVED,
}


def offset_moved_message(ev: OffsetMoved, store_host: bytes, now_ms: int) -> MessageExtBrokerInner:
    """generateOffsetMovedEvent: the OFFSET_MOVED_EVENT message the send actor stores."""
    body = dumps_compact(
        {
            "consumerGroup": ev.group,
            "messageQueue": MessageQueue(ev.topic, ev.broker_name, ev.queue_id).to_obj(),
            "offsetNew": ev.offset_new,
            "offsetRequest": ev.offset_request,
        }
    )
    props = {PROPERTY_TAGS: ev.group, PROPERTY_DELAY_TIME_LEVEL: "0", PROPERTY_KEYS: ev.group}
    return MessageExtBrokerInner(
        OFFSET_MOVED_EVENT, body, 0, props, 0, 0, now_ms, store_host, store_host, 0
    )


class _Reject(Exception):
    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


class PullMessageProcessor:
    """The pull group core (ProcessorCore, LinkedCore: the hold service's link)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.bc = bc = ctx.broker_config
        self.store = ctx.store
        self.access: AccessCheck | None = None  # ACL: checked in the fast path too
        self.suspended = SuspendedPulls()
        self.broker_readable = is_readable(bc.brokerPermission)
        ctx.on_event(BrokerConfigChanged, self._on_config_changed)
        self.is_slave = bc.is_slave
        self.offset_check_in_slave = ctx.store_config.offsetCheckInSlave
        # (subscription, expression type) of FLAG_SUBSCRIPTION pulls -> filter
        self._request_filters: dict[tuple[str | None, str], SubscriptionFilter] = {}
        # the heartbeat-registered SubscriptionData (by identity) -> its filter
        self._registered_filters: dict[int, tuple[SubscriptionData, SubscriptionFilter]] = {}
        # (expression type, text) -> compiled filter (only served types get here)
        self._sql_filters: dict[tuple[str, str], SubscriptionFilter] = {}
        root = ctx.store_config.storePathRootDir
        # GROUP_GET_NUMS / GROUP_GET_SIZE / BROKER_GET_NUMS (BrokerStatsManager)
        self.stats = (
            StatsPublisher(root, "pull", fold_gets(bc.brokerClusterName))
            if root and self.store is not None else None
        )  # fmt: skip

    # --- ProcessorCore --------------------------------------------------------------------

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """First processing of a pull: may be held (returns None)."""
        resp = self.process_pull(req, now_ms, allow_suspend=True)
        if resp is None or req.cmd.flag & 2:  # RPC_ONEWAY
            return None
        return resp

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """Forget the suspended pulls of the connection (the hold service is told)."""
        self.suspended.drop_connection(conn_id)

    def tick(self, now_ms: int) -> int | None:
        """The pulls no hold service took whose hold time is over (run again: answered), and
        the stats samples."""
        for token in self.suspended.overdue(now_ms):
            self._run_woken(token, now_ms)
        waits = [self.suspended.next_due_ms(now_ms)]
        if self.stats is not None:
            waits.append(self.stats.tick(now_ms))
        wanted = [w for w in waits if w is not None]
        return min(wanted) if wanted else None

    def close(self) -> None:
        """The actor stops: publish the stats one last time."""
        if self.stats is not None:
            self.stats.close()

    # --- ObservedHoldCore: the request ledger records every suspended pull -------------------

    @property
    def hold_observer(self) -> HoldObserver | None:
        """Told of every pull suspended and of its answer."""
        return self.suspended.observer

    @hold_observer.setter
    def hold_observer(self, observer: HoldObserver | None) -> None:
        self.suspended.observer = observer

    # --- LinkedCore: the hold service ------------------------------------------------------

    def on_link(self, link: Link, now_ms: int) -> None:
        """A (new) hold service: the pulls suspended meanwhile go to it."""
        if link.role == HOLD_SERVICE:
            self.suspended.linked(link)

    def on_link_record(self, link: Link, record: object, now_ms: int) -> None:
        """WakePull: run the pull again and answer it."""
        if isinstance(record, WakePull):
            self._run_woken(record.token, now_ms)
        else:
            log.warning("pull: unexpected %r from %s", record, link.role)

    def on_link_response(self, link: Link, resp: RemotingCommand, now_ms: int) -> None:
        """No requests go on this core's links."""

    def on_link_lost(self, link: Link, now_ms: int) -> None:
        """The hold service died: every pull it held is answered PULL_RETRY_IMMEDIATELY (its
        client pulls again at once, and that pull waits at the next hold service)."""
        if link.role != HOLD_SERVICE:
            return
        answers = self.suspended.unlinked(link)
        outbox = self.ctx.outbox
        if outbox is not None:
            for conn_id, cmd in answers:
                outbox.send(conn_id, cmd)
        if answers:
            log.warning("hold service gone: %d held pull(s) answered to be pulled again",
                        len(answers))  # fmt: skip

    def _on_config_changed(self, ev: BrokerConfigChanged, now_ms: int) -> None:
        """brokerPermission may have changed: read it again."""
        self.broker_readable = is_readable(self.bc.brokerPermission)

    def _run_woken(self, token: int, now_ms: int) -> None:
        """executeRequestWhenWakeup: the pull again, never suspended, answered."""
        req = self.suspended.woken(token)
        if req is None:
            return  # its connection closed meanwhile
        try:
            resp = self.process_pull(req, now_ms, allow_suspend=False)
        except Exception as exc:  # one bad pull must not strand the other woken ones
            log.exception("woken pull failed conn=%d", req.conn_id)
            resp = req.cmd.make_response(RS.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
        outbox = self.ctx.outbox
        if resp is not None and outbox is not None and not req.cmd.is_oneway:
            outbox.send(req.conn_id, resp)
        self.suspended.answered(token)

    # --- the pull -------------------------------------------------------------------------

    def process_pull(
        self, req: Request, now_ms: int, *, allow_suspend: bool
    ) -> RemotingCommand | None:
        """PullMessageProcessor.processRequest(request, brokerAllowSuspend)."""
        cmd = req.cmd
        try:
            h = PullMessageRequestHeader.from_ext(cmd.ext_fields)
        except HeaderFieldError as e:
            return cmd.make_response(e.code, e.remark)
        try:
            sub_filter = self._check(h, req.peer)
        except _Reject as r:
            return cmd.make_response(r.code, r.remark)
        result = self._get(h, sub_filter, now_ms)
        return self._answer(req, h, sub_filter, result, now_ms, allow_suspend)

    def fast_path(
        self, frame: memoryview, conn_id: int, peer: tuple[str, int], now_ms: int
    ) -> bytes | None:
        """The encoded answer of a two-way JSON PULL_MESSAGE whose group exists, or None
        (nothing done: the request takes process()); b"" when the pull is held.

        Same result as process(): a FOUND answer is framed from FOUND_TEMPLATE straight
        around the store's record views (no RemotingCommand, Request or joined buffer); any
        other status is answered by the general code from the decoded request.
        """
        parts = request_parts(frame, PULL_MESSAGE)
        if parts is None or parts[3] != JSON_SERIALIZE:
            return None
        opaque, ext, body, _st = parts
        try:
            h = PullMessageRequestHeader.from_ext(ext)
        except HeaderFieldError:
            return None
        if h.consumer_group not in self.ctx.groups.table:
            return None  # a group created on the pull emits an event: the general path
        try:
            sub_filter = self._check(h, peer)
        except _Reject:
            return None
        access = self.access  # last, once the fast path takes it: a decline is not checked twice
        if access is not None and access.check(PULL_MESSAGE, ext, body, peer, now_ms) is not None:
            return None  # refused: process() answers it (the host checks it there again)
        result = self._get(h, sub_filter, now_ms)
        if result.status is not _GS.FOUND:
            req = Request(conn_id, peer, RemotingCommand.decode(frame), 0)
            resp = self._answer(req, h, sub_filter, result, now_ms, True)
            return b"" if resp is None else resp.encode()
        header = FOUND_TEMPLATE.header_plain(opaque, (  # four numbers: nothing to escape
            self._suggest(h, result),
            result.next_begin_offset,
            result.min_offset,
            result.max_offset,
        ))  # fmt: skip
        buffers = result.buffers
        size = len(header) + sum(map(len, buffers))
        encoded = b"".join((FRAME_PREFIX.pack(4 + size, len(header)), header, *buffers))
        result.release()
        self._found(h, result)
        self._commit(h, True)
        return encoded

    def _get(self, h: PullMessageRequestHeader, sub_filter: SubscriptionFilter,
             now_ms: int) -> GetMessageResult:  # fmt: skip
        """The store's answer for the pull."""
        return self.store.get_message(
            h.consumer_group,
            h.topic,
            h.queue_id,
            h.queue_offset,
            h.max_msg_nums,
            None,
            None if sub_filter is MATCH_ALL else sub_filter,  # '*': no per-unit call
            now_ms,
        )

    def _suggest(self, h: PullMessageRequestHeader, result: GetMessageResult) -> int:
        """suggestWhichBrokerId: the master (0) unless slaveReadEnable; then the group's
        slow-consumer broker when the store suggests a slave, else the group's brokerId."""
        if self.bc.slaveReadEnable:
            cfg = self.ctx.groups.get(h.consumer_group)
            if cfg is not None:
                return (
                    cfg.which_broker_when_consume_slowly
                    if result.suggest_pull_from_slave
                    else cfg.broker_id
                )
        return MASTER_ID

    def _found(self, h: PullMessageRequestHeader, result: GetMessageResult) -> None:
        """The bookkeeping of a FOUND answer: the get stats, the slow-consumer check."""
        if self.stats is not None:  # incGroupGetNums / Size, BrokerGetNums (folded later)
            count(self.stats.counts, (h.topic, h.consumer_group), result.message_count,
                  result.buffer_total_size)  # fmt: skip
        if self.bc.disableConsumeIfConsumerReadSlowly:  # whatever the filter (Java too)
            self._check_slow(h, result)

    def _commit(self, h: PullMessageRequestHeader, allow_suspend: bool) -> None:
        """The piggybacked commit (first processing only, as Java's brokerAllowSuspend)."""
        if allow_suspend and h.sys_flag & FLAG_COMMIT_OFFSET and not self.is_slave:
            # one store into the shared table: seen by every actor before this reply leaves
            self.ctx.offsets.commit_offset(h.consumer_group, h.topic, h.queue_id, h.commit_offset)

    def _answer(self, req: Request, h: PullMessageRequestHeader,
                sub_filter: SubscriptionFilter, result: GetMessageResult, now_ms: int,
                allow_suspend: bool) -> RemotingCommand | None:  # fmt: skip
        """The answer to a pull the store answered with `result` (None: held)."""
        cmd = req.cmd
        status = result.status
        # FOUND first: an Enum key's hash is a Python-level call
        code = RS.SUCCESS if status is _GS.FOUND else GET_STATUS_CODES.get(status, RS.SYSTEM_ERROR)
        if code is None:
            code = RS.PULL_OFFSET_MOVED if h.queue_offset != 0 else RS.PULL_NOT_FOUND
        # PullMessageResponseHeader.to_ext(), inlined (hot path)
        ext = {
            "suggestWhichBrokerId": str(self._suggest(h, result)),
            "nextBeginOffset": str(result.next_begin_offset),
            "minOffset": str(result.min_offset),
            "maxOffset": str(result.max_offset),
        }
        resp: RemotingCommand | None
        if code == RS.SUCCESS:  # a SQL92 subscription's records were matched in the scan
            resp = TemplatedResponse(code, JAVA, CURRENT_VERSION, cmd.opaque, RPC_TYPE_RESPONSE,
                                     status.name, ext, result.buffer, cmd.serialize_type)
            resp.template = FOUND_TEMPLATE  # make_response's command, encoded from the template
            result.release()
            self._found(h, result)
        elif code == RS.PULL_NOT_FOUND and allow_suspend and h.sys_flag & FLAG_SUSPEND:
            timeout = (
                h.suspend_timeout_millis
                if self.bc.longPollingEnable
                else self.bc.shortPollingTimeMills
            )
            tag_codes, sql = describe(sub_filter)
            self.suspended.suspend(req, h.topic, h.queue_id, h.queue_offset, now_ms, timeout,
                                   tag_codes, sql)  # fmt: skip
            resp = None
        else:
            if code == RS.PULL_OFFSET_MOVED and self.is_slave and not self.offset_check_in_slave:
                # the store kept the offset: retry, towards the group's broker (the master)
                code = RS.PULL_RETRY_IMMEDIATELY
                gcfg = self.ctx.groups.get(h.consumer_group)
                ext["suggestWhichBrokerId"] = str(gcfg.broker_id if gcfg is not None else 0)
            resp = cmd.make_response(code, status.name, ext)
            if code == RS.PULL_OFFSET_MOVED and not self.is_slave:
                self.ctx.emit(
                    OffsetMoved(
                        h.consumer_group,
                        h.topic,
                        h.queue_id,
                        self.bc.brokerName,
                        h.queue_offset,
                        result.next_begin_offset,
                    )
                )
                log.warning(
                    "PULL_OFFSET_MOVED group=%s topic=%s qid=%d request=%d new=%d",
                    h.consumer_group,
                    h.topic,
                    h.queue_id,
                    h.queue_offset,
                    result.next_begin_offset,
                )
        self._commit(h, allow_suspend)
        return resp

    def _check(self, h: PullMessageRequestHeader, peer: tuple[str, int]) -> SubscriptionFilter:
        bc = self.bc
        if not self.broker_readable:
            raise _Reject(
                RS.NO_PERMISSION, f"the broker[{bc.brokerIP1}] pulling message is forbidden"
            )
        group = h.consumer_group
        cfg = self.ctx.groups.table.get(group)
        if cfg is None:
            cfg, created = self.ctx.groups.find_or_create(group)
            if cfg is None:
                raise _Reject(
                    RS.SUBSCRIPTION_GROUP_NOT_EXIST,
                    f"subscription group [{group}] does not exist, {FAQ_SUFFIX}",
                )
            if created:
                self.ctx.emit(SubscriptionGroupChanged(cfg))
        if not cfg.consume_enable:
            raise _Reject(RS.NO_PERMISSION, f"subscription group no permission, {group}")
        tc = self.ctx.topics.table.get(h.topic)
        if tc is None:
            raise _Reject(RS.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!")
        if not is_readable(tc.perm):
            raise _Reject(RS.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden")
        if h.queue_id < 0 or h.queue_id >= tc.read_queue_nums:
            raise _Reject(
                RS.SYSTEM_ERROR,
                f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] topicConfig.readQueueNums:"
                f"[{tc.read_queue_nums}] consumer:[{peer[0]}:{peer[1]}]",
            )
        if h.sys_flag & FLAG_SUBSCRIPTION:
            expr = h.expression_type or EXPRESSION_TYPE_TAG
            key = (h.subscription, expr)
            flt = self._request_filters.get(key)
            if flt is None:
                flt = self._request_filter(h.subscription, expr)
                if len(self._request_filters) >= CACHE_LIMIT:
                    self._request_filters.clear()
                self._request_filters[key] = flt
            return flt
        info = self.ctx.consumer_groups.get(group)
        if info is None:
            raise _Reject(
                RS.SUBSCRIPTION_NOT_EXIST, f"the consumer's group info not exist{FAQ_SUFFIX}"
            )
        if not cfg.consume_broadcast_enable and info.message_model == "BROADCASTING":
            raise _Reject(
                RS.NO_PERMISSION,
                f"the consumer group[{group}] can not consume by broadcast way",
            )
        sub = info.find_subscription(h.topic)
        if sub is None:
            raise _Reject(
                RS.SUBSCRIPTION_NOT_EXIST, f"the consumer's subscription not exist{FAQ_SUFFIX}"
            )
        if sub.sub_version < h.sub_version:
            raise _Reject(RS.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
        if sub.expression_type != EXPRESSION_TYPE_TAG:
            return self._non_tag_filter(sub.expression_type, sub.sub_string)
        hit = self._registered_filters.get(id(sub))
        if hit is not None and hit[0] is sub:
            return hit[1]
        flt = filter_for(sub)
        if len(self._registered_filters) >= CACHE_LIMIT:
            self._registered_filters.clear()
        self._registered_filters[id(sub)] = (sub, flt)
        return flt

    def _request_filter(self, subscription: str | None, expr: str) -> SubscriptionFilter:
        """FilterAPI.build for a subscription carried in the pull (FLAG_SUBSCRIPTION)."""
        if expr != EXPRESSION_TYPE_TAG:
            return self._non_tag_filter(expr, subscription)
        try:
            sub = SubscriptionData.build("", subscription)
        except ValueError as e:
            raise _Reject(
                RS.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed"
            ) from e
        return filter_for(sub)

    def _non_tag_filter(self, expr: str, text: str | None) -> SubscriptionFilter:
        """SQL92 with enablePropertyFilter: the compiled expression (cached); else refused."""
        key = text or ""
        flt = self._sql_filters.get((expr, key))
        if flt is None:
            try:
                sql = compile_subscription(expr, key, self.bc.enablePropertyFilter)
            except SubscriptionRefused as e:
                raise _Reject(e.code, e.remark) from e
            flt = SqlSubscriptionFilter(None, sql)
            if len(self._sql_filters) >= CACHE_LIMIT:
                self._sql_filters.clear()
            self._sql_filters[(expr, key)] = flt
        return flt

    def _check_slow(self, h: PullMessageRequestHeader, result: Any) -> None:
        """Slow-consumer protection: disable a group that fell behind past the threshold."""
        try:
            last = result.next_begin_offset - 1
            phy = self.store.get_commit_log_offset_in_queue(h.topic, h.queue_id, last)
            behind = int(self.store.max_phy_offset) - int(phy)
        except (AttributeError, TypeError, ValueError):
            return
        if behind > self.bc.consumerFallbehindThreshold:
            cfg = self.ctx.groups.get(h.consumer_group)
            if cfg is not None and cfg.consume_enable:
                log.warning(
                    "group=%s falls behind %d bytes; consume disabled", h.consumer_group, behind
                )
                self.ctx.emit(SubscriptionGroupChanged(replace(cfg, consume_enable=False)))
