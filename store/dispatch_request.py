"""DispatchRequest and CommitLog.checkMessageAndReturnSize: what a stored record gives its
consume queue and the index, read back from the commit log; and the commit-log walks that read
records one after another (recovery, a slave's reput, the store check).

Mirrors store/DispatchRequest.java and store/CommitLog.java checkMessageAndReturnSize (and the
record loops of recoverNormally / recoverAbnormally and ReputMessageService.doReput), RocketMQ
4.9.x. The record layout and the property rules are protocol.record's.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterator
from typing import Final, NamedTuple, Protocol

from protocol.codes import SCHEDULE_TOPIC
from protocol.message_properties import TAGS, delay_level, delivery_tags_code, property_value
from protocol.record import BLANK_MAGIC_CODE, RecordError, read_total_and_magic, record_at
from store.index import TagCodes
from store.mapped_file import MappedFile
from store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

_CACHE_LIMIT: Final = 4096  # distinct topics remembered


class DispatchRequest(NamedTuple):
    """What the consume-queue and index dispatchers need from one record."""

    topic: str
    queue_id: int
    phy_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    sys_flag: int
    properties: bytes


class RecordChecker:
    """checkMessageAndReturnSize with its caches (topic names, TAGS hashes) and the delay table
    the delivery times of SCHEDULE_TOPIC_XXXX records come from."""

    def __init__(self, delays_ms: list[int], tag_codes: TagCodes) -> None:
        self.delays_ms = delays_ms
        self.tag_codes = tag_codes
        self._topics: dict[bytes, str] = {}

    def check(
        self, mv: memoryview, pos: int, check_crc: bool
    ) -> tuple[int, DispatchRequest | None]:
        """The record at mv[pos:]: (its size, its request); (0, None) where none starts (the
        end of what was written, a file's END_FILE blank), (-1, None) for a bad record."""
        try:
            r = record_at(mv, pos, len(mv))
        except RecordError:
            return -1, None
        if r is None:
            return 0, None
        (total, crc, qid, _flag, qoff, phy, sys_flag, _bts, store_ts, _sh, _rc, _prep, ba, blen,
         ta, tlen, pa, plen) = r  # fmt: skip
        if check_crc and (zlib.crc32(mv[ba : ba + blen]) & 0x7FFFFFFF) != crc:
            return -1, None
        tb = bytes(mv[ta : ta + tlen])
        topic = self._topics.get(tb)
        if topic is None:
            try:
                topic = tb.decode()
            except UnicodeDecodeError:
                return -1, None
            if len(self._topics) >= _CACHE_LIMIT:
                self._topics.clear()
            self._topics[tb] = topic
        props = bytes(mv[pa : pa + plen])
        tags = property_value(props, TAGS)
        tags_code = self.tag_codes.get(tags) if tags is not None else 0
        if topic == SCHEDULE_TOPIC:
            level = delay_level(props)
            if level is None:  # Integer.parseInt throws: a bad record
                return -1, None
            when = delivery_tags_code(level, store_ts, self.delays_ms)
            if when is not None:
                tags_code = when
        return total, DispatchRequest(topic, qid, phy, total, tags_code, store_ts, qoff,
                                      sys_flag, props)  # fmt: skip

    def first_store_timestamp(self, mf: MappedFile) -> int:
        """Store time of the first record in mf (-1 if none)."""
        size, req = self.check(mf.mv, 0, False)
        return req.store_timestamp if size > 0 and req is not None else -1


def _file_index(files: list[MappedFile], offset: int) -> int | None:
    return next(
        (i for i, mf in enumerate(files) if mf.file_from_offset <= offset < mf.file_end_offset),
        None,
    )


class CommitLogWalk:
    """The valid records from `start`, as DispatchRequests; afterwards `end` is where the valid
    records end. With `limit` (a slave's reput: bytes past it may still be arriving) the walk
    stops before a record or blank that does not lie wholly below it."""

    def __init__(self, mfq: MappedFileQueue, checker: RecordChecker, start: int,
                 check_crc: bool, limit: int | None = None) -> None:  # fmt: skip
        self.mfq = mfq
        self.checker = checker
        self.start = start
        self.check_crc = check_crc
        self.limit = limit
        self.end = start

    def __iter__(self) -> Iterator[DispatchRequest]:
        files = self.mfq.files
        idx = _file_index(files, self.start)
        if idx is None:
            return
        check = self.checker.check
        pos = self.start - files[idx].file_from_offset
        while idx < len(files):
            mf = files[idx]
            mv = mf.mv
            if self.limit is not None and self.limit < mf.file_end_offset:
                # bytes past the limit may still be arriving: the record there reads as cut short
                mv = mv[: max(0, self.limit - mf.file_from_offset)]
            while True:
                size, req = check(mv, pos, self.check_crc)
                if size > 0 and req is not None:
                    if req.phy_offset != mf.file_from_offset + pos:
                        log.warning("phy offset mismatch at=%d", mf.file_from_offset + pos)
                        return
                    pos += size
                    self.end = mf.file_from_offset + pos
                    yield req
                    continue
                if (size == 0 and pos + 8 <= len(mv) and idx + 1 < len(files)
                        and read_total_and_magic(mv, pos)[1] == BLANK_MAGIC_CODE):  # fmt: skip
                        idx += 1
                        pos = 0
                        self.end = files[idx].file_from_offset
                        break
                return


def scan(mfq: MappedFileQueue, start: int, check_crc: bool, ts_mark: int) -> tuple[int, int, int]:
    """Validate records from start without building requests (abnormal recovery): (valid end
    offset, last store timestamp or -1, phy of the first record stored at or after ts_mark, or
    the end when none is). The walker's fields and crc32 of a zero-copy slice per record."""
    files = mfq.files
    idx = _file_index(files, start)
    if idx is None:
        return start, -1, start
    crc32 = zlib.crc32
    last_ts = -1
    mark = -1
    pos = start - files[idx].file_from_offset
    end = start
    while idx < len(files):
        mf = files[idx]
        mv = mf.mv
        size = len(mv)
        base = mf.file_from_offset
        next_file = False
        while True:
            try:
                r = record_at(mv, pos, size)
            except RecordError:
                break
            if r is None:  # the end, or this file's END_FILE blank
                next_file = (pos + 8 <= size and idx + 1 < len(files)
                             and read_total_and_magic(mv, pos)[1] == BLANK_MAGIC_CODE)  # fmt: skip
                break
            if r[5] != base + pos:
                log.warning("phy offset mismatch at=%d", base + pos)
                break
            if check_crc and crc32(mv[r[12] : r[12] + r[13]]) & 0x7FFFFFFF != r[1]:
                break
            ts = r[8]
            if mark < 0 and ts >= ts_mark:
                mark = base + pos
            last_ts = ts
            pos += r[0]
            end = base + pos
        if not next_file:
            break
        idx += 1
        pos = 0
        end = files[idx].file_from_offset
    return end, last_ts, (mark if mark >= 0 else end)


class DispatchFailed(Exception):
    """A record is in the commit log but its dispatch (its consume-queue unit, its index
    entries) failed: the writer's queue offsets no longer match its files, and the next
    unit of that queue would pre-blank the missing one (its message skipped by every
    consumer). Nothing may be put after it: the writer's process ends (ProcessorHost lets
    this through) and its replacement's recovery dispatches the record again."""


class CommitLogDispatcher(Protocol):
    """Where the commit log's writer sends each record it wrote (CommitLogDispatcher.java: the
    consume-queue and index dispatchers; here ReputMessageService), and asks beforehand for the
    files those need (so nothing is written that could not be dispatched)."""

    index_inline: bool  # index keys are built in the dispatch ("sync")

    def has_room(self, topic: str, queue_id: int, queue_offset: int, units: int,
                 keys: int) -> bool: ...  # fmt: skip

    def reserve(self, topic: str, queue_id: int, queue_offset: int, units: int, keys: int,
                now_ms: int) -> None: ...  # fmt: skip

    def dispatch(self, topic: str, queue_id: int, phy: int, size: int, tags_code: int,
                 store_ts: int, queue_offset: int, sys_flag: int, keys: list[bytes] | None,
                 now_ms: int, end: int = -1) -> None: ...  # fmt: skip

    def dispatch_batch(self, topic: str, queue_id: int, units: list[int], queue_offset: int,
                       keys: list[bytes], key_phys: list[int],
                       now_ms: int) -> None: ...  # fmt: skip

    def publish(self, end: int) -> None: ...

    def published_end(self) -> int | None: ...

    def notify(self, topic: str, queue_id: int, next_offset: int, tags_code: int,
               now_ms: int) -> None: ...  # fmt: skip
