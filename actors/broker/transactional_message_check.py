"""TransactionalMessageCheckService: half messages not committed or rolled back in time are
checked back with their producer.

Mirrors broker/transaction/TransactionalMessageCheckService.java and the check of broker/
transaction/queue/TransactionalMessageServiceImpl.java (with TransactionalMessageBridge.java
and AbstractTransactionalMessageCheckListener.java), RocketMQ 4.9.x (spec §9.7). In Java it is
a thread of the broker; here an actor of its own (the "txcheck" group, no request codes, on a
master): it reads the store read-only, sends what it stores (a half message put back, one
discarded to TRANS_CHECK_MAX_TIME_TOPIC) to the writer as SERVICE_PUT_MESSAGES requests on
their link (actors.broker.processors.service_put), and sends CHECK_TRANSACTION_STATE to a
producer connection through the RemotingServer. Progress lives where RocketMQ keeps it, as
consumer offsets of group CID_RMQ_SYS_TRANS on the half and op queues (in the broker's shared
offset table, persisted by the controller in consumerOffset.json), so a replacement resumes
where this one stopped. Producer connections per PGROUP arrive from client_manage as
ProducerGroupChanged events.

The check of one run (`check`, a generator sent each put's outcome): read the op records (each
one's body is the half queue offset it closes; MAX_OPS_PER_TICK per pass, kept between passes,
and no half message is checked before every op written so far has been read), walk the half
queue from the saved offset up to the max seen at the start of the run, skip what an op closed,
stop at the first half message younger than transactionTimeOut, and for each older one put it
back on the half queue with TRANSACTION_CHECK_TIMES + 1 and send CHECK_TRANSACTION_STATE
(oneway) for the copy to one live connection of its producer group. A message with
CHECK_IMMUNITY_TIME_IN_SECONDS still inside its immunity is put back (with
TRAN_PREPARED_QUEUE_OFFSET naming the original) and the walk goes on; its copies are dropped
once an op closes the original. After transactionCheckMax checks, or when born longer ago than
fileReservedTime, a half message goes to TRANS_CHECK_MAX_TIME_TOPIC instead. As in RocketMQ the
outcome is at-least-once: a producer that answers both the original and a copy commits twice.
"""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any, Final

from actors.broker.context import BrokerContext
from actors.broker.processors.service_put import PutOutcome, put_outcomes, put_request
from actors.core import Link, Request, not_supported
from protocol.codes import (
    CID_RMQ_SYS_TRANS,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
)
from protocol.codes import RequestCode as RC
from protocol.command import RemotingCommand
from protocol.headers import CheckTransactionStateRequestHeader
from protocol.java_number import parse_java_int
from protocol.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    MessageExt,
)
from protocol.message_properties import properties_to_string
from protocol.record import encode_record, pack_host
from store.consume_queue import PRE_BLANK_SIZE, ConsumeQueue
from store.message_ext_broker_inner import MessageExtBrokerInner
from store.put_message_result import offset_msg_id

log = logging.getLogger(__name__)

HALF_TOPIC: Final = RMQ_SYS_TRANS_HALF_TOPIC
OP_TOPIC: Final = RMQ_SYS_TRANS_OP_HALF_TOPIC
CHECK_GROUP: Final = CID_RMQ_SYS_TRANS
WRITER: Final = "send"
MAX_CHECKS_PER_TICK: Final = 256  # half messages looked at per pass
MAX_REMEMBERED_CLOSED: Final = 100_000
MAX_OPS_PER_TICK: Final = 1024  # op records read per pass (each one is a store read)
_CHECK_STATE: Final = int(RC.CHECK_TRANSACTION_STATE)

# a check run: yields the writer's requests, is sent their outcomes, returns "more to do"
Puts = Generator[RemotingCommand, PutOutcome | None, bool]


class TransactionalMessageCheckService:
    """The txcheck group's core (ProcessorCore, LinkedCore)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.store = ctx.store
        bc = ctx.broker_config
        self.store_host = pack_host(bc.brokerIP1, bc.listenPort)
        self.timeout_ms = int(bc.transactionTimeOut)
        self.check_max = int(bc.transactionCheckMax)
        self.interval_ms = max(1, int(bc.transactionCheckInterval))
        hours = ctx.store_config.fileReservedTime
        self.reserved_ms = hours * 3_600_000
        self.next_check: int | None = None
        self.checks_sent = 0
        self.discarded = 0
        self._rr = 0
        # ops read so far (kept between passes): half offset -> op offset, and op offsets done
        self._closes: dict[int, int] = {}
        self._done_ops: set[int] = set()
        self._ops_next = -1  # next op offset to read
        self._run: tuple[int, int] | None = None  # (half offset the run ends at, its start ms)
        # half offsets closed by ops already passed: an immune message's copy finds its
        # original here (RocketMQ only looks at ops of halves not passed yet)
        self._closed_passed: dict[int, None] = {}
        self.writer: Link | None = None
        self._pass: Puts | None = None  # the pass waiting for the writer's answer

    # --- ProcessorCore ---------------------------------------------------------------------

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """No request code is routed here."""
        return None if req.cmd.is_oneway else not_supported(req.cmd)

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """Producer connections come as ProducerGroupChanged events."""

    def tick(self, now_ms: int) -> int | None:
        """Start a pass when due (the first one interval after the start)."""
        if self.next_check is None:
            self.next_check = now_ms + self.interval_ms
        if self._pass is not None or now_ms < self.next_check:
            return max(1, self.next_check - now_ms)
        if self.writer is None or not self.writer.alive:
            self.next_check = now_ms + self.interval_ms  # no writer: try again next interval
        else:
            self._pass = self.check(now_ms)
            self._step(None, now_ms)
        return max(1, self.next_check - now_ms)

    def _step(self, outcome: PutOutcome | None, now_ms: int) -> None:
        """Run the pass on to its next put (sent to the writer) or to its end; `outcome` is the
        last put's (None: it failed for want of a writer; a pass starts with None too)."""
        run = self._pass
        while run is not None:
            try:
                request = run.send(outcome)
            except StopIteration as stop:
                self._pass = None
                self.next_check = now_ms if stop.value else now_ms + self.interval_ms
                return
            writer = self.writer
            if writer is not None and writer.alive:
                writer.request(request)
                return
            outcome = None  # nothing stores it: that put fails

    # --- LinkedCore: the writer ------------------------------------------------------------

    def on_link(self, link: Link, now_ms: int) -> None:
        """A (new) writer: the next pass goes to it."""
        if link.role == WRITER:
            self.writer = link

    def on_link_record(self, link: Link, record: Any, now_ms: int) -> None:
        """No typed record comes to this core."""
        log.warning("transaction check: unexpected %r from %s", record, link.role)

    def on_link_response(self, link: Link, resp: RemotingCommand, now_ms: int) -> None:
        """The writer's answer to the pass's put."""
        if self._pass is None or link is not self.writer:
            return
        outcomes = put_outcomes(resp)
        self._step(outcomes[0] if outcomes else None, now_ms)

    def on_link_lost(self, link: Link, now_ms: int) -> None:
        """The writer died: the pass's put failed (its run stops there; the next run checks
        again whatever was not committed)."""
        if link is self.writer:
            self.writer = None
            if self._pass is not None:
                self._step(None, now_ms)

    def _queue(self, topic: str) -> ConsumeQueue | None:
        """The topic's queue 0, as the store sees it now (a reader's view is synced first)."""
        self.store.get_max_offset_in_queue(topic, 0)
        cq: ConsumeQueue | None = self.store.consume_queues.get((topic, 0))
        return cq

    def check(self, now_ms: int, budget: int = MAX_CHECKS_PER_TICK) -> Puts:
        """One pass over the half queue, a generator: it yields each put for the writer and
        is sent its outcome (None: the writer is gone); its value is True when it stopped
        early (more to do at once).

        A half message is only checked once every op record written so far has been read (an
        op past the read window may close it): ops are read MAX_OPS_PER_TICK per pass and
        kept between passes until the half queue walk passes the halves they close. The half
        offset is committed after each put back, so a kill of this actor repeats at most the
        one check whose put was under way (RocketMQ's check is at-least-once all the same).
        """
        store = self.store
        half_cq = self._queue(HALF_TOPIC)
        if half_cq is None:
            return False
        half_moved = self._renumbered(HALF_TOPIC, half_cq)
        op_moved = self._renumbered(OP_TOPIC, self._queue(OP_TOPIC))
        if half_moved or op_moved:
            self._forget_run()
        if self._run is None:  # a new run: it ends where the half queue ends now
            self._run = (half_cq.get_max_offset_in_queue(), now_ms)
        half_max, run_start_ms = self._run
        half_start = max(self.ctx.offsets.query_offset(CHECK_GROUP, HALF_TOPIC, 0),
                         half_cq.get_min_offset_in_queue())  # fmt: skip
        if half_start >= half_max:
            self._run = None
            return False
        op_start, all_ops_read = self._read_ops(half_start)
        closes, done_ops = self._closes, self._done_ops
        i = half_start
        more = not all_ops_read
        while i < half_max:
            if budget <= 0:
                more = True
                break
            op = closes.pop(i, None)
            if op is not None:
                done_ops.add(op)
                i += 1
                continue
            if not all_ops_read:
                break  # an op not read yet may close this one
            unit = half_cq.get_unit(i)
            msg = None
            if unit is not None and unit[1] != PRE_BLANK_SIZE:
                msg = store.look_message_by_offset(unit[0])
            if msg is None:
                log.warning("transaction check: no half message at queue offset %d", i)
                i += 1
                continue
            if msg.store_timestamp >= run_start_ms:
                break  # "fresh stored": put back during this run (the run ends here)
            props = msg.properties
            times = _int(props.get(PROPERTY_TRANSACTION_CHECK_TIMES), 0)
            age = now_ms - msg.born_timestamp
            if times >= self.check_max or age > self.reserved_ms:  # needDiscard / needSkip
                yield from self._discard(msg)
                i += 1
                continue
            secs = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
            if secs is not None:
                immunity = _int(secs, -1)
                immunity = self.timeout_ms if immunity == -1 else immunity * 1000
                if 0 <= age < immunity:  # checkPrepareQueueOffset: keep it, check the rest
                    first = _int(props.get(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET), -1)
                    op = closes.pop(first, None) if first >= 0 else None
                    if op is not None:
                        done_ops.add(op)  # the producer closed the original meanwhile
                        self._remember_closed(first)
                    elif first >= 0 and first in self._closed_passed:
                        pass  # closed by an op already passed
                    elif (yield from self._put_back(msg, times + 1,
                                                    first if first >= 0 else i)) is None:
                        break
                    i += 1
                    self.ctx.offsets.commit_offset(CHECK_GROUP, HALF_TOPIC, 0, i)
                    budget -= 1
                    continue
            elif 0 <= age < self.timeout_ms:
                break  # this one and every later one are too young
            copy = yield from self._put_back(msg, times + 1)
            if copy is None:
                break
            self._send_check(msg, *copy)
            budget -= 1
            i += 1
            self.ctx.offsets.commit_offset(CHECK_GROUP, HALF_TOPIC, 0, i)
        if i != half_start:
            self.ctx.offsets.commit_offset(CHECK_GROUP, HALF_TOPIC, 0, i)
        for hq in [hq for hq in closes if hq < i]:  # closes halves now passed
            done_ops.add(closes.pop(hq))
            self._remember_closed(hq)
        new_op = op_start
        while new_op in done_ops:
            done_ops.discard(new_op)
            new_op += 1
        if new_op != op_start:
            self.ctx.offsets.commit_offset(CHECK_GROUP, OP_TOPIC, 0, new_op)
        if not more:
            self._run = None
        return more

    def _renumbered(self, topic: str, cq: ConsumeQueue | None) -> bool:
        """getHalfMsg / getOpMsg's nextOffsetCorrection: the check group's saved offset is past
        the queue's end (cleanExpiredConsumeQueue dropped the queue, and it is numbered from 0
        again): it starts over from the queue's min, committed. True when it did."""
        if cq is None:
            return False
        saved = self.ctx.offsets.query_offset(CHECK_GROUP, topic, 0)
        if saved <= cq.get_max_offset_in_queue():
            return False
        lo = cq.get_min_offset_in_queue()
        log.warning("transaction check: offset %d of %s is past its queue's end %d (the queue "
                    "was dropped and made again): starting over from %d", saved, topic,
                    cq.get_max_offset_in_queue(), lo)  # fmt: skip
        self.ctx.offsets.commit_offset(CHECK_GROUP, topic, 0, lo)
        return True

    def _forget_run(self) -> None:
        """Drop what was read of the op queue: its offsets and the half offsets it names may
        belong to queues numbered anew."""
        self._closes.clear()
        self._done_ops.clear()
        self._closed_passed.clear()
        self._ops_next = -1
        self._run = None

    def _remember_closed(self, half_qoff: int) -> None:
        closed = self._closed_passed
        closed[half_qoff] = None
        if len(closed) > MAX_REMEMBERED_CLOSED:
            for k in list(closed)[: len(closed) // 2]:  # forget the oldest half
                del closed[k]

    def _read_ops(self, half_start: int) -> tuple[int, bool]:
        """Read up to MAX_OPS_PER_TICK more op records into _closes / _done_ops; (op start,
        whether every op record written so far has been read)."""
        store = self.store
        op_cq = self._queue(OP_TOPIC)
        if op_cq is None:
            return 0, True
        start = max(self.ctx.offsets.query_offset(CHECK_GROUP, OP_TOPIC, 0),
                    op_cq.get_min_offset_in_queue())  # fmt: skip
        if self._ops_next < start:  # first run, or the saved op offset moved past what we read
            self._ops_next = start
        op_max = op_cq.get_max_offset_in_queue()
        end = min(op_max, self._ops_next + MAX_OPS_PER_TICK)
        closes, done = self._closes, self._done_ops
        for o in range(self._ops_next, end):
            unit = op_cq.get_unit(o)
            m = None
            if unit is not None and unit[1] != PRE_BLANK_SIZE:
                m = store.look_message_by_offset(unit[0])
            hq = _int(bytes(m.body).decode("ascii", "replace"), -1) if m is not None else -1
            if hq < half_start:
                done.add(o)  # closes a half message already passed (or unreadable)
                self._remember_closed(hq)
            else:
                prev = closes.get(hq)
                if prev is not None:
                    done.add(prev)  # a second op for the same half (a repeated END_TRANSACTION)
                closes[hq] = o
        self._ops_next = max(self._ops_next, end)
        return start, self._ops_next >= op_max

    def _put_back(
        self, msg: MessageExt, times: int, prepared_qoff: int = -1
    ) -> Generator[RemotingCommand, PutOutcome | None, tuple[PutOutcome, dict[str, str]] | None]:
        """putBackHalfMsgQueue: the half message again at the queue's end with its check count
        (needDiscard counts every pass, an immune one's too) and, for a message still immune,
        the queue offset of the original it stands for; (the put's result, the properties the
        CHECK_TRANSACTION_STATE body carries).

        As renewHalfMessageInner builds it: no flag and no reconsume times are copied (both 0 in
        the copy, so a commit answering its check stores flag 0), and WAIT=false is set on the
        map after a plain copy's properties string was written, so only an immune copy (whose
        string renewImmunityHalfMessageInner writes again) and the check body carry it."""
        props = dict(msg.properties)
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = str(times)
        if prepared_qoff >= 0:
            props[PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET] = str(prepared_qoff)
        stored = props if prepared_qoff >= 0 else dict(props)
        props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
        inner = MessageExtBrokerInner.from_stored(
            msg, HALF_TOPIC, msg.queue_id, stored, store_host=self.store_host, reconsume_times=0
        )
        inner.flag = 0
        result = yield put_request([inner], ensure_topic=True)
        if result is None or not result.ok:
            log.warning("transaction check: put back failed %s",
                        result.status if result is not None else "(the writer is gone)")
            return None
        return result, props

    def _send_check(self, msg: MessageExt, copy: PutOutcome, props: dict[str, str]) -> None:
        """CHECK_TRANSACTION_STATE (oneway) for the copy (stored with `props`), to one
        connection of its producer group."""
        group = props.get(PROPERTY_PRODUCER_GROUP, "")
        conns = self.ctx.producer_groups.get(group)
        outbox = self.ctx.outbox
        if not conns or outbox is None:
            log.warning("transaction check: no live producer of group %r", group)
            return
        conn = conns[self._rr % len(conns)]
        self._rr += 1
        uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=copy.logics_offset,
            commit_log_offset=copy.wrote_offset,
            msg_id=uniq,
            transaction_id=uniq,
            offset_msg_id=offset_msg_id(self.store_host, copy.wrote_offset),
        )
        # MessageDecoder.encode as Broker2Client sends it: the message read from the half queue
        # (its flag, store time, reconsume times) with the copy's offsets, real topic and queue
        body = encode_record(
            body=bytes(msg.body),
            topic=props.get(PROPERTY_REAL_TOPIC, HALF_TOPIC).encode(),
            properties=properties_to_string(props).encode(),
            queue_id=_int(props.get(PROPERTY_REAL_QUEUE_ID), msg.queue_id),
            flag=msg.flag,
            queue_offset=copy.logics_offset,
            phy_offset=copy.wrote_offset,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_timestamp=msg.store_timestamp,
            store_host=self.store_host,
            reconsume_times=msg.reconsume_times,
        )
        outbox.send(conn, RemotingCommand.request(_CHECK_STATE, header.to_ext(), body, oneway=True))
        self.checks_sent += 1

    def _discard(self, msg: MessageExt) -> Generator[RemotingCommand, PutOutcome | None, None]:
        """resolveDiscardMsg: checked transactionCheckMax times -> TRANS_CHECK_MAX_TIME_TOPIC."""
        inner = MessageExtBrokerInner.from_stored(
            msg, TRANS_CHECK_MAX_TIME_TOPIC, 0, dict(msg.properties), store_host=self.store_host
        )
        result = yield put_request([inner], ensure_topic=True)
        self.discarded += 1
        log.warning("half message queue offset %d checked %d times, discarded (%s)",
                    msg.queue_offset, self.check_max,
                    result.status if result is not None else "the writer is gone")  # fmt: skip


def _int(text: str | None, default: int) -> int:
    """A number property as Integer.parseInt reads it; default when absent or not one."""
    v = parse_java_int(text) if text is not None else None
    return default if v is None else v
