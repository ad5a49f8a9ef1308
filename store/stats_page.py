"""Shared stats page: the store's and the executors' running counters, for the admin process.

Mirrors the counters of store/StoreStatsService.java (putMessageTimesTotal, putMessageSizeTotal,
getMessageTimesTotalFound / Miss, getMessageTransferedMsgCount) and the executor figures that
broker/processor/AdminBrokerProcessor.java prepareRuntimeInfo reads (thread-pool queue sizes and
head wait times, the commit log's lock time), RocketMQ 4.9.x. In RocketMQ they live in one JVM;
here the send actor, the pull actor and the RemotingServer's processors are separate processes,
so each publishes its own words into `<storePathRootDir>/stats` and the admin actor samples them.

Layout (native byte order, 8-byte words, each written by one process only, through a memoryview
cast to int64 as store/state_page.py explains)::

    0   magic
    8   boot_ms          when the writer store started (bootTimestamp)
    16  put_times        messages put since the writer started       (send actor)
    24  put_size         bytes of those records
    32  get_found        get_message calls that found messages       (pull actor)
    40  get_miss         get_message calls that found none
    48  get_transferred  messages those calls returned
    56  lock_since_ms    when the send actor's batch in progress began, 0 when idle
    64 + 16 * k          queue size, head wait ms of executor k (QUEUE_GROUPS[k])
"""

from __future__ import annotations

import mmap
import os
from typing import Final

from store.state_page import map_words

STATS_MAGIC: Final = 0x41434D5153544154 ^ 0x5354
STATS_PAGE_SIZE: Final = 4096
OFF_BOOT_MS: Final = 8
OFF_PUT_TIMES: Final = 16
OFF_PUT_SIZE: Final = 24
OFF_GET_FOUND: Final = 32
OFF_GET_MISS: Final = 40
OFF_GET_TRANSFERRED: Final = 48
OFF_LOCK_SINCE_MS: Final = 56
QUEUE_GROUPS: Final = ("send", "pull", "query")  # sendThreadPool..., pullThreadPool..., query...
_QUEUE_BASE: Final = 64


def stats_path(store_root: str) -> str:
    """`<storePathRootDir>/stats`."""
    return os.path.join(os.path.expanduser(store_root), "stats")


def queue_offset(group: str) -> int | None:
    """Offset of the (queue size, head wait ms) pair of an executor group, or None."""
    try:
        return _QUEUE_BASE + 16 * QUEUE_GROUPS.index(group)
    except ValueError:
        return None


class StatsPage:
    """Writer or reader view of the stats page (a missing file reads as zeros)."""

    def __init__(self, path: str, *, writable: bool) -> None:
        self.path = path
        self.writable = writable
        self.mm: mmap.mmap | None = None
        self.words: memoryview | None = None
        mapped = map_words(path, STATS_PAGE_SIZE, STATS_MAGIC, writable=writable, missing_ok=True)
        if mapped is not None:
            self.mm, self.words = mapped

    def get(self, off: int) -> int:
        """Read one word (0 when the page is not there yet)."""
        words = self.words
        if words is None:
            words = self._reopen()
            if words is None:
                return 0
        return int(words[off >> 3])

    def set(self, off: int, value: int) -> None:
        """Write one word."""
        if self.words is not None:
            self.words[off >> 3] = value

    def set_pair(self, off: int, a: int, b: int) -> None:
        """Write two consecutive words."""
        words = self.words
        if words is not None:
            words[off >> 3] = a
            words[(off >> 3) + 1] = b

    def _reopen(self) -> memoryview | None:
        """A reader started before any writer made the file: map it once it exists."""
        again = StatsPage(self.path, writable=False)
        self.mm, self.words = again.mm, again.words
        again.mm = again.words = None
        return self.words

    def close(self) -> None:
        """Unmap."""
        if self.words is not None:
            self.words.release()
            self.words = None
        if self.mm is not None:
            self.mm.close()
            self.mm = None
