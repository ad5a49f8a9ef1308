"""Transactional messages: END_TRANSACTION commit / rollback and the half-message check-back.

Mirrors broker/processor/EndTransactionProcessor.java (`process_end_transaction`), the
RESUME_CHECK_HALF_MESSAGE step of AdminBrokerProcessor.java, broker/transaction/queue/
TransactionalMessageServiceImpl.java (with TransactionalMessageBridge.java) and
broker/transaction/TransactionalMessageCheckService.java, RocketMQ 4.9.x (spec §9.7).

A pure core hosted by the send processor, because both halves write to the store and the send
actor is THE writer: `end_transaction()` serves request 37 and `tick()` runs the check every
transactionCheckInterval. Progress lives where RocketMQ keeps it, as consumer offsets of group
CID_RMQ_SYS_TRANS on the half and op queues (in the broker's shared offset table, persisted
by the controller in consumerOffset.json). Producer connections per PGROUP arrive from client_manage
as ProducerGroupChanged events.

The check of one run: read the op records (each one's body is the half queue offset it closes;
MAX_OPS_PER_TICK per tick, kept between ticks, and no half message is checked before every op
written so far has been read), walk the half queue from the saved offset up to the max seen at
the start of the run, skip what an op closed, stop at the first half message younger than
transactionTimeOut, and for each older one put it back on the half queue with
TRANSACTION_CHECK_TIMES + 1 and send CHECK_TRANSACTION_STATE (oneway) for the copy to one live
connection of its producer group. A message with CHECK_IMMUNITY_TIME_IN_SECONDS still inside
its immunity is put back (with TRAN_PREPARED_QUEUE_OFFSET naming the original) and the walk
goes on; its copies are dropped once an op closes the original. After transactionCheckMax
checks, or when born longer ago than fileReservedTime, a half message goes to
TRANS_CHECK_MAX_TIME_TOPIC instead. As in RocketMQ the outcome is at-least-once: a producer that
answers both the original and a copy commits twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from actors.broker.topic_config import PERM_READ, PERM_WRITE, TopicConfig
from actors.core import Request
from protocol.codes import (
    CID_RMQ_SYS_TRANS,
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
)
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
)
from protocol.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageExt,
    decode_offset_msg_id,
)
from protocol.record import encode_record, properties_to_string
from store.consume_queue import PRE_BLANK_SIZE, ConsumeQueue
from store.message_ext_broker_inner import MessageExtBrokerInner
from store.put_message_result import PutMessageResult, PutMessageStatus, offset_msg_id

log = logging.getLogger(__name__)

HALF_TOPIC: Final = RMQ_SYS_TRANS_HALF_TOPIC
OP_TOPIC: Final = RMQ_SYS_TRANS_OP_HALF_TOPIC
CHECK_GROUP: Final = CID_RMQ_SYS_TRANS
REMOVE_TAG: Final = "d"  # TransactionalMessageUtil.REMOVETAG
MAX_CHECKS_PER_TICK: Final = 256  # the send actor serves no request meanwhile
MAX_REMEMBERED_CLOSED: Final = 100_000
MAX_OPS_PER_TICK: Final = 1024  # op records read per tick (each one is a store read)
RW: Final = PERM_READ | PERM_WRITE
_CHECK_STATE: Final = int(RC.CHECK_TRANSACTION_STATE)


def process_end_transaction(
    tx: TransactionalMessageService | None, req: Request, now_ms: int
) -> RemotingCommand | None:
    """EndTransactionProcessor: commit or roll back a half message (mostly oneway)."""
    cmd = req.cmd
    h = EndTransactionRequestHeader.from_ext(cmd.ext_fields)
    if tx is None:
        return cmd.make_response(RS.SLAVE_NOT_AVAILABLE, "Can't process transaction on slave")
    res = tx.end_transaction(h, now_ms)
    if res is None:
        return None
    code, remark = res
    if code != RS.SUCCESS:
        log.warning("END_TRANSACTION group=%s offset=%d from %s:%d: %s", h.producer_group,
                    h.commit_log_offset, req.peer[0], req.peer[1], remark)  # fmt: skip
    return cmd.make_response(code, remark)


def resume_check_half_message(
    tx: TransactionalMessageService | None, cmd: RemotingCommand, now_ms: int
) -> RemotingCommand:
    """RESUME_CHECK_HALF_MESSAGE (AdminBrokerProcessor.resumeCheckHalfMessage): a put, so the
    writer serves it."""
    if tx is None:  # a slave: Java's put fails there
        return cmd.make_response(
            RS.SYSTEM_ERROR, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.")
    h = ResumeCheckHalfMessageRequestHeader.from_ext(cmd.ext_fields)
    code, remark = tx.resume_check(h.msg_id, now_ms)
    return cmd.make_response(code, remark)


class TransactionalMessageService:
    """END_TRANSACTION and the periodic check, on the writer's store."""

    def __init__(
        self,
        ctx: Any,
        store_host: bytes,
        emit_topic: Callable[[TopicConfig], None],
    ) -> None:
        self.ctx = ctx
        self.store = ctx.store
        bc = ctx.broker_config
        self.store_host = store_host
        self.emit_topic = emit_topic
        self.timeout_ms = int(bc.transactionTimeOut)
        self.check_max = int(bc.transactionCheckMax)
        self.interval_ms = max(1, int(bc.transactionCheckInterval))
        hours = ctx.store_config.fileReservedTime
        self.reserved_ms = hours * 3_600_000
        self.next_check: int | None = None
        self.checks_sent = 0
        self.discarded = 0
        self._rr = 0
        # ops read so far (kept between ticks): half offset -> op offset, and op offsets done
        self._closes: dict[int, int] = {}
        self._done_ops: set[int] = set()
        self._ops_next = -1  # next op offset to read
        self._run: tuple[int, int] | None = None  # (half offset the run ends at, its start ms)
        # half offsets closed by ops already passed: an immune message's copy finds its
        # original here (RocketMQ only looks at ops of halves not passed yet)
        self._closed_passed: dict[int, None] = {}

    # --- END_TRANSACTION ------------------------------------------------------------------

    def end_transaction(
        self, h: EndTransactionRequestHeader, now_ms: int
    ) -> tuple[int, str | None] | None:
        """Commit or roll back a half message: (code, remark), or None (nothing to answer)."""
        kind = h.commit_or_rollback
        if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            if kind != TRANSACTION_NOT_TYPE:
                log.warning("END_TRANSACTION with unknown commitOrRollback=%d", kind)
            return None
        msg = self.store.look_message_by_offset(h.commit_log_offset)
        if msg is None or msg.topic != HALF_TOPIC:
            return RS.SYSTEM_ERROR, "Find prepared transaction message failed"
        props = msg.properties
        if props.get(PROPERTY_PRODUCER_GROUP) != h.producer_group:
            return RS.SYSTEM_ERROR, "The producer group wrong"
        if msg.queue_offset != h.tran_state_table_offset:
            return RS.SYSTEM_ERROR, "The transaction state table offset wrong"
        if msg.commit_log_offset != h.commit_log_offset:
            return RS.SYSTEM_ERROR, "The commit log offset wrong"
        if kind == TRANSACTION_COMMIT_TYPE:
            inner = self._real_message(msg, h.commit_log_offset)
            if inner is None:
                return RS.SYSTEM_ERROR, "the half message has no REAL_TOPIC / REAL_QID"
            result = self.store.put_message(inner, now_ms)
            if result.status is not PutMessageStatus.PUT_OK:
                return RS.SYSTEM_ERROR, f"store the committed message failed: {result.status.name}"
        if not self._put_op(msg, now_ms):
            log.warning("op record for half offset %d not stored", msg.queue_offset)
        return RS.SUCCESS, None

    def _real_message(self, msg: MessageExt, half_phy: int) -> MessageExtBrokerInner | None:
        """The committed message: real topic and queue, tx bits COMMIT (endMessageTransaction).

        Its stored properties are the half message's, all of them: endMessageTransaction fixes
        the properties string before it clears REAL_TOPIC / REAL_QID / TRAN_MSG from the map, so
        a Java broker's committed record keeps them (and the Java consumer sets the message's
        transactionId from UNIQ_KEY because TRAN_MSG=true is there)."""
        props = dict(msg.properties)
        topic = props.get(PROPERTY_REAL_TOPIC)
        qid = props.get(PROPERTY_REAL_QUEUE_ID)
        if not topic or qid is None or not qid.lstrip("-").isdigit():
            return None
        inner = MessageExtBrokerInner.from_stored(
            msg, topic, int(qid), props, store_host=self.store_host
        )
        inner.sys_flag = (msg.sys_flag & ~TRANSACTION_TYPE_MASK) | TRANSACTION_COMMIT_TYPE
        inner.prepared_transaction_offset = half_phy
        return inner

    def _put_op(self, half: MessageExt, now_ms: int) -> bool:
        """The op record closing a half message: tag "d", body = its half queue offset; WAIT=true
        as new Message(topic, tags, body) sets it (makeOpMessageInner writes that map's string
        before its setWaitStoreMsgOK(false) and UNIQ_KEY reach the map)."""
        self._topic(OP_TOPIC)
        op = MessageExtBrokerInner(
            OP_TOPIC,
            str(half.queue_offset).encode("ascii"),
            0,
            {PROPERTY_TAGS: REMOVE_TAG, PROPERTY_WAIT_STORE_MSG_OK: "true"},
            half.queue_id,
            0,
            now_ms,
            self.store_host,
            self.store_host,
        )
        return self.store.put_message(op, now_ms).status is PutMessageStatus.PUT_OK

    def resume_check(self, msg_id: str | None, now_ms: int) -> tuple[int, str | None]:
        """RESUME_CHECK_HALF_MESSAGE (mqadmin resumeCheckHalfMessage): the message at msg_id's
        commit-log offset (one discarded to TRANS_CHECK_MAX_TIME_TOPIC, usually) goes back to
        the half queue with its check count at 0, to be checked again; (code, remark)."""
        exc_remark = "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC."
        try:
            phy = decode_offset_msg_id(msg_id or "")[2]
        except ValueError:
            return RS.SYSTEM_ERROR, exc_remark
        msg = self.store.look_message_by_offset(phy)
        if msg is None:
            return RS.SYSTEM_ERROR, exc_remark
        props = dict(msg.properties)
        props[PROPERTY_TRANSACTION_CHECK_TIMES] = "0"
        self._topic(HALF_TOPIC)
        result = self.store.put_message(
            MessageExtBrokerInner.from_stored(msg, HALF_TOPIC, 0, props), now_ms
        )
        if result.status is not PutMessageStatus.PUT_OK:
            log.error("resume check half message %s: put back failed %s", msg_id,
                      result.status.name)  # fmt: skip
            return RS.SYSTEM_ERROR, "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed."
        log.info("resume check half message %s: put back to the half queue", msg_id)
        return RS.SUCCESS, None

    def _topic(self, name: str) -> None:
        tc, created = self.ctx.topics.create_in_send_back(name, 1, RW)
        if created:
            self.emit_topic(tc)

    # --- the check ------------------------------------------------------------------------

    def tick(self, now_ms: int) -> int:
        """Run the check when due; ms until the next wanted tick."""
        if self.next_check is None:  # the service's first run waits one interval
            self.next_check = now_ms + self.interval_ms
        if now_ms < self.next_check:
            return self.next_check - now_ms
        try:
            more = self.check(now_ms)
        except Exception:
            log.exception("transaction check failed")
            more = False
        self.next_check = now_ms if more else now_ms + self.interval_ms
        return self.next_check - now_ms

    def check(self, now_ms: int, budget: int = MAX_CHECKS_PER_TICK) -> bool:
        """One pass over the half queue; True when it stopped early (more to do next tick).

        A half message is only checked once every op record written so far has been read (an
        op past the read window may close it): ops are read MAX_OPS_PER_TICK per tick and
        kept between ticks until the half queue walk passes the halves they close.
        """
        store = self.store
        half_cq = store.consume_queues.get((HALF_TOPIC, 0))
        if half_cq is None:
            return False
        half_moved = self._renumbered(HALF_TOPIC, half_cq)
        op_moved = self._renumbered(OP_TOPIC, store.consume_queues.get((OP_TOPIC, 0)))
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
                self._discard(msg, now_ms)
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
                    elif self._put_back(msg, times + 1, now_ms, first if first >= 0 else i) is None:
                        break
                    i += 1
                    budget -= 1
                    continue
            elif 0 <= age < self.timeout_ms:
                break  # this one and every later one are too young
            copy = self._put_back(msg, times + 1, now_ms)
            if copy is None:
                break
            self._send_check(msg, *copy)
            budget -= 1
            i += 1
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
        op_cq = store.consume_queues.get((OP_TOPIC, 0))
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
        self, msg: MessageExt, times: int, now_ms: int, prepared_qoff: int = -1
    ) -> tuple[PutMessageResult, dict[str, str]] | None:
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
        result = self.store.put_message(inner, now_ms)
        if result.status is not PutMessageStatus.PUT_OK:
            log.warning("transaction check: put back failed %s", result.status.name)
            return None
        return result, props

    def _send_check(self, msg: MessageExt, copy: PutMessageResult, props: dict[str, str]) -> None:
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

    def _discard(self, msg: MessageExt, now_ms: int) -> None:
        """resolveDiscardMsg: checked transactionCheckMax times -> TRANS_CHECK_MAX_TIME_TOPIC."""
        self._topic(TRANS_CHECK_MAX_TIME_TOPIC)
        inner = MessageExtBrokerInner.from_stored(
            msg, TRANS_CHECK_MAX_TIME_TOPIC, 0, dict(msg.properties), store_host=self.store_host
        )
        status = self.store.put_message(inner, now_ms).status
        self.discarded += 1
        log.warning("half message queue offset %d checked %d times, discarded (%s)",
                    msg.queue_offset, self.check_max, status.name)  # fmt: skip


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default
