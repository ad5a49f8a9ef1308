"""The Java consumer's requests against the broker cores: what the 4.9.x client reads back."""

from __future__ import annotations

import json

from broker_kit import Broker, heartbeat_body, pull_ext, send_ext, wire_cmd

from actors.core import Request
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS


def _put(b: Broker, topic: str, n: int) -> None:
    for i in range(n):
        r = b.call(RC.SEND_MESSAGE_V2, send_ext(topic), b"m%d" % i)
        assert r is not None and r.code == RS.SUCCESS


def _pull_suggest(b: Broker, group: str = "CG") -> str:
    r = b.call(RC.PULL_MESSAGE, pull_ext("T", group, sys_flag=2 | 4, sub="*"))
    assert r is not None and r.code == RS.SUCCESS
    return str(r.ext_fields["suggestWhichBrokerId"])


def _group(b: Broker, body: bytes) -> None:
    r = b.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)
    assert r is not None and r.code == RS.SUCCESS


def test_suggest_master_without_slave_read(tmp_path) -> None:
    """slaveReadEnable=false (default): suggestWhichBrokerId is 0 even for a slow consumer."""
    b = Broker(str(tmp_path))
    try:
        _put(b, "T", 3)
        b.store.cfg.accessMessageInMemoryMaxRatio = 0  # every read counts as "fallen behind"
        assert b.store.get_message("CG", "T", 0, 0, 32).suggest_pull_from_slave
        assert _pull_suggest(b) == "0"
    finally:
        b.close()


def test_suggest_with_slave_read(tmp_path) -> None:
    """slaveReadEnable=true: whichBrokerWhenConsumeSlowly when slow, else the group's brokerId."""
    b = Broker(str(tmp_path), slaveReadEnable=True)
    try:
        _group(b, b'{"groupName":"CG","brokerId":2,"whichBrokerWhenConsumeSlowly":1}')
        _put(b, "T", 3)
        b.store.cfg.totalPhysicalMemory = 1 << 40
        assert _pull_suggest(b) == "2"
        b.store.cfg.accessMessageInMemoryMaxRatio = 0
        assert _pull_suggest(b) == "1"
    finally:
        b.close()


def test_query_offset_empty_queue_on_a_big_commit_log(tmp_path) -> None:
    """QUERY_CONSUMER_OFFSET, new group, empty queue: 0 (code 0) however far the commit log is;
    Java's checkInDiskByConsumeOffset is false when the queue has no unit at offset 0."""
    b = Broker(str(tmp_path))
    try:
        _put(b, "Other", 2)
        b.store.cfg.accessMessageInMemoryMaxRatio = 0  # commit-log offset 0 counts as on disk
        assert b.store.check_in_disk_by_commit_offset(0)
        for topic, qid in (("Other", 1), ("Unknown", 0)):
            q = {"consumerGroup": "CG", "topic": topic, "queueId": qid}
            r = b.call(RC.QUERY_CONSUMER_OFFSET, q)
            assert r is not None and (r.code, r.ext_fields) == (RS.SUCCESS, {"offset": "0"})
        # a queue whose first message is on disk: not found (the client then applies
        # consumeFromWhere)
        r = b.call(
            RC.QUERY_CONSUMER_OFFSET, {"consumerGroup": "CG", "topic": "Other", "queueId": 0}
        )
        assert r is not None and r.code == RS.QUERY_NOT_FOUND
    finally:
        b.close()


def test_channel_close_notifies_despite_the_group_flag(broker: Broker) -> None:
    """ConsumerManager.doChannelCloseEvent sends CHANGE with only the broker's flag checked;
    the group's notifyConsumerIdsChangedEnable=false silences register/unregister only."""
    _group(broker, b'{"groupName":"CG","notifyConsumerIdsChangedEnable":false}')
    for conn_id, cid in ((1, "c1"), (2, "c2"), (3, "c3")):
        r = broker.call(RC.HEART_BEAT, None, heartbeat_body(cid, "CG", "T"), conn_id=conn_id)
        assert r is not None and r.code == RS.SUCCESS
    assert broker.outbox.take() == []  # register: silenced by the group flag
    r = broker.call(RC.UNREGISTER_CLIENT, {"clientID": "c3", "consumerGroup": "CG"}, conn_id=3)
    assert r is not None and r.code == RS.SUCCESS
    assert broker.outbox.take() == []  # unregister: silenced too
    broker.cores["client_manage"].on_connection_closed(2, 0)
    broker.pump()
    sent = broker.outbox.take()
    assert [(c, cmd.code, cmd.ext_fields) for c, cmd in sent] == [
        (1, RC.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "CG"})
    ]


def _held_heartbeat(broker: Broker, conn_id: int, body: bytes, now_ms: int) -> int:
    """Run a heartbeat whose reply the client_manage core holds; the barrier token."""
    core = broker.cores["client_manage"]
    assert core.process(Request(conn_id, ("127.0.0.1", 1), wire_cmd(RC.HEART_BEAT, None, body),
                                0), now_ms) is None  # fmt: skip
    assert broker.outbox.take() == []  # neither the notice nor the reply yet
    events = broker.ctxs["client_manage"].drain_events()
    broker.controller.apply_events(events, "client_manage", now_ms)
    assert broker.controller.take_register_needed()
    [(origin, token)] = broker.controller.take_barriers()
    assert origin == "client_manage" and token != 0
    return token


def test_new_retry_topic_notifies_after_the_registration(broker: Broker) -> None:
    """ClientManageProcessor.heartBeat: createTopicInSendMessageBackMethod registers the new
    %RETRY% topic before registerConsumer notifies; here the notice and the reply wait for the
    controller's registration (the barrier), then go out in that order."""
    broker.ctxs["client_manage"].registration_barrier = True
    core = broker.cores["client_manage"]
    token = _held_heartbeat(broker, 1, heartbeat_body("c1", "CG", "T"), 0)
    assert core.release(token, 5)
    sent = broker.outbox.take()
    assert [(c, cmd.code, cmd.is_oneway, cmd.is_response) for c, cmd in sent] == [
        (1, RC.NOTIFY_CONSUMER_IDS_CHANGED, True, False),
        (1, RS.SUCCESS, False, True),
    ]
    assert not core.release(token, 5)  # only once
    # the topic exists now: a second consumer is answered and the group notified at once
    r = broker.call(RC.HEART_BEAT, None, heartbeat_body("c2", "CG", "T"), conn_id=2)
    assert r is not None and r.code == RS.SUCCESS
    assert sorted((c, cmd.code) for c, cmd in broker.outbox.take()) == [
        (1, RC.NOTIFY_CONSUMER_IDS_CHANGED), (2, RC.NOTIFY_CONSUMER_IDS_CHANGED)]


def test_held_heartbeat_times_out_and_keeps_other_notices_on_close(broker: Broker) -> None:
    """registerBrokerTimeoutMills passed: what is held goes out anyway; the heartbeating
    connection closing drops only what was for it."""
    core = broker.cores["client_manage"]
    r = broker.call(RC.HEART_BEAT, None, heartbeat_body("c1", "A", "T"), conn_id=1)
    assert r is not None and r.code == RS.SUCCESS
    broker.outbox.take()
    broker.ctxs["client_manage"].registration_barrier = True
    two = json.loads(heartbeat_body("c2", "A", "T"))  # group A (old) and B (new) in one beat
    two["consumerDataSet"] += json.loads(heartbeat_body("c2", "B", "T"))["consumerDataSet"]
    _held_heartbeat(broker, 2, json.dumps(two).encode(), 1000)
    core.on_connection_closed(2, 1000)
    closed = broker.outbox.take()  # doChannelCloseEvent: group A is told at once
    assert [(c, cmd.ext_fields) for c, cmd in closed] == [(1, {"consumerGroup": "A"})]
    assert 0 < core.tick(1000) <= 6000
    core.tick(6999)
    assert broker.outbox.take() == []
    core.tick(7000)  # registerBrokerTimeoutMills
    sent = broker.outbox.take()
    assert [(c, cmd.code, cmd.ext_fields) for c, cmd in sent] == [
        (1, RC.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "A"})]
    assert core.held.held == {}


def test_a_heartbeat_without_a_body_is_refused(broker: Broker) -> None:
    """HeartbeatData.decode(null) throws on the reference: SYSTEM_ERROR, nothing registered;
    an empty object is a heartbeat of nobody."""
    r = broker.call(RC.HEART_BEAT, None, b"", conn_id=3)
    assert r is not None and r.code == RS.SYSTEM_ERROR and r.remark == "bad heartbeat body: none"
    r = broker.call(RC.HEART_BEAT, None, b"{}", conn_id=3)
    assert r is not None and r.code == RS.SUCCESS
    r = broker.call(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"}, conn_id=3)
    assert r is not None and r.code == RS.SYSTEM_ERROR  # "no consumer for this group"
