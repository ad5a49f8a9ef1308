"""Spark test fixtures: ONE SparkSession per test run (local[2]) with the rocketmq source
registered, and one actormq cluster per run (name server, brokers broker-a and broker-b, a
SparkBridge) started as `actormq up` starts them; tests isolate themselves by topic.

Without pyspark (the `spark` extra) or a JVM the Spark tests skip on a developer machine and
fail under CI=true, where bin/test installs the extra."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.register_assert_rewrite("tests.spark.spark_helpers")

from tests.spark.spark_helpers import AmqCluster, start_amq, stop_amq  # noqa: E402


def _require_spark() -> None:
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        missing = f"pyspark / pyarrow not installed ({exc}): install actormq[spark]"
    else:
        if shutil.which("java") is not None or os.environ.get("JAVA_HOME"):
            return
        missing = "no JVM (java on PATH or JAVA_HOME)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"Spark tests cannot run in CI: {missing}")
    pytest.skip(missing)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The test run's SparkSession (local[2], UI off, UTC), stopped with its JVM at the end."""
    _require_spark()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from deploy.spark import register

    session = (SparkSession.builder.master("local[2]").appName("actormq-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .getOrCreate())  # fmt: skip
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    gateway = SparkContext._gateway
    try:
        yield session
    finally:
        session.stop()
        proc = getattr(gateway, "proc", None)
        gateway.shutdown()
        if proc is not None:  # the driver JVM, by PID: it exits when its stdin closes
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(20)
            except Exception:
                proc.kill()
                proc.wait(10)


@pytest.fixture(scope="session")
def amq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AmqCluster]:
    """Name server + broker-a + broker-b + SparkBridge in one actor system (by PID after)."""
    _require_spark()
    cluster = start_amq(tmp_path_factory.mktemp("amq"))
    try:
        yield cluster
    finally:
        stop_amq(cluster)
