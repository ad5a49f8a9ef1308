"""Transactional messages on the writer: END_TRANSACTION commit / rollback, resume-check.

Mirrors broker/processor/EndTransactionProcessor.java (`process_end_transaction`), the
RESUME_CHECK_HALF_MESSAGE step of AdminBrokerProcessor.java and the commit / op-record half of
broker/transaction/queue/TransactionalMessageServiceImpl.java (with TransactionalMessageBridge
.java), RocketMQ 4.9.x (spec §9.7). A pure core hosted by the send processor, because each of
these requests writes to the store and the send actor is THE writer. The half-message
check-back is TransactionalMessageCheckService, an actor of its own
(actors.broker.transactional_message_check) that puts its half messages back through this
writer.
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
)
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.headers import (
    EndTransactionRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
)
from protocol.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_WAIT_STORE_MSG_OK,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageExt,
    decode_offset_msg_id,
)
from store.message_ext_broker_inner import MessageExtBrokerInner
from store.put_message_result import PutMessageStatus

log = logging.getLogger(__name__)

HALF_TOPIC: Final = RMQ_SYS_TRANS_HALF_TOPIC
OP_TOPIC: Final = RMQ_SYS_TRANS_OP_HALF_TOPIC
CHECK_GROUP: Final = CID_RMQ_SYS_TRANS
REMOVE_TAG: Final = "d"  # TransactionalMessageUtil.REMOVETAG
RW: Final = PERM_READ | PERM_WRITE
_END_TYPES: Final = frozenset({TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE,
                               TRANSACTION_ROLLBACK_TYPE})  # fmt: skip


def process_end_transaction(
    tx: TransactionalMessageService | None, req: Request, now_ms: int
) -> RemotingCommand | None:
    """EndTransactionProcessor: commit or roll back a half message (mostly oneway)."""
    cmd = req.cmd
    h = EndTransactionRequestHeader.from_ext(cmd.ext_fields)
    if h.commit_or_rollback not in _END_TYPES:  # EndTransactionRequestHeader.checkFields
        return cmd.make_response(RS.SYSTEM_ERROR, "commitOrRollback field wrong")
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
    """END_TRANSACTION and RESUME_CHECK_HALF_MESSAGE, on the writer's store."""

    def __init__(
        self,
        ctx: Any,
        store_host: bytes,
        emit_topic: Callable[[TopicConfig], None],
    ) -> None:
        self.ctx = ctx
        self.store = ctx.store
        self.store_host = store_host
        self.emit_topic = emit_topic

    # --- END_TRANSACTION ------------------------------------------------------------------

    def end_transaction(
        self, h: EndTransactionRequestHeader, now_ms: int
    ) -> tuple[int, str | None] | None:
        """Commit or roll back a half message: (code, remark), or None (nothing to answer)."""
        kind = h.commit_or_rollback
        if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            return None  # TRANSACTION_NOT_TYPE: nothing to do (the caller refused the rest)
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
