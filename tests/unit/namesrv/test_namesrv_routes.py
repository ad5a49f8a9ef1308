"""RouteInfoManager: register/unregister rules, expiry, delete, cluster info."""

from __future__ import annotations

from actors.namesrv.routes import RouteInfoManager, TopicConfigItem

T1 = TopicConfigItem("T1", 4, 4, 6)
T2 = TopicConfigItem("T2", 8, 8, 6)


def reg(
    r: RouteInfoManager,
    name: str = "broker-a",
    bid: int = 0,
    addr: str = "10.0.0.1:10911",
    topics: list[TopicConfigItem] | None = None,
    dv: tuple[int, int] = (1, 1),
    conn: int = 1,
    now: int = 0,
):
    return r.register_broker(
        "DefaultCluster",
        addr,
        name,
        bid,
        addr.replace("10911", "10912"),
        dv,
        topics if topics is not None else [T1],
        [],
        conn,
        now,
    )


def test_master_registration_creates_routes() -> None:
    r = RouteInfoManager()
    reg(r)
    route = r.pick_topic_route_data("T1")
    assert route is not None
    assert route["queueDatas"][0]["readQueueNums"] == 4
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911"}
    assert r.cluster_addr_table == {"DefaultCluster": {"broker-a"}}


def test_only_changed_data_version_updates_routes() -> None:
    r = RouteInfoManager()
    reg(r, topics=[T1], dv=(1, 1))
    reg(r, topics=[T1, T2], dv=(1, 1))  # same version: ignored
    assert r.pick_topic_route_data("T2") is None
    reg(r, topics=[T1, T2], dv=(2, 5))
    assert r.pick_topic_route_data("T2") is not None


def test_topics_not_sent_again_are_kept() -> None:
    r = RouteInfoManager()
    reg(r, topics=[T1, T2], dv=(1, 1))
    reg(r, topics=[T1], dv=(2, 2))
    assert r.pick_topic_route_data("T2") is not None


def test_slave_does_not_update_routes_and_learns_master() -> None:
    r = RouteInfoManager()
    reg(r, topics=[T1])
    res = reg(r, bid=1, addr="10.0.0.2:10911", topics=[T1, T2], dv=(9, 9), conn=2)
    assert r.pick_topic_route_data("T2") is None
    assert res.master_addr == "10.0.0.1:10911"
    assert res.ha_server_addr == "10.0.0.1:10912"
    route = r.pick_topic_route_data("T1")
    assert route is not None
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}


def test_slave_promoted_replaces_old_id() -> None:
    r = RouteInfoManager()
    reg(r, bid=1, addr="10.0.0.2:10911")
    reg(r, bid=0, addr="10.0.0.2:10911")
    assert r.broker_addr_table["broker-a"].broker_addrs == {0: "10.0.0.2:10911"}


def test_expiry_after_silence() -> None:
    r = RouteInfoManager(broker_expired_ms=120_000)
    reg(r, now=0, conn=5)
    assert r.scan_not_active_broker(120_000) == []
    assert r.scan_not_active_broker(120_001) == [("10.0.0.1:10911", 5)]
    assert r.pick_topic_route_data("T1") is None
    assert r.broker_addr_table == {}
    assert r.cluster_addr_table == {}


def test_reregistration_keeps_broker_alive() -> None:
    r = RouteInfoManager(broker_expired_ms=1000)
    reg(r, now=0)
    reg(r, now=900)
    assert r.scan_not_active_broker(1500) == []


def test_connection_close_unregisters() -> None:
    r = RouteInfoManager()
    reg(r, conn=3)
    reg(r, name="broker-b", addr="10.0.0.3:10911", conn=4)
    assert r.on_connection_closed(3) == ["10.0.0.1:10911"]
    route = r.pick_topic_route_data("T1")
    assert route is not None
    assert [b["brokerName"] for b in route["brokerDatas"]] == ["broker-b"]


def test_unregister_and_delete_topic() -> None:
    r = RouteInfoManager()
    reg(r, topics=[T1, T2])
    r.delete_topic("T2")
    assert r.get_all_topic_list() == ["T1"]
    r.unregister_broker("DefaultCluster", "10.0.0.1:10911", "broker-a", 0)
    assert r.get_all_topic_list() == []
    assert r.get_all_cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}


def test_wipe_and_add_write_perm() -> None:
    r = RouteInfoManager()
    reg(r, topics=[T1, T2])
    assert r.wipe_write_perm_of_broker("broker-a") == 2
    assert r.topic_queue_table["T1"]["broker-a"].perm == 4
    assert r.add_write_perm_of_broker("broker-a") == 2
    assert r.topic_queue_table["T1"]["broker-a"].perm == 6


def test_topics_by_cluster() -> None:
    r = RouteInfoManager()
    reg(r, topics=[T1])
    r.register_broker("Other", "10.0.0.9:10911", "broker-z", 0, "x", (1, 1), [T2], [], 9, 0)
    assert r.get_topics_by_cluster("DefaultCluster") == ["T1"]
    assert r.get_topics_by_cluster("Other") == ["T2"]
