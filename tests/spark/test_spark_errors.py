"""Bad options of the rocketmq source fail with a clear message before any Spark job runs."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from tests.spark.spark_helpers import AmqCluster, Producer, create_topic, wait_routable

pytestmark = [pytest.mark.spark, pytest.mark.integration]

TOPIC = "SparkErrors"


@pytest.fixture(scope="module")
def topic(amq: AmqCluster) -> str:
    create_topic(amq.brokers["broker-a"], TOPIC, 2)
    wait_routable(amq.ns, TOPIC, {"broker-a": 2})
    p = Producer("broker-a", amq.brokers["broker-a"])
    try:
        for i in range(4):
            p.send(TOPIC, i % 2, b"x")
    finally:
        p.close()
    return TOPIC


def _fails_before_any_job(spark: Any, opts: dict[str, str], *expect: str) -> str:
    """count() raises with every `expect` text in its message, and no Spark job started."""
    sc = spark.sparkContext
    group = f"bad-{abs(hash(json.dumps(opts, sort_keys=True)))}"
    sc.setJobGroup(group, "a read that must fail while planning")
    try:
        with pytest.raises(Exception) as info:
            spark.read.format("rocketmq").options(**opts).load().count()
    finally:
        sc.setJobGroup("", "")
    text = str(info.value)
    for e in expect:
        assert e in text, text[-3000:]
    assert list(sc.statusTracker().getJobIdsForGroup(group)) == []
    return text


def test_unknown_topic(spark: Any, amq: AmqCluster) -> None:
    _fails_before_any_job(spark, {"nameServer": amq.ns, "topic": "NoSuchTopicHere"},
                          "'NoSuchTopicHere' does not exist")  # fmt: skip


def test_malformed_offsets_json(spark: Any, amq: AmqCluster, topic: str) -> None:
    _fails_before_any_job(
        spark, {"nameServer": amq.ns, "topic": topic, "startingOffsets": '{"SparkErrors": {'},
        "startingOffsets is neither earliest, latest nor offsets JSON")
    _fails_before_any_job(
        spark, {"nameServer": amq.ns, "topic": topic,
                "endingOffsets": json.dumps({topic: {"broker-a": {"0": "ten"}}})},
        "endingOffsets: offset 'ten' of SparkErrors/broker-a/0 must be an integer")
    _fails_before_any_job(
        spark, {"nameServer": amq.ns, "topic": topic,
                "startingOffsets": json.dumps({topic: {"broker-z": {"0": 1}}})},
        "startingOffsets names SparkErrors/broker-z/0, but that broker does not exist")


def test_unreachable_name_server(spark: Any, topic: str) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    _fails_before_any_job(spark, {"nameServer": dead, "topic": topic},
                          "name server unreachable", dead)  # fmt: skip
    _fails_before_any_job(spark, {"nameServer": "nohost", "topic": topic},
                          "nameServer 'nohost' is not host:port")  # fmt: skip


def test_offsets_out_of_range(spark: Any, amq: AmqCluster, topic: str) -> None:
    beyond = json.dumps({topic: {"broker-a": {"0": 999}}})
    _fails_before_any_job(spark, {"nameServer": amq.ns, "topic": topic,
                                  "startingOffsets": beyond},
                          "startingOffsets 999 of SparkErrors/broker-a/0 is beyond the queue's "
                          "max offset 2", "failOnDataLoss=true")  # fmt: skip
    end = json.dumps({topic: {"broker-a": {"1": 50}}})
    _fails_before_any_job(spark, {"nameServer": amq.ns, "topic": topic, "endingOffsets": end},
                          "endingOffsets 50 of SparkErrors/broker-a/1 is beyond")
    # failOnDataLoss=false: the range is moved into what the queue holds, and read
    df = (spark.read.format("rocketmq").option("nameServer", amq.ns).option("topic", topic)
          .option("startingOffsets", beyond).option("failOnDataLoss", "false").load())
    assert df.count() == 2  # queue 0 starts at its max (nothing), queue 1 whole
