"""The executors' read path alone (no Spark): pipelined pulls of a queue range from a real
broker, tag filtering, windows larger than the broker's 32-message cap, data loss, answers
that fill the connection's arena, answers taken out of order."""

from __future__ import annotations

from typing import Any

import pytest

from actors.client.client_requests import PullRequestTemplate
from deploy.spark.bridge_client import DataLossError
from deploy.spark.pull import PullRange, _header, read_range
from deploy.spark.pull_connection import ARENA_BYTES, PullConnection
from deploy.wire import parse_addr
from protocol.message import decode_messages
from tests.spark.spark_helpers import AmqCluster, Producer, create_topic, wait_routable

pytestmark = [pytest.mark.spark, pytest.mark.integration]

TOPIC = "SparkPull"
BIG = "SparkPullBig"
BIG_BODY = 64 * 1024
BIG_COUNT = 300  # ~19 MiB: more than one arena


@pytest.fixture(scope="module")
def broker(amq: AmqCluster) -> str:
    addr = amq.brokers["broker-a"]
    create_topic(addr, TOPIC, 1)
    wait_routable(amq.ns, TOPIC, {"broker-a": 1})
    p = Producer("broker-a", addr)
    try:
        for i in range(300):
            p.send(TOPIC, 0, f"m{i}".encode(), tags="Y" if i % 50 == 7 else "N")
    finally:
        p.close()
    return addr


@pytest.fixture(scope="module")
def big(amq: AmqCluster) -> str:
    addr = amq.brokers["broker-a"]
    create_topic(addr, BIG, 1)
    wait_routable(amq.ns, BIG, {"broker-a": 1})
    p = Producer("broker-a", addr)
    try:
        for i in range(BIG_COUNT):
            p.send(BIG, 0, bytes([i % 251]) * BIG_BODY)
    finally:
        p.close()
    return addr


def _range(addr: str, start: int, end: int, **kw: Any) -> PullRange:
    base = {"topic": TOPIC, "broker": "broker-a", "queue_id": 0, "addr": addr, "start": start,
            "end": end, "group": "spark-pull-test", "sub_expression": "*", "tags": None,
            "batch_size": 32, "timeout_ms": 10_000, "fail_on_data_loss": True}
    base.update(kw)
    return PullRange(**base)


def _offsets(r: PullRange) -> list[int]:
    return [o for b in read_range(r) for o in b.column("queueOffset").to_pylist()]


def test_whole_range_in_order_with_large_windows(broker: str) -> None:
    assert _offsets(_range(broker, 0, 300)) == list(range(300))
    assert _offsets(_range(broker, 17, 263, batch_size=100)) == list(range(17, 263))
    assert _offsets(_range(broker, 5, 5)) == []


def test_tag_filter_skips_most_of_the_queue(broker: str) -> None:
    got = _offsets(_range(broker, 0, 300, sub_expression="Y", tags=frozenset({"Y"})))
    assert got == [i for i in range(300) if i % 50 == 7]


def test_range_past_the_end_is_data_loss(broker: str) -> None:
    with pytest.raises(DataLossError, match="now ends at 300"):
        _offsets(_range(broker, 290, 320))
    assert _offsets(_range(broker, 290, 320, fail_on_data_loss=False)) == list(range(290, 300))


def test_answers_larger_than_the_arena_end_batches_early(big: str) -> None:
    batches = list(read_range(_range(big, 0, BIG_COUNT, topic=BIG)))
    assert len(batches) >= BIG_COUNT * BIG_BODY // ARENA_BYTES + 1  # ended by the arena
    rows = [r for b in batches for r in b.select(["queueOffset", "body"]).to_pylist()]
    assert [r["queueOffset"] for r in rows] == list(range(BIG_COUNT))
    assert all(r["body"] == bytes([i % 251]) * BIG_BODY for i, r in enumerate(rows))


def test_connection_holds_answers_read_ahead_and_grows(broker: str) -> None:
    r = _range(broker, 0, 300)
    conn = PullConnection(parse_addr(broker), PullRequestTemplate(_header(r)), arena_bytes=64)
    try:
        first, second, third = conn.send([(0, 10), (10, 10), (20, 10)])
        assert conn.answer(third, 10.0) is None  # 64 bytes hold no answer
        conn.reclaim()
        got = conn.answer(third, 10.0)
        while got is None:  # grown to the next answer's size, the ones before it kept
            conn.reclaim()
            got = conn.answer(third, 10.0)
        answers = {third: got}
        conn.reclaim(1024)  # moves the answers read ahead; their bytes stay theirs
        for q in (second, first):
            a = conn.answer(q, 10.0)
            assert a is not None
            answers[q] = a
        for q, lo in ((first, 0), (second, 10), (third, 20)):
            a = answers[q]
            assert a.cmd.code == 0 and a.cmd.ext_fields["nextBeginOffset"] == str(lo + 10)
            if q != third:  # (the third's bytes were moved by reclaim)
                got_offsets = [m.queue_offset for m in decode_messages(conn.view[a.lo:a.hi])]
                assert got_offsets == list(range(lo, lo + 10))
    finally:
        conn.close()
