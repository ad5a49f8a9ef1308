"""TransactionProducer: half messages, the local transaction, END_TRANSACTION, check-backs.

Mirrors client/producer/TransactionMQProducer.java and DefaultMQProducerImpl's
sendMessageInTransaction / endTransaction / checkTransactionState, RocketMQ 4.9.x: the half
message carries TRAN_MSG=true and PGROUP; when it is stored (SEND_OK) `execute_local` runs on
the caller's thread (an exception counts as UNKNOW), then END_TRANSACTION goes oneway to the
broker with COMMIT / ROLLBACK / NOT_TYPE. A broker's CHECK_TRANSACTION_STATE (relayed by the
instance actor) is queued to one check thread (Java's check pool: 1 thread, 2000 queued) that
calls `check_local` and answers with another oneway END_TRANSACTION (fromTransactionCheck).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from actors.client.default_mq_producer_impl import now_ms
from actors.client.errors import ClientErrorCode, MQClientError
from actors.client.producer import Producer
from actors.client.records import (
    LocalTransactionState,
    Message,
    MessageExt,
    SendResult,
    SendStatus,
    TransactionSendResult,
)
from actors.client.trace_dispatcher import end_transaction_context
from protocol import message as wire
from protocol.command import RemotingCommand
from protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader

log = logging.getLogger(__name__)

CHECK_QUEUE_MAX = 2000  # checkRequestHoldMax

_TX_TYPE = {
    LocalTransactionState.COMMIT_MESSAGE: wire.TRANSACTION_COMMIT_TYPE,
    LocalTransactionState.ROLLBACK_MESSAGE: wire.TRANSACTION_ROLLBACK_TYPE,
    LocalTransactionState.UNKNOW: wire.TRANSACTION_NOT_TYPE,
}


class TransactionListener(Protocol):
    """The application's side of a transaction (TransactionListener)."""

    def execute_local(self, msg: MessageExt, arg: Any) -> LocalTransactionState:
        """Run the local transaction of a stored half message (msg.transaction_id: what
        check_local gets for it)."""

    def check_local(self, msg: MessageExt) -> LocalTransactionState:
        """The broker asks how the transaction of msg ended."""


def _as_sent(msg: Message, result: SendResult) -> MessageExt:
    """The message execute_local sees: as sent, with its id (UNIQ_KEY) as msg_id and
    transaction_id, which check_local later receives for the same transaction (Java sets
    msg.setTransactionId before executeLocalTransaction): the key to record the local
    transaction under."""
    tx_id = result.transaction_id or result.msg_id
    props = dict(msg.properties)
    props[wire.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = result.msg_id
    props[wire.PROPERTY_TRANSACTION_PREPARED] = "true"
    return MessageExt(msg.topic, msg.body, msg.tags, msg.keys, props, msg.delay_level, msg.flag,
                      msg_id=result.msg_id, offset_msg_id=result.offset_msg_id or "",
                      queue=result.queue, queue_offset=result.queue_offset,
                      transaction_id=tx_id)  # fmt: skip


def _state(value: Any) -> LocalTransactionState:
    if isinstance(value, LocalTransactionState):
        return value
    try:
        return LocalTransactionState(str(value))
    except ValueError:
        log.warning("transaction listener returned %r: taken as UNKNOW", value)
        return LocalTransactionState.UNKNOW


class TransactionProducer(Producer):
    """A Producer whose send_in_transaction runs a local transaction between the half message
    and its commit or rollback."""

    def __init__(self, group: str, *, namesrv: str | Sequence[str],
                 listener: TransactionListener, check_queue: int = CHECK_QUEUE_MAX,
                 **kw: Any) -> None:  # fmt: skip
        super().__init__(group, namesrv=namesrv, **kw)
        self.listener = listener
        self._checks: queue.Queue[tuple[str, RemotingCommand] | None] = queue.Queue(check_queue)
        self._checker: threading.Thread | None = None

    def start(self) -> TransactionProducer:
        """Start the producer and its check thread."""
        super().start()
        if self._checker is None:
            self._checker = threading.Thread(target=self._check_loop, daemon=True,
                                             name=f"actormq-tx-check-{self.group}")
            self._checker.start()
        return self

    def close(self, timeout: float = 10.0) -> None:
        """Stop the check thread, then close as a Producer."""
        checker, self._checker = self._checker, None
        if checker is not None:
            self._checks.put(None)
            checker.join(timeout)
        super().close(timeout)

    # -- sending ------------------------------------------------------------------------------
    def send_in_transaction(self, msg: Message, arg: Any = None, *,
                            timeout: float | None = None) -> TransactionSendResult:
        """Send the half message, run execute_local, commit or roll back (oneway)."""
        _, impl = self._running()
        if msg.delay_level:
            msg = replace(msg, delay_level=0)  # a half message is never delayed
        req = impl.prepare(msg, extra={wire.PROPERTY_TRANSACTION_PREPARED: "true",
                                       wire.PROPERTY_PRODUCER_GROUP: self.group})
        begin = now_ms()
        result = impl.send(req, msg.flag, timeout_ms=self._timeout_ms(timeout))
        if self._tracer is not None:  # the half message's Pub (msgType Trans_Msg_Half)
            self._trace(replace(msg, properties={**msg.properties,
                                                 wire.PROPERTY_TRANSACTION_PREPARED: "true"}),
                        result, begin)  # fmt: skip
        error: BaseException | None = None
        if result.status is SendStatus.SEND_OK:
            try:
                state = _state(self.listener.execute_local(_as_sent(msg, result), arg))
            except Exception as exc:
                log.warning("execute_local of %s raised: %s", result.msg_id, exc)
                error, state = exc, LocalTransactionState.UNKNOW
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            self._end_transaction(msg, result, state, error)
        except Exception as exc:  # the half is stored: a check-back will ask for the state
            log.warning("local transaction of %s ended %s, but ending it at the broker failed: "
                        "%s", result.msg_id, state.name, exc)  # fmt: skip
        return TransactionSendResult(result, state)

    def _end_transaction(self, msg: Message, result: SendResult, state: LocalTransactionState,
                         error: BaseException | None) -> None:  # fmt: skip
        handle, impl = self._running()
        _host, _port, phy_offset = wire.decode_offset_msg_id(result.offset_msg_id or
                                                             result.msg_id)
        addr = handle.find_broker_address_in_publish(result.queue.broker_name)
        if addr is None:
            raise MQClientError(ClientErrorCode.BROKER_NOT_EXIST_EXCEPTION,
                                f"The broker[{result.queue.broker_name}] not exist")
        header = EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=result.queue_offset,
            commit_log_offset=phy_offset, commit_or_rollback=_TX_TYPE[state],
            msg_id=result.msg_id, from_transaction_check=False,
            transaction_id=result.transaction_id or result.msg_id,
            bname=result.queue.broker_name)
        remark = (f"executeLocalTransactionBranch exception: {error!r}"
                  if error is not None else None)  # fmt: skip
        impl.api.end_transaction_oneway(addr, header, remark)
        self._trace_end(msg, result.msg_id, header.transaction_id or "", addr, state, False)

    def _trace_end(self, msg: Message, msg_id: str, transaction_id: str, addr: str,
                   state: LocalTransactionState, from_check: bool) -> None:  # fmt: skip
        """EndTransactionTraceHookImpl: the END_TRANSACTION this producer sent."""
        tracer = self._tracer
        if tracer is not None:
            tracer.append(end_transaction_context(self.group, msg, msg_id, transaction_id, addr,
                                                  state.value, from_check, now_ms()))  # fmt: skip

    # -- check-backs ----------------------------------------------------------------------------
    def check_transaction_state(self, addr: str, cmd: RemotingCommand) -> None:
        """Queue a broker's check (I/O thread); dropped with a warning when 2000 wait."""
        try:
            self._checks.put_nowait((addr, cmd))
        except queue.Full:
            log.warning("transaction check queue full: check from %s dropped", addr)

    def _check_loop(self) -> None:
        while True:
            item = self._checks.get()
            if item is None:
                return
            addr, cmd = item
            try:
                self._check_one(addr, cmd)
            except Exception:
                log.exception("transaction check from %s failed", addr)

    def _check_one(self, addr: str, cmd: RemotingCommand) -> None:
        header = CheckTransactionStateRequestHeader.from_ext(cmd.ext_fields)
        wire_msg = wire.decode_message_ext(bytes(cmd.body))
        msg = MessageExt.from_wire(wire_msg, header.bname or "")
        tx_id = header.transaction_id or msg.properties.get(
            wire.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if tx_id:
            msg = replace(msg, transaction_id=tx_id)
        error = None
        try:
            state = _state(self.listener.check_local(msg))
        except Exception as exc:
            log.warning("check_local of %s raised: %s", msg.msg_id, exc)
            error, state = exc, LocalTransactionState.UNKNOW
        unique = msg.properties.get(wire.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
        end = EndTransactionRequestHeader(
            producer_group=self.group, tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset, commit_or_rollback=_TX_TYPE[state],
            msg_id=unique, from_transaction_check=True, transaction_id=header.transaction_id,
            bname=header.bname)
        remark = f"checkLocalTransactionState Exception: {error!r}" if error else None
        _, impl = self._running()
        impl.api.end_transaction_oneway(addr, end, remark)
        self._trace_end(msg, unique, header.transaction_id or "", addr, state, True)
