"""Master-slave replication end to end: a master and a slave broker (brokerId 1, brokerRole
SLAVE) under one name server, real sockets, real stores. The slave learns its master from its
registration, replicates the commit log over the HA stream (spec §10), copies the master's
topics and consumer offsets (SlaveSynchronize), serves pulls of the replicated messages and
appears in the topic's route; a SYNC_MASTER answers a WAIT send only once a slave has it."""

from __future__ import annotations

import glob
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from actors.broker.config import BrokerConfig
from deploy import launch
from deploy.wire import BlockingClient
from protocol.codes import ResponseCode as RS
from protocol.message import decode_messages
from store.config import StoreConfig
from tests.integration.conftest import cluster_pids
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    SMALL_STORE,
    assert_store_clean,
    broker_addr,
    create_topic_cmd,
    get_route,
    msg_props,
    namesrv_addr,
    pull_cmd,
    role_pids,
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
            assert r.code == RS.SERVICE_NOT_AVAILABLE, r.remark  # the store refuses, as Java's
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
        # one after the other, each answered once the slave has it (the HA service is woken
        # for each through the store's wake pipe; it reports each ack to the
        # GroupTransferService actor, which answers the send)
        for i in range(100):
            r = master.invoke(send_cmd(topic, b"seq-%d" % i, msg_props(), queue_id=0),
                              RPC_TIMEOUT_S)  # fmt: skip
            assert r.code == RS.SUCCESS, (i, r.code, r.remark)
        [path] = glob.glob(os.path.join(cluster.runtime_dir, "*", "ha-transfer.wake"))
        mode = os.stat(path).st_mode  # in the master's runtime dir
        assert stat.S_ISFIFO(mode) and stat.S_IMODE(mode) == 0o600
        assert glob.glob(os.path.join(cluster.runtime_dir, "*", "ha-acked.wake")) == []
        assert len(role_pids(cluster_pids(cluster), "transfer")) == 1
        # WAIT=false: answered at once whatever the slaves
        r = master.invoke(send_cmd(topic, b"nowait", msg_props(wait=False), queue_id=0),
                          RPC_TIMEOUT_S)  # fmt: skip
        assert r.code == RS.SUCCESS


def test_slave_killed_mid_replication_recovers_and_catches_up(local_cluster, tmp_path: Path
                                                              ) -> None:  # fmt: skip
    """kill -9 of a slave (`actormq broker -c slave.conf`, its own process tree) while it copies
    the master's commit log; started again it recovers its store (abort marker: abnormal
    recovery), reports where its intact log ends, and catches up: byte for byte the master's
    log from where it started, and check() clean."""
    import sys

    from store.state_page import StatePage
    from tests.integration.conftest import MarkedProcess

    ha_port = launch.stable_free_port()
    master_root = str(tmp_path / "master-store")
    big = str(64 << 20)  # one commit-log file: the empty slave copies the log from 0 (~24 MB)
    cluster = start_real(local_cluster, haListenPort=str(ha_port), storePathRootDir=master_root,
                         mappedFileSizeCommitLog=big)  # fmt: skip
    topic = "HaCrash"
    with BlockingClient(broker_addr(cluster)) as master:
        assert master.invoke(create_topic_cmd(topic, 2), RPC_TIMEOUT_S).code == 0
        body = b"z" * 8000
        cmds = [send_cmd(topic, body + b"%05d" % i, msg_props(), queue_id=i % 2)
                for i in range(3000)]  # fmt: skip
        for k in range(0, len(cmds), 100):  # ~24 MB
            assert all(r.code == 0 for r in master.invoke_many(cmds[k:k + 100], RPC_TIMEOUT_S))
    store_props = {"listenPort": str(launch.stable_free_port(pair=True)),
                   "brokerName": "broker-a", "brokerId": "1", "brokerRole": "SLAVE",
                   "haMasterAddress": f"127.0.0.1:{ha_port}", "namesrvAddr": cluster.namesrv_addr(),
                   "storePathRootDir": str(tmp_path / "slave-store"), **SMALL_STORE,
                   "mappedFileSizeCommitLog": big}  # fmt: skip
    conf = tmp_path / "slave.conf"
    conf.write_text("".join(f"{k}={v}\n" for k, v in store_props.items()))
    argv = [sys.executable, "-m", "deploy", "broker", "-c", str(conf)]
    state_path = tmp_path / "slave-store" / "state"

    first = MarkedProcess(argv, tmp_path / "slave1", os.getcwd())
    try:  # the copy starts before the broker says it listens: watch its state page from the start
        assert wait_until(state_path.exists, 60.0, 0.001)
        page = StatePage(str(state_path), writable=False)
        master_page = StatePage(os.path.join(master_root, "state"), writable=False)
        try:
            assert wait_until(lambda: page.max_phy > 0, 30.0, 0.001), "no replication"
            first.kill9()  # mid-copy
            assert page.max_phy < master_page.max_phy, "the copy had finished before the kill"
        finally:
            page.close()
            master_page.close()
    finally:
        first.stop()
    assert (tmp_path / "slave-store" / "abort").exists()
    second = MarkedProcess(argv, tmp_path / "slave2", os.getcwd())
    try:
        second.wait_for("listening on", 60.0)
        with BlockingClient(broker_addr(cluster)) as master:
            want = int(master.invoke(simple_cmd(30, topic=topic, queueId=1),
                                     RPC_TIMEOUT_S).ext_fields["offset"])  # fmt: skip
        with BlockingClient(("127.0.0.1", int(store_props["listenPort"]))) as slave:
            def caught_up() -> bool:
                r = slave.invoke(simple_cmd(30, topic=topic, queueId=1), RPC_TIMEOUT_S)
                return r.code == 0 and int(r.ext_fields["offset"]) == want

            assert wait_until(caught_up, 60.0, 0.1), "the restarted slave never caught up"
            # one 64 MB file: the empty slave copied from 0, so its queue starts at 0 too
            low = int(slave.invoke(simple_cmd(31, topic=topic, queueId=1),
                                   RPC_TIMEOUT_S).ext_fields["offset"])  # fmt: skip

            def head() -> Any:
                r = slave.invoke(pull_cmd("SlaveReader", topic, 1, low), RPC_TIMEOUT_S)
                return decode_messages(r.body) if r.code == RS.SUCCESS else None

            got = wait_until(head, 15.0)  # the topic config comes with SlaveSynchronize
            assert got and bytes(got[0].body) == body + b"%05d" % (2 * low + 1)
    finally:
        assert second.stop() == 0
    assert not (tmp_path / "slave-store" / "abort").exists()
    # byte for byte the master's log (one file each), up to the master's end
    master_page = StatePage(os.path.join(master_root, "state"), writable=False)
    try:
        end = master_page.max_phy
    finally:
        master_page.close()
    name = "0" * 20
    with open(os.path.join(master_root, "commitlog", name), "rb") as m, \
            open(tmp_path / "slave-store" / "commitlog" / name, "rb") as sl:  # fmt: skip
        assert m.read(end) == sl.read(end)
    assert_store_clean(tmp_path / "slave-store", mappedFileSizeCommitLog=big)


def test_ha_port_refuses_garbage_and_keeps_serving(local_cluster) -> None:
    """Bad reports on the master's HA port (negative, beyond its log, the first one too) close
    that connection; the HA service keeps serving a well-behaved slave (frames from where it
    asked)."""
    import socket
    import struct

    ha_port = launch.stable_free_port()
    cluster = start_real(local_cluster, haListenPort=str(ha_port))
    with BlockingClient(broker_addr(cluster)) as master:
        assert master.invoke(create_topic_cmd("HaBad", 1), RPC_TIMEOUT_S).code == 0
        assert master.invoke(send_cmd("HaBad", b"x", msg_props()), RPC_TIMEOUT_S).code == 0

    def closed_after(payload: bytes, first: bytes = b"") -> bool:
        """True when the master closes within 2 s of the payload (well before its 5 s
        heartbeat or 20 s housekeeping could be what ends the wait)."""
        with socket.create_connection(("127.0.0.1", ha_port), timeout=5) as s:
            if first:  # a first report, and its first frame back
                s.sendall(first)
                assert len(s.recv(12)) > 0
            s.sendall(payload)
            deadline = time.monotonic() + 2.0
            s.settimeout(0.5)
            while time.monotonic() < deadline:
                try:
                    if not s.recv(65536):
                        return True
                except TimeoutError:
                    continue
            return False

    assert closed_after(struct.pack(">q", -5))  # negative report
    # a first report beyond the log (a slave ahead of a master that lost data): refused, where
    # Java takes it as the start and as the slave's ack, which let SYNC_MASTER answer SEND_OK
    # for sends no slave had
    assert closed_after(struct.pack(">q", 1 << 50))
    # after a first report, one beyond the log
    assert closed_after(struct.pack(">q", 1 << 50), first=struct.pack(">q", 0))
    with socket.create_connection(("127.0.0.1", ha_port), timeout=5) as s:
        s.sendall(struct.pack(">q", 0))  # an empty slave: gets the log from its start
        head = b""
        for _ in range(12):  # at most one byte per read; a closed socket fails at once
            got = s.recv(12 - len(head))
            assert got, "the master closed the connection before the first frame's header"
            head += got
            if len(head) == 12:
                break
        phy, size = struct.unpack(">qi", head)
        assert phy == 0 and size > 0
