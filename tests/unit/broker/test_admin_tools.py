"""Codes mqadmin uses beyond the client path: producer/consumer connections, consume stats with
fastjson's MessageQueue-keyed maps, broker config, delay offsets, reset offset, consumers of a
topic (AdminBrokerProcessor / ClientManageProcessor, RocketMQ 4.9.x)."""

from __future__ import annotations

import json
from typing import Any

from actors.broker.processors.broker2client import CALL_CLIENT_TIMEOUT_MS
from protocol.bodies import loads_object_map
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from tests.unit.broker.broker_kit import Broker, heartbeat_body, send_ext

PEER = ("10.0.0.5", 51000)


def _hb(broker: Broker, conn_id: int, body: bytes) -> None:
    r = broker.call(RC.HEART_BEAT, {}, body, conn_id=conn_id, peer=PEER)
    assert r is not None and r.code == RS.SUCCESS


def _offset_map(body: bytes, member: str = "offsetTable") -> dict[int, Any]:
    text = body.decode()
    start = text.index(f'"{member}":') + len(member) + 3
    pairs, _ = loads_object_map(text, start)
    return {k["queueId"]: v for k, v in pairs}


def test_producer_connection_list(broker: Broker) -> None:
    body = json.dumps({"clientID": "10.0.0.5@p1", "consumerDataSet": [],
                       "producerDataSet": [{"groupName": "PG1"}]}).encode()  # fmt: skip
    _hb(broker, 4, body)
    r = broker.call(RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG1"})
    assert r is not None and r.code == RS.SUCCESS
    assert json.loads(r.body) == {"connectionSet": [
        {"clientAddr": "10.0.0.5:51000", "clientId": "10.0.0.5@p1", "language": "JAVA",
         "version": 409}]}  # fmt: skip
    r = broker.call(RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "nobody"})
    assert r is not None and r.code == RS.SYSTEM_ERROR and "nobody" in (r.remark or "")


def test_consumer_connection_list_has_address_language_version(broker: Broker) -> None:
    _hb(broker, 5, heartbeat_body("10.0.0.5@c1", "CG", "T"))
    r = broker.call(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG"})
    assert r is not None and r.code == RS.SUCCESS
    conn = json.loads(r.body)["connectionSet"][0]
    assert conn == {"clientAddr": "10.0.0.5:51000", "clientId": "10.0.0.5@c1",
                    "language": "JAVA", "version": 409}  # fmt: skip


def test_consume_stats_offset_table_is_a_message_queue_keyed_map(broker: Broker) -> None:
    for i in range(3):
        broker.call(RC.SEND_MESSAGE_V2, send_ext("T", queue_id=1), b"x", now_ms=5000 + i)
    q = {"consumerGroup": "CG", "topic": "T", "queueId": 1, "commitOffset": 2}
    broker.call(RC.UPDATE_CONSUMER_OFFSET, q, oneway=True)
    r = broker.call(RC.GET_CONSUME_STATS, {"consumerGroup": "CG", "topic": "T"})
    assert r is not None and r.code == RS.SUCCESS
    assert r.body.startswith(b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a"')
    table = _offset_map(r.body)
    # lastTimestamp: the store time of the last consumed message (offset 1)
    assert table[1] == {"brokerOffset": 3, "consumerOffset": 2, "lastTimestamp": 5001}
    assert table[0]["brokerOffset"] == 0


def test_broker_config_lists_properties(broker: Broker) -> None:
    r = broker.call(RC.GET_BROKER_CONFIG)
    assert r is not None and r.code == RS.SUCCESS
    lines = set(r.body.decode().splitlines())
    want = {"brokerName=broker-a", "flushDiskType=ASYNC_FLUSH", "autoCreateTopicEnable=true"}
    assert want <= lines
    assert json.loads(r.ext_fields["version"])["counter"] == 0


def test_all_delay_offset_is_the_live_table(broker: Broker) -> None:
    r = broker.call(RC.GET_ALL_DELAY_OFFSET)
    assert r is not None and r.code == RS.SUCCESS and r.body == b'{"offsetTable":{}}'
    sched = broker.cores["schedule"]
    sched.offsets[3] = 7  # not persisted yet: Java's getAllDelayOffset encodes the live table
    sched.offsets[1] = 12
    r = broker.call(RC.GET_ALL_DELAY_OFFSET)
    assert r is not None and r.body == b'{"offsetTable":{1:12,3:7}}'


def test_all_delay_offset_on_a_slave_is_the_synced_copy(tmp_path) -> None:
    """A slave's ScheduleMessageService delivers nothing: it answers the delayOffset.json its
    SlaveSynchronize wrote (a Java slave answers the table it loaded at start)."""
    slave = Broker(str(tmp_path), brokerRole="SLAVE", brokerId=1)
    try:
        assert not slave.cores["schedule"].deliver and "txcheck" not in slave.cores
        r = slave.call(RC.GET_ALL_DELAY_OFFSET)
        assert r is not None and r.code == RS.SUCCESS and r.body == b'{"offsetTable":{}}'
        synced = b'{"offsetTable":{2:40,5:9}}'
        (tmp_path / "config").mkdir(exist_ok=True)
        (tmp_path / "config" / "delayOffset.json").write_bytes(synced)
        r = slave.call(RC.GET_ALL_DELAY_OFFSET)
        assert r is not None and r.body == synced
    finally:
        slave.close()


def test_reset_offset_by_time_tells_each_consumer(broker: Broker) -> None:
    for i, ts in enumerate((1000, 2000, 3000, 4000)):
        r = broker.call(RC.SEND_MESSAGE_V2, send_ext("T", queue_id=0), f"m{i}".encode(), now_ms=ts)
        assert r is not None and r.code == RS.SUCCESS
    _hb(broker, 5, heartbeat_body("10.0.0.5@c1", "CG", "T"))
    for qid, off in ((0, 1), *((q, 0) for q in range(1, 8))):
        q = {"consumerGroup": "CG", "topic": "T", "queueId": qid, "commitOffset": off}
        broker.call(RC.UPDATE_CONSUMER_OFFSET, q, oneway=True)
    broker.outbox.take()
    ext = {"topic": "T", "group": "CG", "timestamp": "3000", "isForce": "true"}
    r = broker.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, ext)
    assert r is not None and r.code == RS.SUCCESS, r.remark
    assert _offset_map(r.body)[0] == 2  # first message stored at or after 3000
    sent = broker.outbox.take()
    assert [(c, cmd.code, cmd.flag & 2) for c, cmd in sent] == [
        (5, RC.RESET_CONSUMER_CLIENT_OFFSET, 2)]  # fmt: skip
    assert sent[0][1].ext_fields == {"topic": "T", "group": "CG", "timestamp": "3000",
                                     "isForce": "true"}  # fmt: skip
    assert _offset_map(sent[0][1].body)[0] == 2
    # not forced: a later point than the consumer's offset keeps the consumer's offset
    r = broker.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, dict(ext, isForce="false"))
    assert r is not None and _offset_map(r.body)[0] == 1


def test_reset_offset_errors(broker: Broker) -> None:
    ext = {"topic": "T", "group": "CG", "timestamp": "-1", "isForce": "true"}
    r = broker.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, ext)
    assert r is not None and r.code == RS.SYSTEM_ERROR and "no topic" in (r.remark or "")
    broker.call(RC.SEND_MESSAGE_V2, send_ext("T"), b"x")
    r = broker.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, ext)
    assert r is not None and r.code == RS.SYSTEM_ERROR and "not exist" in (r.remark or "")
    for qid in range(8):
        q = {"consumerGroup": "CG", "topic": "T", "queueId": qid, "commitOffset": 0}
        broker.call(RC.UPDATE_CONSUMER_OFFSET, q, oneway=True)
    r = broker.call(RC.INVOKE_BROKER_TO_RESET_OFFSET, ext)
    assert r is not None and r.code == RS.CONSUMER_NOT_ONLINE


def test_query_topic_consume_by_who(broker: Broker) -> None:
    _hb(broker, 5, heartbeat_body("10.0.0.5@c1", "CG1", "T"))
    q = {"consumerGroup": "CG2", "topic": "T", "queueId": 0, "commitOffset": 0}
    broker.call(RC.UPDATE_CONSUMER_OFFSET, q, oneway=True)
    r = broker.call(RC.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "T"})
    assert r is not None and r.code == RS.SUCCESS
    assert json.loads(r.body) == {"groupList": ["CG1", "CG2"]}


def _consumer(broker: Broker, conn_id: int = 5, client: str = "10.0.0.5@c1") -> None:
    _hb(broker, conn_id, heartbeat_body(client, "CG", "T"))
    broker.outbox.take()


def test_consumer_running_info_is_asked_of_the_client(broker: Broker) -> None:
    _consumer(broker)
    ext = {"consumerGroup": "CG", "clientId": "10.0.0.5@c1", "jstackEnable": "false"}
    assert broker.call(RC.GET_CONSUMER_RUNNING_INFO, ext, conn_id=9) is None  # answered later
    [(conn, fwd)] = broker.outbox.take()
    assert conn == 5 and fwd.code == RC.GET_CONSUMER_RUNNING_INFO and not fwd.flag & 3
    assert fwd.ext_fields["clientId"] == "10.0.0.5@c1"
    answer = fwd.make_response(RS.SUCCESS, None, None, b'{"properties":{"x":"1"}}')
    broker.cores["admin"].on_client_response(answer, 10)
    [(conn, resp)] = broker.outbox.take()
    assert conn == 9 and resp.code == RS.SUCCESS and resp.opaque == 7  # the asker's opaque
    assert resp.body == b'{"properties":{"x":"1"}}'
    broker.cores["admin"].on_client_response(answer, 10)  # a duplicate matches nothing
    assert broker.outbox.take() == []


def test_consumer_running_info_unknown_client_and_timeout(broker: Broker) -> None:
    _consumer(broker)
    ext = {"consumerGroup": "CG", "clientId": "nobody"}
    r = broker.call(RC.GET_CONSUMER_RUNNING_INFO, ext)
    assert r is not None and r.code == RS.SYSTEM_ERROR and "not online" in (r.remark or "")
    ext["clientId"] = "10.0.0.5@c1"
    assert broker.call(RC.GET_CONSUMER_RUNNING_INFO, ext, conn_id=9, now_ms=1000) is None
    broker.outbox.take()
    admin = broker.cores["admin"]
    [call] = admin.b2c.calls.values()
    assert call.deadline_ms == 1000 + CALL_CLIENT_TIMEOUT_MS  # Broker2Client.callClient: 10 s
    assert 0 < admin.tick(5000) <= 6000  # back by that deadline at the latest
    admin.tick(10_999)
    assert broker.outbox.take() == []
    admin.tick(11_000)
    [(conn, resp)] = broker.outbox.take()
    assert conn == 9 and resp.code == RS.CONSUME_MSG_TIMEOUT  # AdminBrokerProcessor.callConsumer
    assert "<CG> <10.0.0.5@c1> Timeout" in (resp.remark or "")


def test_consume_message_directly_sends_the_stored_record(broker: Broker) -> None:
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("T"), b"direct")
    assert r is not None and r.code == RS.SUCCESS
    _consumer(broker)
    ext = {"consumerGroup": "CG", "clientId": "10.0.0.5@c1", "msgId": r.ext_fields["msgId"]}
    assert broker.call(RC.CONSUME_MESSAGE_DIRECTLY, ext, conn_id=9) is None
    [(conn, fwd)] = broker.outbox.take()
    assert conn == 5 and fwd.code == RC.CONSUME_MESSAGE_DIRECTLY
    assert fwd.ext_fields["brokerName"] == "broker-a"
    from protocol.message import decode_messages

    assert bytes(decode_messages(fwd.body)[0].body) == b"direct"
    r = broker.call(RC.CONSUME_MESSAGE_DIRECTLY, dict(ext, msgId="zz"))
    assert r is not None and r.code == RS.SYSTEM_ERROR


def _check_body(expr_type: str, sub: str) -> bytes:
    return json.dumps({"clientId": "c1", "group": "CG", "subscriptionData": {
        "classFilterMode": False, "codeSet": [], "expressionType": expr_type, "subString": sub,
        "subVersion": 1, "tagsSet": [], "topic": "T"}}).encode()  # fmt: skip


def test_check_client_config(tmp_path: Any) -> None:
    off = Broker(str(tmp_path / "off"))
    on = Broker(str(tmp_path / "on"), enablePropertyFilter=True)
    try:
        r = off.call(RC.CHECK_CLIENT_CONFIG, {}, _check_body("TAG", "*"))
        assert r is not None and r.code == RS.SUCCESS
        r = off.call(RC.CHECK_CLIENT_CONFIG, {}, _check_body("SQL92", "a > 1"))
        assert r is not None and r.code == RS.SYSTEM_ERROR and "SQL92" in (r.remark or "")
        r = on.call(RC.CHECK_CLIENT_CONFIG, {}, _check_body("SQL92", "a > 1"))
        assert r is not None and r.code == RS.SUCCESS
        r = on.call(RC.CHECK_CLIENT_CONFIG, {}, _check_body("SQL92", "a >"))
        assert r is not None and r.code == RS.SUBSCRIPTION_PARSE_FAILED
        r = on.call(RC.CHECK_CLIENT_CONFIG, {}, b"{not json")
        assert r is not None and r.code == RS.SYSTEM_ERROR
        r = on.call(RC.CHECK_CLIENT_CONFIG, {}, b'{"clientId":"c1","group":"CG"}')
        assert r is not None and r.code == RS.SUCCESS  # nothing to check
        r = on.call(RC.CHECK_CLIENT_CONFIG, {}, _check_body("GROOVY", "x"))
        assert r is not None and r.code == RS.SUBSCRIPTION_PARSE_FAILED
    finally:
        off.close()
        on.close()


def test_a_oneway_relayed_request_gets_no_answer(broker: Broker) -> None:
    _consumer(broker)
    ext = {"consumerGroup": "CG", "clientId": "10.0.0.5@c1"}
    assert broker.call(RC.GET_CONSUMER_RUNNING_INFO, ext, conn_id=9, oneway=True) is None
    [(conn, fwd)] = broker.outbox.take()
    assert conn == 5 and broker.cores["admin"].b2c.calls == {}
    broker.cores["admin"].on_client_response(fwd.make_response(RS.SUCCESS), 10)
    assert broker.outbox.take() == []


def test_update_broker_config_reaches_every_core_and_is_persisted(broker: Broker) -> None:
    import os

    body = b"brokerPermission=4\nregionId=EastRegion\n# a comment\nnoSuchKey=1\nlistenPort=20911\n"
    r = broker.call(RC.UPDATE_BROKER_CONFIG, None, body, now_ms=1234)
    assert r is not None and r.code == RS.SUCCESS
    assert "noSuchKey" in (r.remark or "") and "listenPort" in (r.remark or "")
    assert "config/broker.properties" in (r.remark or "")
    for ctx in broker.ctxs.values():  # replicated to every actor
        assert ctx.broker_config.brokerPermission == 4
    # a read-only broker: the send core re-read it (refreshed reply template too), and the
    # name servers will be told its topics are read-only (clients then stop sending to it)
    assert broker.cores["send"].broker_writable is False
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("T"), b"x")
    assert r is not None and r.ext_fields["MSG_REGION"] == "EastRegion"
    tc = broker.controller.topics.get("T")
    assert tc is not None and broker.controller._registered_config(tc).perm == 4
    # GET_BROKER_CONFIG shows it with a new data version, config/broker.properties keeps it
    r = broker.call(RC.GET_BROKER_CONFIG, now_ms=77)
    assert r is not None and "brokerPermission=4" in r.body.decode().splitlines()
    assert json.loads(r.ext_fields["version"]) == {"counter": 1, "timestamp": 1234}
    path = os.path.join(broker.sc.storePathRootDir, "config", "broker.properties")
    with open(path, encoding="utf-8") as f:
        saved = f.read().splitlines()
    assert "brokerPermission=4" in saved and "regionId=EastRegion" in saved
    assert broker.controller.take_register_needed()  # the name servers learn the new perm
    # listenPort is read at start: kept in the file for the next one, the running broker (and
    # what it advertises) keeps the port it listens on, and the remark says where it went
    assert "listenPort=20911" in saved and "noSuchKey=1" not in saved
    assert len(saved) == 3  # the updated names only, not every default
    for ctx in (*broker.ctxs.values(), broker.controller):
        assert ctx.broker_config.listenPort == 10911


def test_update_broker_config_refuses_a_bad_value(broker: Broker) -> None:
    r = broker.call(RC.UPDATE_BROKER_CONFIG, None, b"brokerPermission=lots\n")
    assert r is not None and r.code == RS.SYSTEM_ERROR and "brokerPermission" in (r.remark or "")
    assert broker.ctxs["send"].broker_config.brokerPermission == 6
    r = broker.call(RC.UPDATE_BROKER_CONFIG, None, b"")  # Java: nothing to update, SUCCESS
    assert r is not None and r.code == RS.SUCCESS
    assert broker.ctxs["send"].broker_config.brokerPermission == 6
    # bytes that are not UTF-8 read as U+FFFD (new String(body, UTF-8)): an unknown name
    r = broker.call(RC.UPDATE_BROKER_CONFIG, None, b"\xff\xfe=1\n")
    assert r is not None and r.code == RS.SUCCESS and "ignored unknown" in (r.remark or "")
    assert broker.ctxs["send"].broker_config.brokerPermission == 6


def test_update_broker_config_checks_the_config_the_next_start_reads(tmp_path) -> None:
    """A partial update is checked merged with the running config: a slave's new brokerId is
    kept as sent (it used to be read as a master's and stored as 0, which the next start
    refuses), and an update that would leave a config the next start refuses is refused."""
    import os

    slave = Broker(str(tmp_path / "slave"), brokerRole="SLAVE", brokerId=2)
    try:
        r = slave.call(RC.UPDATE_BROKER_CONFIG, None, b"brokerId=3\n", now_ms=5)
        assert r is not None and r.code == RS.SUCCESS, r.remark
        path = os.path.join(slave.sc.storePathRootDir, "config", "broker.properties")
        with open(path, encoding="utf-8") as f:
            assert "brokerId=3" in f.read().splitlines()
        r = slave.call(RC.UPDATE_BROKER_CONFIG, None, b"brokerId=0\n")
        assert r is not None and r.code == RS.SYSTEM_ERROR and "brokerId" in (r.remark or "")
    finally:
        slave.close()
    master = Broker(str(tmp_path / "master"))
    try:
        for body, key in ((b"brokerRole=SLAVE\n", "brokerId"), (b"aclEnable=true\n", "aclEnable")):
            r = master.call(RC.UPDATE_BROKER_CONFIG, None, body)
            assert r is not None and r.code == RS.SYSTEM_ERROR and key in (r.remark or ""), body
        assert master.ctxs["admin"].broker_config.brokerRole == "ASYNC_MASTER"  # nothing applied
    finally:
        master.close()


def test_update_broker_config_refuses_the_black_list(broker: Broker) -> None:
    for body in (b"configBlackList=\n", b"regionId=X\nbrokerConfigPath=/tmp/b.conf\n"):
        r = broker.call(RC.UPDATE_BROKER_CONFIG, None, body)
        assert r is not None and r.code == RS.NO_PERMISSION
        assert r.remark == "Can not update config in black list."
    assert broker.ctxs["admin"].broker_config.regionId == "DefaultRegion"  # nothing applied
