"""Spark bridge, driver and executor side: the `rocketmq` PySpark data source and pipelines.

`register(spark)` makes `spark.read.format("rocketmq")`, `spark.readStream.format("rocketmq")`
and the matching writers available in a SparkSession (pyspark >= 4, the `spark` extra).
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

log = logging.getLogger(__name__)


def register(spark: Any) -> None:
    """Register the `rocketmq` data source with a SparkSession."""
    from deploy.spark.source import RocketMQDataSource

    spark.dataSource.register(RocketMQDataSource)
    try:
        worker = spark.sparkContext.pythonExec  # PYSPARK_PYTHON when the context started
    except Exception:  # Spark Connect: no SparkContext here; the server decides
        return
    if not os.path.isabs(worker):
        log.warning("rocketmq source: Spark's Python workers run %r (from PATH), which may lack "
                    "actormq and pyarrow: set PYSPARK_PYTHON=%s before the SparkSession starts",
                    worker, sys.executable)  # fmt: skip
