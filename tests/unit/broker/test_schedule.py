"""ScheduleMessageService on a real store with a fake clock (spec §9.6)."""

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
from protocol.record import java_string_hash, pack_host
from store.commitlog import SCHEDULE_TOPIC
from store.config import StoreConfig
from store.message_ext_broker_inner import MessageExtBrokerInner
from store.message_store import DefaultMessageStore
from store.put_message_result import PutMessageResult, PutMessageStatus
from tests.unit.broker.broker_kit import Broker

BORN = pack_host("10.1.2.3", 45678)


def _config(root: str, levels: str = "1s 2s 3s") -> StoreConfig:
    return StoreConfig(
        storePathRootDir=root,
        mappedFileSizeCommitLog=1 << 20,
        mappedFileSizeConsumeQueue=20 * 1000,
        maxIndexNum=1000,
        maxHashSlotNum=100,
        messageDelayLevel=levels,
    )


def _open(cfg: StoreConfig) -> DefaultMessageStore:
    store = DefaultMessageStore(cfg)
    assert store.load(0)
    store.start(0)
    return store


@pytest.fixture
def env(tmp_path: Any) -> Iterator[tuple[DefaultMessageStore, StoreConfig]]:
    cfg = _config(str(tmp_path))
    store = _open(cfg)
    yield store, cfg
    store.shutdown(0)


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


def test_parked_then_delivered_when_due(env: tuple[DefaultMessageStore, StoreConfig]) -> None:
    store, cfg = env
    _put_delayed(store, 1500, 1)  # deliver at 2500
    assert store.get_max_offset_in_queue(SCHEDULE_TOPIC, 0) == 1
    assert store.consume_queues[(SCHEDULE_TOPIC, 0)].get_unit(0)[2] == 2500  # type: ignore[index]
    arrivals: list[tuple[Any, ...]] = []
    store.arrival_listener = lambda *a: arrivals.append(a)
    svc = ScheduleMessageService(store, cfg)
    assert svc.tick(1000) == 1000  # first run after 1000 ms
    assert svc.tick(2000) == DELAY_FOR_A_WHILE  # not due: re-armed, same offset
    assert _delivered(store) == [] and svc.offsets.get(1, 0) == 0
    assert svc.tick(2100) == DELAY_FOR_A_WHILE
    assert svc.tick(2499) == DELAY_FOR_A_WHILE  # the level's timer ran: not due yet
    assert svc.tick(2500) == 99  # a timer that is not due does not run
    assert _delivered(store) == []
    svc.tick(2599)
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
    assert ("T", 2, 1, java_string_hash("TagA"), 2599) in arrivals  # long polls wake


def test_levels_are_independent_and_ordered(env: tuple[DefaultMessageStore, StoreConfig]) -> None:
    store, cfg = env
    _put_delayed(store, 0, 3, body=b"three")  # due 3000
    _put_delayed(store, 0, 1, body=b"one")  # due 1000
    _put_delayed(store, 0, 2, body=b"two")  # due 2000
    svc = ScheduleMessageService(store, cfg)
    svc.tick(0)
    for t in range(1000, 3101, 100):
        svc.tick(t)
        bodies = [bytes(m.body) for m, _ in _delivered(store)]
        assert bodies == [b"one", b"two", b"three"][: min(3, t // 1000)]
    assert svc.offsets == {1: 1, 2: 1, 3: 1}


def test_clock_skew_deliver_time_beyond_level_delay_is_due_now(
    env: tuple[DefaultMessageStore, StoreConfig],
) -> None:
    store, cfg = env
    _put_delayed(store, 100_000, 1)  # deliver at 101000, stored by a clock now far ahead
    svc = ScheduleMessageService(store, cfg)
    svc.tick(49_000)
    assert _delivered(store) == []  # timer not yet run
    svc.tick(50_000)  # 101000 > 50000 + 1000: treated as due now
    assert len(_delivered(store)) == 1


def test_deliver_time_within_level_delay_waits(
    env: tuple[DefaultMessageStore, StoreConfig],
) -> None:
    store, cfg = env
    _put_delayed(store, 10_000, 3)  # deliver at 13000
    svc = ScheduleMessageService(store, cfg)
    svc.tick(10_000)
    svc.tick(11_000)  # 13000 <= 11000 + 3000: honestly not due
    assert _delivered(store) == []
    svc.tick(13_000)
    assert len(_delivered(store)) == 1


def test_offsets_persisted_and_reloaded(tmp_path: Any) -> None:
    cfg = _config(str(tmp_path))
    store = _open(cfg)
    try:
        for i in range(3):
            _put_delayed(store, i, 1)
        svc = ScheduleMessageService(store, cfg)
        svc.tick(0)
        svc.tick(1002)
        assert svc.offsets[1] == 3 and len(_delivered(store)) == 3
        path = delay_offset_path(cfg)
        assert not os.path.exists(path)  # first flush after flushDelayOffsetInterval
        svc.tick(10_000)  # written on the writer thread
        assert svc.writer is not None and svc.writer.flush()
        with open(path, encoding="utf-8") as f:
            text = f.read()
        assert text == '{"offsetTable":{1:3}}'
        assert DelayOffsetSerializeWrapper.from_json(text).offset_table == {1: 3}
        _put_delayed(store, 10_000, 1)
        svc.tick(11_000)
        svc.shutdown()  # clean shutdown persists
        with open(path, encoding="utf-8") as f:
            assert f.read() == encode_offsets({1: 4})
        again = ScheduleMessageService(store, cfg)
        assert again.offsets == {1: 4}
        again.tick(20_000)
        again.tick(21_000)
        assert len(_delivered(store)) == 4  # nothing delivered twice
    finally:
        store.shutdown(0)


def test_reload_falls_back_to_bak_and_keeps_unknown_levels(tmp_path: Any) -> None:
    """A level not configured now keeps its offset and is persisted again (Java's decode puts
    the whole table): forgotten, a level configured again later would deliver its whole queue
    a second time. No timer runs for it."""
    cfg = _config(str(tmp_path))
    path = delay_offset_path(cfg)
    os.makedirs(os.path.dirname(path))
    with open(path + ".bak", "w", encoding="utf-8") as f:
        f.write('{"offsetTable":{1:5,2:6,99:1}}')
    with open(path, "w", encoding="utf-8") as f:
        f.write("{broken")
    store = _open(cfg)
    try:
        svc = ScheduleMessageService(store, cfg)
        assert svc.offsets == {1: 5, 2: 6, 99: 1}
        svc.tick(0)
        svc.tick(5_000)
        assert 99 not in svc.next_run
        svc.dirty = True
        svc.persist()
        with open(path, encoding="utf-8") as f:
            assert DelayOffsetSerializeWrapper.from_json(f.read()).offset_table == {
                1: 5, 2: 6, 99: 1}  # fmt: skip
    finally:
        store.shutdown(0)


def test_failed_put_retries_same_offset(env: tuple[DefaultMessageStore, StoreConfig]) -> None:
    store, cfg = env
    _put_delayed(store, 0, 1)
    real_put = store.put_message
    fails = [1]

    def put(msg: MessageExtBrokerInner, now_ms: int) -> PutMessageResult:
        if fails:
            fails.pop()
            return PutMessageResult(PutMessageStatus.OS_PAGECACHE_BUSY)
        return real_put(msg, now_ms)

    store.put_message = put  # type: ignore[method-assign]
    svc = ScheduleMessageService(store, cfg)
    svc.tick(0)
    assert svc.tick(1000) == DELAY_FOR_A_WHILE
    assert svc.offsets.get(1, 0) == 0 and _delivered(store) == []
    svc.tick(1100)
    assert svc.offsets[1] == 1 and len(_delivered(store)) == 1


def test_budget_per_tick_then_immediate_rerun(
    env: tuple[DefaultMessageStore, StoreConfig],
) -> None:
    store, cfg = env
    for i in range(5):
        _put_delayed(store, i, 1)
    svc = ScheduleMessageService(store, cfg, max_per_tick=2)
    svc.tick(0)
    assert svc.tick(2000) == 0
    assert len(_delivered(store)) == 2
    for t in range(2001, 2011):  # bounded
        if svc.offsets.get(1) == 5:
            break
        svc.tick(t)
    assert len(_delivered(store)) == 5


def test_record_without_real_topic_is_skipped(env: tuple[DefaultMessageStore, StoreConfig]) -> None:
    store, cfg = env
    # a record written straight into the schedule topic (no REAL_TOPIC)
    raw = MessageExtBrokerInner(SCHEDULE_TOPIC, b"x", 0, {"X": "1"}, 0)
    assert store.put_message(raw, 0).status is PutMessageStatus.PUT_OK
    _put_delayed(store, 0, 1)
    svc = ScheduleMessageService(store, cfg)
    svc.tick(0)
    svc.tick(1000)
    assert svc.offsets[1] == 2 and len(_delivered(store)) == 1


def test_send_core_hosts_service_and_persists_on_store_shutdown(tmp_path: Any) -> None:
    broker = Broker(str(tmp_path))
    svc = broker.cores["send"].schedule
    assert isinstance(svc, ScheduleMessageService)
    _put_delayed(broker.store, 0, 1, topic="TopicTest", queue_id=0)
    broker.cores["send"].tick(0)
    wait = broker.cores["send"].tick(1000)
    assert wait is not None and wait <= DELAY_FOR_A_WHILE
    broker.cores["send"].tick(1000)
    assert broker.store.get_max_offset_in_queue("TopicTest", 0) == 1
    broker.close()
    with open(delay_offset_path(broker.sc), encoding="utf-8") as f:
        assert json.loads(f.read().replace("{1:", '{"1":'))["offsetTable"]["1"] == 1


def test_delayed_send_keeps_wait_parked_and_delay_delivered(tmp_path: Any) -> None:
    """As the 4.9.x broker stores them: the parked record carries the producer's WAIT (CommitLog
    renders the map SendMessageProcessor put WAIT back into), and the delivered record keeps
    DELAY, REAL_TOPIC and REAL_QID (messageTimeup renders the text before clearing DELAY);
    the delivered record is not parked again."""
    from protocol.codes import RequestCode as RC
    from protocol.codes import ResponseCode as RS
    from protocol.message import decode_messages
    from tests.unit.broker.broker_kit import send_ext

    broker = Broker(str(tmp_path))
    try:
        props = "UNIQ_KEY\x01UD\x02WAIT\x01true\x02TAGS\x01TagD\x02DELAY\x011"
        r = broker.call(RC.SEND_MESSAGE_V2, send_ext("DelayT", queue_id=1, props=props), b"d",
                        now_ms=0)  # fmt: skip
        assert r is not None and r.code == RS.SUCCESS
        res = broker.store.get_message("G", SCHEDULE_TOPIC, 0, 0, 32)
        [parked] = decode_messages(res.buffer)
        assert parked.properties["WAIT"] == "true" and parked.properties["DELAY"] == "1"
        assert (parked.properties["REAL_TOPIC"], parked.properties["REAL_QID"]) == ("DelayT", "1")
        core = broker.cores["send"]
        for now in (0, 1000, 2000, 2100, 2200):  # level 1 is 1 s; the service starts after 1 s
            core.tick(now)
        res = broker.store.get_message("G", "DelayT", 1, 0, 32)
        [got] = decode_messages(res.buffer)
        assert bytes(got.body) == b"d" and got.properties["DELAY"] == "1"
        assert got.properties["REAL_TOPIC"] == "DelayT" and got.properties["WAIT"] == "true"
        assert got.properties["TAGS"] == "TagD" and got.properties["UNIQ_KEY"] == "UD"
        assert broker.store.get_max_offset_in_queue(SCHEDULE_TOPIC, 0) == 1  # not parked again
    finally:
        broker.close()


def test_an_offset_past_the_queue_end_is_corrected(tmp_path: Any) -> None:
    """correctDelayOffset: a saved offset beyond the level's queue (a truncated consume queue,
    a store wiped with its config kept) is brought back to the queue's end, so what is parked
    from then on is delivered (it used to wait for an offset that never came)."""
    cfg = _config(str(tmp_path))
    path = delay_offset_path(cfg)
    os.makedirs(os.path.dirname(path))
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"offsetTable":{1:5}}')
    store = _open(cfg)
    try:
        for i in range(2):
            _put_delayed(store, i, 1)
        svc = ScheduleMessageService(store, cfg)
        assert svc.offsets == {1: 5}
        svc.tick(0)
        svc.tick(1002)
        assert svc.offsets[1] == 2  # the two parked before the correction are left behind
        _put_delayed(store, 2000, 1)
        svc.tick(3100)
        assert [m.body for m, _ in _delivered(store)] == [b"hello"]
    finally:
        store.shutdown(0)
