"""DELETE_TOPIC_IN_BROKER on the store writer (actors.broker.processors.admin_store): in order
with the sends, the queues gone before the answer, the answer held until the name servers have
a registration without the topic; UPDATE_BROKER_CONFIG of brokerPermission held the same way
(AdminBrokerProcessor.deleteTopic / updateBrokerConfig, RocketMQ 4.9.x)."""

from __future__ import annotations

from broker_kit import Broker, pull_ext, send_ext, wire_cmd

from actors.broker.events import BrokerConfigChanged, TopicsDeleted
from actors.broker.processors import group_for_code
from actors.core import Request
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.message import decode_messages


def _send(b: Broker, topic: str, body: bytes) -> int:
    r = b.call(RC.SEND_MESSAGE_V2, send_ext(topic, queue_id=0), body)
    assert r is not None and r.code == RS.SUCCESS, r and r.remark
    return int(r.ext_fields["queueOffset"])


def _bodies(b: Broker, topic: str, offset: int) -> list[bytes]:
    r = b.call(RC.PULL_MESSAGE, pull_ext(topic, offset=offset, sys_flag=4, sub="*"))
    assert r is not None
    return [bytes(m.body) for m in decode_messages(r.body)] if r.code == RS.SUCCESS else []


def _max_offset(b: Broker, topic: str) -> int:
    r = b.call(RC.GET_MAX_OFFSET, {"topic": topic, "queueId": 0})
    assert r is not None and r.code == RS.SUCCESS
    return int(r.ext_fields["offset"])


def test_the_writer_serves_the_codes_that_change_the_store() -> None:
    for code in (RC.DELETE_TOPIC_IN_BROKER, RC.CLEAN_UNUSED_TOPIC,
                 RC.CLEAN_EXPIRED_CONSUMEQUEUE, RC.DELETE_EXPIRED_COMMITLOG):  # fmt: skip
        assert group_for_code(code) == "send"


def test_a_send_after_the_delete_makes_the_topic_anew_from_offset_0(broker: Broker) -> None:
    for i in range(5):
        assert _send(broker, "T", b"old%d" % i) == i
    r = broker.call(RC.DELETE_TOPIC_IN_BROKER, {"topic": "T"})
    assert r is not None and r.code == RS.SUCCESS
    assert ("T", 0) not in broker.store.consume_queues  # gone before the answer
    assert _max_offset(broker, "T") == 0
    assert broker.ctxs["pull"].topics.get("T") is None
    assert _send(broker, "T", b"new") == 0  # auto-created again (TBW102)
    assert _bodies(broker, "T", 0) == [b"new"]
    assert _max_offset(broker, "T") == 1


def test_without_auto_create_the_send_after_the_delete_is_refused(tmp_path) -> None:
    b = Broker(str(tmp_path / "store"), autoCreateTopicEnable=False)
    try:
        ext = {"topic": "T", "defaultTopic": "TBW102", "readQueueNums": 1, "writeQueueNums": 1,
               "perm": 6, "topicFilterType": "SINGLE_TAG"}  # fmt: skip
        assert b.call(RC.UPDATE_AND_CREATE_TOPIC, ext).code == RS.SUCCESS
        assert _send(b, "T", b"old") == 0
        assert b.call(RC.DELETE_TOPIC_IN_BROKER, {"topic": "T"}).code == RS.SUCCESS
        r = b.call(RC.SEND_MESSAGE_V2, send_ext("T", queue_id=0), b"late")
        assert r is not None and r.code == RS.TOPIC_NOT_EXIST
        assert _max_offset(b, "T") == 0
    finally:
        b.close()


def test_the_delete_answer_waits_for_the_registration_sends_behind_it_do_not(
        broker: Broker) -> None:  # fmt: skip
    """DELETE then SEND pipelined on one connection: the send is served after the delete (a
    new queue, offset 0) and answered at once; the delete is answered once the controller has
    registered without the topic."""
    assert _send(broker, "T", b"old") == 0
    broker.ctxs["send"].registration_barrier = True
    core = broker.cores["send"]
    delete = Request(9, ("127.0.0.1", 1), wire_cmd(RC.DELETE_TOPIC_IN_BROKER, {"topic": "T"}), 0)
    cmd = wire_cmd(RC.SEND_MESSAGE_V2, send_ext("T", queue_id=0), b"behind")
    send = Request(9, ("127.0.0.1", 1), cmd, 0)
    assert core.process(delete, 10) is None  # held
    r = core.process(send, 10)
    assert r is not None and r.code == RS.SUCCESS and r.ext_fields["queueOffset"] == "0"
    assert broker.outbox.take() == []
    events = broker.ctxs["send"].drain_events()
    assert isinstance(events[0], TopicsDeleted) and events[0].barrier
    broker.controller.apply_events(events, "send", 10)
    assert broker.controller.take_register_needed()
    [(origin, token)] = broker.controller.take_barriers()
    assert origin == "send" and token == events[0].barrier
    # the registration is built after the delete: the new topic (auto-created behind the
    # delete) is in it, made anew; the old one is gone from the controller's table with it
    assert broker.controller.topics.get("T") is not None
    assert core.release(token, 20)
    [(conn, resp)] = broker.outbox.take()
    assert conn == 9 and resp.code == RS.SUCCESS and resp.opaque == delete.cmd.opaque
    assert not core.release(token, 20)  # once


def test_a_held_delete_is_answered_after_the_registration_timeout(broker: Broker) -> None:
    broker.ctxs["send"].registration_barrier = True
    core = broker.cores["send"]
    for conn in (1, 2):
        req = Request(conn, ("127.0.0.1", 1),
                      wire_cmd(RC.DELETE_TOPIC_IN_BROKER, {"topic": f"T{conn}"}), 0)  # fmt: skip
        assert core.process(req, 1000) is None
    core.on_connection_closed(2, 1000)
    assert core.store_admin.tick(6999) is not None
    assert broker.outbox.take() == []
    core.tick(7000)  # registerBrokerTimeoutMills (6000) passed: answered anyway
    assert [c for c, _r in broker.outbox.take()] == [1]


def test_delete_refuses_system_topics_bad_names_and_a_slave(tmp_path, broker: Broker) -> None:
    for topic in ("SCHEDULE_TOPIC_XXXX", "a b"):
        r = broker.call(RC.DELETE_TOPIC_IN_BROKER, {"topic": topic})
        assert r is not None and r.code == RS.SYSTEM_ERROR
    slave = Broker(str(tmp_path / "slave"), brokerRole="SLAVE", brokerId=1)
    try:
        r = slave.call(RC.DELETE_TOPIC_IN_BROKER, {"topic": "T"})
        assert r is not None and r.code == RS.SYSTEM_ERROR
        assert r.remark.startswith("Can't modify topic or subscription group from slave broker")
    finally:
        slave.close()


def test_update_of_broker_permission_is_answered_after_the_registration(broker: Broker) -> None:
    """updateBrokerConfig registers synchronously when brokerPermission changes (Java's
    registerBrokerAll before the reply); other names are answered at once."""
    broker.ctxs["admin"].registration_barrier = True
    core = broker.cores["admin"]

    def update(body: bytes) -> Request:
        return Request(4, ("127.0.0.1", 1), wire_cmd(RC.UPDATE_BROKER_CONFIG, None, body), 0)

    r = core.process(update(b"regionId=East\n"), 5)
    assert r is not None and r.code == RS.SUCCESS
    broker.pump(5)
    held = update(b"brokerPermission=4\n")
    assert core.process(held, 6) is None
    events = broker.ctxs["admin"].drain_events()
    assert isinstance(events[0], BrokerConfigChanged) and events[0].barrier
    broker.controller.apply_events(events, "admin", 6)
    assert broker.controller.take_register_needed()
    [(origin, token)] = broker.controller.take_barriers()
    assert origin == "admin" and core.release(token, 7)
    [(conn, resp)] = broker.outbox.take()
    assert conn == 4 and resp.code == RS.SUCCESS and resp.opaque == held.cmd.opaque
