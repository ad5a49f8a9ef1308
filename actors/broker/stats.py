"""Samples the broker's stats page once a second: TPS windows, day totals, executor figures.

Mirrors the sampling half of store/StoreStatsService.java (a snapshot per second, the last 600
kept; a TPS over 10 / 60 / 600 s is empty until that many snapshots exist) and
broker/BrokerStats.java (the put / get totals recorded at each local midnight), RocketMQ 4.9.x,
for the admin actor's GET_BROKER_RUNTIME_INFO. The counters themselves are published by the
send and pull actors (store.stats_page).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Final

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

SAMPLE_EVERY_MS: Final = 1000  # FREQUENCY_OF_SAMPLING
MAX_SAMPLES: Final = 600  # MAX_RECORDS_OF_SAMPLING
WINDOWS: Final = (10, 60, 600)


def _tps(series: deque[tuple[int, int]], window: int) -> float | None:
    """Calls per second between the snapshot `window` samples back and the last one."""
    if len(series) <= window:
        return None
    t0, v0 = series[-(window + 1)]
    t1, v1 = series[-1]
    if t1 <= t0:
        return None
    return (v1 - v0) * 1000.0 / (t1 - t0)


def _tps_text(series: deque[tuple[int, int]]) -> str:
    """The three windows as StoreStatsService writes them ("" for a window not full yet)."""
    return " ".join("" if (v := _tps(series, w)) is None else repr(v) for w in WINDOWS)


def _runtime_text(ms: int) -> str:
    """StoreStatsService.getFormatRuntime."""
    s = max(0, ms) // 1000
    days, hours, minutes = s // 86400, s % 86400 // 3600, s % 3600 // 60
    return f"[ {days} days, {hours} hours, {minutes} minutes, {s % 60} seconds ]"


class BrokerStatsSampler:
    """A second-by-second history of the put / get counters in the stats page."""

    def __init__(self, page: StatsPage) -> None:
        self.page = page
        self.put: deque[tuple[int, int]] = deque(maxlen=MAX_SAMPLES + 1)
        self.found: deque[tuple[int, int]] = deque(maxlen=MAX_SAMPLES + 1)
        self.miss: deque[tuple[int, int]] = deque(maxlen=MAX_SAMPLES + 1)
        self.transferred: deque[tuple[int, int]] = deque(maxlen=MAX_SAMPLES + 1)
        self.next_sample_ms = 0
        self._day: tuple[int, int, int] | None = None
        # BrokerStats: totals recorded at the last two local midnights (0 until then)
        self.put_today_morning = self.put_yesterday_morning = 0
        self.get_today_morning = self.get_yesterday_morning = 0

    def sample(self, now_ms: int) -> int:
        """Take a snapshot when one is due; ms until the next one."""
        if now_ms < self.next_sample_ms:
            return self.next_sample_ms - now_ms
        self.next_sample_ms = now_ms + SAMPLE_EVERY_MS
        get = self.page.get
        self.put.append((now_ms, get(OFF_PUT_TIMES)))
        self.found.append((now_ms, get(OFF_GET_FOUND)))
        self.miss.append((now_ms, get(OFF_GET_MISS)))
        self.transferred.append((now_ms, get(OFF_GET_TRANSFERRED)))
        day = time.localtime(now_ms // 1000)[:3]
        if self._day is not None and day != self._day:  # BrokerStats.record at midnight
            self.put_yesterday_morning = self.put_today_morning
            self.get_yesterday_morning = self.get_today_morning
            self.put_today_morning = get(OFF_PUT_TIMES)
            self.get_today_morning = get(OFF_GET_TRANSFERRED)
        self._day = day
        return SAMPLE_EVERY_MS

    def runtime_table(self, now_ms: int) -> dict[str, str]:
        """The GET_BROKER_RUNTIME_INFO entries that come from these counters."""
        get = self.page.get
        put_total = get(OFF_PUT_TIMES)
        times = put_total or 1  # StoreStatsService divides by at least 1
        size = get(OFF_PUT_SIZE)
        found = [_tps(self.found, w) or 0.0 for w in WINDOWS]
        miss = [_tps(self.miss, w) or 0.0 for w in WINDOWS]
        boot = get(OFF_BOOT_MS)
        lock_since = get(OFF_LOCK_SINCE_MS)
        if lock_since < boot:  # left by a run that ended inside a batch (kill -9): not locked now
            lock_since = 0
        table = {
            "bootTimestamp": str(boot),
            "runtime": _runtime_text(now_ms - boot if boot else 0),
            "putMessageTimesTotal": str(times),
            "putMessageSizeTotal": str(size),
            "putMessageAverageSize": repr(size / times),
            "putTps": _tps_text(self.put),
            "getFoundTps": _tps_text(self.found),
            "getMissTps": _tps_text(self.miss),
            "getTotalTps": " ".join(repr(f + m) for f, m in zip(found, miss, strict=True)),
            "getTransferedTps": _tps_text(self.transferred),
            "msgPutTotalYesterdayMorning": str(self.put_yesterday_morning),
            "msgPutTotalTodayMorning": str(self.put_today_morning),
            "msgPutTotalTodayNow": str(put_total),
            "msgGetTotalYesterdayMorning": str(self.get_yesterday_morning),
            "msgGetTotalTodayMorning": str(self.get_today_morning),
            "msgGetTotalTodayNow": str(get(OFF_GET_TRANSFERRED)),
            "pageCacheLockTimeMills": str(max(0, now_ms - lock_since) if lock_since else 0),
        }
        for group, prefix in (("send", "send"), ("pull", "pull"), ("query", "query")):
            off = queue_offset(group)
            assert off is not None
            table[f"{prefix}ThreadPoolQueueSize"] = str(get(off))
            table[f"{prefix}ThreadPoolQueueHeadWaitTimeMills"] = str(get(off + 8))
        return table
