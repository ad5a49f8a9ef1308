"""Name server end to end (spec §7, §14.1): a silent broker expires after the scan, a closed
broker connection unregisters at once, UNREGISTER_BROKER removes the routes.

Brokers here are raw REGISTER_BROKER requests from a BlockingClient, so the name server is the
only thing under test. The expiry test uses a second name server actor in the same actor
system configured with a short expiry (NamesrvProcessor broker_expired_ms / scan_interval_ms).
"""

from __future__ import annotations

import json
import time

import pytest

from actors.namesrv.config import NamesrvConfig
from deploy.wire import BlockingClient
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    get_route,
    simple_cmd,
    start_namesrv_with,
    wait_route,
)

pytestmark = pytest.mark.integration


def _register_cmd(broker_name: str, addr: str, topics: list[str]):
    """REGISTER_BROKER (103) as a 4.9.8 master writes it (uncompressed RegisterBrokerBody)."""
    table = {t: {"order": False, "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG",
                 "topicName": t, "topicSysFlag": 0, "writeQueueNums": 4} for t in topics}
    body = json.dumps({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": 1, "timestamp": int(time.time() * 1000)},
        "topicConfigTable": table}}, separators=(",", ":"), sort_keys=True).encode()
    return simple_cmd(103, body=body, brokerName=broker_name, brokerAddr=addr,
                      clusterName="NsCluster", haServerAddr="127.0.0.1:1", brokerId=0,
                      compressed="false", bodyCrc32=0)


def _cluster_brokers(ns: tuple[str, int]) -> dict:
    with BlockingClient(ns) as cl:
        r = cl.invoke(simple_cmd(106), RPC_TIMEOUT_S)
    assert r.code == 0
    return json.loads(bytes(r.body)).get("brokerAddrTable", {})


def test_silent_broker_expires_after_scan(local_cluster) -> None:
    cluster = local_cluster()
    port = start_namesrv_with(cluster, NamesrvConfig(brokerChannelExpiredTime=2000,
                                                     scanNotActiveBrokerInterval=500))
    ns = ("127.0.0.1", port)
    with BlockingClient(ns) as fake:
        r = fake.invoke(_register_cmd("ns-silent", "127.0.0.1:10001", ["NsSilentT"]),
                        RPC_TIMEOUT_S)
        assert r.code == 0, r.remark
        route = get_route(ns, "NsSilentT")
        assert route.code == 0
        assert json.loads(bytes(route.body))["brokerDatas"][0]["brokerAddrs"] == {
            "0": "127.0.0.1:10001"}
        assert "ns-silent" in _cluster_brokers(ns)
        # stay connected and silent: the first scan runs after 5 s, then every 0.5 s
        gone = wait_route(ns, "NsSilentT", False, 15.0)
        assert gone.code == 17
        assert "ns-silent" not in _cluster_brokers(ns)
        # Java also closes the expired broker's channel (§7)
        with pytest.raises(ConnectionError):
            fake.read_for(5.0)


def test_default_expiry_keeps_a_live_registration(local_cluster) -> None:
    cluster = local_cluster()
    ns = ("127.0.0.1", cluster.namesrv_port)
    with BlockingClient(ns) as fake:
        assert fake.invoke(_register_cmd("ns-live", "127.0.0.1:10003", ["NsLiveT"]),
                           RPC_TIMEOUT_S).code == 0
        fake.read_for(6.0)  # past the first scan (5 s); 120 s expiry not reached
        assert get_route(ns, "NsLiveT").code == 0


def test_connection_close_unregisters_broker(local_cluster) -> None:
    cluster = local_cluster()
    ns = ("127.0.0.1", cluster.namesrv_port)
    fake = BlockingClient(ns)
    try:
        r = fake.invoke(_register_cmd("ns-closing", "127.0.0.1:10002", ["NsCloseT", "NsCloseU"]),
                        RPC_TIMEOUT_S)
        assert r.code == 0, r.remark
        assert get_route(ns, "NsCloseT").code == 0
    finally:
        fake.close()
    # the 120 s expiry is far away: only the close can remove it within 5 s
    assert wait_route(ns, "NsCloseT", False, 5.0).code == 17
    assert get_route(ns, "NsCloseU").code == 17
    assert "ns-closing" not in _cluster_brokers(ns)


def test_unregister_broker_removes_routes(local_cluster) -> None:
    cluster = local_cluster()
    ns = ("127.0.0.1", cluster.namesrv_port)
    with BlockingClient(ns) as fake:
        assert fake.invoke(_register_cmd("ns-unreg", "127.0.0.1:10004", ["NsUnregT"]),
                           RPC_TIMEOUT_S).code == 0
        assert get_route(ns, "NsUnregT").code == 0
        r = fake.invoke(simple_cmd(104, brokerName="ns-unreg", brokerAddr="127.0.0.1:10004",
                                   clusterName="NsCluster", brokerId=0), RPC_TIMEOUT_S)
        assert r.code == 0
        assert get_route(ns, "NsUnregT").code == 17
        assert "ns-unreg" not in _cluster_brokers(ns)
