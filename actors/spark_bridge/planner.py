"""Offset arithmetic of the Spark source: resolve, check, rate-limit and split queue ranges.

Mirrors Spark's kafka010 KafkaOffsetReader (earliest / latest / specific offsets resolved to
numbers), KafkaMicroBatchStream.rateLimit (maxOffsetsPerTrigger shared by backlog, small
queues never starved), KafkaOffsetRangeCalculator (minPartitions splits the largest ranges)
and KafkaSource's data-loss reporting, in RocketMQ's terms: a queue is (topic, brokerName,
queueId), offsets are consume-queue indexes, an end offset is exclusive (the next to read, as
a consumer offset is). Pure: the heads come in, ranges go out; no sockets, no clock.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from actors.spark_bridge.options import EARLIEST, LATEST, Offsets

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, order=True)
class QueueKey:
    """One message queue: MessageQueue(topic, brokerName, queueId)."""

    topic: str
    broker: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.broker}/{self.queue_id}"


@dataclass(frozen=True, slots=True)
class QueueHead:
    """A queue as its master broker reports it now."""

    key: QueueKey
    addr: str  # the master's host:port
    min_offset: int
    max_offset: int  # the next offset to be written


@dataclass(frozen=True, slots=True)
class QueueRange:
    """One Spark partition: queue offsets [start, end) read from the master at addr."""

    key: QueueKey
    addr: str
    start: int
    end: int

    def to_obj(self) -> dict[str, object]:
        """The JSON form the bridge answers."""
        k = self.key
        return {"topic": k.topic, "broker": k.broker, "queueId": k.queue_id,
                "addr": self.addr, "start": self.start, "end": self.end}  # fmt: skip

    @classmethod
    def from_obj(cls, o: Mapping[str, object]) -> QueueRange:
        """Read the JSON form back."""
        key = QueueKey(str(o["topic"]), str(o["broker"]), int(str(o["queueId"])))
        return cls(key, str(o["addr"]), int(str(o["start"])), int(str(o["end"])))


class PlanError(ValueError):
    """The request does not fit what the cluster has (an unknown broker or queue)."""


class DataLossError(Exception):
    """Requested offsets are gone or out of range, and failOnDataLoss is true."""


def flatten(offsets: Offsets) -> dict[QueueKey, int]:
    """{"t": {"b": {"0": 5}}} -> {QueueKey("t", "b", 0): 5}."""
    out: dict[QueueKey, int] = {}
    for topic, brokers in offsets.items():
        for broker, queues in brokers.items():
            for qid, off in queues.items():
                out[QueueKey(topic, broker, int(qid))] = int(off)
    return out


def nest(flat: Mapping[QueueKey, int]) -> Offsets:
    """The inverse of flatten, keys in sorted order (a stable JSON form)."""
    out: Offsets = {}
    for key in sorted(flat):
        out.setdefault(key.topic, {}).setdefault(key.broker, {})[str(key.queue_id)] = flat[key]
    return out


def check_names(spec: Offsets, heads: Mapping[QueueKey, QueueHead], option: str) -> None:
    """Every queue an offsets JSON names must exist (a typo must not read nothing quietly)."""
    brokers = {(k.topic, k.broker) for k in heads}
    for key in flatten(spec):
        if key not in heads:
            what = "queue" if (key.topic, key.broker) in brokers else "broker"
            known = sorted({k.broker for k in heads if k.topic == key.topic})
            raise PlanError(f"{option} names {key}, but that {what} does not exist "
                            f"(brokers of {key.topic}: {', '.join(known) or 'none'})")


def resolve(spec: str | Offsets, heads: Mapping[QueueKey, QueueHead], *, default: int,
            by_time: Mapping[QueueKey, int] | None = None) -> dict[QueueKey, int]:  # fmt: skip
    """Concrete offsets for every queue: by_time (a timestamp search) wins, then "earliest" /
    "latest" / the JSON's value (-2 min, -1 max); queues the JSON leaves out take `default`
    (EARLIEST or LATEST)."""
    named = flatten(spec) if isinstance(spec, dict) else {}
    symbol = {"earliest": EARLIEST, "latest": LATEST}.get(spec if isinstance(spec, str) else "")
    out: dict[QueueKey, int] = {}
    for key, head in heads.items():
        if by_time is not None and key in by_time:
            out[key] = by_time[key]
            continue
        value = named.get(key, symbol if symbol is not None else default)
        if value == EARLIEST:
            value = head.min_offset
        elif value == LATEST:
            value = head.max_offset
        out[key] = value
    return out


def check_start(key: QueueKey, start: int, head: QueueHead, fail_on_data_loss: bool,
                what: str) -> int:  # fmt: skip
    """The start to read `key` from: below the min (retention removed it) or beyond the max is
    data loss (DataLossError when failing, else moved into range with a warning)."""
    if start < head.min_offset:
        msg = (f"{what} {start} of {key} is below the queue's min offset {head.min_offset}: "
               f"{head.min_offset - start} message(s) were removed (retention) before they "
               "were read")  # fmt: skip
        if fail_on_data_loss:
            raise DataLossError(msg + " (failOnDataLoss=true; set it to false to skip them)")
        log.warning("%s; skipping them (failOnDataLoss=false)", msg)
        return head.min_offset
    if start > head.max_offset:
        msg = (f"{what} {start} of {key} is beyond the queue's max offset {head.max_offset} "
               f"(it holds [{head.min_offset}, {head.max_offset}))")
        if fail_on_data_loss:
            raise DataLossError(msg + " (failOnDataLoss=true)")
        log.warning("%s; reading from the max (failOnDataLoss=false)", msg)
        return head.max_offset
    return start


def check_end(key: QueueKey, end: int, head: QueueHead, fail_on_data_loss: bool) -> int:
    """A batch's end beyond the max is out of range (DataLossError when failing, else the max)."""
    if end > head.max_offset:
        msg = (f"endingOffsets {end} of {key} is beyond the queue's max offset "
               f"{head.max_offset}")
        if fail_on_data_loss:
            raise DataLossError(msg + " (failOnDataLoss=true)")
        log.warning("%s; reading to the max (failOnDataLoss=false)", msg)
        return head.max_offset
    return end


def rate_limit(start: Mapping[QueueKey, int], end: Mapping[QueueKey, int], limit: int
               ) -> dict[QueueKey, int]:  # fmt: skip
    """`limit` offsets over all queues, shared by backlog; a queue whose share is below one
    still gets one (KafkaMicroBatchStream.rateLimit), and what rounding down left over goes to
    the largest remainders, so a micro-batch is not followed by one of a few stray rows."""
    sizes = {k: e - start.get(k, e) for k, e in end.items() if e > start.get(k, e)}
    total = sum(sizes.values())
    out = dict(end)
    if total <= limit:
        return out
    remainders: list[tuple[float, QueueKey]] = []
    taken = 0
    for key, size in sizes.items():
        prorate = limit * size / total
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        if prorate >= 1:
            remainders.append((prorate - share, key))
        out[key] = start[key] + share
        taken += share
    remainders.sort(key=lambda rk: (-rk[0], rk[1]))
    for _, key in remainders[: max(limit - taken, 0)]:
        out[key] += 1
    return out


def split_ranges(ranges: Iterable[QueueRange], min_partitions: int | None, max_records: int
                 ) -> list[QueueRange]:  # fmt: skip
    """One partition per non-empty range, split so none exceeds max_records and, when fewer
    than min_partitions result, the large ones split by their share of the total
    (KafkaOffsetRangeCalculator)."""
    live = [r for r in ranges if r.end > r.start]
    total = sum(r.end - r.start for r in live)
    out: list[QueueRange] = []
    for r in sorted(live, key=lambda x: x.key):
        size = r.end - r.start
        parts = math.ceil(size / max_records)
        if min_partitions is not None and len(live) < min_partitions and total > 0:
            parts = max(parts, round(size / total * min_partitions), 1)
        parts = max(1, min(parts, size))
        step, extra = divmod(size, parts)
        pos = r.start
        for i in range(parts):
            nxt = pos + step + (1 if i < extra else 0)
            out.append(QueueRange(r.key, r.addr, pos, nxt))
            pos = nxt
    return out
