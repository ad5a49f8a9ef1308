"""Auto-batching of async sends: what accumulates while a topic's requests are in flight goes
out as one SEND_BATCH_MESSAGE.

Mirrors client/producer/ProduceAccumulator.java of RocketMQ 5.x (DefaultMQProducer.autoBatch),
here without a linger timer: a message is sent at once when fewer than MAX_INFLIGHT_REQUESTS of
its topic's requests are in flight, and otherwise waits for the next completion, which sends
everything waiting (up to MAX_BATCH_COUNT messages / MAX_BATCH_BYTES) in one request. An idle
producer therefore sends every message alone and at once; a busy one pays one request per batch
instead of one per message. Each message keeps its own future and result: its own msg_id (the
UNIQ_KEY it was given), the batch's queue, queue_offset = the batch's first offset + its index.

Only plain messages are batched (no delay level, no retry topic, not over compress_over, which a
batch would send uncompressed); the rest take the one-message path.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from actors.client.default_mq_producer_impl import DefaultMQProducerImpl
from actors.client.errors import MQClientError
from actors.client.records import Message, SendResult

log = logging.getLogger(__name__)

MAX_INFLIGHT_REQUESTS: Final = 4  # per topic
MAX_BATCH_COUNT: Final = 512
MAX_BATCH_BYTES: Final = 1024 * 1024
ITEM_OVERHEAD: Final = 128  # a message's own fields and usual properties in a batch body
SIZE_HEADROOM: Final = 4096  # kept under max_message_size for longer properties

Done = Callable[[SendResult | None, MQClientError | None], None]
Item = tuple[Message, Done, float]  # the message, its callback, its deadline (monotonic s)


@dataclass(slots=True)
class _TopicBatch:
    """One topic's waiting messages and its requests in flight."""

    pending: list[Item] = field(default_factory=list)
    pending_bytes: int = 0
    inflight: int = 0

    def take(self, max_bytes: int) -> list[Item]:
        """The next batch (bounded by count and by bytes: MAX_BATCH_BYTES, and the producer's
        max_message_size, which the batch's body must not pass: over it, every message of
        the batch failed though each alone would have been sent)."""
        n, size = 0, 0
        for msg, _, _ in self.pending:
            size += len(msg.body) + ITEM_OVERHEAD
            if n and (n >= MAX_BATCH_COUNT or size > max_bytes):
                break
            n += 1
        batch, self.pending = self.pending[:n], self.pending[n:]
        self.pending_bytes -= sum(len(m.body) for m, _, _ in batch)
        return batch


class ProduceAccumulator:
    """Per-topic accumulation of one producer's async sends."""

    def __init__(self, impl: DefaultMQProducerImpl, release: Callable[[int], None]) -> None:
        self.impl = impl
        self.release = release  # a finished request's messages give back their in-flight slots
        self._topics: dict[str, _TopicBatch] = {}
        self._lock = threading.Lock()

    def batchable(self, msg: Message) -> bool:
        """True for a message the batch path sends as it would alone."""
        return (msg.delay_level == 0 and len(msg.body) <= self.impl.compress_over
                and not msg.topic.startswith("%RETRY%"))

    def _max_bytes(self) -> int:
        """The batch body's limit: MAX_BATCH_BYTES, within the producer's max_message_size."""
        return min(MAX_BATCH_BYTES, max(1, self.impl.max_message_size - SIZE_HEADROOM))

    def add(self, msg: Message, done: Done, timeout_ms: int | None) -> None:
        """Send msg now, or with the next batch of its topic; done(result, error) once."""
        timeout = self.impl.send_timeout_ms if timeout_ms is None else timeout_ms
        with self._lock:
            t = self._topics.get(msg.topic)
            if t is None:
                t = self._topics[msg.topic] = _TopicBatch()
            t.pending.append((msg, done, time.monotonic() + timeout / 1000.0))
            t.pending_bytes += len(msg.body)
            if t.inflight >= MAX_INFLIGHT_REQUESTS:
                return
            t.inflight += 1
            batch = t.take(self._max_bytes())
        self._send(t, batch)

    def _send(self, t: _TopicBatch, batch: list[Item]) -> None:
        impl = self.impl
        # each message waited with its own send timeout: the request gets the longest time any
        # of them has left (the first one's timeout reported a neighbour given more time as
        # timed out, though stored, and its caller then sent it twice)
        timeout_ms = max(1, int((max(d for _, _, d in batch) - time.monotonic()) * 1000))
        once = [True]

        def finished(result: SendResult | None, err: MQClientError | None) -> None:
            try:
                once.pop()  # atomic: a late answer racing its timeout reports once only
            except IndexError:
                return
            if len(batch) == 1:
                batch[0][1](result, err)
            elif err is not None or result is None:
                for _, done, _ in batch:
                    done(None, err)
            else:
                for item, r in zip(batch, split_batch_result(result), strict=True):
                    item[1](r, None)
            self.release(len(batch))
            with self._lock:
                nxt = t.take(self._max_bytes()) if t.pending else []
                if not nxt:
                    t.inflight -= 1
            if nxt:
                self._send(t, nxt)

        try:
            if len(batch) == 1:
                msg = batch[0][0]
                impl.send_async(impl.prepare(msg), finished, msg.flag, timeout_ms=timeout_ms)
            else:
                req = impl.prepare_batch([m for m, _, _ in batch], validated=True)
                impl.send_async(req, finished, 0, timeout_ms=timeout_ms)
        except MQClientError as exc:
            finished(None, exc)


_RESULT_FIELDS: Final = ("status", "msg_id", "offset_msg_id", "queue", "queue_offset",
                         "transaction_id", "region_id", "trace_on")


def _result_setters() -> tuple[Callable[[SendResult, object], None], ...]:
    """The slot setters of SendResult in _RESULT_FIELDS order (its frozen __init__ costs a
    setattr call per field: a batch answer builds one result per message)."""
    if tuple(SendResult.__dataclass_fields__) != _RESULT_FIELDS:
        raise RuntimeError("SendResult fields changed")
    return tuple(getattr(SendResult, n).__set__ for n in _RESULT_FIELDS)


(_S_STATUS, _S_MSG_ID, _S_OFFSET_ID, _S_QUEUE, _S_QOFF, _S_TX, _S_REGION,
 _S_TRACE) = _result_setters()


def split_batch_result(result: SendResult) -> list[SendResult]:
    """A batch's SendResult as one per message (ids split, offsets counted up)."""
    ids = result.msg_id.split(",")
    offset_ids = result.offset_msg_id.split(",") if result.offset_msg_id else []
    if len(offset_ids) != len(ids):
        offset_ids = [""] * len(ids)
    status, queue, first = result.status, result.queue, result.queue_offset
    tx, region, trace = result.transaction_id, result.region_id, result.trace_on
    new = object.__new__
    out: list[SendResult] = []
    for i, (mid, oid) in enumerate(zip(ids, offset_ids, strict=True)):
        r = new(SendResult)
        _S_STATUS(r, status)
        _S_MSG_ID(r, mid)
        _S_OFFSET_ID(r, oid)
        _S_QUEUE(r, queue)
        _S_QOFF(r, first + i)
        _S_TX(r, tx)
        _S_REGION(r, region)
        _S_TRACE(r, trace)
        out.append(r)
    return out
