"""Message trace: the records a traced client writes, batched off its hot path.

Mirrors client/trace/AsyncTraceDispatcher.java and the hooks of client/trace/hook
(SendMessageTraceHookImpl, ConsumeMessageTraceHookImpl, EndTransactionTraceHookImpl), RocketMQ
4.9.x. A client with `enable_trace=True` owns one dispatcher: its send, consume and
end-transaction paths hand it finished TraceContexts (`append` never blocks: a full queue of
1,024 drops the record and counts it, as Java's offer does); one worker thread encodes them
(protocol/trace.py) and, every 500 ms or once 118,000 characters wait, sends them as one
message to the trace topic through an inner Producer of its own (group
`_INNER_TRACE_PRODUCER-<group>-<PRODUCE|CONSUME>-<n>`, asynchronous sends, 5 s timeout, no
auto-batching), keyed by every message id and key it carries. close() sends what is left
(waiting at most 500 ms for the queue, as Java's flush) and closes the inner producer.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from protocol.message import decode_offset_msg_id
from protocol.message_client_id_setter import create_uniq_id
from protocol.trace import (
    DEFAULT_REGION,
    GROUP_NAME_PREFIX,
    TRACE_TOPIC,
    ConsumeReturnType,
    MessageType,
    TraceBean,
    TraceContext,
    TraceType,
    batch_body,
    encode,
    encode_pub,
)

if TYPE_CHECKING:
    from actors.client.records import Message, MessageExt, SendResult

log = logging.getLogger(__name__)

QUEUE_SIZE: Final = 1024
POLL_S: Final = 0.1
WAIT_THRESHOLD_S: Final = 0.5  # a record waits at most this long before it is sent
MAX_MSG_SIZE: Final = 128_000
SEND_TIMEOUT_S: Final = 5.0
ERROR_LOG_S: Final = 10.0
_COUNTER = itertools.count(1)


class TraceSender(Protocol):
    """The inner producer a dispatcher sends its trace messages with (a Producer)."""

    def start(self) -> Any: ...

    def send_async(self, msg: Message, *,
                   callback: Callable[[SendResult | None, BaseException | None], None] | None
                   = None) -> Any: ...  # fmt: skip

    def close(self, timeout: float = 10.0) -> None: ...


def inner_group(group: str, kind: str) -> str:
    """The inner producer's group (genGroupNameForTrace)."""
    return f"{GROUP_NAME_PREFIX}-{group}-{kind}-{next(_COUNTER)}"


# what the hot paths queue: a finished record, or a send's raw facts (the worker makes the
# Pub record of them, off the I/O thread)
Raw = TraceContext | tuple[str, "Message", "SendResult", int, int]


class AsyncTraceDispatcher:
    """One traced client's trace records: a bounded queue, a worker, an inner producer.

    The queue is a deque the hot paths append to without a lock (one append is atomic); its
    bound is checked before each append, so a burst from several threads may pass it by a
    few. The worker drains it every POLL_S (Java's worker polls too)."""

    def __init__(self, producer: TraceSender, trace_topic: str | None = None) -> None:
        self.topic = trace_topic or TRACE_TOPIC
        self.queue: deque[Raw] = deque()
        self.discarded = 0  # records dropped on a full queue
        self.failed = 0  # trace messages whose send failed
        self._next_error_log = 0.0
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self.producer = producer

    def start(self) -> None:
        self.producer.start()
        self._worker = threading.Thread(target=self._run, name="AsyncTraceDispatcher",
                                        daemon=True)  # fmt: skip
        self._worker.start()

    def append(self, ctx: Raw) -> bool:
        """Queue a record (never blocks; False when the queue is full: dropped, counted)."""
        if len(self.queue) >= QUEUE_SIZE:
            self.discarded += 1
            return False
        self.queue.append(ctx)
        return True

    def append_sent(self, group: str, msg: Message, result: SendResult, begin_ms: int,
                    now_ms: int) -> bool:  # fmt: skip
        """A send's Pub record, made by the worker (SendMessageTraceHookImpl)."""
        return self.append((group, msg, result, begin_ms, now_ms))

    def close(self, timeout: float = 5.0) -> None:
        """Send what is queued, stop the worker, close the inner producer."""
        self._stop.set()
        if self._worker is not None:
            self._worker.join(timeout)
        self.producer.close(timeout)

    # -- the worker ---------------------------------------------------------------------------
    def _run(self) -> None:
        pending: list[tuple[str, list[str]]] = []
        size = 0
        first = 0.0
        take = self.queue.popleft
        while True:
            stopping = self._stop.wait(POLL_S)
            while self.queue:
                item = take()
                if isinstance(item, tuple):
                    record = pub_record(*item)
                    if record is None:
                        continue
                elif item.beans:
                    record = encode(item)
                else:
                    continue
                if not pending:
                    first = time.monotonic()
                pending.append(record)
                size += len(record[0])
                if size >= MAX_MSG_SIZE - 10_000:
                    self._send(pending)
                    pending, size = [], 0
            if pending and (stopping or time.monotonic() - first >= WAIT_THRESHOLD_S):
                self._send(pending)
                pending, size = [], 0
            if stopping:
                return

    def _send(self, records: list[tuple[str, list[str]]]) -> None:
        from actors.client.records import Message

        body, keys = batch_body(records)
        try:
            self.producer.send_async(Message(self.topic, body, keys=keys or None),
                                     callback=self._sent)  # fmt: skip
        except Exception as exc:  # closed producer, no route: the records are lost, counted
            self._failed(exc)

    def _sent(self, _result: SendResult | None, err: BaseException | None) -> None:
        if err is not None:
            self._failed(err)

    def _failed(self, err: BaseException) -> None:
        self.failed += 1
        now = time.monotonic()
        if now >= self._next_error_log:
            self._next_error_log = now + ERROR_LOG_S
            log.warning("trace records to %s not sent (%d message(s) so far): %s", self.topic,
                        self.failed, err)  # fmt: skip


# -- the hooks: what each traced path hands the dispatcher --------------------------------------
def message_type(msg: Message) -> MessageType:
    """The msgType a send hook records (DefaultMQProducerImpl.sendKernelImpl)."""
    props = msg.properties
    if props.get("TRAN_MSG") == "true":
        return MessageType.Trans_Msg_Half
    if msg.delay_level > 0 or "DELAY" in props or "__STARTDELIVERTIME" in props:
        return MessageType.Delay_Msg
    return MessageType.Normal_Msg


def store_host_of(offset_msg_id: str) -> str:
    """The broker address an offset message id names ("" when it names none)."""
    try:
        host, port, _offset = decode_offset_msg_id(offset_msg_id.split(",")[0])
    except (ValueError, IndexError):
        return ""
    return f"{host}:{port}"


def pub_context(group: str, msg: Message, result: SendResult, begin_ms: int,
                now_ms: int) -> TraceContext | None:  # fmt: skip
    """SendMessageTraceHookImpl: the Pub record of a send the broker answered (None when its
    broker has trace off)."""
    if not result.trace_on:
        return None
    bean = TraceBean(topic=msg.topic, msg_id=result.msg_id, offset_msg_id=result.offset_msg_id,
                     tags=msg.tags or None, keys=msg.keys or None,
                     store_host=store_host_of(result.offset_msg_id), body_length=len(msg.body),
                     msg_type=message_type(msg))  # fmt: skip
    return TraceContext(TraceType.Pub, begin_ms, result.region_id or DEFAULT_REGION, group,
                        cost_time=now_ms - begin_ms, success=result.ok, beans=[bean])  # fmt: skip


_STORE_HOSTS: dict[str, str] = {}  # an offset id's host part (all but its last 16 hex
# digits, the commit-log offset) -> "ip:port"


def pub_record(group: str, msg: Message, result: SendResult, begin_ms: int,
               now_ms: int) -> tuple[str, list[str]] | None:  # fmt: skip
    """The encoded Pub record of a send (pub_context's record, without building it)."""
    if not result.trace_on:
        return None
    off = result.offset_msg_id
    host = _STORE_HOSTS.get(off[:-16])
    if host is None:
        host = store_host_of(off)
        if len(_STORE_HOSTS) < 1024:
            _STORE_HOSTS[off[:-16]] = host
    return encode_pub(begin_ms, result.region_id or DEFAULT_REGION, group, msg.topic,
                      result.msg_id, msg.tags or None, msg.keys or None, host, len(msg.body),
                      now_ms - begin_ms, message_type(msg), off, result.ok)  # fmt: skip


def sub_before(group: str, msgs: Sequence[MessageExt], now_ms: int) -> TraceContext | None:
    """ConsumeMessageTraceHookImpl.consumeMessageBefore (None: nothing traced)."""
    beans: list[TraceBean] = []
    region: str | None = None  # Java: the last message's MSG_REGION property, null without
    for m in msgs:
        if m.properties.get("TRACE_ON") == "false":
            continue
        region = m.properties.get("MSG_REGION")
        beans.append(TraceBean(topic=m.topic, msg_id=m.msg_id, tags=m.tags or None,
                               keys=m.keys or None, body_length=m.store_size,
                               retry_times=m.reconsume_times))  # fmt: skip
    if not beans:
        return None
    return TraceContext(TraceType.SubBefore, now_ms, region, group,
                        request_id=create_uniq_id(), beans=beans)  # fmt: skip


def sub_after(before: TraceContext, n: int, success: bool, returned: ConsumeReturnType,
              now_ms: int) -> TraceContext:  # fmt: skip
    """consumeMessageAfter: the SubAfter of a `before` record (cost per message)."""
    return TraceContext(TraceType.SubAfter, now_ms, before.region_id, before.group_name,
                        cost_time=(now_ms - before.time_stamp) // max(1, n), success=success,
                        request_id=before.request_id, context_code=int(returned),
                        beans=before.beans)  # fmt: skip


def end_transaction_context(group: str, msg: Message, msg_id: str, transaction_id: str,
                            broker_addr: str, state: str, from_check: bool,
                            now_ms: int) -> TraceContext:  # fmt: skip
    """EndTransactionTraceHookImpl: an END_TRANSACTION a producer sent (or answered a check
    with)."""
    region = msg.properties.get("MSG_REGION") or DEFAULT_REGION
    bean = TraceBean(topic=msg.topic, msg_id=msg_id, tags=msg.tags or None, keys=msg.keys or None,
                     store_host=broker_addr, msg_type=MessageType.Trans_msg_Commit,
                     transaction_id=transaction_id, transaction_state=state,
                     from_transaction_check=from_check)  # fmt: skip
    return TraceContext(TraceType.EndTransaction, now_ms, region, group, beans=[bean])
