"""ScheduleMessageService on a real store with a fake clock (spec §9.6): its core reads the store
and sends its deliveries to the real send core (the writer) over the kit's in-memory link, as
the schedule actor sends them to the send actor."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from actors.broker.schedule import (
    DELAY_FOR_A_WHILE,
    ScheduleMessageService,
    delay_offset_path,
    encode_offsets,
)
from protocol.bodies import DelayOffsetSerializeWrapper
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.message import decode_messages
from protocol.record import java_string_hash, pack_host
from store.commitlog import SCHEDULE_TOPIC
from store.message_ext_broker_inner import MessageExtBrokerInner
from store.message_store import DefaultMessageStore
from store.put_message_result import PutMessageResult, PutMessageStatus
from tests.unit.broker.broker_kit import Broker, send_ext

BORN = pack_host("10.1.2.3", 45678)
LEVELS = {"messageDelayLevel": "1s 2s 3s"}


@pytest.fixture
def b(tmp_path: Any) -> Iterator[Broker]:
    broker = Broker(str(tmp_path), store=LEVELS)
    yield broker
    broker.close()


def restart(b: Broker, **kw: Any) -> ScheduleMessageService:
    """A new schedule actor (its predecessor stopped or killed), linked to the writer."""
    b.cut("schedule")
    svc = ScheduleMessageService(b.store, b.sc, **kw)
    b.cores["schedule"] = svc
    b.link("schedule", "send")
    b.pump(0)
    return svc


def run(b: Broker, now_ms: int) -> int | None:
    """The schedule actor's timer, then what its link carries both ways."""
    wait = b.cores["schedule"].tick(now_ms)
    b.pump(now_ms)
    return wait  # type: ignore[no-any-return]


def _put_delayed(
    store: DefaultMessageStore,
    now_ms: int,
    level: int,
    *,
    topic: str = "T",
    queue_id: int = 2,
    tags: str = "TagA",
    body: bytes = b"hello",
) -> None:
    props = {"TAGS": tags, "KEYS": "k1", "UNIQ_KEY": f"U{now_ms}", "DELAY": str(level)}
    msg = MessageExtBrokerInner(
        topic, body, 7, props, queue_id, 0, 1234, BORN, BORN, 2, tags_code=java_string_hash(tags)
    )
    assert store.put_message(msg, now_ms).status is PutMessageStatus.PUT_OK


def _delivered(store: DefaultMessageStore, topic: str = "T", queue_id: int = 2) -> list[Any]:
    out = []
    for off in range(store.get_max_offset_in_queue(topic, queue_id)):
        cq = store.consume_queues[(topic, queue_id)]
        unit = cq.get_unit(off)
        assert unit is not None
        msg = store.look_message_by_offset(unit[0])
        assert msg is not None
        out.append((msg, unit[2]))
    return out


def test_parked_then_delivered_when_due(b: Broker) -> None:
    store, svc = b.store, b.cores["schedule"]
    _put_delayed(store, 1500, 1)  # deliver at 2500
    assert store.get_max_offset_in_queue(SCHEDULE_TOPIC, 0) == 1
    assert store.consume_queues[(SCHEDULE_TOPIC, 0)].get_unit(0)[2] == 2500  # type: ignore[index]
    arrivals: list[tuple[Any, ...]] = []
    store.arrival_listener = lambda *a: arrivals.append(a)
    assert run(b, 1000) == 1000  # first run after 1000 ms
    run(b, 2000)  # not due: re-armed for when it is (the countdown), same offset
    assert svc.next_run[1] == 2500
    assert _delivered(store) == [] and svc.offsets.get(1, 0) == 0
    run(b, 2499)  # a timer that is not due does not run
    assert _delivered(store) == []
    run(b, 2500)
    got = _delivered(store)
    assert len(got) == 1 and svc.offsets[1] == 1
    msg, tags_code = got[0]
    assert tags_code == java_string_hash("TagA")
    assert msg.topic == "T" and msg.queue_id == 2 and bytes(msg.body) == b"hello"
    assert msg.flag == 7 and msg.born_timestamp == 1234 and msg.born_host == BORN
    assert msg.reconsume_times == 2 and msg.sys_flag == 0
    assert msg.properties["DELAY"] == "1"  # kept in the delivered text, as Java stores it
    assert msg.properties["REAL_TOPIC"] == "T" and msg.properties["REAL_QID"] == "2"
    assert msg.properties["TAGS"] == "TagA" and msg.properties["KEYS"] == "k1"
    assert ("T", 2, 1, java_string_hash("TagA"), 2500) in arrivals  # long polls wake


def test_levels_are_independent_and_ordered(b: Broker) -> None:
    store, svc = b.store, b.cores["schedule"]
    _put_delayed(store, 0, 3, body=b"three")  # due 3000
    _put_delayed(store, 0, 1, body=b"one")  # due 1000
    _put_delayed(store, 0, 2, body=b"two")  # due 2000
    run(b, 0)
    for t in range(1000, 3101, 100):
        run(b, t)
        bodies = [bytes(m.body) for m, _ in _delivered(store)]
        assert bodies == [b"one", b"two", b"three"][: min(3, t // 1000)]
    assert svc.offsets == {1: 1, 2: 1, 3: 1}


def test_clock_skew_deliver_time_beyond_level_delay_is_due_now(b: Broker) -> None:
    _put_delayed(b.store, 100_000, 1)  # deliver at 101000, stored by a clock now far ahead
    run(b, 49_000)
    assert _delivered(b.store) == []  # timer not yet run
    run(b, 50_000)  # 101000 > 50000 + 1000: treated as due now
    assert len(_delivered(b.store)) == 1


def test_deliver_time_within_level_delay_waits(b: Broker) -> None:
    _put_delayed(b.store, 10_000, 3)  # deliver at 13000
    run(b, 10_000)
    run(b, 11_000)  # 13000 <= 11000 + 3000: honestly not due
    assert _delivered(b.store) == []
    run(b, 13_000)
    assert len(_delivered(b.store)) == 1


def test_offsets_persisted_and_reloaded(b: Broker) -> None:
    store, svc = b.store, b.cores["schedule"]
    for i in range(3):
        _put_delayed(store, i, 1)
    run(b, 0)
    run(b, 1002)
    assert svc.offsets[1] == 3 and len(_delivered(store)) == 3
    path = delay_offset_path(b.sc)
    assert not os.path.exists(path)  # first flush after flushDelayOffsetInterval
    run(b, 10_000)  # written on the file writer's thread
    assert svc.file_writer is not None and svc.file_writer.flush()
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert text == '{"offsetTable":{1:3}}'
    assert DelayOffsetSerializeWrapper.from_json(text).offset_table == {1: 3}
    _put_delayed(store, 10_000, 1)
    run(b, 11_000)
    svc.close()  # the actor stops: persisted
    with open(path, encoding="utf-8") as f:
        assert f.read() == encode_offsets({1: 4})
    again = restart(b)
    assert again.offsets == {1: 4}
    run(b, 20_000)
    run(b, 21_000)
    assert len(_delivered(store)) == 4  # nothing delivered twice


def test_a_replacement_resumes_where_the_writer_says(b: Broker) -> None:
    """A kill -9 of the schedule actor after deliveries it never persisted: the replacement
    reads delayOffset.json (behind) and asks the writer how far it delivered each level
    (SERVICE_DELAY_PROGRESS): nothing is delivered twice, nothing is skipped."""
    store = b.store
    for i in range(3):
        _put_delayed(store, i, 1)
    run(b, 0)
    run(b, 1002)
    assert len(_delivered(store)) == 3
    assert not os.path.exists(delay_offset_path(b.sc))  # never persisted: killed before
    again = restart(b)  # no close(): killed
    assert again.offsets == {1: 3}  # the writer's word
    _put_delayed(store, 2000, 1)
    run(b, 3000)
    run(b, 4000)
    assert [bytes(m.body) for m, _ in _delivered(store)] == [b"hello"] * 4


def test_a_killed_writer_leaves_the_delivery_to_do_again(b: Broker) -> None:
    """The writer died with the level's request unanswered: the offset did not move, and the
    next writer gets the delivery (answered this time)."""
    svc = b.cores["schedule"]
    _put_delayed(b.store, 0, 1)
    run(b, 0)
    svc.tick(1000)  # the request goes out...
    assert len(svc.under_way) == 1
    b.cut("send", 1000)  # ...and the writer dies before it reads it
    assert svc.under_way == [] and svc.writer is None and svc.offsets.get(1, 0) == 0
    assert run(b, 1100) == DELAY_FOR_A_WHILE  # no writer: nothing sent
    b.link("schedule", "send")  # the replacement writer (the same store here)
    b.pump(1100)
    run(b, 1200)
    assert svc.offsets[1] == 1 and len(_delivered(b.store)) == 1


def test_reload_falls_back_to_bak_and_keeps_unknown_levels(b: Broker) -> None:
    """A level not configured now keeps its offset and is persisted again (Java's decode puts
    the whole table): forgotten, a level configured again later would deliver its whole queue
    a second time. No timer runs for it."""
    path = delay_offset_path(b.sc)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".bak", "w", encoding="utf-8") as f:
        f.write('{"offsetTable":{1:5,2:6,99:1}}')
    with open(path, "w", encoding="utf-8") as f:
        f.write("{broken")
    svc = restart(b)
    assert svc.offsets == {1: 5, 2: 6, 99: 1}
    run(b, 0)
    run(b, 5_000)
    assert 99 not in svc.next_run
    svc.dirty = True
    svc.persist()
    with open(path, encoding="utf-8") as f:
        assert DelayOffsetSerializeWrapper.from_json(f.read()).offset_table == {
            1: 5, 2: 6, 99: 1}  # fmt: skip


def test_failed_put_retries_same_offset(b: Broker) -> None:
    store, svc = b.store, b.cores["schedule"]
    _put_delayed(store, 0, 1)
    real_put = store.put_message
    fails = [1]

    def put(msg: MessageExtBrokerInner, now_ms: int) -> PutMessageResult:
        if fails:
            fails.pop()
            return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY)
        return real_put(msg, now_ms)

    store.put_message = put  # type: ignore[method-assign]
    run(b, 0)
    run(b, 1000)
    assert svc.next_run[1] == 1000 + DELAY_FOR_A_WHILE
    assert svc.offsets.get(1, 0) == 0 and _delivered(store) == []
    run(b, 1100)
    assert svc.offsets[1] == 1 and len(_delivered(store)) == 1


def test_budget_per_run_then_immediate_rerun(b: Broker) -> None:
    store = b.store
    for i in range(5):
        _put_delayed(store, i, 1)
    svc = restart(b, max_per_tick=2)
    run(b, 0)
    run(b, 2000)
    assert svc.next_run[1] == 2000  # more due: again at once
    assert len(_delivered(store)) == 2
    for t in range(2001, 2011):  # bounded
        if svc.offsets.get(1) == 5:
            break
        run(b, t)
    assert len(_delivered(store)) == 5


def test_record_without_real_topic_is_skipped(b: Broker) -> None:
    store, svc = b.store, b.cores["schedule"]
    # a record written straight into the schedule topic (no REAL_TOPIC)
    raw = MessageExtBrokerInner(SCHEDULE_TOPIC, b"x", 0, {"X": "1"}, 0)
    assert store.put_message(raw, 0).status is PutMessageStatus.PUT_OK
    _put_delayed(store, 0, 1)
    run(b, 0)
    run(b, 1000)
    assert svc.offsets[1] == 2 and len(_delivered(store)) == 1


def test_the_schedule_actor_persists_when_it_stops(b: Broker) -> None:
    _put_delayed(b.store, 0, 1, topic="TopicTest", queue_id=0)
    run(b, 0)
    run(b, 1000)
    assert b.store.get_max_offset_in_queue("TopicTest", 0) == 1
    b.close()  # ClosingCore.close, as the actor's exit calls it
    with open(delay_offset_path(b.sc), encoding="utf-8") as f:
        assert json.loads(f.read().replace("{1:", '{"1":'))["offsetTable"]["1"] == 1


def test_delayed_send_keeps_wait_parked_and_delay_delivered(b: Broker) -> None:
    """As the 4.9.x broker stores them: the parked record carries the producer's WAIT (CommitLog
    renders the map SendMessageProcessor put WAIT back into), and the delivered record keeps
    DELAY, REAL_TOPIC and REAL_QID (messageTimeup renders the text before clearing DELAY);
    the delivered record is not parked again."""
    props = "UNIQ_KEY\x01UD\x02WAIT\x01true\x02TAGS\x01TagD\x02DELAY\x011"
    r = b.call(RC.SEND_MESSAGE_V2, send_ext("DelayT", queue_id=1, props=props), b"d", now_ms=0)
    assert r is not None and r.code == RS.SUCCESS
    res = b.store.get_message("G", SCHEDULE_TOPIC, 0, 0, 32)
    [parked] = decode_messages(res.buffer)
    assert parked.properties["WAIT"] == "true" and parked.properties["DELAY"] == "1"
    assert (parked.properties["REAL_TOPIC"], parked.properties["REAL_QID"]) == ("DelayT", "1")
    for now in (0, 1000, 2000, 2100, 2200):  # level 1 is 1 s; the service starts after 1 s
        run(b, now)
    res = b.store.get_message("G", "DelayT", 1, 0, 32)
    [got] = decode_messages(res.buffer)
    assert bytes(got.body) == b"d" and got.properties["DELAY"] == "1"
    assert got.properties["REAL_TOPIC"] == "DelayT" and got.properties["WAIT"] == "true"
    assert got.properties["TAGS"] == "TagD" and got.properties["UNIQ_KEY"] == "UD"
    assert b.store.get_max_offset_in_queue(SCHEDULE_TOPIC, 0) == 1  # not parked again


def test_an_offset_past_the_queue_end_is_corrected(b: Broker) -> None:
    """correctDelayOffset: a saved offset beyond the level's queue (a truncated consume queue,
    a store wiped with its config kept) is brought back to the queue's end, so what is parked
    from then on is delivered (it used to wait for an offset that never came)."""
    path = delay_offset_path(b.sc)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"offsetTable":{1:5}}')
    for i in range(2):
        _put_delayed(b.store, i, 1)
    svc = restart(b)
    assert svc.offsets == {1: 5}
    run(b, 0)
    run(b, 1002)
    assert svc.offsets[1] == 2  # the two parked before the correction are left behind
    _put_delayed(b.store, 2000, 1)
    run(b, 3100)
    assert [m.body for m, _ in _delivered(b.store)] == [b"hello"]


def test_a_slave_delivers_nothing_and_answers_the_synced_copy(tmp_path: Any) -> None:
    slave = Broker(str(tmp_path), brokerRole="SLAVE", brokerId=1, store=LEVELS)
    try:
        svc = slave.cores["schedule"]
        _put_delayed(slave.store, 0, 1)
        for now in (0, 1000, 2000):
            assert svc.tick(now) is None
        slave.pump(2000)
        assert _delivered(slave.store) == [] and svc.writer is None
    finally:
        slave.close()


def test_two_runs_under_way_a_failure_stops_the_second(b: Broker) -> None:
    """A level's next run is read while the writer stores the last; when the first stops at a
    failed put, the writer refuses the second (stored, its messages would go out of order and
    twice once the first is tried again): each message is delivered once, in order."""
    store = b.store
    for i in range(6):
        _put_delayed(store, i, 1, body=b"m%d" % i)
    svc = restart(b, max_per_tick=2)
    run(b, 0)
    real_put = store.put_message
    calls = [0]

    def put(msg: MessageExtBrokerInner, now_ms: int) -> PutMessageResult:
        calls[0] += 1
        if calls[0] == 2:  # the first run's second message
            return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY)
        return real_put(msg, now_ms)

    store.put_message = put  # type: ignore[method-assign]
    svc.tick(2000)  # run 1: m0 m1
    svc.tick(2000)  # run 2 (m2 m3), read while run 1 is with the writer
    assert [(r.start, r.end) for r in svc.under_way] == [(0, 2), (2, 4)]
    assert svc.tick(2000) is not None and len(svc.under_way) == 2  # two at most
    b.pump(2000)
    assert svc.offsets[1] == 1 and [bytes(m.body) for m, _ in _delivered(store)] == [b"m0"]
    assert svc.next_run[1] == 2000 + DELAY_FOR_A_WHILE  # tried again after a while
    for t in range(2100, 2200, 10):  # bounded
        run(b, t)
    assert [bytes(m.body) for m, _ in _delivered(store)] == [b"m%d" % i for i in range(6)]
    assert svc.offsets[1] == 6


def test_the_writer_refuses_a_run_it_stored_already(b: Broker) -> None:
    """A run that does not start where the writer's record of its level ends is not stored:
    its answer says where the level is, and the service takes that."""
    store, svc = b.store, b.cores["schedule"]
    for i in range(2):
        _put_delayed(store, i, 1)
    run(b, 0)
    run(b, 1002)
    assert len(_delivered(store)) == 2 and svc.offsets[1] == 2
    svc.offsets[1] = 0  # a service that lost track (its successor read an old file)
    run(b, 2000)
    assert len(_delivered(store)) == 2 and svc.offsets[1] == 2  # refused: nothing twice
