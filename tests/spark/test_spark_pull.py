"""The executors' read path alone (no Spark): pipelined pulls of a queue range from a real
broker, tag filtering, windows larger than the broker's 32-message cap, data loss."""

from __future__ import annotations

from typing import Any

import pytest

from deploy.spark.bridge_client import DataLossError
from deploy.spark.pull import PullRange, read_range
from tests.spark.spark_helpers import AmqCluster, Producer, create_topic, wait_routable

pytestmark = [pytest.mark.spark, pytest.mark.integration]

TOPIC = "SparkPull"


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
