"""Per-topic and per-group call statistics: minute / hour / day windows (mqadmin statsAll, the
dashboard's topic TPS), kept by the actors that do the work and read by the admin actor.

Mirrors common/stats/StatsItem.java + StatsItemSet.java and the names of
store/stats/BrokerStatsManager.java, RocketMQ 4.9.x: an item is a (value, times) counter pair;
a snapshot of it is taken every 10 s (the last 7 kept: about a minute), every 10 min (7: an
hour) and every hour (25: a day), and a window's figures are the difference between its first
and last snapshots: sum, tps = sum per second, avgpt = sum per call. An item's first snapshot
in a series follows a zero one, one period earlier.

The send actor counts puts, the pull actor gets; each writes its items' snapshot rings to
`<storePathRootDir>/brokerstats/<group>.json` after every 10 s sample (on a background thread),
and the admin actor answers VIEW_BROKER_STATS_DATA from those files.
"""

from __future__ import annotations

import json
import logging
import os
from collections import deque
from collections.abc import Callable
from typing import Any, Final

log = logging.getLogger(__name__)

# BrokerStatsManager's names (keys: a topic; "topic@group"; the cluster name for BROKER_*)
TOPIC_PUT_NUMS: Final = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE: Final = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS: Final = "GROUP_GET_NUMS"
GROUP_GET_SIZE: Final = "GROUP_GET_SIZE"
SNDBCK_PUT_NUMS: Final = "SNDBCK_PUT_NUMS"
BROKER_PUT_NUMS: Final = "BROKER_PUT_NUMS"
BROKER_GET_NUMS: Final = "BROKER_GET_NUMS"

MINUTE_SAMPLE_MS: Final = 10_000
HOUR_SAMPLE_MS: Final = 600_000
DAY_SAMPLE_MS: Final = 3_600_000
KEEP: Final = {"m": 7, "h": 7, "d": 25}
_PERIOD: Final = {"m": MINUTE_SAMPLE_MS, "h": HOUR_SAMPLE_MS, "d": DAY_SAMPLE_MS}

Snapshot = tuple[int, int, int]  # (timestamp ms, value, times)


def stats_key(topic: str, group: str) -> str:
    """BrokerStatsManager.buildStatsKey: "topic@group"."""
    return f"{topic}@{group}"


class StatsItemSet:
    """(stats name, key) -> counters and their snapshot rings."""

    def __init__(self) -> None:
        self.counters: dict[tuple[str, str], list[int]] = {}  # -> [value, times]
        self.rings: dict[tuple[str, str], dict[str, deque[Snapshot]]] = {}
        self._next: dict[str, int] = {}

    def add(self, name: str, key: str, value: int, times: int = 1) -> None:
        """addValue(key, incValue, incTimes)."""
        c = self.counters.get((name, key))
        if c is None:
            c = self.counters[(name, key)] = [0, 0]
        c[0] += value
        c[1] += times

    def sample(self, now_ms: int) -> bool:
        """Take the snapshots that are due (the first call starts every series); True when the
        minute series was sampled (the caller then publishes)."""
        due = [k for k, p in _PERIOD.items() if now_ms >= self._next.get(k, 0)]
        for kind in due:
            self._next[kind] = now_ms + _PERIOD[kind]
            for item, (value, times) in self.counters.items():
                rings = self.rings.get(item)
                if rings is None:
                    rings = self.rings[item] = {k: deque(maxlen=KEEP[k]) for k in KEEP}
                ring = rings[kind]
                if not ring:  # a new item starts from zero one period back, as Java's does
                    ring.append((now_ms - _PERIOD[kind], 0, 0))
                ring.append((now_ms, value, times))
        return "m" in due

    def next_sample_in(self, now_ms: int) -> int:
        """ms until the next snapshot is due."""
        return max(0, min(self._next.get(k, 0) for k in _PERIOD) - now_ms)

    def to_json(self) -> str:
        """The rings as published for the admin actor (an item not sampled yet has empty
        rings: it exists, with zero windows, as a Java StatsItem does from its first add)."""
        empty: dict[str, deque[Snapshot]] = {k: deque() for k in KEEP}
        return json.dumps(
            [[name, key, {k: list(r) for k, r in self.rings.get((name, key), empty).items()}]
             for (name, key) in self.counters],
            separators=(",", ":"),
        )  # fmt: skip


def window(ring: list[list[int]] | deque[Snapshot]) -> dict[str, Any]:
    """StatsItem.computeStatsData: BrokerStatsItem {avgpt, sum, tps} of one window."""
    if not ring:
        return {"avgpt": 0.0, "sum": 0, "tps": 0.0}
    t0, v0, n0 = ring[0]
    t1, v1, n1 = ring[-1]
    total = v1 - v0
    tps = total * 1000.0 / (t1 - t0) if t1 > t0 else 0.0  # Java divides by 0 (NaN) here
    avgpt = total / (n1 - n0) if n1 > n0 else 0.0
    return {"avgpt": avgpt, "sum": total, "tps": tps}


def stats_dir(store_root: str) -> str:
    """Where the actors publish their stats."""
    return os.path.join(store_root, "brokerstats")


# path -> ((inode, st_mtime_ns, st_size), its items): each publish renames a new file in (at a
# 10 s sample or a new item), while an admin command such as statsAll asks per topic and group
_PUBLISHED: dict[str, tuple[tuple[int, int, int], list[Any]]] = {}


def read_published(store_root: str, groups: tuple[str, ...]) -> dict[tuple[str, str], Any]:
    """(name, key) -> rings, from the files the given groups' actors published (each parsed
    again only when it changed)."""
    out: dict[tuple[str, str], Any] = {}
    for group in groups:
        path = os.path.join(stats_dir(store_root), f"{group}.json")
        try:
            st = os.stat(path)
            stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
            cached = _PUBLISHED.get(path)
            if cached is not None and cached[0] == stamp:
                items = cached[1]
            else:
                with open(path, encoding="utf-8") as f:
                    items = json.load(f)
                _PUBLISHED[path] = (stamp, items)
        except FileNotFoundError:
            continue
        except (OSError, ValueError) as exc:
            log.warning("stats file %s unreadable: %s", path, exc)
            continue
        for name, key, rings in items:
            out[(name, key)] = rings
    return out


class StatsPublisher:
    """Samples a StatsItemSet on the owner's ticks and writes it for the admin actor.

    The hot paths only add to `counts` (key -> [messages, bytes, calls], see count()); `fold`
    turns those into stats items before each sample, so a put or a pull pays one dict lookup."""

    def __init__(
        self, store_root: str, group: str,
        fold: Callable[[StatsItemSet, dict[Any, list[int]]], None] | None = None,
    ) -> None:  # fmt: skip
        from store.config_files import BackgroundWriter

        self.items = StatsItemSet()
        self.counts: dict[Any, list[int]] = {}
        self._fold = fold
        self.path = os.path.join(stats_dir(store_root), f"{group}.json")
        self._writer = BackgroundWriter(name=f"stats-{group}")
        self._published_items = 0

    def fold_counts(self) -> None:
        """Move the hot path's counts into the stats items."""
        if self.counts and self._fold is not None:
            self._fold(self.items, self.counts)
            self.counts.clear()  # the same dict: the owner's hot path keeps a reference

    def tick(self, now_ms: int) -> int:
        """Sample when due; publish after a minute-series sample or when items were added
        (so a new item is visible at once); ms to the next sample."""
        self.fold_counts()
        sampled = self.items.sample(now_ms)
        if sampled or len(self.items.counters) != self._published_items:
            self._published_items = len(self.items.counters)
            self._writer.submit(self.path, self.items.to_json())
        return self.items.next_sample_in(now_ms)

    def close(self) -> None:
        """Publish the counts since the last sample (an admin reading the file after a clean
        stop sees every message), then stop the writer thread once it is written."""
        self.fold_counts()
        if self.items.counters:
            self._writer.submit(self.path, self.items.to_json())
        self._writer.close()


def count(counts: dict[Any, list[int]], key: Any, msgs: int, size: int) -> None:
    """One call's messages and bytes under key (the hot paths' only stats work)."""
    c = counts.get(key)
    if c is None:
        c = counts[key] = [0, 0, 0]
    c[0] += msgs
    c[1] += size
    c[2] += 1


def fold_puts(cluster: str) -> Callable[[StatsItemSet, dict[Any, list[int]]], None]:
    """incTopicPutNums / incTopicPutSize / incBrokerPutNums from counts keyed by topic."""

    def fold(items: StatsItemSet, counts: dict[Any, list[int]]) -> None:
        for topic, (msgs, size, calls) in counts.items():
            items.add(TOPIC_PUT_NUMS, topic, msgs, calls)
            items.add(TOPIC_PUT_SIZE, topic, size, calls)
            items.add(BROKER_PUT_NUMS, cluster, msgs, 0)  # Java adds no times here

    return fold


def fold_gets(cluster: str) -> Callable[[StatsItemSet, dict[Any, list[int]]], None]:
    """incGroupGetNums / incGroupGetSize / incBrokerGetNums from counts keyed by
    (topic, group)."""

    def fold(items: StatsItemSet, counts: dict[Any, list[int]]) -> None:
        for (topic, group), (msgs, size, calls) in counts.items():
            key = stats_key(topic, group)
            items.add(GROUP_GET_NUMS, key, msgs, calls)
            items.add(GROUP_GET_SIZE, key, size, calls)
            items.add(BROKER_GET_NUMS, cluster, msgs, 0)

    return fold
