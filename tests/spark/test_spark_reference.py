"""The rocketmq source reads any RocketMQ 4.x cluster: the reference Apache RocketMQ 4.9.8 with
a SparkBridge started on its own beside it (`actormq spark bridge -n`), found by Spark through
the name server's KV entry, batch and streaming, the group's offsets on the Java broker."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from deploy.wire import BlockingClient
from protocol.codes import RequestCode
from protocol.command import RemotingCommand
from tests.integration.conftest import MarkedProcess
from tests.spark.spark_helpers import (
    Producer,
    assert_row_is,
    create_topic,
    row_dict,
    wait_routable,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]

TOPIC = "SparkOnJava"


def test_batch_and_stream_against_the_reference_broker(spark: Any, reference_cluster: Any,
                                                       tmp_path: Path) -> None:
    ns, broker = reference_cluster.namesrv_addr(), reference_cluster.broker_addr()
    bridge = MarkedProcess([sys.executable, "-m", "deploy", "spark", "bridge", "-n", ns,
                            "-p", "0", "--data", str(tmp_path / "bridge")],
                           tmp_path / "bridge", os.getcwd())  # fmt: skip
    try:
        bridge.wait_for("spark bridge listening on 127.0.0.1:", 60.0)
        create_topic(broker, TOPIC, 2)
        wait_routable(ns, TOPIC, {"broker-a": 2})
        p = Producer("broker-a", broker)
        try:
            sent = [p.send(TOPIC, i % 2, f"java-{i}".encode() * (600 if i == 3 else 1),
                           tags=f"J{i % 2}", keys=f"jk{i}", props={"ключ": "значение"},
                           compress=i == 3)
                    for i in range(12)]  # fmt: skip
        finally:
            p.close()
        by_key = {s.key: s for s in sent}

        # batch: only nameServer and topic (the bridge is found through the name server)
        df = spark.read.format("rocketmq").option("nameServer", ns).option("topic", TOPIC).load()
        rows = [row_dict(r) for r in df.collect()]
        assert sorted((r["brokerName"], r["queueId"], r["queueOffset"]) for r in rows) == sorted(
            by_key)  # fmt: skip
        for r in rows:
            assert_row_is(r, by_key[(r["brokerName"], r["queueId"], r["queueOffset"])])

        # streaming, with a group whose offsets land on the Java broker
        got: list[Any] = []
        query = (spark.readStream.format("rocketmq").option("nameServer", ns)
                 .option("topic", TOPIC).option("startingOffsets", "earliest")
                 .option("subExpression", "J1").option("groupId", "spark-on-java").load()
                 .writeStream.foreachBatch(lambda d, _b: got.extend(d.collect()))
                 .option("checkpointLocation", str(tmp_path / "ck"))
                 .trigger(availableNow=True).start())  # fmt: skip
        try:
            assert query.awaitTermination(120), "AvailableNow did not finish"
            assert query.exception() is None
        finally:
            query.stop()
        assert sorted(r.queueOffset for r in got if r.queueId == 1) == list(range(6))
        assert {r.tags for r in got} == {"J1"}
        with BlockingClient(broker) as cl:
            for qid in (0, 1):
                r = cl.invoke(RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, {
                    "consumerGroup": "spark-on-java", "topic": TOPIC, "queueId": str(qid)}),
                    10.0)  # fmt: skip
                assert r.code == 0 and r.ext_fields["offset"] == "6", (qid, r.code, r.remark)
    finally:
        assert bridge.stop() == 0
