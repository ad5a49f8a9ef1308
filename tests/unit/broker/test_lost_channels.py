"""Registrations whose connection died with the RemotingServer (lost channels) stay until their
client heartbeats on a new connection, says goodbye, or expires (issue #20 item 3).

The pure tables (ConsumerManager, ProducerManager), then the client_manage core with the
other broker cores and the controller's replication (broker_kit): pulls on the client's new
connection are served, nobody is notified for a replaced entry, nothing is sent to a lost one,
and admin codes see what a Java broker shows while it waits for a dead channel to expire.
"""

from __future__ import annotations

import json

from broker_kit import Broker, heartbeat_body, pull_ext, send_ext

from actors.broker.consumer_manager import ClientChannel, ConsumerManager
from actors.broker.producer_manager import ProducerManager
from protocol.bodies import SubscriptionData
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS

EXPIRY_MS = 120_000  # channelExpiredTimeout
PEER = ("10.0.0.7", 50000)


def _ch(conn_id: int, client_id: str, at_ms: int = 0) -> ClientChannel:
    return ClientChannel(conn_id, client_id, 0, 409, at_ms, ("10.0.0.7", 50000 + conn_id))


def _reg(cm: ConsumerManager, conn_id: int, client_id: str, at_ms: int = 0,
         topics: tuple[str, ...] = ("T",)) -> tuple[bool, bool]:  # fmt: skip
    subs = [SubscriptionData.build(t, "*") for t in topics]
    return cm.register("G", _ch(conn_id, client_id, at_ms), "CONSUME_PASSIVELY", "CLUSTERING",
                       "CONSUME_FROM_LAST_OFFSET", subs)  # fmt: skip


# -- ConsumerManager ------------------------------------------------------------------------------
def test_a_lost_channel_keeps_the_group_until_its_client_heartbeats_again() -> None:
    cm = ConsumerManager(EXPIRY_MS)
    _reg(cm, 1, "c1")
    _reg(cm, 2, "c2")
    before = cm.info("G")
    assert cm.on_connection_lost(1) == [] and cm.on_connection_lost(2) == []
    assert cm.info("G") == before  # group, subscriptions, client ids and connections stay
    assert [c.conn_id for c in cm.channels("G") if c.lost] == [1, 2]
    assert cm.live_channels("G") == []
    # c1 on its new connection: its lost entry is replaced, nobody joined, nobody notified
    assert _reg(cm, 101, "c1", 5_000) == (True, False)
    info = cm.info("G")
    assert info is not None and info.client_ids == ("c1", "c2")
    assert sorted(c[:2] for c in info.connections) == [("c1", 101), ("c2", 2)]
    assert [c.conn_id for c in cm.live_channels("G")] == [101]
    # a new client is news, as ever
    assert _reg(cm, 103, "c3", 5_000) == (True, True)


def test_a_replacing_heartbeat_with_other_topics_still_notifies() -> None:
    cm = ConsumerManager(EXPIRY_MS)
    _reg(cm, 1, "c1")
    cm.on_connection_lost(1)
    assert _reg(cm, 101, "c1", 1_000, ("T", "U")) == (True, True)


def test_a_lost_channel_that_never_comes_back_expires() -> None:
    cm = ConsumerManager(EXPIRY_MS)
    _reg(cm, 1, "c1", 0)
    _reg(cm, 2, "c2", 0)
    cm.on_connection_lost(1)
    cm.on_connection_lost(2)
    _reg(cm, 101, "c1", 60_000)
    assert cm.scan_expired(EXPIRY_MS) == []  # not past the expiry yet
    gone = cm.scan_expired(EXPIRY_MS + 1)
    assert [(g, ch.conn_id, ch.client_id, ch.lost) for g, ch in gone] == [("G", 2, "c2", True)]
    info = cm.info("G")
    assert info is not None and info.client_ids == ("c1",)


def test_goodbye_on_a_new_connection_drops_the_lost_channels() -> None:
    cm = ConsumerManager(EXPIRY_MS)
    _reg(cm, 1, "c1")
    _reg(cm, 2, "c2")
    cm.on_connection_lost(1)
    assert not cm.unregister("G", 101)  # nothing of conn 101 and no client named
    assert cm.unregister("G", 101, "c1")  # UNREGISTER_CLIENT names the client
    info = cm.info("G")
    assert info is not None and info.client_ids == ("c2",)
    assert not cm.unregister("G", 101, "c2")  # c2's channel is live: only by its connection
    cm.on_connection_lost(2)
    assert cm.unregister("G", 102, "c2") and cm.info("G") is None


def test_a_lost_channel_of_a_client_already_back_is_dropped() -> None:
    """The client heartbeated on its new connection before the old one was seen lost."""
    cm = ConsumerManager(EXPIRY_MS)
    _reg(cm, 1, "c1")
    _reg(cm, 2, "c2")
    _reg(cm, 101, "c1", 1_000)
    assert cm.on_connection_lost(1) == ["G"]
    assert sorted(c.conn_id for c in cm.channels("G")) == [2, 101]
    assert cm.on_connection_lost(2) == []  # c2 is not back: kept


def test_a_closed_connection_still_leaves_at_once() -> None:
    """doChannelCloseEvent as before: closed by the client or the broker is gone."""
    cm = ConsumerManager(EXPIRY_MS)
    _reg(cm, 1, "c1")
    _reg(cm, 2, "c2")
    assert cm.on_connection_closed(1) == ["G"]
    assert _reg(cm, 101, "c1") == (True, True)  # back: a new channel, notified


# -- ProducerManager ------------------------------------------------------------------------------
def test_producer_lost_channels_leave_the_live_set_and_are_replaced() -> None:
    pm = ProducerManager(EXPIRY_MS)
    pm.register("P", _ch(1, "p1"))
    pm.register("P", _ch(2, "p2"))
    assert pm.on_connection_lost(1) == ["P"]
    assert sorted(pm.groups["P"]) == [1, 2] and sorted(pm.live("P")) == [2]
    assert pm.register("P", _ch(101, "p1", 1_000))
    assert sorted(pm.groups["P"]) == [2, 101]
    pm.on_connection_lost(2)
    gone = pm.scan_expired(EXPIRY_MS + 1)
    assert [(g, ch.conn_id, ch.lost) for g, ch in gone] == [("P", 2, True)]
    pm.on_connection_lost(101)
    assert pm.unregister("P", 201, "p1") and "P" not in pm.groups


# -- through the client_manage core ---------------------------------------------------------------
def _hb(b: Broker, conn_id: int, body: bytes, now_ms: int = 0) -> list[tuple[int, int]]:
    """A heartbeat on conn_id; what the broker sent meanwhile besides its answer (conn, code)."""
    r = b.call(RC.HEART_BEAT, None, body, conn_id=conn_id, now_ms=now_ms, peer=PEER)
    assert r is not None and r.code == RS.SUCCESS
    return [(c, cmd.code) for c, cmd in b.outbox.take()]


def _lose(b: Broker, *conn_ids: int, now_ms: int = 0) -> None:
    """What the client_manage actor does when its RemotingServer channel closes."""
    for conn_id in conn_ids:
        b.cores["client_manage"].on_connection_lost(conn_id, now_ms)
    b.pump(now_ms)


def test_pulls_on_the_new_connection_are_served_and_nobody_is_notified(broker: Broker) -> None:
    r = broker.call(RC.SEND_MESSAGE_V2, send_ext("T"), b"m0")
    assert r is not None and r.code == RS.SUCCESS
    _hb(broker, 1, heartbeat_body("c1", "CG", "T"))
    _hb(broker, 2, heartbeat_body("c2", "CG", "T"))
    _lose(broker, 1, 2)
    assert broker.outbox.take() == []  # no notice, to anyone
    # the Java push consumer's pull: no subscription in it, the registered one is used
    r = broker.call(RC.PULL_MESSAGE, pull_ext("T", sys_flag=0), conn_id=101)
    assert r is not None and r.code == RS.SUCCESS, (r.code if r else None, r and r.remark)
    r = broker.call(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"}, conn_id=101)
    assert r is not None and r.code == RS.SUCCESS
    assert sorted(json.loads(r.body)["consumerIdList"]) == ["c1", "c2"]
    # c1's heartbeat on its new connection: answered, no rebalance notice
    assert _hb(broker, 101, heartbeat_body("c1", "CG", "T"), 1_000) == []
    conns = broker.ctxs["admin"].consumer_groups["CG"].connections
    assert sorted((cid, conn) for cid, conn, *_ in conns) == [("c1", 101), ("c2", 2)]
    # a new consumer: the group is told on the live connections only (c2's is lost)
    assert sorted(_hb(broker, 103, heartbeat_body("c3", "CG", "T"), 2_000)) == [
        (101, RC.NOTIFY_CONSUMER_IDS_CHANGED), (103, RC.NOTIFY_CONSUMER_IDS_CHANGED)]


def test_a_lost_consumer_that_never_comes_back_expires_as_java_s_would(broker: Broker) -> None:
    _hb(broker, 1, heartbeat_body("c1", "CG", "T"))
    _hb(broker, 2, heartbeat_body("c2", "CG", "T"))
    _lose(broker, 1, 2)
    _hb(broker, 101, heartbeat_body("c1", "CG", "T"), 100_000)
    r = broker.call(RC.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "CG"})
    assert r is not None and r.code == RS.SUCCESS  # the lost one is listed meanwhile
    assert sorted(c["clientId"] for c in json.loads(r.body)["connectionSet"]) == ["c1", "c2"]
    core = broker.cores["client_manage"]
    core.tick(EXPIRY_MS)  # the housekeeping scan every 10 s from here
    core.tick(EXPIRY_MS + 10_000)
    broker.pump(EXPIRY_MS + 10_000)
    assert [(c, cmd.code) for c, cmd in broker.outbox.take()] == [
        (101, RC.NOTIFY_CONSUMER_IDS_CHANGED)]
    assert broker.outbox.closed == []  # a lost channel has no connection to close
    r = broker.call(RC.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "CG"}, conn_id=101)
    assert r is not None and json.loads(r.body)["consumerIdList"] == ["c1"]


def test_unregister_on_the_new_connection_notifies_the_rest(broker: Broker) -> None:
    _hb(broker, 1, heartbeat_body("c1", "CG", "T"))
    _hb(broker, 2, heartbeat_body("c2", "CG", "T"))
    _lose(broker, 1)
    r = broker.call(RC.UNREGISTER_CLIENT, {"clientID": "c1", "consumerGroup": "CG"},
                    conn_id=101)  # fmt: skip
    assert r is not None and r.code == RS.SUCCESS
    assert [(c, cmd.code) for c, cmd in broker.outbox.take()] == [
        (2, RC.NOTIFY_CONSUMER_IDS_CHANGED)]
    assert broker.ctxs["consumer_manage"].consumer_groups["CG"].client_ids == ("c2",)


def test_lost_producers_leave_the_check_back_channels_and_come_back(broker: Broker) -> None:
    body = json.dumps({"clientID": "p1", "consumerDataSet": [],
                       "producerDataSet": [{"groupName": "PG"}]}).encode()  # fmt: skip
    _hb(broker, 1, body)
    send_state = broker.ctxs["send"]
    assert send_state.producer_groups["PG"] == (1,)
    _lose(broker, 1)
    assert "PG" not in send_state.producer_groups  # no check-back to a dead connection
    r = broker.call(RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG"})
    assert r is not None and r.code == RS.SUCCESS  # still listed, as Java lists it
    _hb(broker, 101, body, 1_000)
    assert send_state.producer_groups["PG"] == (101,)
    r = broker.call(RC.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "PG"})
    assert r is not None and len(json.loads(r.body)["connectionSet"]) == 1
