"""client_manage, consumer_manage, admin, query processors and the controller core."""

from __future__ import annotations

import json

from broker_kit import Broker, heartbeat_body, send_ext, wire_cmd

from actors.broker.config import BrokerConfig
from actors.broker.controller import BrokerControllerCore
from actors.broker.lock_manager import RebalanceLockManager
from actors.core import Request
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from store.config import StoreConfig


def test_heartbeat_creates_retry_topic_and_notifies(broker: Broker) -> None:
    r = broker.call(RC.HEART_BEAT, None, heartbeat_body("c1", "CG", "T"), conn_id=1)
    assert r.code == RS.SUCCESS and r.version == 409
    assert broker.ctxs["pull"].topics.get("%RETRY%CG").write_queue_nums == 1
    assert broker.controller.take_register_needed()
    sent = broker.outbox.take()
    assert [(c, cmd.code, cmd.is_oneway, cmd.ext_fields) for c, cmd in sent] == [
        (1, RC.NOTIFY_CONSUMER_IDS_CHANGED, True, {"consumerGroup": "CG"})
    ]
    # same heartbeat again: nothing changed, no notify
    broker.call(RC.HEART_BEAT, None, heartbeat_body("c1", "CG", "T"), conn_id=1)
    assert broker.outbox.take() == []
    # a second consumer: every channel of the group is notified
    broker.call(RC.HEART_BEAT, None, heartbeat_body("c2", "CG", "T"), conn_id=2)
    assert sorted(c for c, _ in broker.outbox.take()) == [1, 2]
    r = broker.call(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"})
    assert json.loads(r.body) == {"consumerIdList": ["c1", "c2"]}


def test_cpp_heartbeat_ordinal_enums(broker: Broker) -> None:
    body = (
        b'{"clientID":"127.0.0.1@1#DEFAULT","consumerDataSet":[{"groupName":"G",'
        b'"consumeType":1,"messageModel":1,"consumeFromWhere":0,"subscriptionDataSet":'
        b'[{"topic":"T","subString":"TagA","tagsSet":["TagA"],"subVersion":"17"}]}],'
        b'"producerDataSet":[]}\n'
    )
    r = broker.call(RC.HEART_BEAT, {"AccessKey": "", "Signature": "s"}, body, language="CPP")
    assert r.code == RS.SUCCESS
    info = broker.ctxs["pull"].consumer_groups["G"]
    assert info.message_model == "CLUSTERING" and info.consume_type == "CONSUME_PASSIVELY"
    sub = info.find_subscription("T")
    assert sub.sub_version == 17 and sub.code_set == [2598919]


def test_bad_heartbeat_body(broker: Broker) -> None:
    r = broker.call(RC.HEART_BEAT, None, b"{not json")
    assert r.code == RS.SYSTEM_ERROR


def test_unregister_and_close_notify_remaining(broker: Broker) -> None:
    broker.call(RC.HEART_BEAT, None, heartbeat_body("c1", "CG", "T"), conn_id=1)
    broker.call(RC.HEART_BEAT, None, heartbeat_body("c2", "CG", "T"), conn_id=2)
    broker.outbox.take()
    r = broker.call(RC.UNREGISTER_CLIENT, {"clientID": "c2", "consumerGroup": "CG"}, conn_id=2)
    assert r.code == RS.SUCCESS
    assert [c for c, _ in broker.outbox.take()] == [1]
    broker.cores["client_manage"].on_connection_closed(1, 0)
    broker.pump()
    r = broker.call(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"})
    assert r.code == RS.SYSTEM_ERROR and r.remark == "no consumer for this group, CG"


def test_channel_expiry_in_tick(broker: Broker) -> None:
    core = broker.cores["client_manage"]
    core.tick(0)
    broker.call(RC.HEART_BEAT, None, heartbeat_body("c1", "CG", "T"), conn_id=1, now_ms=0)
    core.tick(110_000)
    assert "CG" in broker.ctxs["client_manage"].consumer_groups
    assert broker.outbox.closed == []
    core.tick(130_000)
    broker.pump()
    assert "CG" not in broker.ctxs["consumer_manage"].consumer_groups
    # spec §9.2: the expired channel is closed too (once), not only forgotten
    assert broker.outbox.closed == [1]


def test_query_offset_rules(broker: Broker) -> None:
    q = {"consumerGroup": "CG", "topic": "T", "queueId": 0}
    # unknown queue (min offset -1) => 0 with code 0 (new-group rule)
    r = broker.call(RC.QUERY_CONSUMER_OFFSET, q)
    assert (r.code, r.ext_fields) == (RS.SUCCESS, {"offset": "0"})
    broker.call(RC.SEND_MESSAGE_V2, send_ext("T"), b"x")
    r = broker.call(RC.QUERY_CONSUMER_OFFSET, q)
    assert (r.code, r.ext_fields) == (RS.SUCCESS, {"offset": "0"})
    assert broker.call(RC.UPDATE_CONSUMER_OFFSET, dict(q, commitOffset=1), oneway=True) is None
    r = broker.call(RC.QUERY_CONSUMER_OFFSET, q)
    assert r.ext_fields == {"offset": "1"}
    assert broker.controller.offsets.query_offset("CG", "T", 0) == 1


def test_admin_topics_and_system_topic_rejected(broker: Broker) -> None:
    ext = {
        "topic": "AccBasic",
        "defaultTopic": "TBW102",
        "order": False,
        "perm": 6,
        "readQueueNums": 4,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "writeQueueNums": 4,
    }
    assert broker.call(RC.UPDATE_AND_CREATE_TOPIC, ext, version=121).code == RS.SUCCESS
    assert broker.ctxs["send"].topics.get("AccBasic").read_queue_nums == 4
    r = broker.call(RC.UPDATE_AND_CREATE_TOPIC, dict(ext, topic="SCHEDULE_TOPIC_XXXX"))
    assert r.code == RS.SYSTEM_ERROR
    r = broker.call(RC.UPDATE_AND_CREATE_TOPIC, dict(ext, topic="a b"))
    assert r.code == RS.SYSTEM_ERROR
    assert broker.call(RC.DELETE_TOPIC_IN_BROKER, {"topic": "AccBasic"}).code == RS.SUCCESS
    assert broker.ctxs["pull"].topics.get("AccBasic") is None
    assert "AccBasic" not in broker.controller.topics_json()


def test_admin_offsets_by_queue(broker: Broker) -> None:
    for _ in range(3):
        broker.call(RC.SEND_MESSAGE_V2, send_ext("T"), b"x")
    q = {"topic": "T", "queueId": 0}
    assert broker.call(RC.GET_MAX_OFFSET, q).ext_fields == {"offset": "3"}
    assert broker.call(RC.GET_MIN_OFFSET, q).ext_fields == {"offset": "0"}
    assert int(broker.call(RC.GET_EARLIEST_MSG_STORETIME, q).ext_fields["timestamp"]) >= 0
    r = broker.call(RC.SEARCH_OFFSET_BY_TIMESTAMP, dict(q, timestamp=0))
    assert r.code == RS.SUCCESS and "offset" in r.ext_fields
    r = broker.call(RC.GET_BROKER_RUNTIME_INFO, {})
    assert "msgPutTotalTodayNow" in json.loads(r.body)["table"]


def test_unknown_code_not_supported_but_oneway_unanswered(broker: Broker) -> None:
    r = broker.call(4242, {})
    assert (r.code, r.remark) == (RS.REQUEST_CODE_NOT_SUPPORTED, " request type 4242 not supported")
    # spec §1.6: the broker HAS a default processor, whose reply Java drops for a oneway
    assert broker.call(4242, {}, oneway=True) is None


def test_lock_batch_and_expiry(broker: Broker) -> None:
    mq = {"brokerName": "broker-a", "queueId": 0, "topic": "T"}

    def body(cid):
        return json.dumps(
            {
                "clientId": cid,
                "consumerGroup": "G",
                "mqSet": [mq],
            }
        ).encode()

    r = broker.call(RC.LOCK_BATCH_MQ, None, body("a"), now_ms=0)
    assert json.loads(r.body) == {"lockOKMQSet": [mq]}
    r = broker.call(RC.LOCK_BATCH_MQ, None, body("b"), now_ms=30_000)
    assert json.loads(r.body) == {"lockOKMQSet": []}
    r = broker.call(RC.LOCK_BATCH_MQ, None, body("b"), now_ms=60_001)
    assert json.loads(r.body) == {"lockOKMQSet": [mq]}
    assert broker.call(RC.UNLOCK_BATCH_MQ, None, body("b"), oneway=True) is None
    r = broker.call(RC.LOCK_BATCH_MQ, None, body("a"), now_ms=60_002)
    assert json.loads(r.body) == {"lockOKMQSet": [mq]}


def test_lock_manager_refresh() -> None:
    m = RebalanceLockManager(60_000)
    mq = ("T", "b", 0)
    assert m.try_lock_batch("G", [mq], "a", 0) == [mq]
    assert m.try_lock_batch("G", [mq], "a", 50_000) == [mq]  # refresh
    assert m.try_lock_batch("G", [mq], "b", 100_000) == []
    assert m.is_locked("G", mq, "a", 100_000)


def test_subscription_group_admin(broker: Broker) -> None:
    body = b'{"groupName":"SG","retryMaxTimes":3}'
    assert broker.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body).code == RS.SUCCESS
    r = broker.call(RC.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})
    assert json.loads(r.body)["subscriptionGroupTable"]["SG"]["retryMaxTimes"] == 3
    assert broker.ctxs["send"].groups.get("SG").retry_max_times == 3
    broker.call(RC.DELETE_SUBSCRIPTIONGROUP, {"groupName": "SG", "removeOffset": True})
    assert broker.ctxs["send"].groups.get("SG") is None


def test_query_and_view_message(broker: Broker) -> None:
    r = broker.call(
        RC.SEND_MESSAGE_V2, send_ext("T", props="KEYS\x01order-1\x02UNIQ_KEY\x01U1"), b"body"
    )
    from protocol.message import decode_offset_msg_id

    phy = decode_offset_msg_id(r.ext_fields["msgId"])[2]
    r = broker.call(RC.VIEW_MESSAGE_BY_ID, {"offset": phy})
    assert r.code == RS.SUCCESS and b"body" in r.body
    r = broker.call(RC.VIEW_MESSAGE_BY_ID, {"offset": 123456})
    assert r.code == RS.SYSTEM_ERROR
    q = {"topic": "T", "key": "order-1", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2**62}
    r = broker.call(RC.QUERY_MESSAGE, q)
    assert r.code == RS.SUCCESS and b"body" in r.body
    r = broker.call(RC.QUERY_MESSAGE, dict(q, key="nope", _UNIQUE_KEY_QUERY="true"))
    assert (r.code, r.remark) == (
        RS.QUERY_NOT_FOUND,
        "can not find message, maybe time range not correct",
    )


def test_controller_persists_and_reloads(tmp_path) -> None:
    root = str(tmp_path / "s")
    b = Broker(root)
    try:
        b.call(RC.SEND_MESSAGE_V2, send_ext("Persist"), b"x")
        b.call(
            RC.UPDATE_CONSUMER_OFFSET,
            {"consumerGroup": "CG", "topic": "Persist", "queueId": 0, "commitOffset": 1},
        )
        b.controller.tick(0)
        b.controller.tick(5000)  # 5 s offset persist
    finally:
        b.close()
    c = BrokerControllerCore(BrokerConfig(), StoreConfig(storePathRootDir=root))
    c.load(0)
    assert c.topics.get("Persist") is not None
    assert c.offsets.query_offset("CG", "Persist", 0) == 1
    snap = c.snapshot()
    assert any(t.topic_name == "Persist" for t in snap.topics)


def test_controller_register_commands(broker: Broker) -> None:
    import zlib

    ((addr, cmd),) = broker.controller.build_register_requests(0)
    assert addr == "127.0.0.1:9876" and cmd.code == RC.REGISTER_BROKER
    ext = cmd.ext_fields
    assert ext["brokerAddr"] == "127.0.0.1:10911" and ext["haServerAddr"] == "127.0.0.1:10912"
    assert ext["brokerId"] == "0" and ext["compressed"] == "false"
    assert int(ext["bodyCrc32"]) == zlib.crc32(cmd.body) & 0x7FFFFFFF
    table = json.loads(cmd.body)["topicConfigSerializeWrapper"]["topicConfigTable"]
    assert table["TBW102"]["perm"] == 7 and "DefaultCluster" in table
    ((addr, un),) = broker.controller.build_unregister_requests()
    assert un.code == RC.UNREGISTER_BROKER and un.ext_fields["brokerName"] == "broker-a"


def test_broker_config_from_properties() -> None:
    bc = BrokerConfig.from_properties(
        {
            "brokerName": "b1",
            "listenPort": "10921",
            "autoCreateTopicEnable": "false",
            "unknownKey": "x",
        }
    )
    assert (bc.brokerName, bc.listenPort, bc.autoCreateTopicEnable) == ("b1", 10921, False)
    import pytest

    with pytest.raises(ValueError, match="listenPort"):
        BrokerConfig.from_properties({"listenPort": "abc"})
    with pytest.raises(ValueError, match="longPollingEnable"):
        BrokerConfig.from_properties({"longPollingEnable": "maybe"})


def _create_topic_ext(topic: str) -> dict:
    return {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": 2,
        "writeQueueNums": 2,
        "perm": 6,
        "topicFilterType": "SINGLE_TAG",
    }


def test_create_topic_reply_waits_for_registration(broker: Broker) -> None:
    broker.ctxs["admin"].registration_barrier = True
    core = broker.cores["admin"]
    req = Request(
        9, ("127.0.0.1", 1), wire_cmd(RC.UPDATE_AND_CREATE_TOPIC, _create_topic_ext("B")), 0
    )
    assert core.process(req, 0) is None  # held
    assert broker.outbox.take() == []
    events = broker.ctxs["admin"].drain_events()
    broker.controller.apply_events(events, "admin", 0)
    assert broker.controller.take_register_needed()
    barriers = broker.controller.take_barriers()
    assert barriers == [("admin", events[0].barrier)]
    assert core.release(barriers[0][1], 5)
    [(conn_id, resp)] = broker.outbox.take()
    assert conn_id == 9 and resp.code == RS.SUCCESS and resp.opaque == req.cmd.opaque
    assert not core.release(barriers[0][1], 5)  # only once


def test_create_topic_held_reply_times_out_and_drops_on_close(broker: Broker) -> None:
    broker.ctxs["admin"].registration_barrier = True
    core = broker.cores["admin"]
    for conn in (1, 2):
        req = Request(
            conn,
            ("127.0.0.1", 1),
            wire_cmd(RC.UPDATE_AND_CREATE_TOPIC, _create_topic_ext(f"C{conn}")),
            0,
        )
        assert core.process(req, 1000) is None
    core.on_connection_closed(2, 1000)
    assert 0 < core.tick(1000) <= 6000  # back by the deadline (or the stats sample)
    core.tick(6999)
    assert broker.outbox.take() == []
    core.tick(7000)  # registerBrokerTimeoutMills passed: reply anyway
    assert [c for c, r in broker.outbox.take()] == [1]
    assert core.held.held == {}


def test_create_topic_without_barrier_answers_at_once(broker: Broker) -> None:
    r = broker.call(RC.UPDATE_AND_CREATE_TOPIC, _create_topic_ext("D"))
    assert r is not None and r.code == RS.SUCCESS
    assert broker.controller.take_barriers() == []


NS = "127.0.0.1:9876"  # the kit's (only, so first) name server


def test_registration_reply_sets_the_order_topics(broker: Broker) -> None:
    """updateOrderTopicConfig: the name server's ORDER_TOPIC_CONFIG table in a registration
    reply makes exactly the listed topics order topics; an empty table ends them all; no body
    (the name server has no such namespace) changes nothing."""
    from protocol.command import RemotingCommand

    ext = {"defaultTopic": "TBW102", "perm": 6, "readQueueNums": 4, "topicFilterType": "SINGLE_TAG",
           "topicSysFlag": 0, "writeQueueNums": 4}  # fmt: skip
    for name, order in (("Plain", False), ("WasOrder", True)):
        r = broker.call(RC.UPDATE_AND_CREATE_TOPIC, dict(ext, topic=name, order=order))
        assert r.code == RS.SUCCESS

    def reply(body: bytes) -> RemotingCommand:
        ok = RemotingCommand.request(RC.REGISTER_BROKER, {}, body).make_response(RS.SUCCESS)
        ok.body = body
        return ok

    def orders() -> dict[str, bool]:
        topics = broker.ctxs["send"].topics
        return {t: topics.get(t).order for t in ("Plain", "WasOrder")}

    def apply(body: bytes) -> None:
        events = broker.controller.order_topic_events(NS, reply(body))
        for target, evs in broker.controller.apply_events(events, "controller", 5).items():
            for ev in evs:
                broker.ctxs[target].apply(ev, 5)

    assert broker.controller.order_topic_events(NS, reply(b"")) == []
    apply(b'{"table":{"Plain":"broker-a:4","Elsewhere":"broker-b:8"}}')
    assert orders() == {"Plain": True, "WasOrder": False}
    assert json.loads(broker.controller.topics_json())["topicConfigTable"]["Plain"]["order"]
    apply(b'{"table":{}}')
    assert orders() == {"Plain": False, "WasOrder": False}
    failed = reply(b'{"table":{"Plain":"x"}}')
    failed.code = RS.SYSTEM_ERROR
    assert broker.controller.order_topic_events(NS, failed) == []
    assert broker.controller.order_topic_events(NS, reply(b"{not json")) == []
    # another name server's table is not taken (only the first's, as Java's first result)
    listed = reply(b'{"table":{"Plain":"broker-a:4"}}')
    assert broker.controller.order_topic_events(NS, listed) != []
    assert broker.controller.order_topic_events("10.9.9.9:9876", listed) == []


def test_heartbeat_details_as_client_manage_processor(tmp_path) -> None:
    """A system group (CID_RMQ_SYS_*) is created even with autoCreateSubscriptionGroup=false;
    a unit-mode consumer's retry topic has TopicSysFlag FLAG_UNIT_SUB; another clientId on a
    known connection replaces it without notifying the group."""
    b = Broker(str(tmp_path / "s"), autoCreateSubscriptionGroup=False)
    try:
        b.call(RC.HEART_BEAT, None, heartbeat_body("c1", "PlainG", "T"), conn_id=1)
        assert b.ctxs["pull"].groups.get("PlainG") is None
        assert b.ctxs["pull"].topics.get("%RETRY%PlainG") is None
        b.call(RC.HEART_BEAT, None, heartbeat_body("c1", "CID_RMQ_SYS_X", "T"), conn_id=1)
        assert b.ctxs["pull"].groups.get("CID_RMQ_SYS_X") is not None
        assert b.ctxs["pull"].topics.get("%RETRY%CID_RMQ_SYS_X") is not None

        unit = json.loads(heartbeat_body("c2", "CID_RMQ_SYS_U", "T"))
        unit["consumerDataSet"][0]["unitMode"] = True
        b.call(RC.HEART_BEAT, None, json.dumps(unit).encode(), conn_id=2)
        assert b.ctxs["pull"].topics.get("%RETRY%CID_RMQ_SYS_U").topic_sys_flag == 2
        b.outbox.take()
        b.call(RC.HEART_BEAT, None, heartbeat_body("c9", "CID_RMQ_SYS_X", "T"), conn_id=1)
        assert b.outbox.take() == []
        r = b.call(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CID_RMQ_SYS_X"})
        assert json.loads(r.body) == {"consumerIdList": ["c9"]}
    finally:
        b.close()
