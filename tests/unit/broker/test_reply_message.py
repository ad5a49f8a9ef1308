"""Request-reply (RocketMQ 4.6+ `producer.request()`): SEND_REPLY_MESSAGE(_V2) through the real
send core and store, pushed to the requester as PUSH_REPLY_MESSAGE_TO_CLIENT (326).

Mirrors ReplyMessageProcessor, 4.9.x: the reply is stored in `<cluster>_REPLY_TOPIC` with the
request's properties text as it came, pushed to the producer channel whose client id is the
message's REPLY_TO_CLIENT, and the replier's response carries the push's outcome.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from actors.broker.processors.reply import PUSH_REPLY_TIMEOUT_MS
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.headers import ReplyMessageRequestHeader
from protocol.message import decode_messages, decode_offset_msg_id, parse_properties
from tests.unit.broker.broker_kit import Broker, send_ext

NOW = 1_700_000_000_000
REQUESTER_CONN = 7
REPLIER_CONN = 9
REQUESTER_ID = "127.0.0.1@requester"
REPLY_TOPIC = "DefaultCluster_REPLY_TOPIC"


def _requester_heartbeat(broker: Broker, group: str = "RequestPG") -> None:
    body = json.dumps(
        {"clientID": REQUESTER_ID, "consumerDataSet": [],
         "producerDataSet": [{"groupName": group}, {"groupName": "CLIENT_INNER_PRODUCER"}]}
    ).encode()  # fmt: skip
    resp = broker.call(RC.HEART_BEAT, {}, body, now_ms=NOW, conn_id=REQUESTER_CONN)
    assert resp is not None and resp.code == RS.SUCCESS


def _reply_props(client_id: str | None = REQUESTER_ID) -> str:
    """What MessageUtil.createReplyMessage leaves on a reply (the Java client's text, with its
    trailing separator)."""
    text = "CORRELATION_ID\x01corr-1\x02MSG_TYPE\x01reply\x02TTL\x013000\x02UNIQ_KEY\x01R1\x02"
    if client_id is not None:
        text += f"REPLY_TO_CLIENT\x01{client_id}\x02"
    return text


def _reply(broker: Broker, code: int = RC.SEND_REPLY_MESSAGE_V2, props: str | None = None,
           **kw: Any) -> RemotingCommand | None:  # fmt: skip
    ext = send_ext(REPLY_TOPIC, props=_reply_props() if props is None else props, group="RPG")
    if code == RC.SEND_REPLY_MESSAGE:
        names = ("producerGroup", "topic", "defaultTopic", "defaultTopicQueueNums", "queueId",
                 "sysFlag", "bornTimestamp", "flag", "properties", "reconsumeTimes", "unitMode")
        ext = {n: ext[k] for n, k in zip(names, "abcdefghijk", strict=True)}
    return broker.call(code, ext, b"the answer", now_ms=NOW, conn_id=REPLIER_CONN,
                       peer=("10.0.0.5", 50001), **kw)  # fmt: skip


def _stored_replies(broker: Broker) -> list[Any]:
    res = broker.store.get_message("G", REPLY_TOPIC, 0, 0, 32)
    return decode_messages(res.buffer) if res.message_count else []


@pytest.mark.parametrize("code", [RC.SEND_REPLY_MESSAGE_V2, RC.SEND_REPLY_MESSAGE])
def test_reply_is_stored_and_pushed_then_answered(broker: Broker, code: int) -> None:
    _requester_heartbeat(broker)
    assert _reply(broker, code) is None  # waits for the requester's answer
    sent = broker.outbox.take()
    assert len(sent) == 1
    conn, push = sent[0]
    assert conn == REQUESTER_CONN and push.code == RC.PUSH_REPLY_MESSAGE_TO_CLIENT
    assert push.opaque in broker.outbox.calls  # a call: the answer is routed back by opaque
    assert bytes(push.body) == b"the answer"
    h = ReplyMessageRequestHeader.from_ext(push.ext_fields)
    assert (h.producer_group, h.topic, h.default_topic, h.queue_id) == ("RPG", REPLY_TOPIC,
                                                                        "TBW102", 0)
    assert (h.born_host, h.store_timestamp, h.born_timestamp) == ("/10.0.0.5:50001", NOW,
                                                                  1700000000000)
    assert h.store_host.startswith("/") and h.store_host.endswith(":10911")
    pushed = parse_properties(h.properties or "")
    assert pushed["CORRELATION_ID"] == "corr-1" and pushed["REPLY_TO_CLIENT"] == REQUESTER_ID
    assert pushed["PUSH_REPLY_TIME"] == str(NOW)

    # stored in the reply topic with the request's text as it came and sysFlag 0
    [stored] = _stored_replies(broker)
    assert bytes(stored.body) == b"the answer" and stored.sys_flag == 0
    assert stored.properties == parse_properties(_reply_props())
    assert "CLUSTER" not in stored.properties and "PUSH_REPLY_TIME" not in stored.properties

    # the requester answers SUCCESS: the replier gets SEND_OK with the stored ids
    core = broker.cores["send"]
    core.on_client_response(push.make_response(RS.SUCCESS, None, None), NOW + 3)
    [(conn, resp)] = broker.outbox.take()
    assert conn == REPLIER_CONN and resp.code == RS.SUCCESS and resp.remark is None
    ext = resp.ext_fields
    assert ext["queueId"] == "0" and ext["queueOffset"] == "0"
    assert decode_offset_msg_id(ext["msgId"])[2] == stored.commit_log_offset
    assert ext["MSG_REGION"] == "DefaultRegion" and ext["TRACE_ON"] == "true"


def test_requester_failing_or_silent_fails_the_reply(broker: Broker) -> None:
    _requester_heartbeat(broker)
    core = broker.cores["send"]
    assert _reply(broker) is None
    [(_, push)] = broker.outbox.take()
    core.on_client_response(push.make_response(RS.SYSTEM_ERROR, "process reply message fail"),
                            NOW + 1)  # fmt: skip
    [(conn, resp)] = broker.outbox.take()
    assert conn == REPLIER_CONN and resp.code == RS.SYSTEM_ERROR
    assert resp.remark == f"push reply message to {REQUESTER_ID}fail."
    assert "msgId" in resp.ext_fields  # stored all the same, as in Java

    assert _reply(broker) is None
    broker.outbox.take()
    wait_ms = core.tick(NOW + PUSH_REPLY_TIMEOUT_MS - 1)
    assert wait_ms is not None and wait_ms <= 1  # the next tick comes at the push's deadline
    assert broker.outbox.take() == []
    core.tick(NOW + PUSH_REPLY_TIMEOUT_MS)
    [(conn, resp)] = broker.outbox.take()
    assert resp.code == RS.SYSTEM_ERROR and resp.remark.startswith("push reply message to ")
    assert core.push_waits == {}


def test_requester_connection_closing_fails_the_reply_at_once(broker: Broker) -> None:
    _requester_heartbeat(broker)
    core = broker.cores["send"]
    assert _reply(broker) is None
    broker.outbox.take()
    core.on_connection_closed(REQUESTER_CONN, NOW + 1)
    [(conn, resp)] = broker.outbox.take()
    assert conn == REPLIER_CONN and resp.code == RS.SYSTEM_ERROR


def test_reply_without_requester(broker: Broker) -> None:
    resp = _reply(broker)
    assert resp is not None and resp.code == RS.SYSTEM_ERROR
    assert resp.remark == f"push reply message fail, channel of <{REQUESTER_ID}> not found."
    assert "msgId" in resp.ext_fields and len(_stored_replies(broker)) == 1

    resp = _reply(broker, props=_reply_props(client_id=None))
    assert resp is not None and resp.code == RS.SYSTEM_ERROR
    assert resp.remark == "reply message properties[REPLY_TO_CLIENT] is null"


def test_reply_not_stored_when_disabled(tmp_path: Any) -> None:
    b = Broker(str(tmp_path / "store"), storeReplyMessageEnable=False)
    try:
        _requester_heartbeat(b)
        assert _reply(b) is None
        [(_, push)] = b.outbox.take()
        b.cores["send"].on_client_response(push.make_response(RS.SUCCESS, None, None), NOW)
        [(_, resp)] = b.outbox.take()
        assert resp.code == RS.SUCCESS
        assert (resp.ext_fields["msgId"], resp.ext_fields["queueOffset"]) == ("0", "0")
        assert _stored_replies(b) == []
    finally:
        b.close()


def test_oneway_reply_is_pushed_and_never_answered(broker: Broker) -> None:
    _requester_heartbeat(broker)
    assert _reply(broker, oneway=True) is None
    [(conn, push)] = broker.outbox.take()
    assert conn == REQUESTER_CONN and push.code == RC.PUSH_REPLY_MESSAGE_TO_CLIENT
    broker.cores["send"].on_client_response(push.make_response(RS.SUCCESS, None, None), NOW)
    assert broker.outbox.take() == []


def test_requester_closed_before_its_producer_table_update(broker: Broker) -> None:
    """The send core hears of the close before client_manage's table update arrives: the
    closed channel is skipped (not pushed to and waited on for 10 s)."""
    _requester_heartbeat(broker)
    broker.cores["send"].on_connection_closed(REQUESTER_CONN, NOW)
    resp = _reply(broker)
    assert resp is not None and resp.code == RS.SYSTEM_ERROR
    assert resp.remark == f"push reply message fail, channel of <{REQUESTER_ID}> not found."


def test_sync_flush_reply_answers_after_the_group_commit(tmp_path: Any) -> None:
    """SYNC_FLUSH: the replier's answer joins the waiting sends (one flush for all of them),
    not a flush of its own."""
    b = Broker(str(tmp_path / "store"), sync_flush=True)
    try:
        _requester_heartbeat(b)
        core = b.cores["send"]
        assert _reply(b) is None
        [(_, push)] = b.outbox.take()
        core.on_client_response(push.make_response(RS.SUCCESS, None, None), NOW + 1)
        assert b.outbox.take() == [] and len(core.waiting) == 1  # parked until flushed
        assert core.flush_and_release(NOW + 2) == 1
        [(conn, resp)] = b.outbox.take()
        assert conn == REPLIER_CONN and resp.code == RS.SUCCESS
        assert b.store.flushed_offset >= b.store.max_phy_offset
    finally:
        b.close()


def _acked(b: Broker, offset: int, now: int) -> None:
    """The HAService's report of a slave's offset: the state page and SlaveAcked."""
    from actors.runtime.link_records import SlaveAcked
    from store.state_page import OFF_HA_ACKED, OFF_HA_SLAVES
    from tests.unit.broker.broker_kit import KitLink

    b.store.state.set(OFF_HA_SLAVES, 1)
    b.store.state.set(OFF_HA_ACKED, offset)
    b.cores["transfer"].on_link_record(KitLink(b, "transfer", "HAService", 0),
                                       SlaveAcked(offset, 1), now)  # fmt: skip
    b.pump(now)


def test_sync_master_reply_answers_once_a_slave_has_it(tmp_path: Any) -> None:
    """SYNC_MASTER: the replier's answer waits for a slave's report as a WAIT send does (the
    GroupTransferService answers it)."""
    b = Broker(str(tmp_path / "store"), brokerRole="SYNC_MASTER")
    try:
        _acked(b, 0, NOW)
        _requester_heartbeat(b)
        core = b.cores["send"]
        assert _reply(b) is None
        [(_, push)] = b.outbox.take()
        core.on_client_response(push.make_response(RS.SUCCESS, None, None), NOW + 1)
        b.pump(NOW + 1)
        assert b.outbox.take() == [] and len(b.cores["transfer"].waits) == 1  # not got it
        _acked(b, b.store.max_phy_offset, NOW + 3)
        [(conn, resp)] = b.outbox.take()
        assert conn == REPLIER_CONN and resp.code == RS.SUCCESS
    finally:
        b.close()


def test_sync_master_reply_keeps_the_push_result_code(tmp_path: Any) -> None:
    """ReplyMessageProcessor answers with the push's result: the wait for a slave never turns
    it into SLAVE_NOT_AVAILABLE (11, which a client counts as stored) or FLUSH_SLAVE_TIMEOUT,
    and a failed push stays SYSTEM_ERROR."""
    b = Broker(str(tmp_path / "store"), brokerRole="SYNC_MASTER")
    try:
        core = b.cores["send"]
        _requester_heartbeat(b)
        assert _reply(b) is None  # no slave at all: not 11 either
        [(_, push)] = b.outbox.take()
        core.on_client_response(push.make_response(RS.SUCCESS, None, None), NOW + 1)
        [(_, resp)] = b.outbox.take()
        assert resp.code == RS.SUCCESS
        _acked(b, 0, NOW + 1)
        assert _reply(b) is None
        [(_, push)] = b.outbox.take()
        core.on_client_response(push.make_response(RS.SYSTEM_ERROR, "no", None), NOW + 2)
        b.pump(NOW + 2)
        b.cores["transfer"].tick(NOW + 2 + core.slave_timeout_ms)  # the slave never acks
        [(_, resp)] = b.outbox.take()
        assert resp.code == RS.SYSTEM_ERROR and "fail" in (resp.remark or "")
    finally:
        b.close()


def test_producer_channels_span_groups() -> None:
    """findChannel by client id: a client in two producer groups keeps its channel while either
    group lists it; a reconnect's old connection stays behind the new one in the list."""
    from actors.broker.config import BrokerConfig
    from actors.broker.events import ProducerGroupChanged
    from actors.broker.state import BrokerState
    from store.config import StoreConfig

    st = BrokerState(BrokerConfig(), StoreConfig())
    st.apply_state(ProducerGroupChanged("A", (1, 2), (("c1", 1), ("c2", 2))))
    st.apply_state(ProducerGroupChanged("B", (1, 3), (("c1", 1), ("c1", 3))))
    assert st.producer_channels == {"c1": [1, 3], "c2": [2]}
    st.apply_state(ProducerGroupChanged("A", ()))
    assert st.producer_channels == {"c1": [1, 3]}
    st.apply_state(ProducerGroupChanged("B", ()))
    assert st.producer_channels == {}
