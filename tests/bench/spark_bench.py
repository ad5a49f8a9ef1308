"""Spark bridge benchmark: `python -m tests.bench.spark_bench [--runs 3] [--messages 1000000]`.

An actormq cluster (name server, one broker, 8 queues, a SparkBridge) and a local[2] Spark:
W  (reported) N 1 KiB messages written by the rocketmq sink (the load of the topic).
R1 batch read of the N messages into df.count(), rows/s, against a trivial in-memory Python
   Data Source producing the same rows (tuples) in the same run: the ratio (goal >= 0.4x).
   Also against the in-memory source yielding Arrow batches (the ceiling of a Python source).
R2 the same read into a Parquet write, against the in-memory source into a Parquet write.
S  a streaming query, Trigger.AvailableNow with maxOffsetsPerTrigger 100,000, over the N
   messages into the noop sink: rows/s; per micro-batch the driver's planning time
   (latestOffset + queryPlanning of the query's progress) and the bridge's own two round trips
   (SPARK_LATEST_OFFSET + SPARK_PLAN_PARTITIONS, timed from the driver).
Each figure is the median (min-max) of --runs runs; each ratio is taken within one run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

TOPIC = "SparkBench"
QUEUES = 8
BODY_SIZE = 1024


def _memory_source() -> Any:
    """A trivial in-memory Python Data Source with the rocketmq schema (tuples or Arrow)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from deploy.spark.schema import SCHEMA_DDL

    class MemoryReader(DataSourceReader):
        def __init__(self, rows: int, parts: int, arrow: bool) -> None:
            self.rows, self.parts, self.arrow = rows, parts, arrow

        def partitions(self) -> list[InputPartition]:
            step = self.rows // self.parts
            return [InputPartition((i, i * step, self.rows if i == self.parts - 1
                                    else (i + 1) * step)) for i in range(self.parts)]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            qid, start, end = partition.value
            body = b"x" * BODY_SIZE
            ts = dt.datetime(2026, 11, 27, tzinfo=dt.UTC)
            props = {"UNIQ_KEY": "0" * 32, "TAGS": "TagA", "WAIT": "true",
                     "CLUSTER": "DefaultCluster"}  # fmt: skip
            host = "127.0.0.1:10911"
            if not self.arrow:
                for i in range(start, end):
                    yield (TOPIC, "broker-a", qid, i, "0" * 32, "TagA", None, body, props, ts,
                           ts, host, host, 0)
                return
            import pyarrow as pa

            from deploy.spark.schema import arrow_schema

            schema = arrow_schema()
            us = int(ts.timestamp() * 1e6)
            for lo in range(start, end, 4096):
                n = min(4096, end - lo)
                yield pa.RecordBatch.from_arrays([
                    pa.array([TOPIC] * n), pa.array(["broker-a"] * n),
                    pa.array([qid] * n, pa.int32()), pa.array(range(lo, lo + n), pa.int64()),
                    pa.array(["0" * 32] * n), pa.array(["TagA"] * n), pa.array([None] * n,
                                                                                pa.string()),
                    pa.array([body] * n, pa.binary()),
                    pa.array([list(props.items())] * n, schema.field("properties").type),
                    pa.array([us] * n, pa.timestamp("us", tz="UTC")),
                    pa.array([us] * n, pa.timestamp("us", tz="UTC")),
                    pa.array([host] * n), pa.array([host] * n), pa.array([0] * n, pa.int32()),
                ], schema=schema)  # fmt: skip

    class MemorySource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "membench"

        def schema(self) -> str:
            return SCHEMA_DDL

        def reader(self, schema: Any) -> MemoryReader:
            return MemoryReader(int(self.options["rows"]), int(self.options["partitions"]),
                                self.options.get("arrow") == "true")

    return MemorySource


# the machine's disk is shared and often ~75% full, where a broker starts deleting commit-log
# files early (diskMaxUsedSpaceRatio): the bench's GBs would be cleaned away mid-run
NO_DISK_CLEANUP: dict[str, str] = {"diskMaxUsedSpaceRatio": "95",
                                   "diskSpaceCleanForciblyRatio": "97"}
TUNED: dict[str, str] = {  # a broker set up for bulk readers (RocketMQ's own knobs)
    "maxTransferCountOnMessageInMemory": "256",
    "maxTransferBytesOnMessageInMemory": str(1024 * 1024),
}


def start_cluster(data: str, tuned: bool = False) -> tuple[Any, str, str]:
    """Name server + broker (default store sizes) + SparkBridge; (cluster, ns, broker)."""
    from actors.broker.config import BrokerConfig
    from deploy import launch
    from store.config import StoreConfig

    cluster = launch.start_system(data)
    ns = f"127.0.0.1:{launch.start_namesrv(cluster, port=0)}"
    props = {"listenPort": "0", "namesrvAddr": ns, "storePathRootDir": os.path.join(data, "s"),
             **NO_DISK_CLEANUP}
    if tuned:
        props.update(TUNED)
    port = launch.start_broker(cluster, BrokerConfig.from_properties(props),
                               StoreConfig.from_properties(props))  # fmt: skip
    launch.start_spark_bridge(cluster, ns)
    return cluster, ns, f"127.0.0.1:{port}"


def _create_topic(broker: str) -> None:
    from deploy.wire import BlockingClient
    from protocol.codes import RequestCode
    from protocol.command import RemotingCommand

    ext = {"topic": TOPIC, "defaultTopic": "TBW102", "readQueueNums": str(QUEUES),
           "writeQueueNums": str(QUEUES), "perm": "6", "topicFilterType": "SINGLE_TAG",
           "topicSysFlag": "0", "order": "false"}  # fmt: skip
    with BlockingClient(broker) as cl:
        assert cl.invoke(RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext),
                         10.0).code == 0


def _timed(fn: Any) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _fmt(values: list[float], unit: str = "") -> str:
    return (f"{statistics.median(values):,.0f}{unit} ({min(values):,.0f}-{max(values):,.0f})"
            if max(values) >= 10 else
            f"{statistics.median(values):.3f}{unit} ({min(values):.3f}-{max(values):.3f})")


def run(spark: Any, ns: str, n: int, runs: int, out: Any = sys.stdout, *, title: str = "",
        read_opts: dict[str, str] | None = None) -> dict[str, list[float]]:
    """Load N messages, then the read, Parquet and streaming rounds; the raw figures."""
    from pyspark.sql import functions as F

    from actors.spark_bridge.options import parse_source_options
    from deploy.spark import bridge_client
    from protocol.codes import SparkBridgeCode as SC

    res: dict[str, list[float]] = {}
    add = lambda k, v: res.setdefault(k, []).append(v)  # noqa: E731
    src = {"nameServer": ns, "topic": TOPIC}
    write_opts = dict(src)
    src.update(read_opts or {})
    rows = spark.range(n, numPartitions=4).select(F.expr(f"repeat('x', {BODY_SIZE})").alias(
        "body"), F.lit("TagA").alias("tags"))  # fmt: skip
    secs = _timed(lambda: rows.write.format("rocketmq").options(**write_opts).mode("append")
                  .save())
    add("W rows/s", n / secs)
    rmq = spark.read.format("rocketmq").options(**src)
    # two readers: option() sets the option on the reader itself (and returns it)
    mem = spark.read.format("membench").option("rows", str(n)).option("partitions", str(QUEUES))
    mem_arrow = (spark.read.format("membench").option("rows", str(n))
                 .option("partitions", str(QUEUES)).option("arrow", "true"))  # fmt: skip
    got = rmq.load().count()
    assert got == n, f"read {got} of {n}"
    tmp = tempfile.mkdtemp(prefix="amq-spark-bench-")
    try:
        for i in range(runs):
            r = n / _timed(lambda: rmq.load().count())
            m = n / _timed(lambda: mem.load().count())
            a = n / _timed(lambda: mem_arrow.load().count())
            add("R1 rocketmq count rows/s", r)
            add("R1 memory (tuples) count rows/s", m)
            add("R1 memory (arrow) count rows/s", a)
            add("R1 ratio vs tuples", r / m)
            add("R1 ratio vs arrow", r / a)
            rpath, mpath = f"{tmp}/r{i}", f"{tmp}/m{i}"
            rp = n / _timed(lambda p=rpath: rmq.load().write.mode("overwrite").parquet(p))
            mp = n / _timed(lambda p=mpath: mem.load().write.mode("overwrite").parquet(p))
            add("R2 rocketmq parquet rows/s", rp)
            add("R2 memory (tuples) parquet rows/s", mp)
            add("R2 ratio vs tuples", rp / mp)
            shutil.rmtree(rpath, ignore_errors=True)
            shutil.rmtree(mpath, ignore_errors=True)
            q = (spark.readStream.format("rocketmq").options(**src)
                 .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "100000")
                 .load().writeStream.format("noop").option("checkpointLocation", f"{tmp}/ck{i}")
                 .trigger(availableNow=True))  # fmt: skip
            t = time.perf_counter()
            query = q.start()
            assert query.awaitTermination(3600)
            add("S stream rows/s", n / (time.perf_counter() - t))
            batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
            assert sum(p["numInputRows"] for p in batches) == n
            plan = [p["durationMs"].get("latestOffset", 0) + p["durationMs"].get(
                "queryPlanning", 0) for p in batches]  # fmt: skip
            add("S planning ms per micro-batch (latestOffset + queryPlanning)",
                statistics.median(plan))
            add("S micro-batches", len(batches))
        opts = parse_source_options(src, streaming=True)
        bridge = bridge_client.find_bridge(opts)
        query_id = {"id": uuid.uuid4().hex, "kind": "stream"}
        start = bridge_client.call(bridge, SC.SPARK_INITIAL_OFFSET,
                                   {"options": dict(src, startingOffsets="earliest"),
                                    "query": query_id})["offset"]  # fmt: skip
        laps = []
        for _ in range(20):
            t = time.perf_counter()
            end = bridge_client.call(bridge, SC.SPARK_LATEST_OFFSET, {
                "options": src, "query": query_id, "start": start, "maxRows": 100000})["offset"]
            bridge_client.call(bridge, SC.SPARK_PLAN_PARTITIONS, {
                "options": src, "query": query_id, "start": start, "end": end})
            laps.append((time.perf_counter() - t) * 1000)
        add("S bridge round trips ms per micro-batch (latest + partitions)",
            statistics.median(laps))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out.write(f"\nSpark bridge benchmark{title}: {n:,} x {BODY_SIZE} B messages, {QUEUES} "
              f"queues, local[2], {runs} run(s)\n")
    for k, v in res.items():
        out.write(f"  {k:<64} {_fmt(v)}\n")
    out.flush()
    return res


def main(argv: list[str] | None = None) -> int:
    """Start the cluster and Spark, run, stop everything."""
    p = argparse.ArgumentParser(prog="spark_bench", description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--tuned", action="store_true", help="also: a broker with bulk transfer "
                   "limits (256 messages / 1 MiB per pull) read with pullBatchSize 256")
    p.add_argument("--reference", action="store_true",
                   help="also: the same rounds against the reference RocketMQ 4.9.8 broker")
    a = p.parse_args(argv)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    from deploy import launch
    from deploy.spark import register

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests
    data = tempfile.mkdtemp(prefix="amq-spark-bench-data-")
    cluster, ns, broker = start_cluster(data)
    spark = None
    ref = None
    try:
        _create_topic(broker)
        time.sleep(1.0)  # the route's registration
        spark = (SparkSession.builder.master("local[2]").appName("actormq spark bench")
                 .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress",
                                                             "false")
                 .config("spark.driver.host", "127.0.0.1").config("spark.driver.memory", "2g")
                 .getOrCreate())  # fmt: skip
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        spark.dataSource.register(_memory_source())
        run(spark, ns, a.messages, a.runs, title=" (actormq broker)")
        if a.reference:
            from deploy.reference import reference_cluster

            ref = reference_cluster(os.path.join(data, "ref"),
                                    {"diskMaxUsedSpaceRatio": "95"}).start()
            bridge = launch.start_spark_bridge(cluster, ref.namesrv_addr())
            _create_topic(ref.broker_addr())
            time.sleep(2.0)
            run(spark, ref.namesrv_addr(), a.messages, a.runs,
                title=" (reference RocketMQ 4.9.8 broker)",
                read_opts={"bridge": f"127.0.0.1:{bridge}"})
            ref.stop()
            ref = None
            shutil.rmtree(os.path.join(data, "ref"), ignore_errors=True)
        if a.tuned:
            launch.stop_cluster(cluster)
            shutil.rmtree(data, ignore_errors=True)  # free the disk for the next cluster
            cluster, ns, broker = start_cluster(os.path.join(data, "tuned"), tuned=True)
            _create_topic(broker)
            time.sleep(1.0)
            run(spark, ns, a.messages, a.runs, title=" (actormq broker, bulk transfer limits)",
                read_opts={"pullBatchSize": "256"})
    finally:
        if spark is not None:
            spark.stop()
        if ref is not None:
            ref.stop()
        launch.stop_cluster(cluster)
        shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
