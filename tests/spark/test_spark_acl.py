"""The rocketmq source and sink against brokers with aclEnable=true (issue #23): with
accessKey / secretKey options the bridge's planning calls, the executors' pulls and the sink's
sends are signed and served; without keys, or with a key that may not publish, the read or
the write fails with RocketMQ's reason; the secret shows in no error."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.acl import SessionCredentials
from tests.spark.spark_helpers import (
    AmqCluster,
    create_topic,
    row_dict,
    start_amq,
    stop_amq,
    wait_routable,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]

ACL = """\
accounts:
  - accessKey: sparkAdmin1
    secretKey: sparkSecret1
    admin: true
  - accessKey: readerOnly1
    secretKey: readerSecret1
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""
ADMIN = SessionCredentials("sparkAdmin1", "sparkSecret1")


@pytest.fixture(scope="module")
def acl_amq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AmqCluster]:
    home = tmp_path_factory.mktemp("aclhome")
    (home / "conf").mkdir()
    (home / "conf" / "plain_acl.yml").write_text(ACL)
    amq = start_amq(Path(tmp_path_factory.mktemp("aclamq")), aclEnable="true",
                    rocketmqHome=str(home))  # fmt: skip
    try:
        yield amq
    finally:
        stop_amq(amq)


def _keys(df: Any, ak: str, sk: str) -> Any:
    return df.option("accessKey", ak).option("secretKey", sk)


def test_signed_write_and_read_round_trip(spark: Any, acl_amq: AmqCluster) -> None:
    topic = "SparkAclT"
    for addr in acl_amq.brokers.values():
        create_topic(addr, topic, 2, ADMIN)
    wait_routable(acl_amq.ns, topic, {"broker-a": 2, "broker-b": 2})
    rows = [(f"acl-{i}".encode(),) for i in range(30)]
    df = spark.createDataFrame(rows, "body BINARY").repartition(2)
    _keys(df.write.format("rocketmq").option("nameServer", acl_amq.ns).option("topic", topic),
          "sparkAdmin1", "sparkSecret1").mode("append").save()
    def reader() -> Any:  # a new one each time: option() changes the reader it is called on
        return spark.read.format("rocketmq").option("nameServer", acl_amq.ns) \
            .option("topic", topic)

    got = [row_dict(r) for r in _keys(reader(), "readerOnly1", "readerSecret1").load().collect()]
    assert sorted(r["body"] for r in got) == sorted(b for (b,) in rows)

    with pytest.raises(Exception) as unsigned:
        reader().load().collect()
    assert "No accessKey is configured" in str(unsigned.value)
    with pytest.raises(Exception) as sub_only:
        _keys(df.write.format("rocketmq").option("nameServer", acl_amq.ns)
              .option("topic", topic), "readerOnly1", "readerSecret1").mode("append").save()
    text = str(sub_only.value)
    assert f"No default permission for topic:{topic}" in text and "readerSecret1" not in text
    with pytest.raises(Exception, match="accessKey and secretKey go together"):
        reader().option("accessKey", "readerOnly1").load().collect()
