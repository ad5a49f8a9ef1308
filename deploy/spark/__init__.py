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


SAFE_PATH_ENV = "PYTHONSAFEPATH"


def register(spark: Any) -> None:
    """Register the `rocketmq` data source with a SparkSession.

    Spark starts its Python workers with `python -m pyspark.daemon` in the executor's working
    directory, which `-m` puts first on sys.path: a folder there named like one of our packages
    (`deploy/`, a store root called `store`) would replace ours in every task. The data
    source's functions carry PYTHONSAFEPATH=1 in their environment (the SparkContext's
    `environment`, which Spark copies into each Python function registered after it is set),
    so the workers that plan and read never look in their working directory."""
    from deploy.spark.source import RocketMQDataSource

    try:
        sc = spark.sparkContext
        worker = sc.pythonExec  # PYSPARK_PYTHON when the context started
    except Exception:  # Spark Connect: no SparkContext here; the server decides
        spark.dataSource.register(RocketMQDataSource)
        return
    sc.environment[SAFE_PATH_ENV] = "1"
    spark.dataSource.register(RocketMQDataSource)
    if not os.path.isabs(worker):
        log.warning("rocketmq source: Spark's Python workers run %r (from PATH), which may lack "
                    "actormq and pyarrow: set PYSPARK_PYTHON=%s before the SparkSession starts",
                    worker, sys.executable)  # fmt: skip
