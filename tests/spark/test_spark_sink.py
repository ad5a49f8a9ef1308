"""The rocketmq sink: rows written by a batch and by a streaming query come back from the
source as they were written; a replayed micro-batch sends the same msgIds again."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from deploy.spark.writer import row_key
from tests.integration.e2e_helpers import wait_until
from tests.spark.spark_helpers import (
    AmqCluster,
    Producer,
    create_topic,
    row_dict,
    stored_count,
    wait_routable,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _read_all(spark: Any, amq: AmqCluster, topic: str) -> list[dict[str, Any]]:
    df = spark.read.format("rocketmq").option("nameServer", amq.ns).option("topic", topic)
    return [row_dict(r) for r in df.load().collect()]


def test_batch_write_round_trip(spark: Any, amq: AmqCluster) -> None:
    topic = "SparkSinkBatch"
    for addr in amq.brokers.values():
        create_topic(addr, topic, 2)
    wait_routable(amq.ns, topic, {"broker-a": 2, "broker-b": 2})
    rows = [(f"plain-{i}".encode(), f"T{i % 3}", [f"k{i}", "shared"],
             {"ü": f"wert-{i}", "tags": "x"}, None, 0) for i in range(40)]  # fmt: skip
    rows += [(b"later", "D", None, None, None, 1)]  # delay level 1: delivered after ~1 s
    ordered_rows = [(f"ordered-{i}".encode(), "O", None, None, "order-7", 0) for i in range(10)]
    schema = ("body BINARY, tags STRING, keys ARRAY<STRING>, properties MAP<STRING,STRING>, "
              "shardingKey STRING, delayLevel INT")
    started = time.time()
    for df in (spark.createDataFrame(rows, schema).repartition(3),
               spark.createDataFrame(ordered_rows, schema).coalesce(1)):  # one task: in order
        df.write.format("rocketmq").option("nameServer", amq.ns).option("topic", topic) \
            .mode("append").save()

    assert wait_until(lambda: stored_count(amq, topic) >= 51, 30.0, 0.2), \
        "the written rows (and the delayed one) never all arrived"
    got = _read_all(spark, amq, topic)
    by_body = {r["body"]: r for r in got}
    assert len(by_body) == 51
    for i in range(40):
        r = by_body[f"plain-{i}".encode()]
        assert r["tags"] == f"T{i % 3}" and r["keys"] == f"k{i} shared"
        assert r["properties"]["ü"] == f"wert-{i}"
        assert r["properties"]["TAGS"] == f"T{i % 3}" and r["properties"]["tags"] == "x"
        assert len(r["msgId"]) == 32 and r["msgId"] == r["properties"]["UNIQ_KEY"]
    ordered = sorted((r for r in got if r["tags"] == "O"), key=lambda r: r["queueOffset"])
    assert len({(r["brokerName"], r["queueId"]) for r in ordered}) == 1  # one queue
    assert [r["body"] for r in ordered] == [f"ordered-{i}".encode() for i in range(10)]
    later = by_body[b"later"]
    assert later["storeTimestamp"] / 1000 >= started + 0.5  # re-put by the delay service
    assert len({r["msgId"] for r in got}) == 51


def test_batch_write_needs_body_and_topic(spark: Any, amq: AmqCluster) -> None:
    df = spark.createDataFrame([("x",)], "value STRING")
    with pytest.raises(Exception, match="needs a `body` column"):
        df.write.format("rocketmq").option("nameServer", amq.ns).option("topic", "T") \
            .mode("append").save()
    df = spark.createDataFrame([("x",)], "body STRING")
    with pytest.raises(Exception, match="needs a `topic` option or a `topic` column"):
        df.write.format("rocketmq").option("nameServer", amq.ns).mode("append").save()


def test_batch_write_refuses_bad_properties(spark: Any, amq: AmqCluster) -> None:
    """A system property name, a null or blank value, \\x01 / \\x02 in a property, the tags
    or the keys: the write fails naming the row and the property, and nothing is stored
    (issue #20 item 4: a TAGS property was dropped, a value cut at \\x02)."""
    topic = "SparkSinkBadProps"
    create_topic(amq.brokers["broker-a"], topic, 1)
    wait_routable(amq.ns, topic, {"broker-a": 1})
    schema = "body STRING, tags STRING, keys ARRAY<STRING>, properties MAP<STRING,STRING>"
    good = ("good", "T", ["k"], {"p": "v"})
    for bad, text in [
        (("bad", "T", None, {"TRAN_MSG": "true"}), r"The Property<TRAN_MSG> is used by system"),
        (("bad", "T", None, {"UNIQ_KEY": "X"}), r"The Property<UNIQ_KEY> is used by system"),
        (("bad", "T", None, {"p": "v\x02TAGS\x01Injected"}), r"Property<'p'> .* holds"),
        (("bad", "T", None, {"p": None}), r"can not be null or blank string.*Property<'p'>"),
        (("bad", "T", None, {"p": " "}), r"can not be null or blank string"),
        (("bad", "T\x01x", None, None), r"the tags 'T\\x01x' hold"),
        (("bad", "T", ["k\x02"], None), r"the keys 'k\\x02' hold"),
    ]:  # fmt: skip
        df = spark.createDataFrame([good, bad, good], schema).coalesce(1)
        with pytest.raises(Exception, match=r"row 1 of partition 0: .*" + text):
            df.write.format("rocketmq").option("nameServer", amq.ns).option("topic", topic) \
                .mode("append").save()
    assert stored_count(amq, topic) == 0  # the bad row stopped its task before any send


def test_streaming_write_round_trip_and_replay_keeps_msg_ids(spark: Any, amq: AmqCluster,
                                                             tmp_path: Path) -> None:
    src, dst = "SparkSinkSrc", "SparkSinkDst"
    create_topic(amq.brokers["broker-a"], src, 2)
    create_topic(amq.brokers["broker-b"], dst, 2)
    wait_routable(amq.ns, src, {"broker-a": 2})
    wait_routable(amq.ns, dst, {"broker-b": 2})
    p = Producer("broker-a", amq.brokers["broker-a"])
    try:
        bodies = [f"s-{i}".encode() for i in range(30)]
        for i, b in enumerate(bodies):
            p.send(src, i % 2, b, tags="ST", keys=f"sk{i}")
    finally:
        p.close()
    ck = tmp_path / "ck"

    def run() -> None:
        q = (spark.readStream.format("rocketmq").option("nameServer", amq.ns)
             .option("topic", src).option("startingOffsets", "earliest").load()
             .selectExpr("body", "tags", "keys", "'rocketmq' AS source")
             .writeStream.format("rocketmq").option("nameServer", amq.ns).option("topic", dst)
             .option("checkpointLocation", str(ck)).trigger(availableNow=True).start())
        try:
            assert q.awaitTermination(120), "AvailableNow did not finish"
            assert q.exception() is None
        finally:
            q.stop()

    run()
    first = _read_all(spark, amq, dst)
    assert sorted(r["body"] for r in first) == sorted(bodies)
    assert all(r["tags"] == "ST" for r in first)
    # forget that the last micro-batch was committed: the restart runs it again, and its rows
    # go out a second time with the same msgIds (deduplicated by msgId they are the source)
    commits = sorted((f for f in (ck / "commits").iterdir() if f.name.isdigit()),
                     key=lambda f: int(f.name))  # fmt: skip
    last = commits[-1]
    last.unlink()
    (ck / "commits" / f".{last.name}.crc").unlink(missing_ok=True)
    run()
    second = _read_all(spark, amq, dst)
    assert len(second) > len(first)
    unique = {r["msgId"]: r["body"] for r in second}
    assert sorted(unique.values()) == sorted(bodies)


def test_row_key_is_deterministic() -> None:
    a = row_key("query-1", "7", 2, 41)
    assert a == row_key("query-1", "7", 2, 41)
    assert len({a, row_key("query-1", "7", 2, 42), row_key("query-1", "8", 2, 41),
                row_key("query-2", "7", 2, 41), row_key("query-1", "7", 3, 41)}) == 5
    assert len(a) == 32 and a == a.upper() and int(a, 16) >= 0
