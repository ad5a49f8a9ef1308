"""Helpers of the Spark tests: an actormq cluster with two brokers and a SparkBridge, and a
producer that remembers what every message's row must be."""

from __future__ import annotations

import os
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors.broker.config import BrokerConfig
from actors.runtime.tls import TlsConfig
from deploy import launch
from deploy.launch import cluster_pids
from deploy.wire import BlockingClient
from protocol.acl import SessionCredentials
from protocol.codes import RequestCode
from protocol.command import RemotingCommand
from protocol.message import COMPRESSED_ZLIB_SYSFLAG
from protocol.message_client_id_setter import create_uniq_id
from protocol.message_properties import properties_to_string
from store.config import StoreConfig
from tests.integration.conftest import kill_pids, wait_gone
from tests.integration.e2e_helpers import SMALL_STORE, wait_until

RPC_TIMEOUT_S = 10.0


@dataclass
class AmqCluster:
    """A running actormq cluster for Spark tests."""

    cluster: launch.LocalCluster
    ns: str  # name server host:port
    brokers: dict[str, str]  # brokerName -> host:port
    bridge: str  # SparkBridge host:port
    pids: list[int] = field(default_factory=list)


def start_amq(data: Path, tls: TlsConfig | None = None, **broker_props: str) -> AmqCluster:
    """Name server, broker-a, broker-b and a SparkBridge, as `actormq up` starts them (the
    brokers with broker_props besides; every port and connection with `tls`)."""
    cluster = launch.start_system(str(data))
    amq = AmqCluster(cluster, "", {}, "")
    try:
        ns_port = launch.start_namesrv(cluster, port=0, tls=tls)
        amq.ns = f"127.0.0.1:{ns_port}"
        for name in ("broker-a", "broker-b"):
            props = dict(SMALL_STORE, listenPort="0", brokerName=name, namesrvAddr=amq.ns,
                         storePathRootDir=os.path.join(str(data), f"store-{name}"),
                         **broker_props)  # fmt: skip
            port = launch.start_broker(cluster, BrokerConfig.from_properties(props),
                                       StoreConfig.from_properties(props), tls=tls)  # fmt: skip
            amq.brokers[name] = f"127.0.0.1:{port}"
        amq.bridge = f"127.0.0.1:{launch.start_spark_bridge(cluster, amq.ns, tls=tls)}"
    finally:
        amq.pids = cluster_pids(cluster)
    return amq


def stop_amq(amq: AmqCluster) -> None:
    """Stop the cluster cleanly; whatever survives is killed by PID (and fails the run)."""
    pids = sorted(set(amq.pids) | set(cluster_pids(amq.cluster)))
    try:
        launch.stop_cluster(amq.cluster)
    finally:
        left = wait_gone(pids, 15.0)
        kill_pids(left)
    assert not left, f"actor processes outlived the cluster: {left}"


def create_topic(addr: str, topic: str, queues: int,
                 credentials: SessionCredentials | None = None,
                 tls: TlsConfig | None = None) -> None:  # fmt: skip
    """UPDATE_AND_CREATE_TOPIC on one broker (read and write queues; signed with
    credentials when given)."""
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(queues),
           "writeQueueNums": str(queues), "perm": "6", "topicFilterType": "SINGLE_TAG",
           "topicSysFlag": "0", "order": "false"}  # fmt: skip
    cmd = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    if credentials is not None:
        credentials.sign(cmd)
    with BlockingClient(addr, tls=tls) as cl:
        resp = cl.invoke(cmd, RPC_TIMEOUT_S)
    assert resp.code == 0, resp.remark


def wait_routable(ns: str, topic: str, queues_by_broker: dict[str, int],
                  timeout_s: float = 30.0, tls: TlsConfig | None = None) -> None:
    """Until the name server's route of `topic` shows these read queue counts."""
    from protocol.bodies import TopicRouteData

    def seen() -> bool:
        with BlockingClient(ns, tls=tls) as cl:
            r = cl.invoke(RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                  {"topic": topic}), RPC_TIMEOUT_S)
        if r.code != 0:
            return False
        got = {q.broker_name: q.read_queue_nums
               for q in TopicRouteData.from_json(bytes(r.body)).queue_datas}  # fmt: skip
        return all(got.get(b) == n for b, n in queues_by_broker.items())

    assert wait_until(seen, timeout_s, 0.2), f"route of {topic} never showed {queues_by_broker}"


@dataclass
class Sent:
    """One stored message and the row the source must give for it."""

    topic: str
    broker: str
    queue_id: int
    queue_offset: int
    msg_id: str
    tags: str | None
    keys: str | None
    body: bytes
    properties: dict[str, str]
    born_ms: int
    born_host: str
    store_host: str
    sent_before_ms: int
    acked_after_ms: int

    @property
    def key(self) -> tuple[str, int, int]:
        """(broker, queue, offset): what a stream sink is keyed by."""
        return (self.broker, self.queue_id, self.queue_offset)


class Producer:
    """Sends SEND_MESSAGE_V2 to a broker's queue over one connection, remembering each row."""

    def __init__(self, broker: str, addr: str) -> None:
        self.broker = broker
        self.addr = addr
        self.client = BlockingClient(addr)

    def close(self) -> None:
        """Close the connection."""
        self.client.close()

    def send(self, topic: str, queue_id: int, body: bytes, *, tags: str | None = None,
             keys: str | None = None, props: dict[str, str] | None = None,
             compress: bool = False, born_ms: int | None = None) -> Sent:  # fmt: skip
        """One message (born now, or at born_ms); its expected row."""
        uniq = create_uniq_id()
        properties = dict(props or {})
        properties.update({"UNIQ_KEY": uniq, "WAIT": "true"})
        if tags:
            properties["TAGS"] = tags
        if keys:
            properties["KEYS"] = keys
        born = int(time.time() * 1000) if born_ms is None else born_ms
        wire_body = zlib.compress(body) if compress else body
        ext = {"a": "spark_test_pg", "b": topic, "c": "TBW102", "d": "4", "e": str(queue_id),
               "f": str(COMPRESSED_ZLIB_SYSFLAG if compress else 0), "g": str(born), "h": "0",
               "i": properties_to_string(properties), "j": "0", "k": "false", "m": "false",
               "n": self.broker}  # fmt: skip
        before = int(time.time() * 1000)
        resp = self.client.invoke(RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, ext,
                                                          wire_body), RPC_TIMEOUT_S)
        after = int(time.time() * 1000)
        assert resp.code == 0, (resp.code, resp.remark)
        assert self.client.sock is not None
        local = self.client.sock.getsockname()
        # the broker adds CLUSTER and does not store WAIT=true (SendMessageProcessor, 4.9.8)
        stored_props = {k: v for k, v in properties.items() if k != "WAIT"}
        stored_props["CLUSTER"] = "DefaultCluster"
        return Sent(topic, self.broker, queue_id, int((resp.ext_fields or {})["queueOffset"]), uniq,
                    tags, keys, body, stored_props, born, f"{local[0]}:{local[1]}", self.addr,
                    before, after)  # fmt: skip


def row_dict(row: Any) -> dict[str, Any]:
    """A source row as plain values (timestamps as epoch ms, body as bytes)."""
    d = row.asDict()
    for ts in ("bornTimestamp", "storeTimestamp"):
        d[ts] = round(d[ts].timestamp() * 1000)
    d["body"] = bytes(d["body"])
    d["properties"] = dict(d["properties"] or {})
    return d


def assert_row_is(row: dict[str, Any], sent: Sent) -> None:
    """Every column of a source row against what was sent."""
    assert row["topic"] == sent.topic
    assert (row["brokerName"], row["queueId"], row["queueOffset"]) == sent.key
    assert row["msgId"] == sent.msg_id
    assert row["tags"] == sent.tags
    assert row["keys"] == sent.keys
    assert row["body"] == sent.body
    assert row["properties"] == sent.properties
    assert row["bornTimestamp"] == sent.born_ms
    assert sent.sent_before_ms <= row["storeTimestamp"] <= sent.acked_after_ms
    assert row["bornHost"] == sent.born_host
    assert row["storeHost"] == sent.store_host
    assert row["reconsumeTimes"] == 0


def stored_count(amq: AmqCluster, topic: str, queues: int = 8) -> int:
    """Messages in `topic` over every broker (GET_MAX_OFFSET summed over queues)."""
    total = 0
    for addr in amq.brokers.values():
        with BlockingClient(addr) as cl:
            for q in range(queues):
                r = cl.invoke(RemotingCommand.request(RequestCode.GET_MAX_OFFSET,
                                                      {"topic": topic, "queueId": str(q)}),
                              RPC_TIMEOUT_S)  # fmt: skip
                total += int((r.ext_fields or {}).get("offset", 0)) if r.code == 0 else 0
    return total
