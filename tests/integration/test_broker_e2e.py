"""End-to-end broker tests: the real cores behind the real runtime, over TCP (spec §3, §9, §14).

Each test starts a name server and the real broker (BrokerControllerActor) in a fresh actor system
with small store files in a tmp dir; the fixture stops every process by PID.
"""

from __future__ import annotations

import json
import time

import pytest

from deploy import launch
from deploy.wire import BlockingClient
from protocol.codes import SerializeType
from protocol.message import decode_messages, decode_offset_msg_id
from protocol.message_batch import BatchItem
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    SERIALIZE_TYPES,
    batch_cmd,
    broker_addr,
    create_topic_pullable,
    get_route,
    heartbeat_cmd,
    msg_props,
    namesrv_addr,
    pull_cmd,
    pull_e2e,
    send_cmd,
    simple_cmd,
    start_real,
    wait_route,
    wait_until,
)

pytestmark = pytest.mark.integration


# -- 1. send then pull, every header serialization ---------------------------------------------
@pytest.mark.parametrize("st", SERIALIZE_TYPES, ids=lambda s: SerializeType(s).name)
def test_send_v1_v2_then_pull_round_trip(local_cluster, st: int) -> None:
    cluster = start_real(local_cluster)
    port = cluster.broker_port()
    topic = f"E2ESend{int(st)}"
    create_topic_pullable(cluster, topic)
    sent = []
    with BlockingClient(broker_addr(cluster)) as cl:
        for i, code in enumerate((310, 10, 310, 10)):
            props = msg_props(tags=f"Tag{i}", keys=f"key{i} other{i}")
            body = f"body-{i}-{code}".encode() * (i + 1)
            req = send_cmd(topic, body, props, queue_id=1, code=code, serialize_type=st)
            resp = cl.invoke(req, RPC_TIMEOUT_S)
            assert resp.code == 0, (code, resp.remark)
            assert resp.is_response and resp.opaque == req.opaque
            assert resp.serialize_type == st
            assert resp.version == 409
            ext = resp.ext_fields or {}
            assert ext["queueId"] == "1"
            assert ext["queueOffset"] == str(i)
            assert ext["MSG_REGION"] == "DefaultRegion"
            assert ext["TRACE_ON"] == "true"
            host, msg_port, phy = decode_offset_msg_id(ext["msgId"])
            assert (host, msg_port) == ("127.0.0.1", port)
            assert ext["msgId"] == ext["msgId"].upper() and len(ext["msgId"]) == 32
            sent.append((body, props, phy, ext["msgId"]))

        resp = pull_e2e(cl, topic, 1, 0, serialize_type=st)
        assert resp.code == 0, resp.remark
        assert resp.serialize_type == st
        hdr = resp.ext_fields or {}
        assert hdr["nextBeginOffset"] == "4"
        assert hdr["minOffset"] == "0"
        assert hdr["maxOffset"] == "4"
        assert hdr["suggestWhichBrokerId"] == "0"
        msgs = decode_messages(bytes(resp.body), check_crc=True)
    assert len(msgs) == len(sent)
    for i, (m, (body, props, phy, msg_id)) in enumerate(zip(msgs, sent, strict=True)):
        assert m.topic == topic
        assert m.body == body
        assert m.queue_id == 1
        assert m.queue_offset == i
        assert m.commit_log_offset == phy
        assert m.offset_msg_id == msg_id
        assert m.store_address == f"127.0.0.1:{port}"
        assert m.born_address.startswith("127.0.0.1:")
        assert m.properties["UNIQ_KEY"] == props["UNIQ_KEY"]
        assert m.properties["TAGS"] == props["TAGS"]
        assert m.properties["KEYS"] == props["KEYS"]
        assert m.properties["CLUSTER"] == "DefaultCluster"
        assert "WAIT" not in m.properties  # the broker drops WAIT from the stored copy (§9.1)
        assert m.msg_id == props["UNIQ_KEY"]
    offsets = [m.commit_log_offset for m in msgs]
    assert offsets == sorted(offsets)


def test_batch_send_consecutive_offsets(local_cluster) -> None:
    cluster = start_real(local_cluster)
    topic = "E2EBatch"
    create_topic_pullable(cluster, topic)
    items = [BatchItem(flag=i, body=f"batch-{i}".encode(),
                       properties=msg_props(tags="B", keys=f"bk{i}")) for i in range(10)]
    with BlockingClient(broker_addr(cluster)) as cl:
        first = cl.invoke(send_cmd(topic, b"single", msg_props(), queue_id=2), RPC_TIMEOUT_S)
        assert first.code == 0
        resp = cl.invoke(batch_cmd(topic, items, queue_id=2), RPC_TIMEOUT_S)
        assert resp.code == 0, resp.remark
        ext = resp.ext_fields or {}
        assert ext["queueId"] == "2"
        assert ext["queueOffset"] == "1"
        ids = ext["msgId"].split(",")
        assert len(ids) == 10
        phys = [decode_offset_msg_id(i)[2] for i in ids]
        assert phys == sorted(phys) and len(set(phys)) == 10
        pulled = pull_e2e(cl, topic, 2, 1)
        assert pulled.code == 0, pulled.remark
        msgs = decode_messages(bytes(pulled.body), check_crc=True)
    assert [m.queue_offset for m in msgs] == list(range(1, 11))
    assert [m.commit_log_offset for m in msgs] == phys
    for m, it in zip(msgs, items, strict=True):
        assert m.body == it.body
        assert m.flag == it.flag
        assert m.properties["UNIQ_KEY"] == it.properties["UNIQ_KEY"]
        assert m.properties["KEYS"] == it.properties["KEYS"]
        assert m.properties["CLUSTER"] == "DefaultCluster"


# -- pull statuses ---------------------------------------------------------------------------------
def test_every_pull_status(local_cluster) -> None:
    cluster = start_real(local_cluster)
    topic = "E2EPullStatus"
    create_topic_pullable(cluster, topic)
    with BlockingClient(broker_addr(cluster)) as cl:
        for i in range(3):
            assert cl.invoke(send_cmd(topic, b"m%d" % i, msg_props(tags="TagA")),
                             RPC_TIMEOUT_S).code == 0
        found = pull_e2e(cl, topic, 0, 0, max_nums=2)
        assert found.code == 0
        assert found.ext_fields["nextBeginOffset"] == "2"
        assert len(decode_messages(bytes(found.body))) == 2

        # FLAG_SUBSCRIPTION only (no suspend): answered at once with 19, offset unchanged
        none = pull_e2e(cl, topic, 0, 3, sys_flag=4)
        assert none.code == 19
        assert none.ext_fields["nextBeginOffset"] == "3"
        assert none.ext_fields["maxOffset"] == "3"
        assert not bytes(none.body)

        badly = pull_e2e(cl, topic, 0, 10)
        assert badly.code == 21
        # getMessage since 4.9.4 (apache/rocketmq#4219, spec §9.3): the max offset (it was the
        # min when that was 0, which sent consumers back to the start)
        assert badly.ext_fields["nextBeginOffset"] == "3"

        small = pull_e2e(cl, topic, 0, -1)
        assert small.code == 21
        assert small.ext_fields["nextBeginOffset"] == "0"  # minOffset

        # a queue with no messages: 21 for a non-zero offset, 19 for offset 0
        assert pull_e2e(cl, topic, 3, 5).code == 21
        assert pull_e2e(cl, topic, 3, 0).code == 19

        unmatched = pull_e2e(cl, topic, 0, 0, subscription="TagB")
        assert unmatched.code == 20
        assert int(unmatched.ext_fields["nextBeginOffset"]) > 0
        matched = pull_e2e(cl, topic, 0, 0, subscription="TagB || TagA")
        assert matched.code == 0
        assert len(decode_messages(bytes(matched.body))) == 3

        unknown = pull_e2e(cl, "E2ENoSuchTopic", 0, 0)
        assert unknown.code == 17


# -- consumer offsets ------------------------------------------------------------------------------
def _query_offset(cl: BlockingClient, group: str, topic: str, qid: int):
    return cl.invoke(simple_cmd(14, consumerGroup=group, topic=topic, queueId=qid), RPC_TIMEOUT_S)


def test_consumer_offsets_and_restart(local_cluster, tmp_path) -> None:
    store_dir = str(tmp_path / "shared-store")
    cluster = start_real(local_cluster, storePathRootDir=store_dir)
    topic = "E2EOffsets"
    create_topic_pullable(cluster, topic)
    with BlockingClient(broker_addr(cluster)) as cl:
        for i in range(5):
            assert cl.invoke(send_cmd(topic, b"o%d" % i, msg_props()), RPC_TIMEOUT_S).code == 0
        # new group, young topic: offset 0 with code 0 (spec §9.5 rule 2)
        fresh = _query_offset(cl, "cg_new", topic, 0)
        assert fresh.code == 0, fresh.remark
        assert fresh.ext_fields["offset"] == "0"
        upd = cl.invoke(simple_cmd(15, consumerGroup="cg_a", topic=topic, queueId=0,
                                   commitOffset=3), RPC_TIMEOUT_S)
        assert upd.code == 0
        cl.invoke_oneway(simple_cmd(15, consumerGroup="cg_a", topic=topic, queueId=1,
                                    commitOffset=0))
        cl.invoke_oneway(simple_cmd(15, consumerGroup="cg_b", topic=topic, queueId=0,
                                    commitOffset=4))
        # a pull with FLAG_COMMIT_OFFSET stores commitOffset whatever the result
        committed = cl.invoke(pull_cmd("cg_c", topic, 0, 0, sys_flag=5, commit_offset=2),
                              RPC_TIMEOUT_S)
        assert committed.code == 0

        def offsets() -> dict[str, str] | None:
            got = {g: _query_offset(cl, g, topic, 0) for g in ("cg_a", "cg_b", "cg_c")}
            vals = {g: r.ext_fields.get("offset") for g, r in got.items() if r.code == 0}
            return vals if vals == {"cg_a": "3", "cg_b": "4", "cg_c": "2"} else None

        assert wait_until(offsets, 10.0), {g: _query_offset(cl, g, topic, 0).ext_fields
                                           for g in ("cg_a", "cg_b", "cg_c")}
    launch.stop_cluster(cluster)  # clean shutdown persists consumerOffset.json

    with open(f"{store_dir}/config/consumerOffset.json", encoding="utf-8") as f:
        assert f"{topic}@cg_a" in f.read()
    again = start_real(local_cluster, storePathRootDir=store_dir)
    with BlockingClient(broker_addr(again)) as cl:
        for group, want in (("cg_a", "3"), ("cg_b", "4"), ("cg_c", "2")):
            resp = _query_offset(cl, group, topic, 0)
            assert resp.code == 0 and resp.ext_fields["offset"] == want, (group, resp.remark)
        q1 = _query_offset(cl, "cg_a", topic, 1)
        assert q1.code == 0 and q1.ext_fields["offset"] == "0"
        pulled = pull_e2e(cl, topic, 0, 0)
        assert pulled.code == 0
        assert [m.body for m in decode_messages(bytes(pulled.body))] == [
            b"o%d" % i for i in range(5)]


# -- offset queries --------------------------------------------------------------------------------
def test_max_min_search_and_earliest(local_cluster) -> None:
    cluster = start_real(local_cluster)
    topic = "E2ESearch"
    create_topic_pullable(cluster, topic)
    with BlockingClient(broker_addr(cluster)) as cl:
        for i in range(4):
            assert cl.invoke(send_cmd(topic, b"s%d" % i, msg_props()), RPC_TIMEOUT_S).code == 0
            time.sleep(0.02)  # distinct store timestamps
        msgs = decode_messages(bytes(pull_e2e(cl, topic, 0, 0).body))
        assert len(msgs) == 4
        mx = cl.invoke(simple_cmd(30, topic=topic, queueId=0), RPC_TIMEOUT_S)
        assert mx.code == 0 and mx.ext_fields["offset"] == "4"
        mn = cl.invoke(simple_cmd(31, topic=topic, queueId=0), RPC_TIMEOUT_S)
        assert mn.code == 0 and mn.ext_fields["offset"] == "0"
        empty = cl.invoke(simple_cmd(30, topic=topic, queueId=3), RPC_TIMEOUT_S)
        assert empty.code == 0 and empty.ext_fields["offset"] == "0"
        for m in msgs:
            r = cl.invoke(simple_cmd(29, topic=topic, queueId=0, timestamp=m.store_timestamp),
                          RPC_TIMEOUT_S)
            assert r.code == 0 and r.ext_fields["offset"] == str(m.queue_offset)
        early = cl.invoke(simple_cmd(29, topic=topic, queueId=0, timestamp=1), RPC_TIMEOUT_S)
        assert early.code == 0 and early.ext_fields["offset"] == "0"
        ts = cl.invoke(simple_cmd(32, topic=topic, queueId=0), RPC_TIMEOUT_S)
        assert ts.code == 0 and ts.ext_fields["timestamp"] == str(msgs[0].store_timestamp)


# -- query / view ----------------------------------------------------------------------------------
def _send_three(cluster: launch.LocalCluster, topic: str) -> tuple[list[str], list[int]]:
    """Three messages with keys order-<i> and shared; (UNIQ_KEYs, commit-log offsets)."""
    uniq: list[str] = []
    phys: list[int] = []
    with BlockingClient(broker_addr(cluster)) as cl:
        for i in range(3):
            props = msg_props(tags="Q", keys=f"order-{i} shared")
            resp = cl.invoke(send_cmd(topic, b"q%d" % i, props), RPC_TIMEOUT_S)
            assert resp.code == 0
            uniq.append(props["UNIQ_KEY"])
            phys.append(decode_offset_msg_id(resp.ext_fields["msgId"])[2])
    return uniq, phys


def test_query_message_by_key(local_cluster) -> None:
    cluster = start_real(local_cluster)
    topic = "E2EQuery"
    create_topic_pullable(cluster, topic)
    uniq, _ = _send_three(cluster, topic)
    end = int(time.time() * 1000) + 3_600_000
    with BlockingClient(broker_addr(cluster)) as cl:
        def query(key: str, **extra: str):
            return cl.invoke(simple_cmd(12, topic=topic, key=key, maxNum=32, beginTimestamp=0,
                                        endTimestamp=end, **extra), RPC_TIMEOUT_S)

        hit = wait_until(lambda: (r := query("order-1")).code == 0 and r, 10.0)
        assert hit, "QUERY_MESSAGE never found key order-1 (reader missed new files?)"
        assert "indexLastUpdateTimestamp" in hit.ext_fields
        assert "indexLastUpdatePhyoffset" in hit.ext_fields
        found = [m for m in decode_messages(bytes(hit.body)) if "order-1" in m.key_list]
        assert [m.body for m in found] == [b"q1"]
        shared = query("shared")
        assert shared.code == 0
        assert sorted(m.body for m in decode_messages(bytes(shared.body))) == [b"q0", b"q1", b"q2"]
        by_uniq = query(uniq[2], _UNIQUE_KEY_QUERY="true")
        assert by_uniq.code == 0
        assert [m.body for m in decode_messages(bytes(by_uniq.body))
                if m.msg_id == uniq[2]] == [b"q2"]
        miss = query("no-such-key")
        assert miss.code == 22


def test_view_message_by_id(local_cluster) -> None:
    cluster = start_real(local_cluster)
    topic = "E2EView"
    create_topic_pullable(cluster, topic)
    _, phys = _send_three(cluster, topic)
    with BlockingClient(broker_addr(cluster)) as cl:
        view = wait_until(lambda: (r := cl.invoke(simple_cmd(33, offset=phys[1]),
                                                  RPC_TIMEOUT_S)).code == 0 and r, 5.0)
        assert view, "VIEW_MESSAGE_BY_ID never found the message (reader missed new files?)"
        (one,) = decode_messages(bytes(view.body))
        assert one.body == b"q1" and one.commit_log_offset == phys[1]
        bad = cl.invoke(simple_cmd(33, offset=phys[2] + 1_000_000), RPC_TIMEOUT_S)
        assert bad.code == 1
        assert bad.remark == f"can not find message by the offset, {phys[2] + 1_000_000}"


# -- clients: heartbeats, consumer list, notify, locks -------------------------------------------
def test_heartbeat_consumer_list_and_notify(local_cluster) -> None:
    cluster = start_real(local_cluster)
    topic = "E2EGroupT"
    create_topic_pullable(cluster, topic)
    group = "e2e_cg_notify"
    subs = {topic: "*", f"%RETRY%{group}": "*"}
    with BlockingClient(broker_addr(cluster)) as a, BlockingClient(broker_addr(cluster)) as b:
        ra = a.invoke(heartbeat_cmd("10.0.0.1@A", group, subs), RPC_TIMEOUT_S)
        assert ra.code == 0 and ra.version == 409

        def members() -> list[str] | None:
            r = a.invoke(simple_cmd(38, consumerGroup=group), RPC_TIMEOUT_S)
            return json.loads(bytes(r.body))["consumerIdList"] if r.code == 0 else None

        assert wait_until(lambda: members() == ["10.0.0.1@A"], 10.0), members()
        a.read_for(0.2)
        a.requests.clear()
        rb = b.invoke(heartbeat_cmd("10.0.0.2@B", group, subs), RPC_TIMEOUT_S)
        assert rb.code == 0
        deadline = time.monotonic() + 10
        while not a.requests and time.monotonic() < deadline:
            a.read_for(0.2)
        notes = [r for r in a.requests if r.code == 40]
        assert notes, "client A got no NOTIFY_CONSUMER_IDS_CHANGED"
        assert notes[0].ext_fields["consumerGroup"] == group
        assert notes[0].flag & 2 and not notes[0].flag & 1  # oneway request, not a response
        assert wait_until(lambda: sorted(members() or []) == ["10.0.0.1@A", "10.0.0.2@B"],
                          10.0), members()
        unknown = a.invoke(simple_cmd(38, consumerGroup="e2e_nobody"), RPC_TIMEOUT_S)
        assert unknown.code == 1
        assert unknown.remark == "no consumer for this group, e2e_nobody"
        # the retry topic is created on the first heartbeat and registered
        route = wait_route(namesrv_addr(cluster), f"%RETRY%{group}", True, 10.0)
        assert route.code == 0


def _mq_set(topic: str, qids: list[int]) -> list[dict[str, object]]:
    return [{"brokerName": "broker-a", "queueId": q, "topic": topic} for q in qids]


def _lock_body(client: str, group: str, mqs: list[dict[str, object]]) -> bytes:
    return json.dumps({"clientId": client, "consumerGroup": group, "mqSet": mqs},
                      separators=(",", ":")).encode()


def test_lock_and_unlock_batch_mq(local_cluster) -> None:
    cluster = start_real(local_cluster)
    topic = "E2ELock"
    mqs = _mq_set(topic, [0, 1])
    with BlockingClient(broker_addr(cluster)) as cl:
        def locked(client: str) -> list[int]:
            r = cl.invoke(simple_cmd(41, body=_lock_body(client, "lock_cg", mqs)), RPC_TIMEOUT_S)
            assert r.code == 0, r.remark
            return sorted(int(m["queueId"]) for m in json.loads(bytes(r.body))["lockOKMQSet"])

        assert locked("c1") == [0, 1]
        assert locked("c1") == [0, 1]  # re-lock by the holder refreshes
        assert locked("c2") == []
        un = cl.invoke(simple_cmd(42, body=_lock_body("c1", "lock_cg", mqs[:1])), RPC_TIMEOUT_S)
        assert un.code == 0
        assert locked("c2") == [0]
        assert locked("c1") == [1]


# -- topics and routes ----------------------------------------------------------------------------
# -- causal consistency: a reply's effects are visible to the client's next request -----------
# Java keeps this state in one process, so these hold there without any wait; here they hold
# because a batch's state events ride ahead of its replies (actors/runtime/channel.py).
def test_heartbeat_then_immediate_consumer_list_and_pull(local_cluster) -> None:
    cluster = start_real(local_cluster)
    topic = "E2ECausalHb"
    create_topic_pullable(cluster, topic)
    group = "e2e_cg_causal"
    with BlockingClient(broker_addr(cluster)) as cl:
        assert cl.invoke(send_cmd(topic, b"c", msg_props()), RPC_TIMEOUT_S).code == 0
        hb = cl.invoke(heartbeat_cmd("10.0.0.9@C", group, {topic: "*"}), RPC_TIMEOUT_S)
        assert hb.code == 0
        listed = cl.invoke(simple_cmd(38, consumerGroup=group), RPC_TIMEOUT_S)
        assert listed.code == 0, listed.remark
        assert json.loads(bytes(listed.body))["consumerIdList"] == ["10.0.0.9@C"]
        # a push consumer's pull: no FLAG_SUBSCRIPTION, the heartbeat's subscription is used
        pulled = cl.invoke(pull_cmd(group, topic, 0, 0, sys_flag=0, subscription=None),
                           RPC_TIMEOUT_S)
        assert pulled.code == 0, (pulled.code, pulled.remark)


def test_new_group_notified_after_its_retry_route_is_registered(local_cluster) -> None:
    """The first heartbeat of a new group creates %RETRY%group; as in Java (heartBeat's
    createTopicInSendMessageBackMethod registers before registerConsumer notifies), the
    NOTIFY_CONSUMER_IDS_CHANGED and the reply come once the name server has the retry route,
    so the rebalance the notice starts finds the retry queue. Notified before, a consumer held
    its retry queue only at its next 20 s rebalance (issue #20 item 7)."""
    cluster = start_real(local_cluster)
    topic, group = "E2ECausalRetry", "e2e_cg_new_retry"
    create_topic_pullable(cluster, topic)
    assert get_route(namesrv_addr(cluster), f"%RETRY%{group}").code == 17
    with BlockingClient(broker_addr(cluster)) as cl:
        subs = {topic: "*", f"%RETRY%{group}": "*"}
        hb = cl.invoke(heartbeat_cmd("10.0.0.7@R", group, subs), RPC_TIMEOUT_S)
        assert hb.code == 0
        # the notice went out before the reply, on the same connection
        assert [r.ext_fields["consumerGroup"] for r in cl.requests if r.code == 40] == [group]
        route = get_route(namesrv_addr(cluster), f"%RETRY%{group}")
        assert route.code == 0, route.remark
        (qd,) = json.loads(bytes(route.body))["queueDatas"]
        assert (qd["readQueueNums"], qd["writeQueueNums"], qd["perm"]) == (1, 1, 6)
        # the next heartbeat creates nothing: answered without waiting, no notice
        cl.requests.clear()
        assert cl.invoke(heartbeat_cmd("10.0.0.7@R", group, subs), RPC_TIMEOUT_S).code == 0
        assert cl.requests == []


def test_sql92_pull_over_the_wire(local_cluster) -> None:
    """enablePropertyFilter=true: a pull carrying a SQL92 subscription gets only the records
    whose properties match; the default broker refuses it (spec §9.3)."""
    cluster = start_real(local_cluster, enablePropertyFilter="true")
    topic = "E2eSql92"
    create_topic_pullable(cluster, topic, queues=1)
    with BlockingClient(broker_addr(cluster)) as cl:
        for i in range(8):
            props = dict(msg_props(tags=f"Tag{i % 2}"), price=str(i * 10))
            assert cl.invoke(send_cmd(topic, f"m{i}".encode(), props), RPC_TIMEOUT_S).code == 0
        cmd = pull_cmd("sql_cg", topic, 0, 0, subscription="price >= 30 AND TAGS = 'Tag1'")
        cmd.ext_fields["expressionType"] = "SQL92"
        r = cl.invoke(cmd, RPC_TIMEOUT_S)
        assert r.code == 0, r.remark
        assert [bytes(m.body) for m in decode_messages(r.body)] == [b"m3", b"m5", b"m7"]
        assert r.ext_fields["nextBeginOffset"] == "8"


def _channel_files(cluster: launch.LocalCluster) -> list[str]:
    import os

    return [f for _d, _s, files in os.walk(cluster.runtime_dir) for f in files
            if f.endswith(".sock")]  # fmt: skip


def test_processor_channels_over_tcp(local_cluster) -> None:
    """processorChannel=tcp: every RemotingServer <-> processor channel is a TCP connection
    (what a processor on another host uses); sends and pulls work as over Unix sockets."""
    unix = start_real(local_cluster)
    assert len(_channel_files(unix)) >= 6  # the default: one Unix socket per processor group
    cluster = start_real(local_cluster, processorChannel="tcp")
    assert _channel_files(cluster) == []
    topic = "E2eTcpChannels"
    create_topic_pullable(cluster, topic, queues=1)
    with BlockingClient(broker_addr(cluster)) as cl:
        for i in range(20):
            r = cl.invoke(send_cmd(topic, f"t{i}".encode(), msg_props(tags="T")), RPC_TIMEOUT_S)
            assert r.code == 0, r.remark
        r = pull_e2e(cl, topic, 0, 0)
        assert r.code == 0 and [bytes(m.body) for m in decode_messages(r.body)] == [
            f"t{i}".encode() for i in range(20)]  # fmt: skip


def test_runtime_info_counts_what_the_send_and_pull_actors_did(local_cluster) -> None:
    """GET_BROKER_RUNTIME_INFO's totals come from the send and pull actors' stats page."""
    cluster = start_real(local_cluster)
    topic = "StatsT"
    create_topic_pullable(cluster, topic)

    def table(cl: BlockingClient) -> dict:
        r = cl.invoke(simple_cmd(28), RPC_TIMEOUT_S)
        assert r.code == 0
        return json.loads(bytes(r.body))["table"]

    with BlockingClient(broker_addr(cluster)) as cl:
        before = int(table(cl)["msgPutTotalTodayNow"])
        for i in range(3):
            assert cl.invoke(send_cmd(topic, b"s%d" % i, msg_props()), RPC_TIMEOUT_S).code == 0
        assert wait_until(lambda: int(table(cl)["msgPutTotalTodayNow"]) >= before + 3, 10)
        got = pull_e2e(cl, topic, 0, 0)
        assert got.code == 0
        assert wait_until(lambda: int(table(cl)["msgGetTotalTodayNow"]) >= 3, 10)
        t = table(cl)
        assert int(t["bootTimestamp"]) > 0 and t["runtime"].startswith("[ 0 days")
        assert int(t["putMessageSizeTotal"]) > 3 * 2

