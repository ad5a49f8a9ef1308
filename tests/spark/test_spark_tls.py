"""The rocketmq source and sink against a cluster whose every port enforces TLS (issue #23):
with the useTLS option the driver's bridge and name-server calls, the executors' pulls and the
sink's sends are TLS and served; without it the name server closes the plain connection and
the read fails with a clear error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.runtime.tls import TlsConfig, TlsMode
from tests.spark.spark_helpers import (
    AmqCluster,
    create_topic,
    row_dict,
    start_amq,
    stop_amq,
    wait_routable,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]

TLS = TlsConfig(server_mode=TlsMode.ENFORCING, enable=True)


@pytest.fixture(scope="module")
def tls_amq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AmqCluster]:
    amq = start_amq(Path(tmp_path_factory.mktemp("tlsamq")), TLS)
    try:
        yield amq
    finally:
        stop_amq(amq)


def test_tls_write_and_read_round_trip(spark: Any, tls_amq: AmqCluster) -> None:
    topic = "SparkTlsT"
    for addr in tls_amq.brokers.values():
        create_topic(addr, topic, 2, tls=TLS)
    wait_routable(tls_amq.ns, topic, {"broker-a": 2, "broker-b": 2}, tls=TLS)
    rows = [(f"tls-{i}".encode(),) for i in range(30)]
    df = spark.createDataFrame(rows, "body BINARY").repartition(2)
    df.write.format("rocketmq").option("nameServer", tls_amq.ns).option("topic", topic) \
        .option("useTLS", "true").mode("append").save()

    def reader() -> Any:
        return spark.read.format("rocketmq").option("nameServer", tls_amq.ns) \
            .option("topic", topic)

    got = [row_dict(r) for r in reader().option("useTLS", "true").load().collect()]
    assert sorted(r["body"] for r in got) == sorted(b for (b,) in rows)
    with pytest.raises(Exception) as plain:
        reader().load().collect()
    assert "name server unreachable" in str(plain.value)
    with pytest.raises(Exception, match="useTLS: expected true or false"):
        reader().option("useTLS", "maybe").load().collect()
