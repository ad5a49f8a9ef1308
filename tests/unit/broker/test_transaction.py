"""Transactional messages through the real cores and store: half, commit, rollback, check-back.

Spec §9.7 and §14.2 ("Transaction"); the broker kit wires every core, the controller and a real
store, with a fake clock.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from actors.broker.context import BrokerContext
from actors.broker.transaction import CHECK_GROUP, HALF_TOPIC, OP_TOPIC
from actors.broker.transactional_message_check import TransactionalMessageCheckService
from protocol.codes import TRANS_CHECK_MAX_TIME_TOPIC
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.message import decode_messages
from tests.unit.broker.broker_kit import Broker, send_ext

BORN = 1_700_000_000_000  # "g" of send_ext
PRODUCER_CONN = 7


def _half(
    broker: Broker, topic: str = "TxTopic", uniq: str = "U1", group: str = "PG", *,
    queue_id: int = 1, immunity_s: int | None = None, body: bytes = b"tx-body",
) -> Any:  # fmt: skip
    """A half message (TRAN_MSG); immunity_s sets CHECK_IMMUNITY_TIME_IN_SECONDS."""
    props = f"UNIQ_KEY\x01{uniq}\x02WAIT\x01true\x02TRAN_MSG\x01true\x02PGROUP\x01{group}"
    if immunity_s is not None:
        props += f"\x02CHECK_IMMUNITY_TIME_IN_SECONDS\x01{immunity_s}"
    resp = broker.call(
        RC.SEND_MESSAGE_V2, send_ext(topic, queue_id=queue_id, props=props, f=4), body,
        now_ms=BORN,
    )  # fmt: skip
    assert resp is not None and resp.code == RS.SUCCESS, resp
    return resp


def _only_record(broker: Broker, topic: str, queue_id: int, qoff: int = 0) -> Any:
    unit = broker.store.consume_queues[(topic, queue_id)].get_unit(qoff)
    assert unit is not None
    return decode_messages(broker.store.select_one_message_by_offset(unit[0]))[0]


def _end(broker: Broker, qoff: int, phy: int, kind: int, group: str = "PG", **kw: Any) -> Any:
    ext = {
        "producerGroup": group,
        "tranStateTableOffset": str(qoff),
        "commitLogOffset": str(phy),
        "commitOrRollback": str(kind),
        "msgId": "U1",
        "fromTransactionCheck": "false",
    }
    return broker.call(RC.END_TRANSACTION, ext, now_ms=BORN + 100, **kw)


def _half_phy(broker: Broker, qoff: int = 0) -> int:
    unit = broker.store.consume_queues[(HALF_TOPIC, 0)].get_unit(qoff)
    assert unit is not None
    return int(unit[0])


def _producer_heartbeat(broker: Broker, group: str = "PG") -> None:
    body = json.dumps(
        {"clientID": "127.0.0.1@tx", "consumerDataSet": [],
         "producerDataSet": [{"groupName": group}, {"groupName": "CLIENT_INNER_PRODUCER"}]}
    ).encode()  # fmt: skip
    resp = broker.call(RC.HEART_BEAT, {}, body, now_ms=BORN, conn_id=PRODUCER_CONN)
    assert resp is not None and resp.code == RS.SUCCESS


@pytest.fixture
def txb(tmp_path: Any) -> Any:
    b = Broker(str(tmp_path), transactionCheckInterval=1000, transactionTimeOut=6000)
    yield b
    b.close()


def test_half_message_is_parked_not_visible(txb: Broker) -> None:
    resp = _half(txb)
    assert resp.ext_fields["queueOffset"] == "0"
    assert txb.store.get_max_offset_in_queue("TxTopic", 1) == 0
    half = _only_record(txb, HALF_TOPIC, 0)
    assert half.properties["REAL_TOPIC"] == "TxTopic" and half.properties["REAL_QID"] == "1"
    assert half.properties["WAIT"] == "true" and half.properties["TRAN_MSG"] == "true"
    assert half.sys_flag & 0xC == 0


def test_commit_stores_real_message_and_op_record(txb: Broker) -> None:
    _half(txb)
    phy = _half_phy(txb)
    resp = _end(txb, 0, phy, 8)
    assert resp is not None and resp.code == RS.SUCCESS, resp.remark
    real = _only_record(txb, "TxTopic", 1)
    assert bytes(real.body) == b"tx-body"
    assert real.sys_flag & 0xC == 0x8
    assert real.prepared_transaction_offset == phy
    assert real.properties["UNIQ_KEY"] == "U1" and real.properties["PGROUP"] == "PG"
    # endMessageTransaction fixes the properties string before clearing REAL_TOPIC / REAL_QID /
    # TRAN_MSG from the map: a Java broker's committed record keeps all of them, and WAIT too
    # (parseHalfMessageInner wrote the half's string from the map with WAIT put back)
    assert real.properties["REAL_TOPIC"] == "TxTopic" and real.properties["REAL_QID"] == "1"
    assert real.properties["TRAN_MSG"] == "true" and real.properties["WAIT"] == "true"
    op = _only_record(txb, OP_TOPIC, 0)
    assert bytes(op.body) == b"0" and op.properties == {"TAGS": "d", "WAIT": "true"}
    assert op.flag == 0 and op.sys_flag == 0


def test_rollback_writes_only_the_op_record(txb: Broker) -> None:
    _half(txb)
    resp = _end(txb, 0, _half_phy(txb), 12)
    assert resp is not None and resp.code == RS.SUCCESS
    assert txb.store.get_max_offset_in_queue("TxTopic", 1) == 0
    assert bytes(_only_record(txb, OP_TOPIC, 0).body) == b"0"


@pytest.mark.parametrize(
    ("qoff", "delta", "group", "remark"),
    [
        (0, 0, "OTHER", "The producer group wrong"),
        (5, 0, "PG", "The transaction state table offset wrong"),
        (0, 1, "PG", "Find prepared transaction message failed"),
    ],
)
def test_end_transaction_validation(
    txb: Broker, qoff: int, delta: int, group: str, remark: str
) -> None:
    _half(txb)
    resp = _end(txb, qoff, _half_phy(txb) + delta, 8, group=group)
    assert resp is not None and resp.code == RS.SYSTEM_ERROR and resp.remark == remark
    assert txb.store.get_max_offset_in_queue("TxTopic", 1) == 0
    assert (OP_TOPIC, 0) not in txb.store.consume_queues


@pytest.mark.parametrize("kind", [99, -1, 4])
def test_an_unknown_end_transaction_type_is_answered(txb: Broker, kind: int) -> None:
    """EndTransactionRequestHeader.checkFields: only NOT / COMMIT / ROLLBACK; the rest is
    SYSTEM_ERROR (it used to get no answer, a two-way request timing out)."""
    _half(txb)
    resp = _end(txb, 0, _half_phy(txb), kind)
    assert resp is not None and resp.code == RS.SYSTEM_ERROR
    assert resp.remark == "commitOrRollback field wrong"
    assert txb.store.get_max_offset_in_queue("TxTopic", 1) == 0
    assert (OP_TOPIC, 0) not in txb.store.consume_queues


def test_end_transaction_on_a_normal_message_is_refused(txb: Broker) -> None:
    resp = txb.call(RC.SEND_MESSAGE_V2, send_ext("Plain"), b"x", now_ms=BORN)
    assert resp is not None and resp.code == RS.SUCCESS
    phy = txb.store.consume_queues[("Plain", 0)].get_unit(0)
    assert phy is not None
    resp = _end(txb, 0, phy[0], 8)
    assert resp is not None and resp.code == RS.SYSTEM_ERROR
    assert txb.store.get_max_offset_in_queue("Plain", 0) == 1


def test_oneway_and_not_type_get_no_reply(txb: Broker) -> None:
    _half(txb)
    assert _end(txb, 0, _half_phy(txb), 8, oneway=True) is None
    assert txb.store.get_max_offset_in_queue("TxTopic", 1) == 1
    assert _end(txb, 0, _half_phy(txb), 0) is None


def _tick(b: Broker, now_ms: int) -> list[Any]:
    """The TransactionalMessageCheckService's timer: a pass, its puts through the writer."""
    b.cores["txcheck"].tick(now_ms)
    b.pump(now_ms)
    return [(c, cmd) for c, cmd in b.outbox.take() if cmd.code == RC.CHECK_TRANSACTION_STATE]


def test_check_back_after_timeout_then_commit_from_check(txb: Broker) -> None:
    _producer_heartbeat(txb)
    _half(txb)
    txb.outbox.take()
    assert _tick(txb, BORN) == []  # starts the service: first run one interval later
    assert _tick(txb, BORN + 2000) == []  # 2 s old: younger than transactionTimeOut
    checks = _tick(txb, BORN + 7000)
    assert len(checks) == 1
    conn, cmd = checks[0]
    assert conn == PRODUCER_CONN and cmd.flag & 2  # oneway, to the producer's connection
    ext = cmd.ext_fields
    assert ext["tranStateTableOffset"] == "1"  # the copy put back on the half queue
    copy_phy = _half_phy(txb, 1)
    assert ext["commitLogOffset"] == str(copy_phy)
    assert ext["msgId"] == "U1" and ext["transactionId"] == "U1"
    msg = decode_messages(cmd.body)[0]
    assert msg.topic == "TxTopic" and msg.queue_id == 1 and bytes(msg.body) == b"tx-body"
    assert msg.queue_offset == 1 and msg.commit_log_offset == copy_phy
    assert msg.properties["TRANSACTION_CHECK_TIMES"] == "1"
    # progress saved as consumer offsets of CID_RMQ_SYS_TRANS (the controller persists them)
    assert txb.controller.offsets.query_offset(CHECK_GROUP, HALF_TOPIC, 0) == 1
    # the producer answers from its check listener
    resp = _end(txb, 1, copy_phy, 8)
    assert resp is not None and resp.code == RS.SUCCESS
    assert txb.store.get_max_offset_in_queue("TxTopic", 1) == 1
    assert _tick(txb, BORN + 9000) == []  # the op record closes the copy: no more checks
    assert txb.controller.offsets.query_offset(CHECK_GROUP, HALF_TOPIC, 0) == 2
    assert txb.controller.offsets.query_offset(CHECK_GROUP, OP_TOPIC, 0) == 1


def test_committed_half_is_never_checked(txb: Broker) -> None:
    _producer_heartbeat(txb)
    _half(txb)
    _end(txb, 0, _half_phy(txb), 12)
    _tick(txb, BORN)
    assert _tick(txb, BORN + 60_000) == []
    assert txb.store.get_max_offset_in_queue(HALF_TOPIC, 0) == 1  # nothing put back


def test_check_immunity_property_delays_the_first_check(txb: Broker) -> None:
    _producer_heartbeat(txb)
    _half(txb, uniq="U9", queue_id=0, immunity_s=20, body=b"b")
    _tick(txb, BORN)
    assert _tick(txb, BORN + 10_000) == []
    assert len(_tick(txb, BORN + 21_000)) == 1


def test_discarded_after_check_max(tmp_path: Any) -> None:
    b = Broker(str(tmp_path), transactionCheckInterval=1000, transactionTimeOut=1000,
               transactionCheckMax=2)  # fmt: skip
    try:
        _producer_heartbeat(b)
        _half(b)
        _tick(b, BORN)
        sent = [len(_tick(b, BORN + 2000 * k)) for k in range(1, 5)]
        assert sent == [1, 1, 0, 0]
        assert b.store.get_max_offset_in_queue(TRANS_CHECK_MAX_TIME_TOPIC, 0) == 1
        assert b.cores["txcheck"].discarded == 1
    finally:
        b.close()


def test_resume_check_half_message_puts_a_discarded_half_back(tmp_path: Any) -> None:
    """RESUME_CHECK_HALF_MESSAGE (mqadmin resumeCheckHalfMessage): the discarded message goes
    back to the half queue with TRANSACTION_CHECK_TIMES=0 and is checked again."""
    b = Broker(str(tmp_path), transactionCheckInterval=1000, transactionTimeOut=1000,
               transactionCheckMax=1)  # fmt: skip
    try:
        _producer_heartbeat(b)
        _half(b, uniq="UR", body=b"resume-me")
        _tick(b, BORN)
        assert [len(_tick(b, BORN + 2000 * k)) for k in range(1, 4)] == [1, 0, 0]
        discarded = _only_record(b, TRANS_CHECK_MAX_TIME_TOPIC, 0)
        half_max = b.store.get_max_offset_in_queue(HALF_TOPIC, 0)
        msg_id = discarded.offset_msg_id

        r = b.call(RC.RESUME_CHECK_HALF_MESSAGE, {"msgId": msg_id}, now_ms=BORN + 9000)
        assert r is not None and r.code == RS.SUCCESS and r.remark is None
        back = _only_record(b, HALF_TOPIC, 0, half_max)
        assert bytes(back.body) == b"resume-me"
        assert back.properties["TRANSACTION_CHECK_TIMES"] == "0"
        assert back.properties["UNIQ_KEY"] == "UR" and back.properties["PGROUP"] == "PG"
        assert "WAIT" not in back.properties or back.properties["WAIT"] == "true"
        # checked again once it is old enough (and discarded again at the max)
        assert len(_tick(b, BORN + 12_000)) == 1

        for bad in (f"7F00000100002A9F{1 << 40:016X}", "not-an-id"):  # past the end; no id
            r = b.call(RC.RESUME_CHECK_HALF_MESSAGE, {"msgId": bad}, now_ms=BORN + 13_000)
            assert r is not None and r.code == RS.SYSTEM_ERROR
            assert r.remark == ("Exception was thrown when putting message back to "
                                "RMQ_SYS_TRANS_HALF_TOPIC.")  # fmt: skip
    finally:
        b.close()


def test_no_live_producer_still_advances(txb: Broker) -> None:
    _half(txb)
    _tick(txb, BORN)
    assert _tick(txb, BORN + 7000) == []
    assert txb.controller.offsets.query_offset(CHECK_GROUP, HALF_TOPIC, 0) == 1
    assert txb.store.get_max_offset_in_queue(HALF_TOPIC, 0) == 2  # put back for the next run


def test_producer_connection_close_stops_checks_to_it(txb: Broker) -> None:
    _producer_heartbeat(txb)
    assert txb.ctxs["send"].producer_groups == {"PG": (PRODUCER_CONN,)}
    txb.cores["client_manage"].on_connection_closed(PRODUCER_CONN, BORN)
    txb.pump(BORN)
    assert "PG" not in txb.ctxs["send"].producer_groups


def test_reject_transaction_message(tmp_path: Any) -> None:
    b = Broker(str(tmp_path), rejectTransactionMessage=True)
    try:
        props = "UNIQ_KEY\x01U1\x02TRAN_MSG\x01true\x02PGROUP\x01PG"
        resp = b.call(RC.SEND_MESSAGE_V2, send_ext("T", props=props, f=4), b"x", now_ms=BORN)
        assert resp is not None and resp.code == RS.NO_PERMISSION
    finally:
        b.close()


def test_ops_beyond_one_read_window_still_close_their_halves(
    txb: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ops are read a few per tick: no committed half may be checked meanwhile."""
    import actors.broker.transactional_message_check as tx

    monkeypatch.setattr(tx, "MAX_OPS_PER_TICK", 4)
    _producer_heartbeat(txb)
    for k in range(10):
        _half(txb, uniq=f"U{k}")
    for k in range(10):
        assert _end(txb, k, _half_phy(txb, k), 8).code == RS.SUCCESS
    checks = [c for t in range(BORN, BORN + 60_000, 1000) for c in _tick(txb, t)]
    assert checks == []
    assert txb.store.get_max_offset_in_queue("TxTopic", 1) == 10
    assert txb.controller.offsets.query_offset(CHECK_GROUP, HALF_TOPIC, 0) == 10
    assert txb.controller.offsets.query_offset(CHECK_GROUP, OP_TOPIC, 0) == 10


def test_an_immune_half_does_not_hold_back_later_ones(txb: Broker) -> None:
    """checkPrepareQueueOffset: the immune message is put back, the next one is checked."""
    _producer_heartbeat(txb)
    _half(txb, uniq="IMM", queue_id=0, immunity_s=600, body=b"immune")
    _half(txb, uniq="LATER")
    _tick(txb, BORN)
    checks = _tick(txb, BORN + 7000)
    assert [decode_messages(c.body)[0].properties["UNIQ_KEY"] for _, c in checks] == ["LATER"]
    copy = _only_record(txb, HALF_TOPIC, 0, 2)  # the immune one, put back first
    assert copy.properties["UNIQ_KEY"] == "IMM"
    assert copy.properties["TRAN_PREPARED_QUEUE_OFFSET"] == "0"
    # needDiscard counted this pass before the immunity test; renewImmunityHalfMessageInner
    # wrote the string again after renewHalfMessageInner had set WAIT=false on the map
    assert copy.properties["TRANSACTION_CHECK_TIMES"] == "1"
    assert copy.properties["WAIT"] == "false"
    # the producer commits the original meanwhile: the copy is recognised, never checked
    assert _end(txb, 0, _half_phy(txb, 0), 8).code == RS.SUCCESS
    later = [c for t in range(BORN + 8000, BORN + 700_000, 60_000) for c in _tick(txb, t)]
    uniqs = [decode_messages(c.body)[0].properties["UNIQ_KEY"] for _, c in later]
    assert uniqs and set(uniqs) == {"LATER"}  # LATER (unanswered) is checked again, IMM never


def test_half_older_than_file_reserved_time_is_discarded(txb: Broker) -> None:
    _producer_heartbeat(txb)
    _half(txb)
    _tick(txb, BORN)
    assert _tick(txb, BORN + 73 * 3_600_000) == []  # fileReservedTime 72 h, by born time
    assert txb.store.get_max_offset_in_queue(TRANS_CHECK_MAX_TIME_TOPIC, 0) == 1


def test_a_run_over_many_ticks_checks_each_half_once(
    txb: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budget splits a run over ticks; copies put back during the run are not walked again
    in it (the run ends where the half queue ended when it began, and stops at fresh copies)."""
    import actors.broker.transactional_message_check as tx

    monkeypatch.setattr(tx, "MAX_CHECKS_PER_TICK", 16)
    n = 60
    for k in range(n):
        _half(txb, uniq=f"M{k}")
    _tick(txb, BORN)
    checks = [c for t in range(BORN + 7000, BORN + 7040) for c in _tick(txb, t)]
    assert checks == []  # no live producer: nothing sent, but each half is put back once
    assert txb.store.get_max_offset_in_queue(HALF_TOPIC, 0) == 2 * n
    assert txb.controller.offsets.query_offset(CHECK_GROUP, HALF_TOPIC, 0) == n
    assert txb.cores["txcheck"].discarded == 0
    copies = [_only_record(txb, HALF_TOPIC, 0, q).properties for q in range(n, 2 * n)]
    assert all(p["TRANSACTION_CHECK_TIMES"] == "1" for p in copies)


def test_immune_halves_are_put_back_once_per_run(txb: Broker) -> None:
    for _ in range(5):
        _half(txb, uniq="I", queue_id=0, immunity_s=3600, body=b"i")
    _tick(txb, BORN)
    for t in range(BORN + 7000, BORN + 7020):
        _tick(txb, t)
    assert txb.store.get_max_offset_in_queue(HALF_TOPIC, 0) == 10


def test_a_repeated_end_transaction_does_not_stall_the_op_offset(txb: Broker) -> None:
    _producer_heartbeat(txb)
    _half(txb)
    phy = _half_phy(txb)
    assert _end(txb, 0, phy, 12).code == RS.SUCCESS
    assert _end(txb, 0, phy, 12).code == RS.SUCCESS  # a producer retrying its rollback
    _tick(txb, BORN)
    _tick(txb, BORN + 7000)
    assert txb.controller.offsets.query_offset(CHECK_GROUP, OP_TOPIC, 0) == 2
    assert txb.controller.offsets.query_offset(CHECK_GROUP, HALF_TOPIC, 0) == 1


def test_immunity_minus_one_means_the_transaction_timeout(txb: Broker) -> None:
    _producer_heartbeat(txb)
    _half(txb, uniq="M1", queue_id=0, immunity_s=-1, body=b"m")
    _tick(txb, BORN)
    assert _tick(txb, BORN + 3000) == []  # younger than transactionTimeOut (6 s)
    assert len(_tick(txb, BORN + 7000)) == 1


def test_check_copy_and_body_as_renew_half_message_inner_builds_them(txb: Broker) -> None:
    """The put-back copy has no flag / reconsume times (renewHalfMessageInner copies neither) and
    keeps WAIT as stored; the check body is the message read (its flag and store time) with
    WAIT=false; a commit answering the check stores the copy's flag 0."""
    _producer_heartbeat(txb)
    props = "UNIQ_KEY\x01F1\x02WAIT\x01true\x02TRAN_MSG\x01true\x02PGROUP\x01PG"
    ext = send_ext("TxTopic", queue_id=1, props=props, f=4, h=5, j=2)
    assert txb.call(RC.SEND_MESSAGE_V2, ext, b"fb", now_ms=BORN).code == RS.SUCCESS
    half = _only_record(txb, HALF_TOPIC, 0)
    assert half.flag == 5 and half.reconsume_times == 2
    _tick(txb, BORN)
    checks = _tick(txb, BORN + 7000)
    assert len(checks) == 1
    copy = _only_record(txb, HALF_TOPIC, 0, 1)
    assert copy.flag == 0 and copy.reconsume_times == 0
    assert copy.properties["WAIT"] == "true" and copy.properties["TRANSACTION_CHECK_TIMES"] == "1"
    body = decode_messages(checks[0][1].body)[0]
    assert body.flag == 5 and body.reconsume_times == 2
    assert body.store_timestamp == half.store_timestamp != copy.store_timestamp
    assert body.properties["WAIT"] == "false" and body.properties["TRANSACTION_CHECK_TIMES"] == "1"
    assert _end(txb, 1, _half_phy(txb, 1), 8).code == RS.SUCCESS
    real = _only_record(txb, "TxTopic", 1)
    assert real.flag == 0 and bytes(real.body) == b"fb"


def test_the_check_starts_over_when_the_half_and_op_queues_are_made_anew(txb: Broker) -> None:
    """cleanExpiredConsumeQueue (or a deleted topic) drops the half and op queues; new ones are
    numbered from 0 again, below the check group's saved offsets. The check starts over from
    the queues' min (Java's nextOffsetCorrection in getHalfMsg / getOpMsg): a half sent then is
    checked, where the saved offset past the new queue's end skipped it for good."""
    _producer_heartbeat(txb)
    for qoff, uniq in enumerate(("U1", "U2")):
        _half(txb, uniq=uniq)
        assert _end(txb, qoff, _half_phy(txb, qoff), 8).code == RS.SUCCESS
    _tick(txb, BORN)
    assert _tick(txb, BORN + 7000) == []  # both closed by their op records
    offsets = txb.controller.offsets
    assert offsets.query_offset(CHECK_GROUP, HALF_TOPIC, 0) == 2
    assert offsets.query_offset(CHECK_GROUP, OP_TOPIC, 0) == 2
    txb.store.delete_topics([HALF_TOPIC, OP_TOPIC])
    _half(txb, uniq="U3")  # queue offset 0 of the new half queue, never ended
    assert txb.store.get_max_offset_in_queue(HALF_TOPIC, 0) == 1
    txb.outbox.take()
    checks = _tick(txb, BORN + 20_000)
    assert [decode_messages(c.body)[0].properties["UNIQ_KEY"] for _, c in checks] == ["U3"]
    assert offsets.query_offset(CHECK_GROUP, HALF_TOPIC, 0) == 1


def test_a_replaced_check_service_knows_the_producers_at_once(txb: Broker) -> None:
    """A kill -9 of the check service: its replacement starts from the controller's snapshot,
    which carries the producer groups' connections, so the check-back goes out at its first
    run (it used to wait for the producer's next heartbeat, 30 s away)."""
    _producer_heartbeat(txb)
    _half(txb)
    txb.outbox.take()
    txb.cut("txcheck")
    ctx = BrokerContext(txb.bc, txb.sc, group="txcheck", outbox=txb.outbox, store=txb.store)
    ctx.load_snapshot(txb.controller.snapshot())
    txb.ctxs["txcheck"] = ctx
    txb.cores["txcheck"] = TransactionalMessageCheckService(ctx)
    txb.link("txcheck", "send")
    assert _tick(txb, BORN) == []
    [(conn, _cmd)] = _tick(txb, BORN + 7000)
    assert conn == PRODUCER_CONN
