"""Pull processor: checks in order, every status => code, long-poll hold/wake/timeout (the
hold service's core linked to it in memory, as the kit links every service)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from broker_kit import Broker, heartbeat_body, pull_ext, send_ext, wire_cmd

from actors.broker.events import OffsetMoved
from actors.broker.processors.pull import RESPONSE_KEYS
from actors.broker.pull_hold import HeldPull, PullRequestHoldService
from actors.core import Request
from actors.runtime.link_records import ArrivalNotices
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.headers import PullMessageResponseHeader
from protocol.message import decode_messages

SUB_ALL = 2 | 4  # suspend + subscription (ali-ons / C++)
FAQ = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."  # FAQUrl.suggestTodo


def put(b: Broker, topic: str, n: int, tags: str | None = None, qid: int = 0) -> None:
    props = "WAIT\x01true" + (f"\x02TAGS\x01{tags}" if tags else "")
    for i in range(n):
        r = b.call(RC.SEND_MESSAGE_V2, send_ext(topic, queue_id=qid, props=props), b"m%d" % i)
        assert r.code == RS.SUCCESS


def pull(b: Broker, topic: str, offset: int = 0, conn_id: int = 1, **kw):
    kw.setdefault("sys_flag", SUB_ALL)
    kw.setdefault("sub", "*")
    return b.call(
        RC.PULL_MESSAGE,
        pull_ext(topic, offset=offset, **kw),
        language="CPP",
        version=333,
        conn_id=conn_id,
    )


def test_found_header_and_body(broker: Broker) -> None:
    put(broker, "T", 3)
    r = pull(broker, "T")
    assert r.code == RS.SUCCESS and r.remark == "FOUND"
    assert r.ext_fields == {
        "suggestWhichBrokerId": "0",
        "nextBeginOffset": "3",
        "minOffset": "0",
        "maxOffset": "3",
    }
    assert [m.body for m in decode_messages(r.body)] == [b"m0", b"m1", b"m2"]


def test_status_codes(broker: Broker) -> None:
    put(broker, "T", 2)
    r = pull(broker, "T", offset=2, sys_flag=4)  # no suspend flag: answered
    assert (r.code, r.remark) == (RS.PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
    assert r.ext_fields["nextBeginOffset"] == "2"
    r = pull(broker, "T", offset=9)
    assert (r.code, r.remark) == (RS.PULL_OFFSET_MOVED, "OFFSET_OVERFLOW_BADLY")
    assert r.ext_fields["nextBeginOffset"] == "2"  # Java 4.9.4+: the max offset, always
    # queue 1 exists in the topic but never written: NO_MATCHED_LOGIC_QUEUE / NO_MESSAGE
    r = pull(broker, "T", queue_id=1, offset=0, sys_flag=4)
    assert r.code == RS.PULL_NOT_FOUND
    r = pull(broker, "T", queue_id=1, offset=5, sys_flag=4)
    assert r.code == RS.PULL_OFFSET_MOVED


def test_tag_filter_no_match_is_20(broker: Broker) -> None:
    put(broker, "T", 2, tags="TagB")
    r = pull(broker, "T", sub="TagA")
    assert (r.code, r.remark) == (RS.PULL_RETRY_IMMEDIATELY, "NO_MATCHED_MESSAGE")
    assert r.ext_fields["nextBeginOffset"] == "2"
    r = pull(broker, "T", sub="TagA || TagB")
    assert r.code == RS.SUCCESS


def test_check_order(broker: Broker) -> None:
    put(broker, "T", 1)
    r = pull(broker, "Unknown")
    assert r.code == RS.TOPIC_NOT_EXIST
    r = pull(broker, "T", queue_id=7)
    assert r.code == RS.SYSTEM_ERROR and "queueId[7] is illegal" in r.remark
    # no subscription flag and no heartbeat => 24
    r = pull(broker, "T", sys_flag=2, sub=None)
    assert r.code == RS.SUBSCRIPTION_NOT_EXIST
    assert r.remark == "the consumer's group info not exist" + FAQ
    ext = pull_ext("T")
    del ext["queueOffset"]
    r = broker.call(RC.PULL_MESSAGE, ext)
    assert r.code == RS.SYSTEM_ERROR and "queueOffset" in r.remark


def test_heartbeat_subscription_rules(broker: Broker) -> None:
    put(broker, "T", 1)
    r = broker.call(RC.HEART_BEAT, None, heartbeat_body("c1", "CG", "T", sub_version=5))
    assert r.code == RS.SUCCESS
    r = pull(broker, "T", sys_flag=2, sub=None, sub_version=5)
    assert r.code == RS.SUCCESS
    r = pull(broker, "Other", sys_flag=2, sub=None)
    assert r.code == RS.TOPIC_NOT_EXIST
    put(broker, "Other", 1)
    r = pull(broker, "Other", sys_flag=2, sub=None)
    assert (r.code, r.remark) == (
        RS.SUBSCRIPTION_NOT_EXIST,
        "the consumer's subscription not exist" + FAQ,
    )
    r = pull(broker, "T", sys_flag=2, sub=None, sub_version=6)
    assert r.code == RS.SUBSCRIPTION_NOT_LATEST


def test_group_disabled_and_no_auto_create(tmp_path) -> None:
    b = Broker(str(tmp_path / "s"), autoCreateSubscriptionGroup=False)
    try:
        put(b, "T", 1)
        r = pull(b, "T", group="NoSuchGroup")
        assert r.code == RS.SUBSCRIPTION_GROUP_NOT_EXIST
        body = b'{"groupName":"Off","consumeEnable":false}'
        assert b.call(RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body).code == RS.SUCCESS
        r = pull(b, "T", group="Off")
        assert r.code == RS.NO_PERMISSION
    finally:
        b.close()


def test_commit_offset_flag_stores_into_the_shared_table(broker: Broker) -> None:
    put(broker, "T", 1)
    pull(broker, "T", sys_flag=SUB_ALL | 1, commit=1)
    assert broker.ctxs["consumer_manage"].offsets.query_offset("CG", "T", 0) == 1
    assert broker.controller.offsets.query_offset("CG", "T", 0) == 1


def test_long_poll_hold_then_arrival_wakes(broker: Broker) -> None:
    put(broker, "T", 1)
    assert pull(broker, "T", offset=1, conn_id=9) is None  # held
    assert len(broker.cores["hold"].hold) == 1 and len(broker.cores["pull"].suspended) == 1
    put(broker, "T", 1)  # arrival -> woken within the same pump
    sent = broker.outbox.take()
    assert len(sent) == 1
    conn, resp = sent[0]
    assert conn == 9 and resp.code == RS.SUCCESS and resp.opaque == 7
    assert [m.body for m in decode_messages(resp.body)] == [b"m0"]
    assert len(broker.cores["hold"].hold) == 0 and len(broker.cores["pull"].suspended) == 0


def test_arrival_with_non_matching_tag_keeps_hold(broker: Broker) -> None:
    put(broker, "T", 1, tags="TagA")
    assert pull(broker, "T", offset=1, sub="TagA") is None
    put(broker, "T", 1, tags="TagB")
    assert broker.outbox.take() == []
    put(broker, "T", 1, tags="TagA")
    ((_conn, resp),) = broker.outbox.take()
    assert resp.code == RS.SUCCESS


def test_hold_times_out_on_sweep(broker: Broker) -> None:
    core = broker.cores["hold"]
    put(broker, "T", 1)
    assert core.tick(0) == 200  # first "none held" goes to the writer, after its quiet delay
    assert core.tick(200) == 4800  # then the 5 s sweep
    assert (
        broker.call(
            RC.PULL_MESSAGE,
            pull_ext("T", offset=1, sys_flag=SUB_ALL, sub="*", suspend=15000),
            now_ms=0,
        )
        is None
    )
    broker.outbox.take()
    for now in (5000, 10000):
        core.tick(now)
        broker.pump(now)
    assert broker.outbox.take() == []
    core.tick(15000)
    broker.pump(15000)
    ((_conn, resp),) = broker.outbox.take()
    assert resp.code == RS.PULL_NOT_FOUND and resp.ext_fields["nextBeginOffset"] == "1"


def test_short_polling(tmp_path) -> None:
    b = Broker(str(tmp_path / "s"), longPollingEnable=False)
    try:
        put(b, "T", 1)
        core = b.cores["hold"]
        core.tick(0)
        assert b.call(RC.PULL_MESSAGE, pull_ext("T", offset=1, sys_flag=SUB_ALL, sub="*")) is None
        put(b, "T", 1)  # no arrival wake-up without long polling
        assert b.outbox.take() == []
        core.tick(1000)
        b.pump(1000)
        ((_conn, resp),) = b.outbox.take()
        assert resp.code == RS.SUCCESS
    finally:
        b.close()


def test_held_pull_dropped_on_close(broker: Broker) -> None:
    put(broker, "T", 1)
    assert pull(broker, "T", offset=1, conn_id=4) is None
    broker.cores["pull"].on_connection_closed(4, 0)
    put(broker, "T", 1)
    assert broker.outbox.take() == []


def test_hold_service_sweep_uses_max_offset() -> None:
    svc = PullRequestHoldService(5000)
    h = HeldPull(None, None, "T", 0, 3, 0, 15000, None)  # type: ignore[arg-type]
    svc.suspend(h)
    assert svc.check_hold_request(1000, lambda t, q: 3) == []
    assert svc.check_hold_request(2000, lambda t, q: 4) == [h]
    svc.suspend(h)
    assert svc.check_hold_request(15000, lambda t, q: 3) == [h]


def _offset_moved_messages(b: Broker) -> list:
    res = b.store.get_message("T", "OFFSET_MOVED_EVENT", 0, 0, 32)
    return decode_messages(res.buffer) if res.message_count else []


def test_offset_moved_event_written_by_the_send_core(broker: Broker) -> None:
    put(broker, "T", 2)
    assert _offset_moved_messages(broker) == []
    r = pull(broker, "T", offset=9)
    assert r.code == RS.PULL_OFFSET_MOVED
    msgs = _offset_moved_messages(broker)  # the kit pumped the event: controller -> send core
    assert len(msgs) == 1
    m = msgs[0]
    assert m.topic == "OFFSET_MOVED_EVENT" and m.queue_id == 0
    assert m.properties["TAGS"] == "CG" and m.properties["KEYS"] == "CG"
    assert json.loads(m.body) == {
        "consumerGroup": "CG",
        "messageQueue": {"brokerName": "broker-a", "queueId": 0, "topic": "T"},
        "offsetNew": 2,
        "offsetRequest": 9,
    }
    assert m.body.startswith(b'{"consumerGroup":"CG","messageQueue":{"brokerName"')
    assert m.born_address.startswith("127.0.0.1:10911")
    # answered codes other than 21 write nothing more
    pull(broker, "T", offset=0)
    assert len(_offset_moved_messages(broker)) == 1


def test_offset_moved_event_goes_to_the_writer_only(broker: Broker) -> None:
    ev = OffsetMoved("CG", "T", 1, "broker-a", 5, 0)
    forward = broker.controller.apply_events([ev], "pull", 0)
    assert forward == {"send": [ev]}
    # applied at the origin (no handler there) it is a no-op
    broker.ctxs["pull"].apply(ev, 0)
    assert _offset_moved_messages(broker) == []
    broker.ctxs["send"].apply(ev, 0)
    assert len(_offset_moved_messages(broker)) == 1


@pytest.mark.parametrize("check_in_slave", [False, True])
def test_a_slave_keeps_an_out_of_range_offset_unless_offset_check_in_slave(
    tmp_path, check_in_slave: bool
) -> None:
    """PullMessageProcessor on a slave: PULL_RETRY_IMMEDIATELY towards the group's broker with
    the offset as asked (nextOffsetCorrection leaves it), so a consumer reading a lagging slave
    never moves back; with offsetCheckInSlave the slave corrects it (21) as a master does. A
    slave writes no OFFSET_MOVED_EVENT either way."""
    b = Broker(str(tmp_path / "s"), brokerRole="SLAVE",
               store={"offsetCheckInSlave": check_in_slave})  # fmt: skip
    try:
        put(b, "T", 1)  # what replication brought; the store now reads as the slave's
        b.sc.brokerRole = "SLAVE"  # (a slave store takes no puts: switched after this one)
        r = pull(b, "T", offset=9)
        if check_in_slave:
            assert (r.code, r.ext_fields["nextBeginOffset"]) == (RS.PULL_OFFSET_MOVED, "1")
        else:
            assert (r.code, r.remark) == (RS.PULL_RETRY_IMMEDIATELY, "OFFSET_OVERFLOW_BADLY")
            assert r.ext_fields["nextBeginOffset"] == "9"
            assert r.ext_fields["suggestWhichBrokerId"] == "0"  # the group's brokerId
        assert _offset_moved_messages(b) == []
    finally:
        b.close()


def test_pull_response_keys_are_the_typed_headers(broker: Broker) -> None:
    put(broker, "T", 1)
    for offset in (0, 1, 7):
        r = pull(broker, "T", offset=offset, sys_flag=4)
        assert tuple(r.ext_fields) == RESPONSE_KEYS
        assert PullMessageResponseHeader.from_ext(r.ext_fields).to_ext() == r.ext_fields


def test_sql92_subscription_refused_without_property_filter(tmp_path) -> None:
    """enablePropertyFilter=false (the default): a SQL92 pull is refused (spec §9.3)."""
    b = Broker(str(tmp_path))
    try:
        b.call(RC.SEND_MESSAGE_V2, send_ext("T"), b"x")
        ext = pull_ext("T", sub="a > 1", sys_flag=0b110)
        ext["expressionType"] = "SQL92"
        r = b.call(RC.PULL_MESSAGE, ext)
        assert r is not None and r.code == RS.SYSTEM_ERROR and "SQL92" in (r.remark or "")
    finally:
        b.close()


def _sql_pull(b: Broker, sql: str, offset: int = 0) -> Any:
    ext = pull_ext("T", sub=sql, sys_flag=0b110, offset=offset)
    ext["expressionType"] = "SQL92"
    return b.call(RC.PULL_MESSAGE, ext)


def _send_props(b: Broker, props: str, body: bytes) -> None:
    """One SEND_MESSAGE_V2 to T with this properties text, which must succeed."""
    r = b.call(RC.SEND_MESSAGE_V2, send_ext("T", props=props), body)
    assert r is not None and r.code == RS.SUCCESS


def test_sql92_subscription_filters_on_properties(tmp_path) -> None:
    """enablePropertyFilter=true: records are evaluated on their properties (TAGS included)."""
    b = Broker(str(tmp_path), enablePropertyFilter=True)
    try:
        for i in range(6):
            _send_props(b, f"UNIQ_KEY\x01U{i}\x02TAGS\x01Tag{i % 2}\x02a\x01{i}", b"m%d" % i)
        r = _sql_pull(b, "a between 2 and 4 AND TAGS = 'Tag0'")
        assert r is not None and r.code == RS.SUCCESS
        assert [bytes(m.body) for m in decode_messages(r.body)] == [b"m2", b"m4"]
        assert r.ext_fields["nextBeginOffset"] == "6"
        r = _sql_pull(b, "a > 100")  # nothing matches: retry at once from the next offset
        assert r is not None and r.code == RS.PULL_RETRY_IMMEDIATELY
        assert r.ext_fields["nextBeginOffset"] == "6"
        r = _sql_pull(b, "a >")
        assert r is not None and r.code == RS.SUBSCRIPTION_PARSE_FAILED
    finally:
        b.close()


def test_sql92_counts_only_matching_records_towards_the_batch(tmp_path) -> None:
    """getMessage evaluates a SQL92 subscription inside its scan: 40 records that do not match
    and then 5 that do come back in one pull (maxMsgNums 32), nextBeginOffset past them all."""
    b = Broker(str(tmp_path), enablePropertyFilter=True)
    try:
        for i in range(45):
            _send_props(b, f"UNIQ_KEY\x01U{i}\x02a\x01{1 if i >= 40 else 2}", b"m%d" % i)
        r = _sql_pull(b, "a = 1")
        assert r is not None and r.code == RS.SUCCESS
        assert [bytes(m.body) for m in decode_messages(r.body)] == [
            b"m%d" % i for i in range(40, 45)
        ]
        assert r.ext_fields["nextBeginOffset"] == "45"
    finally:
        b.close()


def test_sql92_held_pull_stays_held_for_an_arrival_that_does_not_match(tmp_path) -> None:
    """notifyMessageArriving checks a SQL92 subscription on the arrival's properties: a
    non-matching arrival leaves the pull held, a matching one answers it with that record."""
    b = Broker(str(tmp_path), enablePropertyFilter=True)

    def send(i: int, a: int) -> None:
        _send_props(b, f"UNIQ_KEY\x01U{i}\x02a\x01{a}", b"m%d" % i)

    try:
        send(0, 2)
        ext = pull_ext("T", sub="a = 1", sys_flag=0b110, offset=1, suspend=15000)
        ext["expressionType"] = "SQL92"
        assert b.call(RC.PULL_MESSAGE, ext, conn_id=9) is None  # held
        b.outbox.take()
        send(1, 2)  # does not match: still held
        assert [c for c, _ in b.outbox.take() if c == 9] == []
        [held] = [h for hs in b.cores["hold"].hold.table.values() for h in hs]
        assert held.checked_to == 2  # the arrival was read once; the next look starts past it
        send(2, 1)  # matches: answered with it, past the one that did not
        [resp] = [r for c, r in b.outbox.take() if c == 9]
        assert resp.code == RS.SUCCESS
        assert [bytes(m.body) for m in decode_messages(resp.body)] == [b"m2"]
        assert resp.ext_fields["nextBeginOffset"] == "3"
        assert len(b.cores["hold"].hold) == 0
    finally:
        b.close()


def test_sql92_held_pull_reads_past_a_long_run_of_arrivals_that_do_not_match(tmp_path) -> None:
    """One notice covering 900 records that do not match and then one that does (a batch, or
    arrivals coalesced by the writer) wakes the held pull at once, although one look reads at
    most 800 units (Java checks each arrival's properties as it comes); it stayed held until
    the 5 s sweep."""
    b = Broker(str(tmp_path), enablePropertyFilter=True)
    send = b.cores["send"]

    def put(i: int, a: int) -> None:  # stored without moving its arrival to the pull core
        cmd = wire_cmd(RC.SEND_MESSAGE_V2, send_ext("T", props=f"UNIQ_KEY\x01U{i}\x02a\x01{a}"),
                       b"m%d" % i)  # fmt: skip
        r = send.process(Request(1, ("127.0.0.1", 40000), cmd, 0), 0)
        assert r is not None and r.code == RS.SUCCESS

    try:
        _send_props(b, "UNIQ_KEY\x01U0\x02a\x012", b"m0")
        ext = pull_ext("T", sub="a = 1", sys_flag=0b110, offset=1, suspend=15000)
        ext["expressionType"] = "SQL92"
        assert b.call(RC.PULL_MESSAGE, ext, conn_id=9) is None  # held
        b.outbox.take()
        for i in range(1, 901):
            put(i, 2)
        put(901, 1)
        # the writer's notice for them: one, with the queue's new max (a SEND_BATCH_MESSAGE's,
        # or a read of several sends: the send actor keeps the newest per queue and tags code)
        last = b.ctxs["send"].drain_arrivals()[-1]
        assert last[:3] == ("T", 0, 902)
        b.cores["hold"].on_link_record(b.end("hold", "send"), ArrivalNotices((last,)), 0)
        b.pump(0)
        # answered at once: the re-run reads 800 units from its offset, as Java's does, and
        # tells the consumer to pull again from where it stopped; that pull gets the record
        [resp] = [r for c, r in b.outbox.take() if c == 9]
        assert resp.code == RS.PULL_RETRY_IMMEDIATELY
        assert resp.ext_fields["nextBeginOffset"] == "801"
        r = _sql_pull(b, "a = 1", offset=801)
        assert r is not None and r.code == RS.SUCCESS
        assert [bytes(m.body) for m in decode_messages(r.body)] == [b"m901"]
    finally:
        b.close()


@pytest.mark.parametrize("sql", [None, "a >= 0"])
def test_slow_consumer_group_is_disabled(tmp_path, sql: str | None) -> None:
    """disableConsumeIfConsumerReadSlowly: a pull that leaves its group further behind than
    consumerFallbehindThreshold bytes disables the group (TAG and SQL92 subscriptions alike);
    its next pull is refused."""
    b = Broker(
        str(tmp_path),
        enablePropertyFilter=True,
        disableConsumeIfConsumerReadSlowly=True,
        consumerFallbehindThreshold=4096,
    )
    try:
        for i in range(20):  # ~20 KiB in the commit log
            r = b.call(RC.SEND_MESSAGE_V2, send_ext("T", props=f"UNIQ_KEY\x01U{i}\x02a\x01{i}"),
                       b"y" * 1024)  # fmt: skip
            assert r is not None and r.code == RS.SUCCESS
        ext = pull_ext("T", sub=sql or "*", sys_flag=0b110)
        ext["maxMsgNums"] = 1
        if sql:
            ext["expressionType"] = "SQL92"
        r = b.call(RC.PULL_MESSAGE, ext)
        assert r is not None and r.code == RS.SUCCESS  # served, then found 19 KiB behind
        cfg = b.ctxs["pull"].groups.get("CG")
        assert cfg is not None and not cfg.consume_enable
        r = b.call(RC.PULL_MESSAGE, ext)
        assert r is not None and r.code == RS.NO_PERMISSION
    finally:
        b.close()
