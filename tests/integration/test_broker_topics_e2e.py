"""End-to-end broker tests of topics: creation and routes, auto-creation through TBW102, the
config tables' data versions, and a deleted topic made again (spec §3.4, §9).

Each test starts a name server and the real broker (BrokerControllerActor) in a fresh actor system
with small store files in a tmp dir; the fixture stops every process by PID.
"""

from __future__ import annotations

import json
import os

import pytest

from deploy.wire import BlockingClient
from protocol.message import decode_messages
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    broker_addr,
    create_topic_cmd,
    create_topic_pullable,
    get_route,
    msg_props,
    namesrv_addr,
    pull_e2e,
    send_cmd,
    simple_cmd,
    start_real,
    wait_pullable,
    wait_route,
    wait_until,
)

pytestmark = pytest.mark.integration


def test_create_topic_shows_in_route_and_unknown_is_17(local_cluster) -> None:
    cluster = start_real(local_cluster)
    ns = namesrv_addr(cluster)
    assert get_route(ns, "E2ENeverCreated").code == 17
    with BlockingClient(broker_addr(cluster)) as cl:
        assert cl.invoke(create_topic_cmd("E2ECreated", 3), RPC_TIMEOUT_S).code == 0
    # registerNameServerPeriod is 30 s: seeing it within 10 s means the broker re-registered
    route = wait_route(ns, "E2ECreated", True, 10.0)
    assert route.code == 0, route.remark
    data = json.loads(bytes(route.body))
    (qd,) = data["queueDatas"]
    assert (qd["readQueueNums"], qd["writeQueueNums"], qd["perm"]) == (3, 3, 6)
    (bd,) = data["brokerDatas"]
    assert bd["brokerAddrs"] == {"0": f"127.0.0.1:{cluster.broker_port()}"}
    assert data["filterServerTable"] == {}


def test_auto_create_via_tbw102_on_first_send(local_cluster) -> None:
    cluster = start_real(local_cluster)
    ns = namesrv_addr(cluster)
    tbw = wait_route(ns, "TBW102", True, 10.0)
    assert tbw.code == 0
    (qd,) = json.loads(bytes(tbw.body))["queueDatas"]
    assert qd["perm"] == 7 and qd["writeQueueNums"] == 8
    assert get_route(ns, "E2EAuto").code == 17
    with BlockingClient(broker_addr(cluster)) as cl:
        resp = cl.invoke(send_cmd("E2EAuto", b"auto", msg_props(tags="T"), queue_id=2),
                         RPC_TIMEOUT_S)
        assert resp.code == 0, resp.remark
        assert resp.ext_fields["queueId"] == "2"
        route = wait_route(ns, "E2EAuto", True, 10.0)
        assert route.code == 0
        (qd,) = json.loads(bytes(route.body))["queueDatas"]
        assert (qd["readQueueNums"], qd["writeQueueNums"], qd["perm"]) == (4, 4, 6)
        wait_pullable(cl, "E2EAuto")
        pulled = pull_e2e(cl, "E2EAuto", 2, 0)
        assert pulled.code == 0
        assert [m.body for m in decode_messages(bytes(pulled.body))] == [b"auto"]
        cfg = cl.invoke(simple_cmd(21), RPC_TIMEOUT_S)
        assert cfg.code == 0
        assert "E2EAuto" in json.loads(bytes(cfg.body))["topicConfigTable"]


def test_create_topic_then_immediate_route_and_pull(local_cluster) -> None:
    cluster = start_real(local_cluster)
    topic = "E2ECausalCreate"
    with BlockingClient(broker_addr(cluster)) as cl:
        assert cl.invoke(create_topic_cmd(topic), RPC_TIMEOUT_S).code == 0
        route = get_route(namesrv_addr(cluster), topic)  # §3.4: registered before the reply
        assert route.code == 0, route.remark
        pulled = pull_e2e(cl, topic, 0, 0)
        assert pulled.code == 19, (pulled.code, pulled.remark)


def test_auto_created_topic_pullable_at_once(local_cluster) -> None:
    cluster = start_real(local_cluster)
    with BlockingClient(broker_addr(cluster)) as cl:
        assert cl.invoke(send_cmd("E2ECausalAuto", b"a", msg_props()), RPC_TIMEOUT_S).code == 0
        pulled = pull_e2e(cl, "E2ECausalAuto", 0, 0)
        assert pulled.code == 0, (pulled.code, pulled.remark)


def test_all_topic_and_group_config_carry_the_controllers_data_version(local_cluster) -> None:
    """GET_ALL_TOPIC_CONFIG / GET_ALL_SUBSCRIPTIONGROUP_CONFIG answer the data version the
    broker persists (topics.json), and a new one after a change (SlaveSynchronize relies on it)."""

    cluster = start_real(local_cluster)

    def versions(cl: BlockingClient) -> tuple[dict, dict]:
        topics = cl.invoke(simple_cmd(21), RPC_TIMEOUT_S)
        groups = cl.invoke(simple_cmd(201), RPC_TIMEOUT_S)
        assert topics.code == 0 and groups.code == 0
        return (json.loads(bytes(topics.body))["dataVersion"],
                json.loads(bytes(groups.body))["dataVersion"])

    def persisted() -> dict:
        path = os.path.join(cluster.data_dir, "store", "config", "topics.json")
        with open(path, encoding="utf-8") as f:
            return json.load(f)["dataVersion"]

    with BlockingClient(broker_addr(cluster)) as cl:
        create_topic_pullable(cluster, "VersionT")
        first, g0 = versions(cl)
        assert first["counter"] > 0 and first["timestamp"] > 0
        assert wait_until(lambda: persisted() == first, 10), (persisted(), first)
        assert versions(cl)[0] == first  # no change, same version
        create_topic_pullable(cluster, "VersionT2")
        now = wait_until(lambda: (v := versions(cl)[0]) != first and v, 10)
        assert now and now["counter"] > first["counter"]
        assert wait_until(lambda: persisted() == now, 10), (persisted(), now)
        upd = cl.invoke(simple_cmd(200, body=json.dumps(
            {"groupName": "VersionG", "consumeEnable": True}).encode()), RPC_TIMEOUT_S)
        assert upd.code == 0
        g1 = wait_until(lambda: (v := versions(cl)[1]) != g0 and v, 10)
        assert g1 and g1["counter"] == g0["counter"] + 1


def test_deleted_topic_made_again_starts_empty(local_cluster) -> None:
    """DELETE_TOPIC_IN_BROKER removes the topic's consume queues (cleanUnusedTopic) before it is
    answered: the admin actor's GET_MAX_OFFSET sees the queue empty at once, the topic made
    again under the same name starts at offset 0, and the pull actor, which had the old queue
    mapped, serves only the new messages."""
    cluster = start_real(local_cluster)
    topic = "E2eDeleteAgain"
    create_topic_pullable(cluster, topic, queues=1)
    with BlockingClient(broker_addr(cluster)) as cl:
        for i in range(3):
            assert cl.invoke(send_cmd(topic, b"old%d" % i, msg_props()), RPC_TIMEOUT_S).code == 0
        r = pull_e2e(cl, topic, 0, 0)
        assert r.code == 0 and len(decode_messages(r.body)) == 3  # the pull actor maps the queue
        assert cl.invoke(simple_cmd(215, topic=topic), RPC_TIMEOUT_S).code == 0

        r = cl.invoke(simple_cmd(30, topic=topic, queueId=0), RPC_TIMEOUT_S)
        assert r.code == 0 and r.ext_fields.get("offset") == "0", "the old queue is still seen"
    create_topic_pullable(cluster, topic, queues=1)
    with BlockingClient(broker_addr(cluster)) as cl:
        sent = cl.invoke(send_cmd(topic, b"new", msg_props()), RPC_TIMEOUT_S)
        assert sent.code == 0 and sent.ext_fields["queueOffset"] == "0"
        r = pull_e2e(cl, topic, 0, 0)
        assert r.code == 0
        assert [bytes(m.body) for m in decode_messages(r.body)] == [b"new"]
