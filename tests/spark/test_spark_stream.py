"""Streaming reads of the rocketmq source: Trigger.AvailableNow with maxOffsetsPerTrigger, a
processing-time query stopped and restarted from its checkpoint while messages keep coming,
new queues and brokers picked up, a group's offsets committed on the brokers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from deploy.admin import main as admin_main
from deploy.spark.cli import main as spark_main
from tests.integration.e2e_helpers import wait_until
from tests.spark.spark_helpers import (
    AmqCluster,
    Producer,
    Sent,
    create_topic,
    wait_routable,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]

QUERY_TIMEOUT_S = 120.0


class KeyedSink:
    """A foreachBatch sink keyed by (broker, queue, offset), keeping each batch's keys."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, int, int], bytes] = {}
        self.batches: list[tuple[int, frozenset[tuple[str, int, int]]]] = []
        self.lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        got = df.select("brokerName", "queueId", "queueOffset", "body").collect()
        keys = frozenset((r.brokerName, r.queueId, r.queueOffset) for r in got)
        with self.lock:
            assert len(keys) == len(got), f"batch {batch_id} holds a row twice"
            self.batches.append((batch_id, keys))
            for r in got:
                self.rows[(r.brokerName, r.queueId, r.queueOffset)] = bytes(r.body)

    def count(self) -> int:
        with self.lock:
            return len(self.rows)

    def replays_identical(self) -> None:
        """A micro-batch run twice (after a restart) read exactly the same rows."""
        seen: dict[int, frozenset[Any]] = {}
        for batch_id, keys in self.batches:
            if batch_id in seen:
                assert seen[batch_id] == keys, f"batch {batch_id} replayed different rows"
            seen[batch_id] = keys


def _stream(spark: Any, amq: AmqCluster, topic: str, **opts: str) -> Any:
    return (spark.readStream.format("rocketmq").option("nameServer", amq.ns)
            .option("topic", topic).option("startingOffsets", "earliest").options(**opts)
            .load())  # fmt: skip


def _produce(amq: AmqCluster, topic: str, per_queue: dict[str, int], count: int,
             pause_s: float = 0.0, start: int = 0) -> list[Sent]:  # fmt: skip
    """count messages spread over the queues of each broker (broker -> queue count)."""
    producers = {b: Producer(b, amq.brokers[b]) for b in per_queue}
    targets = [(b, q) for b, n in sorted(per_queue.items()) for q in range(n)]
    sent = []
    try:
        for i in range(start, start + count):
            b, q = targets[i % len(targets)]
            sent.append(producers[b].send(topic, q, f"{topic}-{i}".encode(), tags="T"))
            if pause_s:
                time.sleep(pause_s)
    finally:
        for p in producers.values():
            p.close()
    return sent


def _wait(cond: Callable[[], bool], query: Any, what: str) -> None:
    def ok() -> bool:
        if query.exception() is not None:
            raise AssertionError(f"query failed: {query.exception()}")
        return cond()

    assert wait_until(ok, QUERY_TIMEOUT_S, 0.2), f"timed out waiting for {what}"


def test_available_now_with_max_offsets_per_trigger(spark: Any, amq: AmqCluster,
                                                    tmp_path: Any) -> None:
    topic = "SparkStreamA"
    for addr in amq.brokers.values():
        create_topic(addr, topic, 2)
    wait_routable(amq.ns, topic, {"broker-a": 2, "broker-b": 2})
    sent = _produce(amq, topic, {"broker-a": 2, "broker-b": 2}, 120)
    sink = KeyedSink()
    query = (_stream(spark, amq, topic, maxOffsetsPerTrigger="25").writeStream
             .foreachBatch(sink).option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())  # fmt: skip
    try:
        assert query.awaitTermination(QUERY_TIMEOUT_S), "AvailableNow did not finish"
        assert query.exception() is None
    finally:
        query.stop()
    assert {s.key: s.body for s in sent} == sink.rows
    sizes = [len(keys) for _b, keys in sink.batches if keys]
    assert max(sizes) <= 25 and len(sizes) >= 5, sizes  # 120 rows, at most 25 a batch


def test_restart_from_checkpoint_while_producing(spark: Any, amq: AmqCluster,
                                                 tmp_path: Any) -> None:
    topic = "SparkStreamB"
    layout = {"broker-a": 2, "broker-b": 2}
    for addr in amq.brokers.values():
        create_topic(addr, topic, 2)
    wait_routable(amq.ns, topic, layout)
    sent: list[Sent] = []
    producer = threading.Thread(
        target=lambda: sent.extend(_produce(amq, topic, layout, 400, pause_s=0.01)))
    sink = KeyedSink()
    ck = str(tmp_path / "ck")

    def start() -> Any:
        return (_stream(spark, amq, topic).writeStream.foreachBatch(sink)
                .option("checkpointLocation", ck).trigger(processingTime="200 milliseconds")
                .start())  # fmt: skip

    producer.start()
    try:
        query = start()
        try:
            _wait(lambda: sink.count() >= 60, query, "the first rows")
        finally:
            query.stop()
        stopped_at = sink.count()
        assert producer.is_alive(), "the producer finished before the restart: slow it down"
        query = start()
        try:
            producer.join(QUERY_TIMEOUT_S)
            _wait(lambda: sink.count() >= len(sent), query, "every message after the restart")
        finally:
            query.stop()
    finally:
        producer.join(QUERY_TIMEOUT_S)
    assert len(sent) == 400 and stopped_at < 400
    assert {s.key: s.body for s in sent} == sink.rows  # nothing lost, nothing extra
    sink.replays_identical()


def test_new_queues_and_brokers_and_group_offsets(spark: Any, amq: AmqCluster, tmp_path: Any,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    topic, group = "SparkStreamC", "spark-stream-c"
    create_topic(amq.brokers["broker-a"], topic, 2)
    wait_routable(amq.ns, topic, {"broker-a": 2})
    sent = _produce(amq, topic, {"broker-a": 2}, 10)
    sink = KeyedSink()
    query = (_stream(spark, amq, topic, groupId=group).writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(processingTime="200 milliseconds").start())  # fmt: skip
    try:
        _wait(lambda: sink.count() == 10, query, "the first 10")
        create_topic(amq.brokers["broker-a"], topic, 4)  # two more queues
        create_topic(amq.brokers["broker-b"], topic, 2)  # and a broker
        wait_routable(amq.ns, topic, {"broker-a": 4, "broker-b": 2})
        sent += _produce(amq, topic, {"broker-a": 4, "broker-b": 2}, 30, start=10)
        _wait(lambda: sink.count() == 40, query, "the rows of the new queues")
        assert {s.key: s.body for s in sent} == sink.rows

        def progress() -> str | None:  # the group shows in consumerProgress with no lag
            capsys.readouterr()
            assert admin_main(["consumerProgress", "-n", amq.ns, "-g", group]) == 0
            out = capsys.readouterr().out
            return out if "Diff Total: 0" in out and out.count(topic) == 6 else None

        out = wait_until(progress, 30.0, 0.3)
        assert out, "consumerProgress never showed the group caught up on 6 queues"
        assert spark_main(["list", "-n", amq.ns]) == 0
        listed = capsys.readouterr().out
        line = next(ln for ln in listed.splitlines() if ln.startswith(group))
        assert " stream " in line and topic in line and line.split()[-2] == "0", listed
    finally:
        query.stop()
