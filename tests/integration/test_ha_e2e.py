"""Master-slave replication end to end: a master and a slave broker (brokerId 1, brokerRole
SLAVE) under one name server, real sockets, real stores. The slave learns its master from its
registration, replicates the commit log over the HA stream (spec §10), copies the master's
topics and consumer offsets (SlaveSynchronize), serves pulls of the replicated messages and
appears in the topic's route; a SYNC_MASTER answers a WAIT send only once a slave has it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from actors.broker.config import BrokerConfig
from deploy import launch
from deploy.wire import BlockingClient
from protocol.codes import ResponseCode as RS
from protocol.message import decode_messages
from store.config import StoreConfig
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    SMALL_STORE,
    broker_addr,
    create_topic_cmd,
    get_route,
    msg_props,
    namesrv_addr,
    pull_cmd,
    send_cmd,
    simple_cmd,
    start_real,
    wait_until,
)

pytestmark = pytest.mark.integration


def _start_slave(cluster: launch.LocalCluster, tmp_path: Path, **extra: str) -> int:
    props = {**SMALL_STORE, "listenPort": "0", "brokerName": "broker-a", "brokerId": "1",
             "brokerRole": "SLAVE", "namesrvAddr": cluster.namesrv_addr(),
             "storePathRootDir": os.path.join(str(tmp_path), "store-slave"), **extra}
    return launch.start_broker(cluster, BrokerConfig.from_properties(props),
                               StoreConfig.from_properties(props))  # fmt: skip


def _pulled(cl: BlockingClient, topic: str, queue_id: int) -> list[Any] | None:
    r = cl.invoke(pull_cmd("SlaveReader", topic, queue_id, 0, max_nums=64), RPC_TIMEOUT_S)
    return decode_messages(r.body) if r.code == RS.SUCCESS else None


def test_slave_replicates_syncs_and_serves(local_cluster, tmp_path: Path) -> None:
    cluster = start_real(local_cluster)
    topic = "HaTopic"
    with BlockingClient(broker_addr(cluster)) as master:
        assert master.invoke(create_topic_cmd(topic, 2), RPC_TIMEOUT_S).code == 0
        for i in range(40):
            r = master.invoke(send_cmd(topic, b"before-%d" % i, msg_props(tags="T"),
                                       queue_id=i % 2), RPC_TIMEOUT_S)  # fmt: skip
            assert r.code == 0, r.remark
        q = {"consumerGroup": "HaGroup", "topic": topic, "queueId": 0, "commitOffset": 7}
        master.invoke_oneway(simple_cmd(15, **q))

        slave_port = _start_slave(cluster, tmp_path)
        with BlockingClient(("127.0.0.1", slave_port)) as slave:
            # the commit log replicated and dispatched; the topic config copied from the master
            got = wait_until(lambda: (m := _pulled(slave, topic, 0)) and len(m) == 20 and m, 20.0)
            assert got, "the slave never served the replicated messages"
            assert [bytes(m.body) for m in got] == [b"before-%d" % i for i in range(0, 40, 2)]
            # messages sent after the slave connected follow within moments
            for i in range(10):
                r = master.invoke(send_cmd(topic, b"after-%d" % i, msg_props(), queue_id=1),
                                  RPC_TIMEOUT_S)  # fmt: skip
                assert r.code == 0
            later = wait_until(lambda: (m := _pulled(slave, topic, 1)) and len(m) == 30 and m,
                               10.0)  # fmt: skip
            assert later and bytes(later[-1].body) == b"after-9"
            # consumer offsets copied (SlaveSynchronize every 10 s)
            def offset() -> str | None:
                r = slave.invoke(simple_cmd(14, consumerGroup="HaGroup", topic=topic, queueId=0),
                                 RPC_TIMEOUT_S)  # fmt: skip
                return (r.ext_fields or {}).get("offset") if r.code == 0 else None

            assert wait_until(lambda: offset() == "7", 15.0)
            # a slave takes no sends
            r = slave.invoke(send_cmd(topic, b"nope", msg_props()), RPC_TIMEOUT_S)
            assert r.code != 0
            # the route lists the slave as brokerId 1 of broker-a
            def route_ids() -> list[str] | None:
                r = get_route(namesrv_addr(cluster), topic)
                if r.code != 0:
                    return None
                bds = json.loads(bytes(r.body))["brokerDatas"]
                ids = sorted(str(k) for k in bds[0]["brokerAddrs"])
                return ids if ids == ["0", "1"] else None

            assert wait_until(route_ids, 15.0)


def test_sync_master_waits_for_a_slave(local_cluster, tmp_path: Path) -> None:
    cluster = start_real(local_cluster, brokerRole="SYNC_MASTER")
    topic = "SyncHa"
    with BlockingClient(broker_addr(cluster)) as master:
        assert master.invoke(create_topic_cmd(topic, 1), RPC_TIMEOUT_S).code == 0
        r = master.invoke(send_cmd(topic, b"alone", msg_props(), queue_id=0), RPC_TIMEOUT_S)
        assert r.code == RS.SLAVE_NOT_AVAILABLE  # stored, but no slave has it
        assert r.ext_fields.get("msgId")
        _start_slave(cluster, tmp_path)

        def synced() -> Any:
            r = master.invoke(send_cmd(topic, b"paired", msg_props(), queue_id=0),
                              RPC_TIMEOUT_S)  # fmt: skip
            return r if r.code == RS.SUCCESS else None

        r = wait_until(synced, 20.0, 0.2)
        assert r is not None, "a SYNC_MASTER send never got SEND_OK with a slave connected"
        # WAIT=false: answered at once whatever the slaves
        r = master.invoke(send_cmd(topic, b"nowait", msg_props(wait=False), queue_id=0),
                          RPC_TIMEOUT_S)  # fmt: skip
        assert r.code == RS.SUCCESS
