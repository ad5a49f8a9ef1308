"""Benchmarks for the message codec (protocol/message.py) and a heartbeat body.

pytest tests/bench/test_bench_message.py --benchmark-enable      (pytest-benchmark table)
python -m tests.bench.test_bench_message                          (median and spread, records/s)
"""

from __future__ import annotations

import logging
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from protocol.bodies import HeartbeatData
from protocol.message import MessageExt, decode_messages, encode_message_ext
from protocol.message_batch import BatchItem, encode_batch, expand_batch
from protocol.message_client_id_setter import create_uniq_id
from protocol.record import pack_host

log = logging.getLogger(__name__)

N_MSGS = 32
BODY_SIZE = 1024
STORE = pack_host("192.168.1.10", 10911)
BORN = pack_host("10.0.0.5", 50000)


def make_message(i: int, body_size: int = BODY_SIZE) -> MessageExt:
    """Stored message number i, with a typical Java producer's properties."""
    props = {
        "UNIQ_KEY": create_uniq_id(),
        "CLUSTER": "DefaultCluster",
        "TAGS": "TagA",
        "KEYS": f"order-{i}",
        "WAIT": "true",
    }
    return MessageExt(
        topic="BenchTopic", body=bytes([i % 251]) * body_size, properties=props, queue_id=3,
        queue_offset=1000 + i, commit_log_offset=10_000_000 + i * 1200,
        born_timestamp=1_700_000_000_000 + i, born_host=BORN,
        store_timestamp=1_700_000_000_005 + i, store_host=STORE,
    )  # fmt: skip


def make_messages(n: int = N_MSGS) -> list[MessageExt]:
    """n stored messages (1 KiB bodies)."""
    return [make_message(i) for i in range(n)]


def make_pull_body() -> bytes:
    """A 32 x 1 KiB pull response body."""
    return b"".join(encode_message_ext(m) for m in make_messages())


PULL_BODY = make_pull_body()
HEARTBEAT = HeartbeatData.from_json(
    b'{"clientID":"192.168.1.5@4242#1234567890","consumerDataSet":[{"consumeFromWhere":'
    b'"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg1",'
    b'"messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,'
    b'"codeSet":[2598919],"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,'
    b'"tagsSet":["TagA"],"topic":"TopicTest"}],"unitMode":false}],"producerDataSet":[]}'
).to_json()


def decode_pull() -> list[MessageExt]:
    """Decode the pull body (properties and ids stay lazy)."""
    return decode_messages(PULL_BODY)


def decode_pull_touch() -> list[MessageExt]:
    """Decode and read what a consumer reads: msg_id, tags, body."""
    msgs = decode_messages(PULL_BODY)
    for m in msgs:
        _ = (m.msg_id, m.tags, m.body)
    return msgs


_MSGS = make_messages()


def encode_decode_pull() -> list[MessageExt]:
    """Encode 32 messages into a pull body and decode it again."""
    return decode_messages(b"".join([encode_message_ext(m) for m in _MSGS]))


_BATCH = encode_batch(
    [BatchItem(0, m.body, {"UNIQ_KEY": m.properties["UNIQ_KEY"], "TAGS": "TagA"}) for m in _MSGS]
)


def expand_send_batch() -> int:
    """Broker-side expansion of a 32-item send batch."""
    return len(expand_batch(_BATCH, "WAIT\x01true\x02CLUSTER\x01DefaultCluster"))


def heartbeat_parse() -> HeartbeatData:
    """Parse a one-subscription consumer heartbeat body."""
    return HeartbeatData.from_json(HEARTBEAT)


def test_bench_decode_pull_body(benchmark: Any) -> None:
    msgs = benchmark(decode_pull)
    assert len(msgs) == N_MSGS and msgs[-1].queue_offset == 1000 + N_MSGS - 1


def test_bench_decode_pull_body_touch(benchmark: Any) -> None:
    msgs = benchmark(decode_pull_touch)
    assert len(msgs) == N_MSGS and msgs[0].tags == "TagA"


def test_bench_encode_decode_pull_body(benchmark: Any) -> None:
    msgs = benchmark(encode_decode_pull)
    assert [m.properties for m in msgs] == [m.properties for m in _MSGS]
    assert [m.body for m in msgs] == [m.body for m in _MSGS]


def test_bench_expand_batch(benchmark: Any) -> None:
    assert benchmark(expand_send_batch) == N_MSGS


def test_bench_heartbeat_parse(benchmark: Any) -> None:
    assert benchmark(heartbeat_parse).consumer_data_set[0].group_name == "cg1"


def _measure(fn: Callable[[], object], rounds: int, inner: int) -> list[float]:
    """Seconds per call, one sample per round (each round averages `inner` calls)."""
    fn()
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return samples


def main(rounds: int = 15, inner: int = 200) -> None:
    """Print median and spread (min-max of per-round rates) for each benchmark."""
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    cases: list[tuple[str, Callable[[], object], int, str]] = [
        ("decode_messages 32 x 1 KiB", decode_pull, N_MSGS, "records/s"),
        ("decode + msg_id/tags/body", decode_pull_touch, N_MSGS, "records/s"),
        ("encode + decode 32 x 1 KiB", encode_decode_pull, N_MSGS, "records/s"),
        ("expand_batch 32 items", expand_send_batch, N_MSGS, "items/s"),
        ("HeartbeatData.from_json", heartbeat_parse, 1, "bodies/s"),
    ]
    for name, fn, per_call, unit in cases:
        rates = sorted(per_call / s for s in _measure(fn, rounds, inner))
        log.info(
            "%-28s median %10.0f %s  (min %.0f, max %.0f, %d rounds x %d calls)",
            name, statistics.median(rates), unit, rates[0], rates[-1], rounds, inner,
        )  # fmt: skip


if __name__ == "__main__":
    main()
