"""ProduceAccumulator: the split of a batch answer into one SendResult per message, and the
batches it makes (size, timeout) and completes (once)."""

from __future__ import annotations

from typing import Any

from actors.client.errors import ClientErrorCode, MQClientError
from actors.client.produce_accumulator import (
    MAX_INFLIGHT_REQUESTS,
    SIZE_HEADROOM,
    ProduceAccumulator,
    split_batch_result,
)
from actors.client.records import Message, SendResult, SendStatus
from protocol.bodies import MessageQueue

MQ = MessageQueue("Orders", "broker-a", 2)
TIMEOUT = MQClientError(ClientErrorCode.REQUEST_TIMEOUT_EXCEPTION, "timed out")


def test_split_batch_result_gives_each_message_its_ids_and_offset() -> None:
    batch = SendResult(SendStatus.FLUSH_DISK_TIMEOUT, "u0,u1,u2", "o0,o1,o2", MQ, 40,
                       region_id="r1", trace_on=False)
    parts = split_batch_result(batch)
    assert parts == [SendResult(SendStatus.FLUSH_DISK_TIMEOUT, f"u{i}", f"o{i}", MQ, 40 + i,
                                region_id="r1", trace_on=False) for i in range(3)]
    assert len({hash(p) for p in parts}) == 3 and parts[1].ok is False
    short = split_batch_result(SendResult(SendStatus.SEND_OK, "a,b", "x", MQ, 7))
    assert [(p.msg_id, p.offset_msg_id, p.queue_offset) for p in short] == \
        [("a", "", 7), ("b", "", 8)]  # fmt: skip


class _Impl:
    """What the accumulator needs of DefaultMQProducerImpl; requests are kept, not sent."""

    send_timeout_ms = 3000
    compress_over = 1 << 20

    def __init__(self, max_message_size: int) -> None:
        self.max_message_size = max_message_size
        self.sent: list[tuple[list[Message], Any, int | None]] = []

    def prepare(self, msg: Message) -> list[Message]:
        return [msg]

    def prepare_batch(self, msgs: list[Message], validated: bool = False) -> list[Message]:
        assert sum(len(m.body) for m in msgs) <= self.max_message_size
        return msgs

    def send_async(self, req: list[Message], done: Any, flag: int = 0, *,
                   timeout_ms: int | None = None) -> None:  # fmt: skip
        self.sent.append((req, done, timeout_ms))


def _busy(max_message_size: int) -> tuple[_Impl, ProduceAccumulator, list[Any], list[int]]:
    """An accumulator whose topic has its MAX_INFLIGHT_REQUESTS requests out."""
    impl = _Impl(max_message_size)
    released: list[int] = []
    acc = ProduceAccumulator(impl, released.append)  # type: ignore[arg-type]
    results: list[Any] = []
    for i in range(MAX_INFLIGHT_REQUESTS):
        acc.add(Message("T", b"first%d" % i), lambda r, e: results.append((r, e)), None)
    assert len(impl.sent) == MAX_INFLIGHT_REQUESTS
    return impl, acc, results, released


def test_a_batch_stays_under_the_producers_max_message_size() -> None:
    impl, acc, _results, _released = _busy(64 * 1024)
    for _ in range(60):  # 240 KiB waiting; a batch of them must fit 64 KiB
        acc.add(Message("T", bytes(4096)), lambda r, e: None, None)
    impl.sent[0][1](None, TIMEOUT)  # one request answered: the waiting ones go
    batch = impl.sent[-1][0]
    assert len(batch) > 1 and sum(len(m.body) for m in batch) <= 64 * 1024 - SIZE_HEADROOM


def test_a_batch_gets_the_longest_time_its_messages_have_left() -> None:
    impl, acc, _results, _released = _busy(4 << 20)
    acc.add(Message("T", b"short"), lambda r, e: None, 100)
    acc.add(Message("T", b"long"), lambda r, e: None, 10_000)
    impl.sent[0][1](None, TIMEOUT)
    req, _done, timeout_ms = impl.sent[-1]
    assert [bytes(m.body) for m in req] == [b"short", b"long"]
    assert timeout_ms is not None and 9_000 < timeout_ms <= 10_000


def test_an_answer_reported_twice_completes_its_messages_once() -> None:
    """A late answer racing its timeout: the callbacks and the budget's release run once."""
    impl, _acc, results, released = _busy(4 << 20)
    done = impl.sent[0][1]
    done(None, TIMEOUT)
    done(None, TIMEOUT)
    assert len(results) == 1 and released == [1]
