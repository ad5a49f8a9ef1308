"""The pull actor's re-pull gates (pull_flow_control.py): the estimate of the user's ProcessQueue
from its snapshots and the answers forwarded since, each of Java's gates, the consumer's budget
across its queues, and the pull-body scan against the full decoder."""

from __future__ import annotations

from actors.client.consumer.pull_flow_control import (
    MIB,
    PullChain,
    PullChains,
    PullLimits,
    scan_pull_body,
)
from protocol.message import MessageExt as WireExt
from protocol.message import decode_messages, encode_message_ext
from protocol.record import pack_host

NO_LIMIT = PullLimits(1000, 100, -1, -1, -1)


def chain(limits: PullLimits = NO_LIMIT, group: str = "g", seq: int = 0, count: int = 0,
          size: int = 0, first: int = -1) -> PullChain:
    return PullChain([0] * 14, group, seq, count, size, first, 0, limits, 0)


def test_scan_counts_records_bodies_and_offsets_like_the_decoder() -> None:
    recs = []
    for i in range(5):
        v6 = i == 3
        host = pack_host("::1", 9000) if v6 else pack_host("10.0.0.1", 9000)
        m = WireExt(topic="T", body=b"b" * (10 + i), properties={"K": "v"}, queue_id=1,
                    queue_offset=40 + i, sys_flag=0x30 if v6 else 0, born_host=host,
                    store_host=host)
        recs.append(encode_message_ext(m))
    body = b"".join(recs)
    count, size, first, last = scan_pull_body(memoryview(body))
    decoded = decode_messages(body)
    assert count == len(decoded) == 5
    assert (first, last) == (40, 44)
    assert size == sum(len(m.body) for m in decoded)  # IPv6 hosts too (protocol.record's walk)
    assert scan_pull_body(body[:-3]) == (4, size - 14, 40, 43)  # a cut record is not counted
    assert scan_pull_body(b"") == (0, 0, -1, -1)


def test_estimate_adds_forwarded_answers_until_a_snapshot_covers_them() -> None:
    c = chain(count=10, size=100, first=5, seq=3)
    c.found(32, 320, 15, 46)
    c.found(32, 320, 47, 78)
    assert c.seq == 5
    assert c.estimate() == (74, 740, 78 - 5)
    c.snapshot(4, 20, 200, 40, 41)  # the user put answer 4 and consumed some
    assert c.estimate() == (52, 520, 78 - 40)
    assert c.commit == 41
    c.snapshot(3, 99, 999, 0, 7)  # an older snapshot is ignored
    assert c.estimate() == (52, 520, 38)
    assert c.commit == 41
    c.snapshot(4, 20, 200, 40, 30)  # a reset offset goes back
    assert c.commit == 30
    c.snapshot(5, 0, 0, -1, 79)
    assert c.estimate() == (0, 0, 0)
    c.found(2, 20, 79, 80)
    assert c.estimate() == (2, 20, 1)  # nothing cached at the snapshot: span from the answer


def test_each_queue_gate_stops_the_chain_as_java_would() -> None:
    chains = PullChains()
    c = chain(PullLimits(64, 1, 100, -1, -1))
    chains.start(1, c)
    c.found(32, 1000, 0, 31)
    c.found(32, 1000, 32, 63)
    assert chains.may_repull(c)  # 64 cached: Java pulls while count <= threshold
    c.found(1, 10, 64, 64)
    assert not chains.may_repull(c)  # 65 > 64
    c.snapshot(3, 0, 0, -1, 65)
    assert chains.may_repull(c)
    c.found(1, 2 * MIB, 65, 65)
    assert not chains.may_repull(c)  # 2 MiB > 1 MiB
    c.snapshot(4, 1, 10, 65, 65)
    c.found(1, 10, 200, 200)
    assert not chains.may_repull(c)  # span 135 > consumeConcurrentlyMaxSpan 100
    chains.stop(1)
    assert c.stopped and not chains.may_repull(c)


def test_the_consumer_budget_counts_every_queue_of_the_group() -> None:
    chains = PullChains()
    lim = PullLimits(1000, 100, -1, 100, -1)
    a, b, other = chain(lim), chain(lim), chain(lim, group="h", count=500)
    for rid, c in enumerate((a, b, other), 1):
        chains.start(rid, c)
    a.found(50, 0, 0, 49)
    assert chains.may_repull(a)
    b.found(51, 0, 0, 50)
    assert not chains.may_repull(a) and not chains.may_repull(b)  # 101 > 100 in group g
    assert chains.may_repull(other) is False  # its own 500 > 100
    a.snapshot(1, 0, 0, -1, 50)
    assert chains.may_repull(b)
