"""Commit log: the append-only record files every message goes through.

Mirrors store/CommitLog.java (DefaultAppendMessageCallback, checkMessageAndReturnSize,
recoverNormally / recoverAbnormally), RocketMQ 4.9.x. Record layout: protocol/record.py.

A record that does not fit (`size + 8 > remaining`) is replaced by an END_FILE blank
(`int remaining, int BLANK_MAGIC_CODE`) and goes to the start of the next file.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterator
from typing import Final, NamedTuple

from protocol.record import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    END_FILE_MIN_BLANK_LENGTH,
    MESSAGE_MAGIC_CODE,
    STOREHOSTADDRESS_V6_FLAG,
    TAGS,
    RecordError,
    delay_level,
    delivery_tags_code,
    pack_blank,
    property_value,
    read_total_and_magic,
    record_at,
    record_size,
    write_record,
)
from store.config import StoreConfig
from store.index import TagCodes
from store.mapped_file import MappedFile, MappedFileQueue

log = logging.getLogger(__name__)

_CACHE_LIMIT: Final = 4096  # distinct topics remembered by a walker
TRANSACTION_TYPE_MASK: Final = 0xC
TRANSACTION_PREPARED_TYPE: Final = 0x4
TRANSACTION_COMMIT_TYPE: Final = 0x8
TRANSACTION_ROLLBACK_TYPE: Final = 0xC
ROLLBACK_OR_PREPARED: Final = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"


class DispatchRequest(NamedTuple):
    """What the CQ and index dispatchers need from one record."""

    topic: str
    queue_id: int
    phy_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    sys_flag: int
    properties: bytes


class AppendError(Exception):
    """A record that cannot be stored (too large, bad topic)."""


class CommitLog:
    """The commit log files and the append / read / recover operations on them."""

    def __init__(self, cfg: StoreConfig, *, writable: bool = True) -> None:
        self.cfg = cfg
        self.file_size = cfg.mappedFileSizeCommitLog
        self.path = cfg.commitlog_path
        self.mfq = MappedFileQueue(
            self.path,
            self.file_size,
            writable=writable,
            warm=cfg.warmMapedFileEnable,
            warm_flush_pages=cfg.flushLeastPagesWhenWarmMapedFile if cfg.is_sync_flush else 0,
        )
        self.writable = writable
        self._cur: MappedFile | None = None
        self.last_store_timestamp = 0
        self.on_new_file: object = None  # callable() when a file is created
        self._topics: dict[bytes, str] = {}  # check_record's topic bytes -> name
        self.tag_codes = TagCodes()  # TAGS hashes, shared with the store's put path
        self._delays = cfg.delay_levels_ms

    # ---- append --------------------------------------------------------------------------
    def room(self, need: int) -> bool:
        """A record of `need` bytes can be appended without creating a file: it fits the file
        being written, or the next one is preallocated (or it can never fit: AppendError)."""
        mf = self._cur
        if mf is None:
            files = self.mfq.files
            mf = files[-1] if files and not files[-1].is_full() else None
        if mf is not None and need + END_FILE_MIN_BLANK_LENGTH <= mf.file_size - mf.wrote_position:
            return True
        return need + END_FILE_MIN_BLANK_LENGTH > self.file_size or self.mfq.next_ready()

    def make_room(self) -> None:
        """Create the file room() found missing, before any byte of the record is written:
        OSError (a full disk) leaves the log as it was (CommitLog's CREATE_MAPEDFILE_FAILED)."""
        if self.mfq.files:
            self.mfq.preallocate_next()
        else:
            self.mfq.get_last_mapped_file(0)

    def _current(self, need: int) -> MappedFile:
        """The file to write a record of `need` bytes into (blank-pads and rolls if needed)."""
        mf = self._cur
        if mf is None:
            mf = self.mfq.get_last_mapped_file(0)
            assert mf is not None
            self._cur = mf
        remaining = mf.file_size - mf.wrote_position
        if need + END_FILE_MIN_BLANK_LENGTH > remaining:
            if need + END_FILE_MIN_BLANK_LENGTH > self.file_size:
                raise AppendError(f"record of {need} bytes cannot fit a {self.file_size}-byte file")
            if remaining >= END_FILE_MIN_BLANK_LENGTH:
                wp = mf.wrote_position
                mf.mm[wp : wp + END_FILE_MIN_BLANK_LENGTH] = pack_blank(remaining)
            mf.wrote_position = mf.file_size
            mf = self.mfq.get_last_mapped_file(mf.file_end_offset)
            assert mf is not None
            self._cur = mf
            if callable(self.on_new_file):
                self.on_new_file()
        return mf

    def append(
        self,
        topic_tb: bytes,
        body: bytes | memoryview,
        props: bytes,
        queue_id: int,
        flag: int,
        queue_offset: int,
        sys_flag: int,
        born_ts: int,
        born_host: bytes,
        store_ts: int,
        store_host: bytes,
        reconsume_times: int,
        prepared_offset: int,
    ) -> tuple[int, int]:
        """Write one record; topic_tb is the length byte + topic. Returns (phy, size)."""
        v6 = (BORNHOST_V6_FLAG if len(born_host) == 20 else 0) | (
            STOREHOSTADDRESS_V6_FLAG if len(store_host) == 20 else 0)  # fmt: skip
        total = record_size(len(body), len(topic_tb) - 1, len(props), v6)
        mf = self._cur
        if mf is None or total + END_FILE_MIN_BLANK_LENGTH > mf.file_size - mf.wrote_position:
            mf = self._current(total)
        pos = mf.wrote_position
        phy = mf.file_from_offset + pos
        write_record(mf.mm, pos, total, zlib.crc32(body) & 0x7FFFFFFF, queue_id, flag,
                     queue_offset, phy, sys_flag, born_ts, born_host, store_ts, store_host,
                     reconsume_times, prepared_offset, body, topic_tb, props)  # fmt: skip
        mf.wrote_position = pos + total
        self.last_store_timestamp = store_ts
        return phy, total

    # ---- positions -----------------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        """Offset one past the last written byte."""
        mf = self._cur
        if mf is not None:
            return mf.file_from_offset + mf.wrote_position
        return self.mfq.get_max_offset()

    @property
    def min_offset(self) -> int:
        """Start offset of the first file (0 when empty)."""
        m = self.mfq.get_min_offset()
        return 0 if m < 0 else m

    def flush(self, least_pages: int = 0, max_bytes: int = 0) -> int:
        """msync written bytes (at most max_bytes of them when > 0); returns the flushed offset."""
        self.mfq.flush(least_pages, max_bytes)
        return self.mfq.flushed_where

    @property
    def flushed_offset(self) -> int:
        """Offset known to be on disk."""
        return self.mfq.flushed_where

    def roll_next_file(self, offset: int) -> int:
        """Start of the file after the one holding offset."""
        return offset + self.file_size - offset % self.file_size

    # ---- read ----------------------------------------------------------------------------
    def get_data(self, phy: int, size: int) -> memoryview | None:
        """A view of size bytes at phy, or None when that file is gone."""
        mf = self.mfq.find_mapped_file_by_offset(phy)
        if mf is None:
            return None
        p = phy - mf.file_from_offset
        if p + size > len(mf.mv):
            return None
        return mf.mv[p : p + size]

    def record_size_at(self, phy: int) -> int:
        """TOTALSIZE of the message record at phy, or -1."""
        mf = self.mfq.find_mapped_file_by_offset(phy)
        if mf is None:
            return -1
        p = phy - mf.file_from_offset
        if p + 8 > len(mf.mv):
            return -1
        total, magic = read_total_and_magic(mf.mv, p)
        return total if magic == MESSAGE_MAGIC_CODE else -1

    def store_timestamp_at(self, phy: int, size: int) -> int:
        """STORETIMESTAMP of the record at phy, or -1."""
        data = self.get_data(phy, size)
        if data is None:
            return -1
        try:
            r = record_at(data, 0, len(data))
        except RecordError:
            return -1
        return -1 if r is None else r[8]

    # ---- recovery walk -------------------------------------------------------------------
    def check_record(
        self, mv: memoryview, pos: int, check_crc: bool
    ) -> tuple[int, DispatchRequest | None]:
        """Validate the record at mv[pos:]; returns (size, request); 0 = end, -1 = bad
        (checkMessageAndReturnSize over protocol.record's walker)."""
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
        req = self._dispatch_request(bytes(mv[ta : ta + tlen]), bytes(mv[pa : pa + plen]), qid,
                                     phy, total, store_ts, qoff, sys_flag)  # fmt: skip
        return (total, req) if req is not None else (-1, None)

    def _dispatch_request(
        self, tb: bytes, props: bytes, qid: int, phy: int, total: int, store_ts: int,
        qoff: int, sys_flag: int,
    ) -> DispatchRequest | None:
        """What dispatch needs of a checked record, as checkMessageAndReturnSize works it out:
        the TAGS hash, or for SCHEDULE_TOPIC_XXXX with DELAY > 0 the delivery time; None (a
        bad record) for a topic that is not UTF-8 or a DELAY that is not a number."""
        topic = self._topics.get(tb)
        if topic is None:
            try:
                topic = tb.decode()
            except UnicodeDecodeError:
                return None
            if len(self._topics) >= _CACHE_LIMIT:
                self._topics.clear()
            self._topics[tb] = topic
        tags = property_value(props, TAGS)
        tags_code = self.tag_codes.get(tags) if tags is not None else 0
        if topic == SCHEDULE_TOPIC:
            level = delay_level(props)
            if level is None:  # Integer.parseInt throws: a bad record
                return None
            when = delivery_tags_code(level, store_ts, self._delays)
            if when is not None:
                tags_code = when
        return DispatchRequest(topic, qid, phy, total, tags_code, store_ts, qoff, sys_flag, props)

    def scan(self, start: int, check_crc: bool, ts_mark: int) -> tuple[int, int, int]:
        """Validate records from start without building objects (abnormal recovery).

        One unpack_from per record on the file's memoryview and crc32 of a zero-copy slice.
        Returns (valid end offset, last store timestamp or -1, phy of the first record stored
        at or after ts_mark, or the end when none is).
        """
        files = self.mfq.files
        idx = next(
            (i for i, mf in enumerate(files) if mf.file_from_offset <= start < mf.file_end_offset),
            None,
        )
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
                                 and read_total_and_magic(mv, pos)[1] == BLANK_MAGIC_CODE)
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

    def walk(
        self, start: int, check_crc: bool, end: int | None = None
    ) -> Iterator[DispatchRequest]:
        """Yield valid records from start; afterwards self.walk_end is the valid end offset.

        With `end` (a slave's reput: bytes past it may still be arriving) the walk stops
        before a record or blank that does not lie wholly below end."""
        self.walk_end = start
        idx = next(
            (
                i
                for i, mf in enumerate(self.mfq.files)
                if mf.file_from_offset <= start < mf.file_end_offset
            ),
            None,
        )
        if idx is None:
            return
        files = self.mfq.files
        pos = start - files[idx].file_from_offset
        while idx < len(files):
            mf = files[idx]
            mv = mf.mv
            if end is not None and end < mf.file_end_offset:
                # bytes past `end` may still be arriving: the record there reads as cut short
                mv = mv[: max(0, end - mf.file_from_offset)]
            while True:
                size, req = self.check_record(mv, pos, check_crc)
                if size > 0 and req is not None:
                    if req.phy_offset != mf.file_from_offset + pos:
                        log.warning("phy offset mismatch at=%d", mf.file_from_offset + pos)
                        return
                    pos += size
                    self.walk_end = mf.file_from_offset + pos
                    yield req
                    continue
                if size == 0 and pos + 8 <= len(mv):
                    _total, magic = read_total_and_magic(mv, pos)
                    if magic == BLANK_MAGIC_CODE and idx + 1 < len(files):
                        idx += 1
                        pos = 0
                        self.walk_end = files[idx].file_from_offset
                        break
                return
            continue

    def truncate_dirty(self, offset: int) -> None:
        """Drop everything at or after offset."""
        self.mfq.truncate_dirty_files(offset)
        self._cur = None
        if self.mfq.files:
            last = self.mfq.files[-1]
            self._cur = last if last.wrote_position < last.file_size else None
        self.mfq.flushed_where = min(self.mfq.flushed_where, offset)

    def set_recovered(self, end: int) -> None:
        """After recovery: positions of every file from the valid end offset."""
        for mf in self.mfq.files:
            if mf.file_end_offset <= end:
                mf.wrote_position = mf.file_size
                mf.flushed_position = mf.file_size
            else:
                mf.wrote_position = max(0, end - mf.file_from_offset)
                mf.flushed_position = mf.wrote_position
        self.mfq.flushed_where = end
        self._cur = None
        if self.mfq.files and self.mfq.files[-1].wrote_position < self.file_size:
            self._cur = self.mfq.files[-1]

    def first_store_timestamp(self, mf: MappedFile) -> int:
        """Store time of the first record in mf (-1 if none)."""
        size, req = self.check_record(mf.mv, 0, False)
        return req.store_timestamp if size > 0 and req is not None else -1

    def close(self) -> None:
        """Unmap every file."""
        self.mfq.close()
        self._cur = None
