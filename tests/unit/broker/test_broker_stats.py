"""actors.broker.stats over a real stats page: TPS windows, totals, executor figures."""

from __future__ import annotations

import os
from typing import Any

from actors.broker.stats import MAX_SAMPLES, BrokerStatsSampler
from store.stats_page import (
    OFF_BOOT_MS,
    OFF_GET_FOUND,
    OFF_GET_MISS,
    OFF_GET_TRANSFERRED,
    OFF_LOCK_SINCE_MS,
    OFF_PUT_SIZE,
    OFF_PUT_TIMES,
    StatsPage,
    queue_offset,
)

T0 = 1_700_000_000_000


def test_tps_windows_fill_as_java_does(tmp_path: Any) -> None:
    path = os.path.join(str(tmp_path), "stats")
    reader = StatsPage(path, writable=False)  # before any writer made the file: zeros
    assert reader.get(OFF_PUT_TIMES) == 0
    writer = StatsPage(path, writable=True)
    sampler = BrokerStatsSampler(reader)
    writer.set(OFF_BOOT_MS, T0)
    for i in range(61):  # 100 puts, 30 found pulls of 10 messages, 5 misses per second
        writer.set_pair(OFF_PUT_TIMES, 100 * i, 100 * i * 1200)
        writer.set_pair(OFF_GET_FOUND, 30 * i, 5 * i)
        writer.set(OFF_GET_TRANSFERRED, 300 * i)
        assert sampler.sample(T0 + 1000 * i) == 1000
        assert sampler.sample(T0 + 1000 * i + 10) == 990  # not due again yet
        if i == 5:
            table = sampler.runtime_table(T0 + 5000)
            assert table["putTps"] == "  "  # no window has enough samples yet
    table = sampler.runtime_table(T0 + 60_000)
    assert table["putTps"] == "100.0 100.0 "  # 10 s and 60 s full, 600 s not
    assert table["getFoundTps"] == "30.0 30.0 "
    assert table["getMissTps"] == "5.0 5.0 "
    assert table["getTotalTps"] == "35.0 35.0 0.0"  # Double.toString(found + miss) always
    assert table["getTransferedTps"] == "300.0 300.0 "
    assert table["msgPutTotalTodayNow"] == "6000" and table["msgGetTotalTodayNow"] == "18000"
    assert table["putMessageTimesTotal"] == "6000"
    assert table["putMessageAverageSize"] == "1200.0"
    assert table["bootTimestamp"] == str(T0)
    assert table["runtime"] == "[ 0 days, 0 hours, 1 minutes, 0 seconds ]"
    assert len(sampler.put) <= MAX_SAMPLES + 1
    writer.close()
    reader.close()


def test_executor_figures_and_lock_time(tmp_path: Any) -> None:
    path = os.path.join(str(tmp_path), "stats")
    writer = StatsPage(path, writable=True)
    sampler = BrokerStatsSampler(StatsPage(path, writable=False))
    send = queue_offset("send")
    pull = queue_offset("pull")
    assert send is not None and pull is not None and queue_offset("admin") is None
    writer.set_pair(send, 42, 17)
    writer.set(OFF_LOCK_SINCE_MS, T0 - 25)
    table = sampler.runtime_table(T0)
    assert table["sendThreadPoolQueueSize"] == "42"
    assert table["sendThreadPoolQueueHeadWaitTimeMills"] == "17"
    assert table["pullThreadPoolQueueSize"] == "0"
    assert table["pageCacheLockTimeMills"] == "25"
    assert table["putMessageTimesTotal"] == "1"  # divided by at least 1, as Java reports it
    writer.set(OFF_LOCK_SINCE_MS, 0)
    assert sampler.runtime_table(T0)["pageCacheLockTimeMills"] == "0"
    writer.close()


def test_day_totals_recorded_at_local_midnight(tmp_path: Any) -> None:
    import time

    path = os.path.join(str(tmp_path), "stats")
    writer = StatsPage(path, writable=True)
    sampler = BrokerStatsSampler(StatsPage(path, writable=False))
    noon = int(time.mktime((2024, 1, 2, 12, 0, 0, 0, 0, -1))) * 1000
    writer.set(OFF_PUT_TIMES, 7)
    writer.set(OFF_GET_TRANSFERRED, 3)
    sampler.sample(noon)
    table = sampler.runtime_table(noon)
    assert table["msgPutTotalTodayMorning"] == "0"  # no midnight seen since start
    writer.set(OFF_PUT_TIMES, 11)
    writer.set(OFF_GET_TRANSFERRED, 5)
    sampler.sample(noon + 13 * 3_600_000)  # 01:00 the next day
    table = sampler.runtime_table(noon + 13 * 3_600_000)
    assert table["msgPutTotalTodayMorning"] == "11" and table["msgGetTotalTodayMorning"] == "5"
    assert table["msgPutTotalYesterdayMorning"] == "0"
    writer.set(OFF_PUT_TIMES, 20)
    sampler.sample(noon + 37 * 3_600_000)  # 01:00 the day after
    table = sampler.runtime_table(noon + 37 * 3_600_000)
    assert table["msgPutTotalYesterdayMorning"] == "11" and table["msgPutTotalTodayMorning"] == "20"
    writer.close()


def test_store_publishes_put_and_get_counters(tmp_path: Any) -> None:
    from store.message_store_reader import MessageStoreReader
    from store.stats_page import stats_path
    from tests.unit.store.store_helpers import msg, open_store, small_config

    cfg = small_config(str(tmp_path))
    s = open_store(cfg)
    try:
        for i in range(5):
            assert s.put_message(msg("T", b"x" * 10), 1_000 + i).ok
        s.tick(1_010)
        page = StatsPage(stats_path(cfg.storePathRootDir), writable=False)
        assert page.get(OFF_PUT_TIMES) == 5 and page.get(OFF_PUT_SIZE) > 5 * 10
        reader = MessageStoreReader(cfg)
        reader.stats_page = StatsPage(stats_path(cfg.storePathRootDir), writable=True)
        assert reader.get_message("g", "T", 0, 0, 32).message_count == 5
        reader.get_message("g", "T", 0, 5, 32)  # nothing there: a miss
        reader.publish_stats()
        assert (page.get(OFF_GET_FOUND), page.get(OFF_GET_MISS)) == (1, 1)
        assert page.get(OFF_GET_TRANSFERRED) == 5
        reader.close()
        page.close()
    finally:
        s.shutdown(2_000)


def test_lock_time_left_by_a_killed_run_is_not_reported(tmp_path: Any) -> None:
    """A send actor killed inside a batch leaves its batch start in the page; after the
    restart (a later boot time) no batch holds the lock until the first one starts."""
    path = os.path.join(str(tmp_path), "stats")
    writer = StatsPage(path, writable=True)
    sampler = BrokerStatsSampler(StatsPage(path, writable=False))
    writer.set(OFF_BOOT_MS, T0)
    writer.set(OFF_LOCK_SINCE_MS, T0 + 500)  # inside a batch when killed
    writer.set(OFF_BOOT_MS, T0 + 60_000)  # restarted: the store writer's start
    assert sampler.runtime_table(T0 + 3_600_000)["pageCacheLockTimeMills"] == "0"
    writer.set(OFF_LOCK_SINCE_MS, T0 + 3_600_000 - 40)  # a batch of this run
    assert sampler.runtime_table(T0 + 3_600_000)["pageCacheLockTimeMills"] == "40"
    writer.close()
