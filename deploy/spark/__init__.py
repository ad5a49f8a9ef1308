"""Spark bridge, driver and executor side: the `rocketmq` PySpark data source and pipelines.

`register(spark)` makes `spark.read.format("rocketmq")`, `spark.readStream.format("rocketmq")`
and the matching writers available in a SparkSession (pyspark >= 4, the `spark` extra).
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the `rocketmq` data source with a SparkSession."""
    from deploy.spark.source import RocketMQDataSource

    spark.dataSource.register(RocketMQDataSource)
