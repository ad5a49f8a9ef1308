"""Batch reads of the rocketmq source: exact offset ranges over two brokers, every column,
compressed bodies, unicode properties, tag filters, time ranges, partition splitting."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.spark.spark_helpers import (
    AmqCluster,
    Producer,
    Sent,
    assert_row_is,
    create_topic,
    row_dict,
    wait_routable,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]

TOPIC = "SparkBatch"
PER_QUEUE = 6
BIG = ("grüße " * 2000).encode()  # 14 KB: sent zlib-compressed, must come back inflated


@pytest.fixture(scope="module")
def stored(amq: AmqCluster) -> dict[tuple[str, int, int], Sent]:
    """PER_QUEUE messages in each of 2 queues on broker-a and broker-b."""
    for addr in amq.brokers.values():
        create_topic(addr, TOPIC, 2)
    wait_routable(amq.ns, TOPIC, {"broker-a": 2, "broker-b": 2})
    out = {}
    for broker, addr in amq.brokers.items():
        p = Producer(broker, addr)
        try:
            for qid in range(2):
                for i in range(PER_QUEUE):
                    if i == 0:
                        s = p.send(TOPIC, qid, f"{broker}-{qid}-first".encode(), tags="TagA",
                                   keys="k0 k0b", props={"ünï": "cödé ✓ 日本", "x": "y"})
                    elif i == 1:
                        s = p.send(TOPIC, qid, BIG, tags="TagZ", compress=True)
                    elif i == 2:
                        s = p.send(TOPIC, qid, b"")  # no tags, no keys, empty body
                    else:
                        s = p.send(TOPIC, qid, bytes([i]) * 100, tags="TagB", keys=f"k{i}")
                    out[s.key] = s
        finally:
            p.close()
    return out


def _read(spark: Any, amq: AmqCluster, **opts: str) -> list[dict[str, Any]]:
    df = (spark.read.format("rocketmq").option("nameServer", amq.ns).option("topic", TOPIC)
          .options(**opts).load())  # fmt: skip
    return [row_dict(r) for r in df.collect()]


def test_exact_offset_ranges_every_column(spark: Any, amq: AmqCluster,
                                          stored: dict[tuple[str, int, int], Sent]) -> None:
    start = {TOPIC: {"broker-a": {"0": 1, "1": 2}, "broker-b": {"0": 0, "1": 3}}}
    end = {TOPIC: {"broker-a": {"0": 4, "1": 6}, "broker-b": {"0": 2, "1": 5}}}
    rows = _read(spark, amq, startingOffsets=json.dumps(start), endingOffsets=json.dumps(end))
    want = {(b, int(q), o) for b, qs in start[TOPIC].items() for q, s in qs.items()
            for o in range(s, end[TOPIC][b][q])}  # fmt: skip
    got = sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in rows)
    assert got == sorted(want)  # exactly those, each once
    for r in rows:
        assert_row_is(r, stored[(r["brokerName"], r["queueId"], r["queueOffset"])])
    assert any(r["body"] == BIG for r in rows)  # the compressed ones, inflated
    assert any(r["properties"].get("ünï") == "cödé ✓ 日本" for r in rows)


def test_default_range_is_everything_and_latest_json_means_the_end(
        spark: Any, amq: AmqCluster, stored: dict[tuple[str, int, int], Sent]) -> None:
    rows = _read(spark, amq)
    assert sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in rows) == sorted(
        stored)  # fmt: skip
    end = {TOPIC: {"broker-b": {"1": -1}}}  # -1: latest; queues not named: latest too
    start = {TOPIC: {"broker-a": {"0": -2, "1": 5}}}  # -2: earliest; others: earliest
    rows = _read(spark, amq, startingOffsets=json.dumps(start), endingOffsets=json.dumps(end))
    assert len(rows) == len(stored) - 5


def test_tag_filter_checked_on_the_client(spark: Any, amq: AmqCluster,
                                          stored: dict[tuple[str, int, int], Sent]) -> None:
    rows = _read(spark, amq, subExpression="TagA || TagZ")
    want = sorted(k for k, s in stored.items() if s.tags in ("TagA", "TagZ"))
    assert sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in rows) == want


def test_time_range_is_exact(spark: Any, amq: AmqCluster,
                             stored: dict[tuple[str, int, int], Sent]) -> None:
    rows = sorted(_read(spark, amq), key=lambda r: r["storeTimestamp"])
    times = [r["storeTimestamp"] for r in rows]
    lo = times[len(times) // 4]
    hi = times[3 * len(times) // 4]
    if hi == lo:
        hi = lo + 1
    got = _read(spark, amq, startingTimestamp=str(lo), endingTimestamp=str(hi))
    want = sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in rows
                  if lo <= r["storeTimestamp"] < hi)  # fmt: skip
    assert want
    assert sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in got) == want


def test_partitions_split_by_size_and_min_partitions(spark: Any, amq: AmqCluster,
                                                     stored: dict[Any, Sent]) -> None:
    base = spark.read.format("rocketmq").option("nameServer", amq.ns).option("topic", TOPIC)
    assert base.load().rdd.getNumPartitions() == 4  # one per queue
    split = base.option("maxRecordsPerPartition", "4").load()
    assert split.rdd.getNumPartitions() == 8  # each queue of 6 in two
    assert split.count() == len(stored)
    wide = base.option("minPartitions", "12").load()
    assert wide.rdd.getNumPartitions() == 12
    assert sorted(r.queueOffset for r in wide.select("queueOffset").collect()) == sorted(
        k[2] for k in stored)  # fmt: skip
