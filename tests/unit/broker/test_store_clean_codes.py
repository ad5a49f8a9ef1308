"""CLEAN_UNUSED_TOPIC (316) and CLEAN_EXPIRED_CONSUMEQUEUE (306): the admin actor asks, the store
writer (send actor) drops the consume queues (DefaultMessageStore.cleanUnusedTopic /
cleanExpiredConsumerQueue, RocketMQ 4.9.x)."""

from __future__ import annotations

from protocol.codes import SCHEDULE_TOPIC
from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from tests.unit.broker.broker_kit import Broker, send_ext


def _queues(broker: Broker) -> set[tuple[str, int]]:
    return set(broker.store.consume_queues)


def test_clean_unused_topic_drops_queues_of_topics_no_longer_configured(broker: Broker) -> None:
    for topic in ("Keep", "Gone"):
        r = broker.call(RC.SEND_MESSAGE_V2, send_ext(topic, queue_id=1), b"x", now_ms=5000)
        assert r is not None and r.code == RS.SUCCESS
    broker.store.cq_table.find_or_create(SCHEDULE_TOPIC, 2)  # a system topic's queue always stays
    for ctx in broker.ctxs.values():  # "Gone" dropped from the config (topics.json edited)
        ctx.topics.delete("Gone")
    assert ("Gone", 1) in _queues(broker)
    r = broker.call(RC.CLEAN_UNUSED_TOPIC, {})
    assert r is not None and r.code == RS.SUCCESS
    assert ("Gone", 1) not in _queues(broker)
    assert {("Keep", 1), (SCHEDULE_TOPIC, 2)} <= _queues(broker)
    assert broker.store.get_max_offset_in_queue("Keep", 1) == 1


def test_clean_expired_consume_queue_drops_queues_below_the_log_min(broker: Broker) -> None:
    body = b"y" * 60_000  # the kit's commit-log files are 1 MiB: a few records roll them
    r = broker.call(RC.SEND_MESSAGE_V2,  # parked in the delay level 2 queue, in the first file
                    send_ext("Old", props="UNIQ_KEY\x01D\x02WAIT\x01true\x02DELAY\x012"),
                    b"d", now_ms=5000)  # fmt: skip
    assert r is not None and r.code == RS.SUCCESS
    assert (SCHEDULE_TOPIC, 1) in _queues(broker)
    for topic, n in (("Old", 15), ("Fresh", 25)):  # Old in the first file; Fresh past the second
        for _ in range(n):
            r = broker.call(RC.SEND_MESSAGE_V2, send_ext(topic, queue_id=0), body, now_ms=5000)
            assert r is not None and r.code == RS.SUCCESS
    store = broker.store
    store.execute_delete_files_manually()
    store.cfg.fileReservedTime = 0
    store.disk_usage = lambda _p: 0.1  # type: ignore[method-assign]
    assert store.clean_expired(10_000) > 0  # every file but the one being written
    assert store.commitlog.min_offset > store.consume_queues[("Old", 0)].max_phy_offset
    r = broker.call(RC.CLEAN_EXPIRED_CONSUMEQUEUE, {})
    assert r is not None and r.code == RS.SUCCESS
    assert ("Old", 0) not in _queues(broker)
    assert ("Fresh", 0) in _queues(broker)  # its unit is above the min: it stays
    # a delay level's queue stays whatever its units (Java skips SCHEDULE_TOPIC_XXXX): its
    # numbering goes on from the offset ScheduleMessageService saved for the level
    assert (SCHEDULE_TOPIC, 1) in _queues(broker)
    assert store.get_max_offset_in_queue(SCHEDULE_TOPIC, 1) == 1
    assert store.check() == []


def test_delete_expired_commitlog_deletes_now_whatever_the_hour(broker: Broker) -> None:
    """DELETE_EXPIRED_COMMITLOG (329): expired files go at once, though deleteWhen's hour is not
    now and the disk is far from full (executeDeleteFilesManually)."""
    body = b"z" * 60_000
    for _ in range(40):  # several 1 MiB commit-log files
        r = broker.call(RC.SEND_MESSAGE_V2, send_ext("Old", queue_id=0), body, now_ms=5000)
        assert r is not None and r.code == RS.SUCCESS
    store = broker.store
    store.cfg.fileReservedTime = 0
    store.cfg.deleteWhen = "99"  # never the hour
    store.disk_usage = lambda _p: 0.1  # type: ignore[method-assign]
    assert store.clean_expired(10_000) == 0  # a scheduled pass deletes nothing
    files = len(store.commitlog.mfq.files)
    r = broker.call(RC.DELETE_EXPIRED_COMMITLOG, {}, now_ms=10_000)
    assert r is not None and r.code == RS.SUCCESS
    assert len(store.commitlog.mfq.files) == 1 < files  # all but the one being written
    # Java's 20 manual passes, one spent here
    assert store.clean_commitlog.manual_delete_times == 19
    assert store.check() == []
