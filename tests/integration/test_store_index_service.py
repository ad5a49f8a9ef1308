"""The broker's IndexService actor (messageIndexDispatch=process, the broker's default)."""

from __future__ import annotations

import os
import signal
import time

from deploy import launch
from deploy.wire import BlockingClient
from protocol.message import decode_messages
from store.index import IndexService
from store.state_page import OFF_INDEX_PHY, StatePage
from tests.integration.conftest import cluster_pids
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    SMALL_STORE,
    broker_addr,
    create_topic_cmd,
    msg_props,
    send_cmd,
    simple_cmd,
    start_real,
    wait_until,
)

TOPIC = "IdxSvc"
END = 2**62


def _store_root(cluster: launch.LocalCluster) -> str:
    return os.path.join(cluster.data_dir, "store") if hasattr(cluster, "data_dir") else ""


def _send(cl: BlockingClient, start: int, n: int) -> None:
    for i in range(start, start + n):
        resp = cl.invoke(send_cmd(TOPIC, b"b%d" % i, msg_props(keys=f"key-{i} all")), RPC_TIMEOUT_S)
        assert resp.code == 0, resp.remark


def _query(cl: BlockingClient, key: str) -> list[bytes]:
    r = cl.invoke(simple_cmd(12, topic=TOPIC, key=key, maxNum=64, beginTimestamp=0,
                             endTimestamp=END), RPC_TIMEOUT_S)
    return sorted(m.body for m in decode_messages(bytes(r.body))) if r.code == 0 else []


def _index_lock_holders(pids: list[int], root: str) -> list[int]:
    lock = os.path.realpath(os.path.join(root, "index", "lock"))
    out = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == lock:
                    out.append(pid)
                    break
            except OSError:
                pass
    return out


def _indexed(root: str) -> tuple[int, int]:
    sp = StatePage(os.path.join(root, "state"), writable=False)
    try:
        return sp.get(OFF_INDEX_PHY), sp.max_phy
    finally:
        sp.close()


def test_index_service_actor_default_query_restart_and_drain(local_cluster, tmp_path) -> None:
    root = str(tmp_path / "store")
    cluster = start_real(local_cluster, storePathRootDir=root)
    with BlockingClient(broker_addr(cluster)) as cl:
        assert cl.invoke(create_topic_cmd(TOPIC), RPC_TIMEOUT_S).code == 0
        _send(cl, 0, 20)
        # queried at once: whatever the index has not reached is found in the commit-log tail
        assert _query(cl, "key-7") == [b"b7"]
        assert len(_query(cl, "all")) == 20
        # an actor of the broker (no subprocess) owns the index and catches up
        assert wait_until(lambda: (lambda a, b: a == b)(*_indexed(root)), 10.0)
        holders = _index_lock_holders(cluster_pids(cluster), root)
        assert len(holders) == 1
        # supervised: killed, it is restarted by the controller and resumes
        os.kill(holders[0], signal.SIGKILL)
        assert wait_until(
            lambda: (h := _index_lock_holders(cluster_pids(cluster), root)) and h != holders, 10.0
        )
        _send(cl, 20, 10)
        assert _query(cl, "key-25") == [b"b25"]
        assert wait_until(lambda: (lambda a, b: a == b)(*_indexed(root)), 10.0)
        _send(cl, 30, 5)
    t0 = time.monotonic()
    launch.stop_cluster(cluster)
    assert time.monotonic() - t0 < 30
    indexed, max_phy = _indexed(root)
    assert indexed == max_phy  # clean shutdown drained the index
    idx = IndexService(root, int(SMALL_STORE["maxHashSlotNum"]), int(SMALL_STORE["maxIndexNum"]),
                       writable=False)
    idx.refresh()
    try:
        assert len(idx.query(f"{TOPIC}#all".encode(), 100, 0, END)) == 35
        assert len(idx.query(f"{TOPIC}#key-33".encode(), 100, 0, END)) == 1
    finally:
        idx.close()


def test_sync_index_still_selectable(local_cluster, tmp_path) -> None:
    root = str(tmp_path / "store")
    cluster = start_real(local_cluster, storePathRootDir=root, messageIndexDispatch="sync")
    with BlockingClient(broker_addr(cluster)) as cl:
        assert cl.invoke(create_topic_cmd(TOPIC), RPC_TIMEOUT_S).code == 0
        _send(cl, 0, 3)
        assert _query(cl, "key-1") == [b"b1"]
        assert _index_lock_holders(cluster_pids(cluster), root) == []  # no index owner
