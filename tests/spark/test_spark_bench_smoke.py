"""The Spark bridge benchmark (tests/bench/spark_bench.py) runs end to end on a few messages,
so the figures' command keeps working; its numbers are not checked (no timed assertions)."""

from __future__ import annotations

import io
import sys
from typing import Any

import pytest

from tests.spark.spark_helpers import AmqCluster, wait_routable

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_spark_bench_runs(spark: Any, amq: AmqCluster) -> None:
    from pyspark import cloudpickle

    from tests.bench import spark_bench

    cloudpickle.register_pickle_by_value(sys.modules["tests.bench.spark_bench"])
    spark.dataSource.register(spark_bench._memory_source())
    spark_bench._create_topic(amq.brokers["broker-a"])
    wait_routable(amq.ns, spark_bench.TOPIC, {"broker-a": spark_bench.QUEUES})
    out = io.StringIO()
    res = spark_bench.run(spark, amq.ns, 2000, 1, out)
    assert res["S micro-batches"] == [1.0]
    for key in ("R1 ratio vs tuples", "R2 ratio vs tuples", "S stream rows/s",
                "S bridge round trips ms per micro-batch (latest + partitions)"):
        assert key in res and res[key][0] > 0, out.getvalue()
