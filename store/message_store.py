"""The message store facade: one writer process, any number of read-only reader processes.

Mirrors store/DefaultMessageStore.java (putMessage, getMessage, recover, CleanCommitLogService,
CleanConsumeQueueService, ReputMessageService dispatch), RocketMQ 4.9.x.

The writer appends to the commit log and dispatches each record synchronously to its consume
queue and the index, then publishes the new max offset in the shared state page (after the
bytes), then calls `arrival_listener`. Readers map the same files read-only and trust only data
below the published max offset. Time is always a parameter (`now_ms`); nothing here reads a clock.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import fcntl
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from struct import Struct
from struct import error as struct_error
from typing import Any, Final, Protocol
from zlib import crc32

from protocol.message import MessageExt, decode_message_ext
from protocol.record import (
    MESSAGE_MAGIC_CODE,
    RECORD_V4_HEAD,
    properties_to_string,
    string_to_properties,
)
from store.allocate_service import AllocateMappedFileService, FileDeleter
from store.checkpoint import StoreCheckpoint
from store.commitlog import (
    _TOTAL_MAGIC,
    BLANK_MAGIC_CODE,
    SCHEDULE_TOPIC,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    AppendError,
    CommitLog,
    DispatchRequest,
    java_int,
    prop_value,
)
from store.config import StoreConfig
from store.consume_queue import (
    CQ_UNIT,
    CQ_UNIT_SIZE,
    PRE_BLANK_SIZE,
    ConsumeQueue,
    ConsumeQueueView,
)
from store.flush_service import (
    CommitLogFlusher,
    ConsumeQueueFlusher,
    load_msync,
    load_range_call,
)
from store.get_message_result import GetMessageResult, GetMessageStatus, whole_batch
from store.index import IndexService, index_key_hashes, java_hash_bytes, key_hash
from store.index_dispatch import IndexDispatcher
from store.mapped_file import OS_PAGE_SIZE, MappedFile, RangeSync
from store.state_page import (
    OFF_FLUSHED_PHY,
    OFF_INDEX_PHY,
    OFF_MAX_PHY,
    OFF_MIN_PHY,
    OFF_WRITER_PID,
    StatePage,
)
from store.stats_page import (
    OFF_BOOT_MS,
    OFF_GET_FOUND,
    OFF_GET_TRANSFERRED,
    OFF_PUT_TIMES,
    StatsPage,
    stats_path,
)

log = logging.getLogger(__name__)

# The next commit-log segment is warmed in slices between requests: a whole 1 GiB segment at
# once stalled the writer for 170-300 ms (sends then failed fast with SYSTEM_BUSY).
WARM_BYTES_PER_TICK: Final = 8 * 1024 * 1024
WARM_STEP_INTERVAL_MS: Final = 2
# The periodic (ASYNC_FLUSH) commit-log msync is sliced the same way.
FLUSH_BYTES_PER_TICK: Final = 4 * 1024 * 1024

LOCALHOST: Final = b"\x7f\x00\x00\x01\x00\x00\x00\x00"
_ROLLBACK_OR_PREPARED: Final = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
DELETE_FILES_BATCH_MAX: Final = 10
MAX_MANUAL_DELETE_FILE_TIMES: Final = 20  # retention passes a manual request keeps "due"
_REC_PACK = RECORD_V4_HEAD.pack_into
_I16_PACK = Struct(">h").pack_into
_I32_UNPACK = Struct(">i").unpack_from
_U16_UNPACK = Struct(">H").unpack_from
_MAX_PHY_WORD: Final = OFF_MAX_PHY >> 3  # state page words (see store/state_page.py)
# A batch item (§5.2): TOTALSIZE, MAGICCODE, BODYCRC, FLAG, body length; body; short props len.
_BATCH_ITEM = Struct(">iiiii")
_I16: Final = Struct(">h")
_ITEM_UNPACKERS: dict[int, Callable[[bytes, int], tuple[Any, ...]]] = {}


def _item_unpacker(body_len: int) -> Callable[[bytes, int], tuple[Any, ...]]:
    """unpack_from of (FLAG, body length, PROPLEN) for items of this body length."""
    f = _ITEM_UNPACKERS.get(body_len)
    if f is None:
        if len(_ITEM_UNPACKERS) >= 256:
            _ITEM_UNPACKERS.clear()
        f = _ITEM_UNPACKERS[body_len] = Struct(f">12xii{body_len}xH").unpack_from
    return f

# RECORD_V4_HEAD for a batch's records: the 48 bytes SYSFLAG..PREPAREDTRANSACTIONOFFSET are
# the same for every record of a batch and packed once (_REC_TAIL).
_REC_HEAD: Final = Struct(
    ">i"  # TOTALSIZE
    "i"  # MAGICCODE
    "i"  # BODYCRC
    "i"  # QUEUEID
    "i"  # FLAG
    "q"  # QUEUEOFFSET
    "q"  # PHYSICALOFFSET
    "48s"  # SYSFLAG .. PREPAREDTRANSACTIONOFFSET: _REC_TAIL
    "i"  # body length
)
_REC_TAIL: Final = Struct(
    ">i"  # SYSFLAG
    "q"  # BORNTIMESTAMP
    "8s"  # BORNHOST ip + port
    "q"  # STORETIMESTAMP
    "8s"  # STOREHOSTADDRESS ip + port
    "i"  # RECONSUMETIMES
    "q"  # PREPAREDTRANSACTIONOFFSET
)


# ---- message types --------------------------------------------------------------------------
@dataclass(slots=True)
class MessageExtBrokerInner:
    """A message to store (MessageExtBrokerInner)."""

    topic: str
    body: bytes | memoryview
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    queue_id: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = LOCALHOST
    store_host: bytes = LOCALHOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags_code: int | None = None  # None: the store hashes the TAGS property
    properties_string: str | bytes | None = None  # bytes: stored as they are
    # a delayed message being delivered (ScheduleMessageService.messageTimeup): stored under
    # its real topic with the DELAY its text still carries, as Java stores it, not parked again
    deliver_now: bool = False

    @classmethod
    def from_stored(
        cls,
        msg: MessageExt,
        topic: str,
        queue_id: int,
        properties: dict[str, str],
        *,
        store_host: bytes | None = None,
        reconsume_times: int | None = None,
    ) -> MessageExtBrokerInner:
        """A stored message put again elsewhere (delay delivery, send-back): same body, flag,
        sysflag and born time/host; new topic, queue and properties."""
        return cls(
            topic=topic,
            body=msg.body,
            flag=msg.flag,
            properties=properties,
            queue_id=queue_id,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_host=msg.store_host if store_host is None else store_host,
            reconsume_times=msg.reconsume_times if reconsume_times is None else reconsume_times,
        )


@dataclass(slots=True)
class MessageExtBatch:
    """A SEND_BATCH_MESSAGE body to expand into records (MessageExtBatch)."""

    topic: str
    body: bytes | memoryview
    queue_id: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = LOCALHOST
    store_host: bytes = LOCALHOST
    reconsume_times: int = 0
    batch_properties: str = ""


class PutMessageStatus(enum.Enum):
    """PutMessageStatus."""

    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPEDFILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGECACHE_BUSY = 8
    UNKNOWN_ERROR = 9


def offset_msg_id(store_host: bytes, phy_offset: int) -> str:
    """Upper-case hex of store ip + port + 8-byte phy offset (§5.5)."""
    return (store_host + phy_offset.to_bytes(8, "big")).hex().upper()


class PutMessageResult:
    """Result of a put; msg_ids are computed on first access."""

    __slots__ = (
        "_ids",
        "end_offset",
        "logics_offset",
        "msg_num",
        "offsets",
        "status",
        "store_host",
        "store_timestamp",
        "wrote_bytes",
        "wrote_offset",
    )

    def __init__(
        self,
        status: PutMessageStatus,
        wrote_offset: int = 0,
        wrote_bytes: int = 0,
        logics_offset: int = 0,
        store_timestamp: int = 0,
        msg_num: int = 0,
        end_offset: int = 0,
        store_host: bytes = LOCALHOST,
        offsets: list[int] | None = None,
    ) -> None:
        self.status = status
        self.wrote_offset = wrote_offset
        self.wrote_bytes = wrote_bytes
        self.logics_offset = logics_offset
        self.store_timestamp = store_timestamp
        self.msg_num = msg_num
        self.end_offset = end_offset
        self.store_host = store_host
        self.offsets = offsets
        self._ids: list[str] | None = None

    @property
    def ok(self) -> bool:
        """True for PUT_OK."""
        return self.status is PutMessageStatus.PUT_OK

    @property
    def msg_ids(self) -> list[str]:
        """Offset message ids of the stored records."""
        if self._ids is None:
            offs = (
                self.offsets
                if self.offsets is not None
                else ([self.wrote_offset] if self.ok else [])
            )
            self._ids = [offset_msg_id(self.store_host, o) for o in offs]
        return self._ids

    def __repr__(self) -> str:
        return (
            f"PutMessageResult({self.status.name}, wrote_offset={self.wrote_offset}, "
            f"logics_offset={self.logics_offset}, msg_num={self.msg_num})"
        )


class MessageFilter(Protocol):
    """Consume-queue level filter (MessageFilter). A filter may also have
    `is_matched_by_commit_log(record: memoryview) -> bool`, asked for each stored record that
    passed the consume queue (a SQL92 subscription's properties check): a record it refuses
    is skipped like a tag mismatch, within the same scan."""

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        """True when a unit with this tags code should be returned."""
        ...


class TagFilter:
    """Tag-hash filter: None or an empty set means '*'."""

    __slots__ = ("code_set",)

    def __init__(self, code_set: set[int] | None) -> None:
        self.code_set = code_set or None

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        """(int) tagsCode must be in the code set."""
        cs = self.code_set
        if cs is None:
            return True
        tc = tags_code & 0xFFFFFFFF
        return (tc - 0x100000000 if tc & 0x80000000 else tc) in cs


@dataclass(slots=True)
class QueryMessageResult:
    """QUERY_MESSAGE result: matching records and the index bounds."""

    buffers: list[memoryview] = field(default_factory=list)
    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0

    @property
    def buffer(self) -> bytes:
        """Matching records concatenated."""
        return b"".join(self.buffers)

    @property
    def buffer_total_size(self) -> int:
        """Bytes in buffer."""
        return sum(len(b) for b in self.buffers)


QUERY_TAIL_SCAN_BYTES: Final = 32 << 20  # bound of the unindexed commit-log tail a query scans


class _HashSink:
    """Stands in for the index in a tail scan: keeps phy offsets whose key hash matches."""

    def __init__(self, kh: int, begin_ms: int, end_ms: int) -> None:
        self.kh, self.begin_ms, self.end_ms = kh, begin_ms, end_ms
        self.phys: list[int] = []

    def put_hash_batch(
        self, hashes: list[int], phys: list[int], tss: list[int], now_ms: int
    ) -> None:
        kh, b, e = self.kh, self.begin_ms, self.end_ms
        hits = zip(hashes, phys, tss, strict=True)
        self.phys += [p for h, p, t in hits if h == kh and b <= t <= e]


def _scan_tail(
    cl: CommitLog, kb: bytes, start: int, max_phy: int, begin_ms: int, end_ms: int
) -> list[int]:
    """Phy offsets of records in [start, max_phy) (bounded) with key topic#key = kb."""
    sink = _HashSink(key_hash(kb), begin_ms, end_ms)
    IndexDispatcher(cl, sink, start).catch_up(min(max_phy, start + QUERY_TAIL_SCAN_BYTES), 0)
    return sink.phys


# ---- shared read side ------------------------------------------------------------------------
class _StoreReadMixin:
    """Read operations common to the writer and read-only views."""

    cfg: StoreConfig
    commitlog: CommitLog
    index: IndexService

    def _cq(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        raise NotImplementedError

    def _max_phy(self) -> int:
        raise NotImplementedError

    def _min_phy(self) -> int:
        raise NotImplementedError

    def _refresh_index(self) -> None:
        """Reader hook."""

    @property
    def indexed_offset(self) -> int:
        """Commit-log offset below which every record's index entries are written."""
        raise NotImplementedError

    def _cl_data(self, phy: int, size: int) -> memoryview | None:
        return self.commitlog.get_data(phy, size)

    def get_commit_log_data(self, phy: int, max_bytes: int) -> memoryview | None:
        """HA transfer (getCommitLogData): raw commit-log bytes from phy, at most max_bytes,
        never past phy's file nor the published max; None when there is nothing there."""
        end = self._max_phy()
        if phy >= end or phy < self._min_phy():
            return None
        fs = self.cfg.mappedFileSizeCommitLog
        n = min(max_bytes, end - phy, fs - phy % fs)
        return self._cl_data(phy, n) if n > 0 else None

    @property
    def max_phy_offset(self) -> int:
        """Commit-log max offset."""
        return self._max_phy()

    @property
    def min_phy_offset(self) -> int:
        """Commit-log min offset."""
        return self._min_phy()

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be written (0 for a missing queue)."""
        cq = self._cq(topic, queue_id)
        return cq.get_max_offset_in_queue() if cq is not None else 0

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """First readable queue offset (-1 for a missing queue)."""
        cq = self._cq(topic, queue_id)
        return cq.get_min_offset_in_queue() if cq is not None else -1

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        """Phy offset of the unit at queue offset, or 0."""
        cq = self._cq(topic, queue_id)
        u = cq.get_unit(offset) if cq is not None else None
        return u[0] if u is not None and u[1] != PRE_BLANK_SIZE else 0

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, ts_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP (§9.8)."""
        cq = self._cq(topic, queue_id)
        if cq is None:
            return 0
        min_phy = self._min_phy()

        def store_time(phy: int, size: int) -> int:
            if phy < min_phy:
                return -1
            return self.commitlog.store_timestamp_at(phy, size)

        return cq.get_offset_in_queue_by_time(ts_ms, store_time)

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at queue offset, -1 if unavailable."""
        cq = self._cq(topic, queue_id)
        u = cq.get_unit(offset) if cq is not None else None
        if u is None or u[1] == PRE_BLANK_SIZE or u[0] < self._min_phy():
            return -1
        return self.commitlog.store_timestamp_at(u[0], u[1])

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of the message at the queue's min offset, -1 if unavailable."""
        cq = self._cq(topic, queue_id)
        if cq is None:
            return -1
        return self.get_message_store_timestamp(topic, queue_id, cq.get_min_offset_in_queue())

    def select_one_message_by_offset(
        self, phy_offset: int, size: int | None = None
    ) -> memoryview | None:
        """The stored record at phy_offset (its bytes), or None."""
        if phy_offset < self._min_phy() or phy_offset >= self._max_phy():
            return None
        if size is None:
            size = self.commitlog.record_size_at(phy_offset)
            if size <= 0 and not self.commitlog.writable:
                # a reader: the file may have been created after this view last looked
                self.commitlog.mfq.refresh()
                size = self.commitlog.record_size_at(phy_offset)
            if size <= 0 or phy_offset + size > self._max_phy():
                return None
        return self._cl_data(phy_offset, size)

    def look_message_by_offset(self, phy_offset: int) -> MessageExt | None:
        """The decoded message at phy_offset, or None. The body stays as stored (a compressed
        one keeps COMPRESSED in its sysFlag), as lookMessageByOffset reads it: what send-back,
        delayed delivery and transactions store again is the bytes the producer sent."""
        data = self.select_one_message_by_offset(phy_offset)
        if data is None:
            return None
        try:
            return decode_message_ext(bytes(data), 0, decompress=False)
        except Exception:
            log.warning("undecodable record phy_offset=%d", phy_offset)
            return None

    def check_in_disk_by_commit_offset(self, phy_offset: int) -> bool:
        """True when the record is farther behind the max than the in-memory share of RAM."""
        memory = self.cfg.totalPhysicalMemory * self.cfg.accessMessageInMemoryMaxRatio // 100
        return (self._max_phy() - phy_offset) > memory

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int
    ) -> QueryMessageResult:
        """Records indexed under topic#key stored in [begin_ms, end_ms] (hash matches)."""
        self._refresh_index()
        res = QueryMessageResult()
        kb = f"{topic}#{key}".encode()
        max_phy, min_phy = self._max_phy(), self._min_phy()
        # records the index owner has not reached yet are found by scanning the commit-log tail
        indexed = self.indexed_offset
        phys = self.index.query(kb, max_num, begin_ms, end_ms)
        if indexed < max_phy and len(phys) < max_num:
            seen = set(phys)
            tail = _scan_tail(self.commitlog, kb, indexed, max_phy, begin_ms, end_ms)
            phys += [p for p in tail if p not in seen][: max_num - len(phys)]
        for phy in phys:
            if phy < min_phy or phy >= max_phy:
                continue
            data = self.select_one_message_by_offset(phy)
            if data is not None:
                res.buffers.append(data)
                res.phy_offsets.append(phy)
        if self.index.files:
            last = self.index.files[-1]
            res.index_last_update_timestamp = last.end_ts
            res.index_last_update_phyoffset = last.end_phy
        return res

    # StoreStatsService's get counters (published by the process that owns the stats page)
    get_found_total = 0
    get_miss_total = 0
    get_transferred_total = 0
    stats_page: StatsPage | None = None

    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msgs: int,
        max_bytes: int | None = None,
        filter: MessageFilter | None = None,
        now_ms: int = 0,
        *,
        count_stats: bool = True,
    ) -> GetMessageResult:
        """DefaultMessageStore.getMessage: read up to max_msgs records from a queue (§9.3);
        count_stats=False for the broker's own looks (not a consumer's get)."""
        res = self._get_message(topic, queue_id, offset, max_msgs, max_bytes, filter)
        if not count_stats:
            return res
        if res.status is GetMessageStatus.FOUND:
            self.get_found_total += 1
            self.get_transferred_total += res.message_count
        else:
            self.get_miss_total += 1
        return res

    def publish_stats(self) -> None:
        """Write this reader's get counters into the stats page (when it owns one)."""
        sp = self.stats_page
        if sp is not None:
            sp.set_pair(OFF_GET_FOUND, self.get_found_total, self.get_miss_total)
            sp.set(OFF_GET_TRANSFERRED, self.get_transferred_total)

    def _get_message(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msgs: int,
        max_bytes: int | None,
        filter: MessageFilter | None,
    ) -> GetMessageResult:
        G = GetMessageStatus
        cfg = self.cfg
        # nextOffsetCorrection: a slave leaves an out-of-range offset as asked (the broker
        # then answers PULL_RETRY_IMMEDIATELY towards the master) unless offsetCheckInSlave
        fix = cfg.brokerRole != "SLAVE" or cfg.offsetCheckInSlave
        cq = self._cq(topic, queue_id)
        if cq is None:
            return GetMessageResult(G.NO_MATCHED_LOGIC_QUEUE, 0 if fix else offset, 0, 0)
        min_off = cq.get_min_offset_in_queue()
        max_off = cq.get_max_offset_in_queue()
        if max_off == 0:
            return GetMessageResult(G.NO_MESSAGE_IN_QUEUE, 0 if fix else offset, min_off, max_off)
        if offset < min_off:
            return GetMessageResult(
                G.OFFSET_TOO_SMALL, min_off if fix else offset, min_off, max_off
            )
        if offset == max_off:
            return GetMessageResult(G.OFFSET_OVERFLOW_ONE, offset, min_off, max_off)
        if offset > max_off:  # 4.9.4+: the max whatever the min (before, 0 when the min was 0)
            return GetMessageResult(
                G.OFFSET_OVERFLOW_BADLY, max_off if fix else offset, min_off, max_off
            )
        ib = cq.get_index_buffer(offset)
        if ib is None:
            return GetMessageResult(
                G.OFFSET_FOUND_NULL, cq.roll_next_file(offset) if fix else offset, min_off,
                max_off,
            )  # fmt: skip
        buf, n_units = ib
        max_phy = self._max_phy()
        min_phy = self._min_phy()
        memory = cfg.totalPhysicalMemory * cfg.accessMessageInMemoryMaxRatio // 100
        max_filter = max(16000, max_msgs * CQ_UNIT_SIZE) // CQ_UNIT_SIZE
        n = max(0, min(n_units, max_filter, max_off - offset))
        res = GetMessageResult(G.NO_MATCHED_MESSAGE, offset, min_off, max_off)
        if (filter is None and 0 < max_msgs <= cfg.maxTransferCountOnMessageInMemory
                and whole_batch(res, buf, n, max_msgs, max_bytes, max_phy, min_phy, memory,
                                cfg.maxTransferBytesOnMessageInMemory,
                                self.commitlog.mfq.find_mapped_file_by_offset)):  # fmt: skip
            buf.release()
            return res
        # read unit by unit: a pull of 32 stops after ~32 of the up to 800 units in reach (one
        # unpack of all of them cost 26 us a pull); the slice keeps the view until the loop ends
        units = CQ_UNIT.iter_unpack(buf[: n * CQ_UNIT_SIZE])
        buf.release()
        buffers = res.buffers
        qoffs = res.message_queue_offsets
        total = 0
        count = 0
        next_phy_file_start = -1
        max_phy_pulling = 0
        status = G.NO_MATCHED_MESSAGE
        mem_bytes, mem_count = (
            cfg.maxTransferBytesOnMessageInMemory,
            cfg.maxTransferCountOnMessageInMemory,
        )
        disk_bytes, disk_count = (
            cfg.maxTransferBytesOnMessageInDisk,
            cfg.maxTransferCountOnMessageInDisk,
        )
        byte_cap = max_bytes if max_bytes is not None else 1 << 62
        commitlog = self.commitlog
        find = commitlog.mfq.find_mapped_file_by_offset
        by_record = getattr(filter, "is_matched_by_commit_log", None)
        # coalesce adjacent records into one view: (file, start, end)
        span_mf = None
        span_start = span_end = 0
        i = 0
        for i, (phy, size, tags) in enumerate(units):
            max_phy_pulling = phy
            if next_phy_file_start >= 0 and phy < next_phy_file_start:
                continue
            if size == PRE_BLANK_SIZE:
                continue
            if count:
                if count >= max_msgs:
                    break
                if max_phy - phy > memory:
                    if total + size > disk_bytes or count >= disk_count:
                        break
                elif total + size > mem_bytes or count >= mem_count:
                    break
                if total + size > byte_cap:
                    break
            if filter is not None and not filter.is_matched_by_consume_queue(tags):
                if count == 0:
                    status = G.NO_MATCHED_MESSAGE
                continue
            if phy < min_phy or phy + size > max_phy:
                mf = None
            else:
                mf = (
                    span_mf
                    if span_mf is not None
                    and span_mf.file_from_offset <= phy
                    and phy + size <= span_mf.file_end_offset
                    else find(phy)
                )
            if mf is None:
                if count == 0:
                    status = G.MESSAGE_WAS_REMOVING
                next_phy_file_start = commitlog.roll_next_file(phy)
                continue
            p = phy - mf.file_from_offset
            if by_record is not None and not by_record(mf.mv[p : p + size]):
                if count == 0:
                    status = G.NO_MATCHED_MESSAGE
                continue
            if mf is span_mf and p == span_end:
                span_end = p + size
            else:
                if span_mf is not None:
                    buffers.append(span_mf.mv[span_start:span_end])
                span_mf, span_start, span_end = mf, p, p + size
            total += size
            count += 1
            qoffs.append(offset + i)
            status = G.FOUND
            next_phy_file_start = -1
        else:
            i = n
        if span_mf is not None:
            buffers.append(span_mf.mv[span_start:span_end])
        res.status = status
        res.next_begin_offset = offset + i
        res.message_count = count
        res.buffer_total_size = total
        res.suggest_pull_from_slave = (max_phy - max_phy_pulling) > memory
        return res


# ---- put helpers ------------------------------------------------------------------------------
_BatchItem = tuple[int, int, int, int, int]


def _batch_items(
    raw: bytes, bp: bytes, base: int
) -> tuple[list[_BatchItem], int] | PutMessageStatus:
    """Validate a batch body (§5.2) before anything is written.

    Returns ([(start, flag, body len, props len, stored props len)], total record bytes) where
    a record is `base + body len + stored props len` bytes; or the status rejecting the batch.
    """
    items: list[_BatchItem] = []
    n_raw = len(raw)
    extra = len(bp)
    unpack_item = _BATCH_ITEM.unpack_from
    u16 = _U16_UNPACK
    pos = total = 0
    try:
        while pos < n_raw:
            # TOTALSIZE, MAGICCODE and BODYCRC are skipped, as MessageExtBatchEncoder skips them:
            # an item is as long as its body and properties lengths say
            _total, _magic, _crc, flag, bl = unpack_item(raw, pos)
            pp = pos + 20 + bl
            if bl < 0 or pp + 2 > n_raw:
                return PutMessageStatus.MESSAGE_ILLEGAL
            pl = u16(raw, pp)[0]
            if pp + 2 + pl > n_raw:
                return PutMessageStatus.MESSAGE_ILLEGAL
            rpl = pl
            if extra:  # item props + (separator) + batch props
                rpl += extra + (1 if pl and raw[pp + 1 + pl] != 2 else 0)
            if rpl > 32767:
                return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
            items.append((pos, flag, bl, pl, rpl))
            total += base + bl + rpl
            pos = pp + 2 + pl
    except (ValueError, IndexError, struct_error):
        return PutMessageStatus.MESSAGE_ILLEGAL
    if not items:
        return PutMessageStatus.MESSAGE_ILLEGAL
    return items, total


def _record_keys(pb: bytes) -> list[bytes]:
    """Index keys of one record's encoded properties: UNIQ_KEY, then each KEYS entry."""
    out = []
    uniq = prop_value(pb, b"UNIQ_KEY\x01")
    if uniq:
        out.append(uniq)
    keys = prop_value(pb, b"KEYS\x01")
    if keys:
        out += [k for k in keys.split(b" ") if k]
    return out


def _key_hashes(pre: bytes, pre_h: int, keys: list[bytes]) -> list[int]:
    """abs(hashCode(pre + key)) of each key, hashed in one pass (pre_h = hashCode(pre))."""
    hashes = index_key_hashes(pre_h, keys)
    if -1 in hashes:
        hashes = [h if h >= 0 else key_hash(pre + k) for h, k in zip(hashes, keys, strict=True)]
    return hashes


# ---- the writer -------------------------------------------------------------------------------
# struct flock on Linux x86-64 / arm64: l_type, l_whence, l_start, l_len, l_pid (0 for OFD)
_FLOCK: Final = Struct("@hhqqi4x")
_F_OFD_SETLK: Final = getattr(fcntl, "F_OFD_SETLK", 37)


def _record_lock(fd: int) -> None:
    """Write-lock byte 0 of fd without waiting (OSError when another holder has it)."""
    try:
        fcntl.fcntl(fd, _F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0))
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)  # a kernel without OFD locks


class DefaultMessageStore(_StoreReadMixin):
    """The single writer of one store directory."""

    def __init__(self, cfg: StoreConfig) -> None:
        self.cfg = cfg
        self.root = cfg.storePathRootDir
        os.makedirs(self.root, exist_ok=True)
        self.commitlog = CommitLog(cfg)
        self.commitlog.on_new_file = self._on_new_file
        self.cq_root = os.path.join(self.root, "consumequeue")
        self.consume_queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        self.index = IndexService(self.root, cfg.maxHashSlotNum, cfg.maxIndexNum)
        self.checkpoint: StoreCheckpoint | None = None
        self.state: StatePage | None = None
        self.arrival_listener: Callable[[str, int, int, int, int], None] | None = None
        self.disk_usage: Callable[[str], float] = disk_usage_ratio
        self._lock_fd: int | None = None
        self._topic_cache: dict[str, tuple[bytes, bytes, int]] = {}
        self._tags_cache = self.commitlog.tag_codes.codes  # one TAGS hash cache per store
        # batch append: per tag offset (0 or 2) the last "TAGS\x01<v>\x02" prefix seen, where
        # it ends and its code; and the last item body length with its unpacker
        self._tag_memo: dict[int, tuple[bytes, int, int]] = {
            at: (b"TAGS\x01\x02", at + 6, 0) for at in (0, 2)
        }
        self._unpack_memo: tuple[int, Any] = (0, _item_unpacker(0))
        self._delays = cfg.delay_levels_ms
        self._running = False
        self._accepting = False  # running and not a slave
        self._slave = cfg.brokerRole == "SLAVE"
        self._reput_offset = 0  # a slave: end of the last record given its consume-queue unit
        self._max_msg_size = cfg.maxMessageSize
        self._index_mode = cfg.index_mode
        self._index_inline = self._index_mode == "sync"
        self._index_disp: IndexDispatcher | None = None  # "tick" mode
        self._index_proc: subprocess.Popen[bytes] | None = None  # "process" mode
        self._index_lock_fd: int | None = None
        self._last_flush_ms = 0
        self._flush_target = 0
        self._last_thorough_ms = 0
        self._last_cq_flush_ms = 0
        self._last_cq_thorough_ms = 0
        self._last_clean_ms = 0
        self._last_cq_store_ts = 0
        self.manual_delete_times = 0  # passes left that run as if deleteWhen's hour had come
        self.put_lock = threading.Lock()  # only GroupCommit uses it; the broker is one thread
        # ASYNC_FLUSH: the commit log is flushed by a thread (fdatasync releases the GIL);
        # _flush_mu orders its publishing with flush() on the writer's thread
        self.flush_thread_enabled = True
        self._flusher: CommitLogFlusher | None = None
        self._cq_flusher: ConsumeQueueFlusher | None = None  # FlushConsumeQueueService
        self._allocator: AllocateMappedFileService | None = None  # the next segment, warmed
        self._deleter = FileDeleter()  # retention's unlinks of expired commit-log segments
        self.put_times_total = 0  # StoreStatsService: messages and record bytes put since start
        self.put_size_total = 0
        self._flush_mu = threading.Lock()
        self.recovered_abnormally = False

    # ---- lifecycle -------------------------------------------------------------------------
    def _lock(self) -> None:
        """Take <root>/lock both ways: flock, and a record lock on byte 0, the range a Java
        broker's FileChannel.tryLock(0, 1, false) takes (on Linux flock and record locks never
        conflict, so flock alone would let a Java broker open the same store at the same time).
        The record lock is an open-file-description one (F_OFD_SETLK): it conflicts with
        Java's F_SETLK lock, and unlike lockf it is not dropped when this process closes some
        other descriptor of the file (a second, refused open of the same store)."""
        path = os.path.join(self.root, "lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            _record_lock(fd)
        except OSError:
            os.close(fd)  # drops whichever lock this descriptor took
            raise RuntimeError("Lock failed,MQ already started") from None
        os.ftruncate(fd, 0)
        os.write(fd, b"lock")
        self._lock_fd = fd

    def load(self, now_ms: int = 0) -> bool:
        """Map every file and recover (normal, or abnormal when the abort marker exists); on an
        error everything taken so far (maps, descriptors, the lock) is let go before it is
        raised, so the same process, or another one, can try again."""
        self._lock()
        try:
            return self._load_locked(now_ms)
        except BaseException:
            self.close_abruptly()
            raise

    def _load_locked(self, now_ms: int) -> bool:
        abort_path = os.path.join(self.root, "abort")
        abnormal = os.path.exists(abort_path)
        self.recovered_abnormally = abnormal
        state_path = os.path.join(self.root, "state")
        clean_end = -1
        indexed_word = -1
        if os.path.exists(state_path):
            sp = StatePage(state_path, writable=False)
            if not abnormal and sp.get(OFF_WRITER_PID) == 0 and sp.get(0) != 0:
                clean_end = sp.max_phy
                indexed_word = sp.get(OFF_INDEX_PHY)
            sp.close()
        self.state = StatePage(state_path, writable=True)
        self.checkpoint = StoreCheckpoint(os.path.join(self.root, "checkpoint"))
        self.commitlog.mfq.load()
        self._load_consume_queues()
        if self._index_mode == "process":
            self._index_lock()
        self.index.load()
        if abnormal:
            log.warning("abort file found: abnormal recovery root=%s", self.root)
        self._recover(abnormal, clean_end, now_ms)
        if self._slave:  # recovery ends the log at its last whole record, every one dispatched
            self._reput_offset = self.commitlog.max_offset
        self._setup_index_dispatch(indexed_word)
        with open(abort_path, "wb") as f:
            f.flush()
        self.state.set(OFF_WRITER_PID, os.getpid())
        self._publish()
        self.state.bump_generation()
        return True

    def _setup_index_dispatch(self, indexed_word: int) -> None:
        """After recovery: where the lagging index dispatch resumes ("tick" / "process")."""
        if self._index_mode not in ("tick", "process"):
            return
        cl = self.commitlog
        end = cl.max_offset
        idx_end = self.index.end_phy
        if idx_end >= 0 and idx_end >= cl.min_offset:
            size = cl.record_size_at(idx_end)
            resume = idx_end + size if size > 0 else idx_end
        else:
            resume = cl.min_offset
        if cl.min_offset <= indexed_word <= end:  # clean restart: the owner's own progress
            resume = max(resume, indexed_word)
        resume = min(resume, end)
        assert self.state is not None
        self.state.set(OFF_INDEX_PHY, resume)
        if self._index_mode == "tick":
            self._index_disp = IndexDispatcher(cl, self.index, resume, idx_end)
            return
        # "process": the index process owns the files from now on; this writer only reads them
        self.index.flush()
        self.index.close()
        self.index = IndexService(
            self.root, self.cfg.maxHashSlotNum, self.cfg.maxIndexNum, writable=False
        )
        self.index.refresh()
        self._index_unlock()

    def start(self, now_ms: int = 0) -> None:
        """Begin accepting puts."""
        if self.state is None:
            self.load(now_ms)
        self._running = True
        self._accepting = self.cfg.brokerRole != "SLAVE"
        self._last_flush_ms = self._last_cq_flush_ms = self._last_clean_ms = now_ms
        self._last_cq_thorough_ms = now_ms
        self._last_thorough_ms = now_ms
        self._flush_target = 0  # end of the async flush round going on in slices
        cl = self.commitlog
        # create + warm the first file now, not on the first put (a slave's first file starts
        # where the master's first byte for it falls: append_to_commit_log makes it)
        if not self._slave and not cl.mfq.files:
            cl._cur = cl.mfq.get_last_mapped_file(0)
            self._on_new_file()
        elif cl._cur is not None and self.cfg.warmMapedFileEnable:
            cl.mfq.warm(cl._cur)  # after a restart: pre-touch the unwritten tail before serving
        cl.mfq.preallocate_next()
        # at start, before serving, the next segment is warmed whole (later ones in slices)
        while cl.mfq.warm_next_step(cl.file_size):
            pass
        if self._index_mode in ("sync", "tick") and not self.index.files:
            self.index.put_hash_batch([], [], [], now_ms)  # the first index file, made now
        msync = load_msync() if self.flush_thread_enabled else None
        if msync is not None:
            if not self.cfg.is_sync_flush and self._flusher is None:
                self._flusher = CommitLogFlusher(self, msync)
            if self._cq_flusher is None:
                self._cq_flusher = ConsumeQueueFlusher(self, msync)
            madvise = load_range_call("madvise")
            if madvise is not None and self._allocator is None:
                mfq = cl.mfq
                self._allocator = AllocateMappedFileService(
                    mfq, madvise, msync if mfq.warm_flush_pages else None
                )
        if self.stats_page is None:
            self.stats_page = StatsPage(stats_path(self.cfg.storePathRootDir), writable=True)
            self.stats_page.set(OFF_BOOT_MS, now_ms)
            self.publish_stats()
        spawn = self.cfg.messageIndexProcessSpawn
        if self._index_mode == "process" and spawn and self._index_proc is None:
            self._spawn_index_process()

    # ---- index dispatch modes ------------------------------------------------------------------
    def _index_lock(self) -> None:
        """Wait for any index process of an earlier writer to be gone (it holds this flock)."""
        os.makedirs(self.index.path, exist_ok=True)
        fd = os.open(os.path.join(self.index.path, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        self._index_lock_fd = fd

    def _index_unlock(self) -> None:
        if self._index_lock_fd is not None:
            fcntl.flock(self._index_lock_fd, fcntl.LOCK_UN)
            os.close(self._index_lock_fd)
            self._index_lock_fd = None

    def _spawn_index_process(self) -> None:
        """Start `python -m store.index_dispatch` as the owner of the index files."""
        cfg = self.cfg
        args = [
            sys.executable, "-m", "store.index_dispatch", self.root,
            f"maxHashSlotNum={cfg.maxHashSlotNum}", f"maxIndexNum={cfg.maxIndexNum}",
            f"mappedFileSizeCommitLog={cfg.mappedFileSizeCommitLog}",
        ]  # fmt: skip
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = here + os.pathsep + env.get("PYTHONPATH", "")
        self._index_proc = subprocess.Popen(
            args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True
        )
        log.info("started index process pid=%d root=%s", self._index_proc.pid, self.root)

    def _stop_index_process(self, kill: bool = False) -> None:
        proc = self._index_proc
        if proc is None:
            return
        self._index_proc = None
        if not kill and self.state is not None:
            # let it index everything written (bounded: ~60 s while it is alive)
            target = self.commitlog.max_offset
            for _ in range(12_000):
                if self.state.get(OFF_INDEX_PHY) >= target:
                    break
                try:
                    proc.wait(timeout=0.005)
                    break  # it exited on its own; the next start resumes from its progress
                except subprocess.TimeoutExpired:
                    pass
        if proc.poll() is None:
            if kill:
                proc.kill()
            else:
                proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        log.info("index process stopped pid=%d code=%s", proc.pid, proc.returncode)

    @property
    def indexed_offset(self) -> int:
        """Commit-log offset below which every record's index entries are written."""
        if self._index_mode in ("sync", "off"):
            return self.commitlog.max_offset
        if self._index_disp is not None:
            return self._index_disp.next_phy
        return self.state.get(OFF_INDEX_PHY) if self.state is not None else 0

    def dispatch_index(self, now_ms: int, max_records: int = 1 << 30) -> int:
        """"tick" mode: index records appended since the last call; returns records walked."""
        disp = self._index_disp
        if disp is None:
            return 0
        limit = self._published_max()
        if disp.next_phy >= limit:
            return 0
        n = disp.catch_up(limit, now_ms, max_records)
        if self.state is not None:
            self.state.set(OFF_INDEX_PHY, disp.next_phy)
        return n

    def _refresh_index(self) -> None:
        if self._index_mode == "process":
            self.index.refresh()
        elif self._index_disp is not None:
            self.dispatch_index(self.commitlog.last_store_timestamp)

    def shutdown(self, now_ms: int = 0) -> None:
        """Flush everything, write the checkpoint, remove the abort marker, unlock."""
        if self.state is None:
            return
        self._running = False
        self._accepting = False
        self.dispatch_index(now_ms)
        self._stop_index_process()
        self._stop_flusher()
        self.flush(now_ms)
        if not self.flush_logics(0):  # every consume queue's dirty range, then the checkpoint
            log.warning("store shutdown: a consume queue could not be flushed")
        self.index.flush()
        cp = self.checkpoint
        assert cp is not None
        cp.logics_msg_timestamp = max(cp.logics_msg_timestamp, self.commitlog.last_store_timestamp)
        cp.flush()
        self._publish()
        self.state.set(OFF_WRITER_PID, 0)
        self.state.mm.flush()
        if self.stats_page is not None:
            self.publish_stats()
            self.stats_page.close()
            self.stats_page = None
        self.commitlog.close()
        for cq in self.consume_queues.values():
            cq.close()
        self.index.close()
        cp.close()
        self.state.close()
        self.state = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self.root, "abort"))
        if self._lock_fd is not None:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None
        log.info("store shut down root=%s", self.root)

    def close_abruptly(self) -> None:
        """Drop everything without flushing (the abort marker stays): a failed load, tests."""
        self._running = self._accepting = False
        self._stop_flusher()
        self._stop_index_process(kill=True)
        self._index_unlock()
        self.commitlog.close()
        for cq in self.consume_queues.values():
            cq.close()
        self.index.close()
        if self.checkpoint is not None:
            self.checkpoint.close()
        if self.state is not None:
            self.state.close()
            self.state = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # ---- recovery --------------------------------------------------------------------------
    def _load_consume_queues(self) -> None:
        if not os.path.isdir(self.cq_root):
            os.makedirs(self.cq_root, exist_ok=True)
            return
        for topic in os.listdir(self.cq_root):
            tdir = os.path.join(self.cq_root, topic)
            if not os.path.isdir(tdir):
                continue
            for q in os.listdir(tdir):
                if not q.lstrip("-").isdigit():
                    continue
                cq = ConsumeQueue(self.cq_root, topic, int(q), self.cfg.mappedFileSizeConsumeQueue)
                cq.load()
                cq.recover()
                self.consume_queues[(topic, int(q))] = cq

    def _recover(self, abnormal: bool, clean_end: int, now_ms: int) -> None:
        cl = self.commitlog
        files = cl.mfq.files
        check_crc = self.cfg.checkCRCOnRecover
        reput_from: int
        last_ts = -1
        if not files:
            end = 0
            reput_from = 0
        elif not abnormal and clean_end >= 0 and self._clean_end_plausible(clean_end):
            end = clean_end
            reput_from = max((cq.max_phy_offset for cq in self.consume_queues.values()), default=0)
            reput_from = min(max(reput_from, cl.min_offset), end)
        else:
            if abnormal:
                assert self.checkpoint is not None
                ts = self.checkpoint.min_timestamp(self.cfg.messageIndexSafe)
                idx = 0
                for i in range(len(files) - 1, -1, -1):
                    t = cl.first_store_timestamp(files[i])
                    if 0 <= t <= ts:
                        idx = i
                        break
            else:
                idx = max(0, len(files) - 3)
            start = files[idx].file_from_offset
            assert self.checkpoint is not None
            ts_mark = self.checkpoint.min_timestamp(self.cfg.messageIndexSafe)
            end, last_ts, mark = cl.scan(start, check_crc, ts_mark)
            if abnormal:
                # units and index entries of records stored before the checkpoint time are on
                # disk (StoreCheckpoint): re-dispatch only from there
                reput_from = mark
            else:
                reput_from = max(
                    (cq.max_phy_offset for cq in self.consume_queues.values()), default=0
                )
                reput_from = min(max(reput_from, cl.min_offset), end)
        if files:
            cl.truncate_dirty(end)
            cl.set_recovered(end)
        for cq in self.consume_queues.values():
            cq.truncate_dirty(end)
        self.index.truncate_from_phy(end)
        min_phy = cl.min_offset
        for cq in self.consume_queues.values():
            cq.correct_min_offset(min_phy)
        # re-dispatch what the consume queues / index are missing
        index_end = self.index.end_phy
        if not self._index_inline:
            index_end = 1 << 62  # the lagging index dispatch resumes on its own
        elif abnormal and index_end >= 0:
            reput_from = min(reput_from, max(index_end, min_phy))
        self._rebuild_queue_table()
        n = 0
        if reput_from < end:
            for req in cl.walk(reput_from, False):
                if req.phy_offset >= end:
                    break
                self._dispatch(req, index_end, now_ms, notify=False)
                last_ts = req.store_timestamp
                n += 1
        self._rebuild_queue_table()
        if last_ts >= 0:
            cl.last_store_timestamp = last_ts
        else:
            assert self.checkpoint is not None
            cl.last_store_timestamp = self.checkpoint.physic_msg_timestamp if end > 0 else 0
        log.info(
            "recovered store root=%s abnormal=%s end=%d redispatched=%d",
            self.root,
            abnormal,
            end,
            n,
        )

    def _clean_end_plausible(self, end: int) -> bool:
        cl = self.commitlog
        mf = cl.mfq.find_mapped_file_by_offset(end)
        if mf is None:
            return (
                end == cl.mfq.files[-1].file_end_offset or end == cl.mfq.files[0].file_from_offset
            )
        p = end - mf.file_from_offset
        if p + 8 > mf.file_size:
            return True
        total, magic = (
            int.from_bytes(mf.mv[p : p + 4], "big"),
            int.from_bytes(mf.mv[p + 4 : p + 8], "big"),
        )
        return total == 0 and magic == 0

    def _rebuild_queue_table(self) -> None:
        self.topic_queue_table = {
            k: cq.get_max_offset_in_queue() for k, cq in self.consume_queues.items()
        }

    def _dispatch(
        self, req: DispatchRequest, index_end: int, now_ms: int, notify: bool = True
    ) -> None:
        """Build the CQ unit and index entries of one record (recovery path)."""
        tran = req.sys_flag & 0xC
        if tran not in _ROLLBACK_OR_PREPARED:
            cq = self._find_or_create_cq(req.topic, req.queue_id)
            cq.put(req.phy_offset, req.size, req.tags_code, req.queue_offset)
        if (
            self._index_inline
            and tran != TRANSACTION_ROLLBACK_TYPE
            and req.phy_offset > index_end
        ):
            keys = _record_keys(req.properties)
            info = self._topic_info(req.topic) if keys else None
            if info is not None:
                hashes = _key_hashes(info[1], info[2], keys)
                self.index.put_hashes(hashes, req.phy_offset, req.store_timestamp, now_ms)

    # ---- consume queues ----------------------------------------------------------------------
    def _find_or_create_cq(self, topic: str, queue_id: int) -> ConsumeQueue:
        key = (topic, queue_id)
        cq = self.consume_queues.get(key)
        if cq is None:
            cq = ConsumeQueue(self.cq_root, topic, queue_id, self.cfg.mappedFileSizeConsumeQueue)
            cq.load()
            self.consume_queues[key] = cq
            if self.state is not None:
                self.state.bump_generation()
        return cq

    def _cq(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.consume_queues.get((topic, queue_id))

    def _max_phy(self) -> int:
        return self._published_max()

    def _min_phy(self) -> int:
        return self.commitlog.min_offset

    @property
    def flushed_offset(self) -> int:
        """Commit-log offset known to be on disk."""
        return self.commitlog.flushed_offset

    def _on_new_file(self) -> None:
        if self.state is not None:
            self.state.bump_generation()
        if self._allocator is not None:
            self._allocator.request()  # the segment after this one, made and warmed ahead

    def _published_max(self) -> int:
        """The end of what readers may use: a slave's reput offset (its log may end inside a
        record still arriving), else the commit log's end."""
        return self._reput_offset if self._slave else self.commitlog.max_offset

    def _publish(self) -> None:
        st = self.state
        if st is not None:
            st.set(OFF_MIN_PHY, self.commitlog.min_offset)
            st.set(OFF_FLUSHED_PHY, self.commitlog.flushed_offset)
            st.set(OFF_MAX_PHY, self._published_max())
            if self._index_mode in ("sync", "off"):
                st.set(OFF_INDEX_PHY, self._published_max())

    # ---- put -----------------------------------------------------------------------------
    def _topic_info(self, topic: str) -> tuple[bytes, bytes, int] | None:
        """(length byte + topic, b'topic#', hashCode('topic#') unsigned) or None if illegal."""
        info = self._topic_cache.get(topic)
        if info is None:
            raw = topic.encode()
            if not raw or len(raw) > 127:
                return None
            pre = raw + b"#"
            info = self._topic_cache[topic] = (
                bytes((len(raw),)) + raw,
                pre,
                java_hash_bytes(pre) & 0xFFFFFFFF,
            )
        return info

    def _topic_bytes(self, topic: str) -> bytes | None:
        info = self._topic_info(topic)
        return None if info is None else info[0]

    def _tags_code(self, pb: bytes) -> int:
        """Tag hash of the TAGS property in encoded properties (0 without tags)."""
        tags = prop_value(pb, b"TAGS\x01")
        if not tags:
            return 0
        tc = self._tags_cache.get(tags)
        return tc if tc is not None else self._tag_hash(tags)

    def _tag_hash(self, tags: bytes) -> int:
        """Hash a tag and remember it (store.index.TagCodes: bounded)."""
        return self.commitlog.tag_codes.get(tags)

    def put_message(self, msg: MessageExtBrokerInner, now_ms: int) -> PutMessageResult:
        """Append one message and dispatch it (CommitLog.putMessage + reput).

        `msg.properties_string` (str or already-encoded bytes) is used as-is when set; only
        TAGS / KEYS / UNIQ_KEY / DELAY are looked up in it, with bytes.find.
        """
        if not self._accepting:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        ps = msg.properties_string
        if ps is None:
            pb = properties_to_string(msg.properties).encode()
        elif ps.__class__ is bytes:
            pb = ps  # type: ignore[assignment]
        else:
            pb = ps.encode()  # type: ignore[union-attr]
        sys_flag = msg.sys_flag
        tran = sys_flag & 0xC
        dispatch_cq = tran != 4 and tran != 12
        if dispatch_cq and b"DELAY\x01" in pb and not msg.deliver_now:
            pb = self._apply_delay(msg, pb)
        topic = msg.topic
        info = self._topic_cache.get(topic) or self._topic_info(topic)
        if info is None:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        tb = info[0]
        body = msg.body
        blen = len(body)
        if blen > self._max_msg_size:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        plen = len(pb)
        if plen > 32767:
            return PutMessageResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
        qid = msg.queue_id
        key = (topic, qid)
        qoff = self.topic_queue_table.get(key, 0) if dispatch_cq else 0
        born_host = msg.born_host
        store_host = msg.store_host
        tl = len(tb)
        size = 90 + blen + tl + plen
        cl = self.commitlog
        mf = cl._cur
        if (
            mf is not None
            and size + 8 <= mf.file_size - mf.wrote_position
            and len(born_host) == 8
            and len(store_host) == 8
        ):
            pos = mf.wrote_position
            phy = mf.file_from_offset + pos
            mm = mf.mm
            _REC_PACK(
                mm, pos, size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, qid, msg.flag, qoff,
                phy, sys_flag & ~0x30, msg.born_timestamp, born_host, now_ms, store_host,
                msg.reconsume_times, msg.prepared_transaction_offset, blen,
            )  # fmt: skip
            p = pos + 88
            mm[p : p + blen] = body
            p += blen
            mm[p : p + tl] = tb
            p += tl
            _I16_PACK(mm, p, plen)
            mm[p + 2 : p + 2 + plen] = pb
            mf.wrote_position = pos + size
            cl.last_store_timestamp = now_ms
        else:
            try:
                phy, size = cl.append(
                    tb, body, pb, qid, msg.flag, qoff, sys_flag, msg.born_timestamp, born_host,
                    now_ms, store_host, msg.reconsume_times, msg.prepared_transaction_offset,
                )  # fmt: skip
            except AppendError:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if topic == SCHEDULE_TOPIC:
            tags_code = self._deliver_time(pb, now_ms)
        else:
            tc = msg.tags_code
            tags_code = tc if tc is not None else self._tags_code(pb)
        if dispatch_cq:
            cq = self.consume_queues.get(key) or self._find_or_create_cq(topic, qid)
            cq.put(phy, size, tags_code, qoff)
            self.topic_queue_table[key] = qoff + 1
        if self._index_inline and tran != 12 and (b"KEYS\x01" in pb or b"UNIQ_KEY\x01" in pb):
            keys = _record_keys(pb)
            if keys:
                self.index.put_hashes(_key_hashes(info[1], info[2], keys), phy, now_ms, now_ms)
        end = phy + size
        st = self.state
        if st is not None:
            st.words[_MAX_PHY_WORD] = end
        listener = self.arrival_listener
        if listener is not None and dispatch_cq:
            listener(topic, qid, qoff + 1, tags_code, now_ms)
        self.put_times_total += 1
        self.put_size_total += size
        return PutMessageResult(
            PutMessageStatus.PUT_OK, phy, size, qoff, now_ms, 1, end, store_host
        )

    def _deliver_time(self, pb: bytes, store_ts: int) -> int:
        lvl = prop_value(pb, b"DELAY\x01") or b""
        delays = self._delays
        n = min(max(int(lvl), 1), len(delays)) if lvl.isdigit() else 1
        return store_ts + delays[n - 1]

    # ---- HA slave: commit-log bytes from the master -----------------------------------------
    def append_to_commit_log(self, start: int, data: bytes | memoryview, now_ms: int) -> bool:
        """The raw commit-log bytes a master sent for offset `start` (CommitLog.appendData), then
        the reput that gives complete records their consume-queue units; False when `start` is
        not this log's end or the bytes do not fit its file (the HA client reconnects)."""
        if not self._running:
            return False
        if not data:
            return True
        cl = self.commitlog
        if cl.mfq.files and start != cl.max_offset:
            return False
        mf = cl.mfq.get_last_mapped_file(start)  # the first file where the master's starts
        if mf is None or mf.file_from_offset + mf.wrote_position != start:
            return False
        p = mf.wrote_position
        n = len(data)
        if p + n > mf.file_size:
            return False
        if p == 0:
            self._on_new_file()
        mf.mm[p : p + n] = data
        mf.wrote_position = p + n
        cl._cur = mf if mf.wrote_position < mf.file_size else None
        self._reput(now_ms)
        return True

    def _reput(self, now_ms: int) -> int:
        """ReputMessageService on a slave: dispatch every complete record past the reput offset
        (consume-queue unit, index when built here), one arrival notice per queue and tags code
        with its new max, then publish the new end as max_phy; a record still arriving stops
        it. The number dispatched."""
        cl = self.commitlog
        end = cl.max_offset
        start = max(self._reput_offset, cl.min_offset)  # an empty slave's first file starts later
        arrivals: dict[tuple[str, int, int], int] = {}
        n = 0
        for req in cl.walk(start, False, end):
            self._dispatch(req, -1, now_ms)
            if req.sys_flag & 0xC not in _ROLLBACK_OR_PREPARED:
                qoff = req.queue_offset + 1
                self.topic_queue_table[(req.topic, req.queue_id)] = qoff
                arrivals[(req.topic, req.queue_id, req.tags_code)] = qoff
            cl.last_store_timestamp = req.store_timestamp
            n += 1
        pos = max(cl.walk_end, start)
        if pos < end and self._bad_record_at(pos, end):
            log.error("reput: no valid record at phy=%d below end=%d: stopped", pos, end)
        listener = self.arrival_listener
        if listener is not None:
            for (topic, qid, tc), qoff in arrivals.items():
                listener(topic, qid, qoff, tc, now_ms)
        if n:
            self.put_times_total += n
            self.put_size_total += pos - start
        self._reput_offset = pos
        st = self.state
        if st is not None:
            st.words[_MAX_PHY_WORD] = pos
        return n

    def _bad_record_at(self, pos: int, end: int) -> bool:
        """True when the bytes at pos are neither a record still arriving nor a file's end
        blank waiting for the next file (so the reput stopped at a bad record)."""
        mf = self.commitlog.mfq.find_mapped_file_by_offset(pos)
        if mf is None:
            return False
        p = pos - mf.file_from_offset
        if pos + 8 > end or p + 8 > mf.file_size:
            return False
        total, magic = _TOTAL_MAGIC.unpack_from(mf.mv, p)
        if magic == BLANK_MAGIC_CODE:  # a file's end: the next file has not arrived yet
            return False
        return magic != MESSAGE_MAGIC_CODE or pos + total <= end

    def _apply_delay(self, msg: MessageExtBrokerInner, pb: bytes) -> bytes:
        """Park a delayed message in SCHEDULE_TOPIC_XXXX (CommitLog.asyncPutMessage)."""
        raw = prop_value(pb, b"DELAY\x01")
        level = java_int(raw) if raw is not None else None
        if level is None or level <= 0:
            return pb
        props = (
            msg.properties
            if msg.properties_string is None
            else string_to_properties(pb.decode("utf-8", "replace"))
        )
        level = min(level, len(self._delays))
        props["DELAY"] = str(level)
        props["REAL_TOPIC"] = msg.topic
        props["REAL_QID"] = str(msg.queue_id)
        msg.properties = props
        msg.topic = SCHEDULE_TOPIC
        msg.queue_id = level - 1
        msg.properties_string = None
        return properties_to_string(props).encode()

    def put_messages(self, batch: MessageExtBatch, now_ms: int) -> PutMessageResult:
        """Expand a batch body into consecutive records of one queue (MessageExtBatchEncoder).

        Every item is validated before any is written; when the whole batch fits the current
        file each record is written with one header pack and three copies from the body.
        """
        if not self._accepting:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        if batch.sys_flag & 0xC:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        topic = batch.topic
        info = self._topic_info(topic)
        body = batch.body
        if info is None or len(body) > self.cfg.maxMessageSize or topic == SCHEDULE_TOPIC:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        raw = body if body.__class__ is bytes else bytes(body)
        bprops = batch.batch_properties
        bp = bprops if bprops.__class__ is bytes else bprops.encode()  # type: ignore[attr-defined]
        delay = prop_value(bp, b"DELAY\x01") if bp and b"DELAY\x01" in bp else None
        if delay is not None:
            level = java_int(delay)  # asyncPutMessages: a delayed batch (its own DELAY) is
            if level is None or level > 0:  # refused, and one getDelayTimeLevel cannot parse
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        tb, pre, pre_h = info
        tl = len(tb)
        qid = batch.queue_id
        key = (topic, qid)
        qoff0 = self.topic_queue_table.get(key, 0)
        born_host = batch.born_host
        store_host = batch.store_host
        cl = self.commitlog
        mf = cl._cur
        n_raw = len(raw)
        # a record is at most 69 + tl + len(bp) bytes longer than its item (>= 22 bytes)
        bound = n_raw + n_raw // 22 * (69 + tl + len(bp))
        if (
            mf is not None
            and bound + 8 <= mf.file_size - mf.wrote_position
            and len(born_host) == 8
            and len(store_host) == 8
        ):
            fast = self._write_batch_fast(batch, raw, bp, info, mf, qoff0, now_ms)
            if isinstance(fast, PutMessageStatus):
                return PutMessageResult(fast)
            units, items = fast
            qoff = qoff0 + len(units) // 3
        else:
            checked = _batch_items(raw, bp, 90 + tl)
            if isinstance(checked, PutMessageStatus):
                return PutMessageResult(checked)
            items = checked[0]
            slow = self._write_batch_slow(batch, raw, bp, tb, items, qoff0, now_ms)
            if slow is None:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
            units = slow
            qoff = qoff0 + len(units) // 3
        cl.last_store_timestamp = now_ms
        n = qoff - qoff0
        cq = self.consume_queues.get(key) or self._find_or_create_cq(topic, qid)
        cq.put_many(units, qoff0)
        self.topic_queue_table[key] = qoff
        offsets = units[0::3]
        if self._index_inline:
            self._index_batch(raw, bp, items[:n], offsets, pre, pre_h, now_ms)
        end = offsets[-1] + units[-2]
        st = self.state
        if st is not None:
            st.words[_MAX_PHY_WORD] = end
        listener = self.arrival_listener
        if listener is not None:
            # one notice per distinct tags code, with the queue's new max (what the holds need)
            for tc in dict.fromkeys(units[2::3]):
                listener(topic, qid, qoff, tc, now_ms)
        self.put_times_total += n
        self.put_size_total += end - offsets[0]
        return PutMessageResult(
            PutMessageStatus.PUT_OK, offsets[0], end - offsets[0], qoff0, now_ms, n, end,
            store_host, offsets,
        )  # fmt: skip

    def _write_batch_fast(
        self,
        batch: MessageExtBatch,
        raw: bytes,
        bp: bytes,
        info: tuple[bytes, bytes, int],
        mf: MappedFile,
        qoff: int,
        now_ms: int,
    ) -> tuple[list[int], list[_BatchItem]] | PutMessageStatus:
        """Validate every item, then write the whole batch into mf with one copy.

        A record is [88-byte head][BODY][topic][PROPLEN PROPS] and an item is [TOTAL MAGIC CRC
        FLAG BODYLEN][BODY][PROPLEN PROPS]: per item one unpack, one pack of the head and pieces
        taken from the body; the pieces are joined and copied once after the last item passed,
        so a rejected batch writes nothing. The caller checked the batch fits mf.
        Returns (CQ units, items when the index is built here) or the rejecting status.
        """
        tb = info[0]
        base = 90 + len(tb)
        extra = len(bp)
        sep_bp = b"\x02" + bp
        fbase = mf.file_from_offset
        p0 = mf.wrote_position
        phy = fbase + p0
        tail = _REC_TAIL.pack(
            batch.sys_flag & ~0x30, batch.born_timestamp, batch.born_host, now_ms,
            batch.store_host, batch.reconsume_times, 0,
        )  # fmt: skip
        qid = batch.queue_id
        bp_tags = prop_value(bp, b"TAGS\x01") if bp else None
        # items whose properties start with tag_pre (b"TAGS\x01<value>\x02") have last_tc;
        # b"TAGS\x01\x02" (empty tags, code 0) is what a general lookup gives for it as well.
        # pr is an item's props piece: PROPLEN + PROPS, or PROPS alone with batch properties.
        tag_at = 0 if extra else 2
        # the last tag prefix and body length seen carry over from the previous batch
        tag_pre, tag_end, last_tc = self._tag_memo[tag_at]
        tags_cache = self._tags_cache
        inline = self._index_inline
        items: list[_BatchItem] = []
        units: list[int] = []
        pieces: list[bytes | memoryview] = []
        n_raw = len(raw)
        ub, item_unpack = self._unpack_memo
        head = _REC_HEAD.pack
        rv = memoryview(raw)  # body pieces as views: crc32 and the join read them in place
        pos = 0
        try:
            while pos < n_raw:
                try:  # FLAG, body length, PROPLEN in one unpack, for the last body length seen
                    flag, bl, pl = item_unpack(raw, pos)
                except struct_error:
                    bl = -1
                if bl != ub:
                    bl = _I32_UNPACK(raw, pos + 16)[0]
                    if bl < 0 or pos + 22 + bl > n_raw:
                        break
                    item_unpack = _item_unpacker(bl)
                    ub = bl
                    flag, bl, pl = item_unpack(raw, pos)
                a = pos + 20
                pp = a + bl
                pe = pp + 2 + pl  # past the end of raw: the loop ends with pos != n_raw
                b = rv[a:pp]
                if extra:  # item props + (separator) + batch props
                    rpl = pl + extra + (1 if pl and raw[pe - 1] != 2 else 0)
                    if rpl > 32767:
                        break
                    size = base + bl + rpl
                    pr = raw[pp + 2 : pe]
                    pieces += (
                        head(size, MESSAGE_MAGIC_CODE, crc32(b) & 0x7FFFFFFF, qid, flag, qoff,
                             phy, tail, bl),
                        b, tb, _I16.pack(rpl), pr, sep_bp if rpl - pl > extra else bp,
                    )  # fmt: skip
                else:
                    if pl > 32767:
                        break
                    rpl = pl
                    size = base + bl + pl
                    pr = raw[pp:pe]
                    pieces += (
                        head(size, MESSAGE_MAGIC_CODE, crc32(b) & 0x7FFFFFFF, qid, flag, qoff,
                             phy, tail, bl),
                        b, tb, pr,
                    )  # fmt: skip
                if pr[tag_at:tag_end] == tag_pre:
                    tc = last_tc
                else:
                    tc = 0
                    tags = prop_value(pr[tag_at:], b"TAGS\x01")
                    if tags is None:
                        tags = bp_tags
                    if tags:
                        c = tags_cache.get(tags)
                        tc = c if c is not None else self._tag_hash(tags)
                        te = tag_at + 5 + len(tags)
                        if pr.startswith(b"TAGS\x01", tag_at) and pr[te : te + 1] == b"\x02":
                            tag_pre = pr[tag_at : te + 1]
                            tag_end = te + 1
                            last_tc = tc
                units += (phy, size, tc)
                if inline:
                    items.append((pos, flag, bl, pl, rpl))
                phy += size
                qoff += 1
                pos = pe
        except (ValueError, IndexError, struct_error):
            pos = -1
        # a bad item: _batch_items names the first bad item's status, checked in the same order
        # as always (an item's DELAY is stored as it is, as MessageExtBatchEncoder does)
        if pos != n_raw or not units:
            checked = _batch_items(raw, bp, base)
            if isinstance(checked, PutMessageStatus):
                return checked
            if pos != n_raw:  # not reached: both passes apply the same checks
                return PutMessageStatus.MESSAGE_ILLEGAL
        p = phy - fbase
        mf.mm[p0:p] = b"".join(pieces)
        mf.wrote_position = p
        self._tag_memo[tag_at] = (tag_pre, tag_end, last_tc)
        self._unpack_memo = (ub, item_unpack)
        return units, items

    def _write_batch_slow(
        self,
        batch: MessageExtBatch,
        raw: bytes,
        bp: bytes,
        tb: bytes,
        items: list[_BatchItem],
        qoff: int,
        now_ms: int,
    ) -> list[int] | None:
        """Append validated items one record at a time (a batch near a file roll, IPv6 hosts)."""
        cl = self.commitlog
        mv = memoryview(raw)
        units: list[int] = []
        sys_flag = batch.sys_flag & ~0x30
        for start, flag, bl, pl, rpl in items:
            a = start + 22 + bl
            ip = raw[a : a + pl]
            if rpl != pl:
                ip = ip + bp if rpl - pl == len(bp) else ip + b"\x02" + bp
            try:
                phy, size = cl.append(
                    tb, mv[start + 20 : start + 20 + bl], ip, batch.queue_id, flag, qoff,
                    sys_flag, batch.born_timestamp, batch.born_host, now_ms, batch.store_host,
                    batch.reconsume_times, 0,
                )  # fmt: skip
            except AppendError:
                if not units:
                    return None
                break
            tags = prop_value(ip, b"TAGS\x01")
            units += (phy, size, java_hash_bytes(tags) if tags else 0)
            qoff += 1
        return units

    def _index_batch(
        self,
        raw: bytes,
        bp: bytes,
        items: list[_BatchItem],
        phys: list[int],
        pre: bytes,
        pre_h: int,
        now_ms: int,
    ) -> None:
        """Index entries (UNIQ_KEY, then KEYS) of a batch's records, hashed in one pass."""
        keys: list[bytes] = []
        kphys: list[int] = []
        for (start, _flag, bl, pl, rpl), phy in zip(items, phys, strict=True):
            a = start + 22 + bl
            ip = raw[a : a + pl]
            if rpl != pl:
                ip = ip + bp if rpl - pl == len(bp) else ip + b"\x02" + bp
            ks = _record_keys(ip)
            if ks:
                keys += ks
                kphys += [phy] * len(ks)
        if keys:
            hashes = _key_hashes(pre, pre_h, keys)
            self.index.put_hash_batch(hashes, kphys, [now_ms] * len(hashes), now_ms)

    # ---- flush / tick ----------------------------------------------------------------------
    def flush(self, now_ms: int = 0) -> int:
        """Flush the commit log; returns the flushed offset."""
        with self._flush_mu:
            off = self.commitlog.flush(0)
            self._after_flush()
        return off

    def flush_logics(self, least_pages: int = 0, sync: RangeSync | None = None) -> bool:
        """Flush the consume queues (files with >= least_pages dirty pages; 0 = every one),
        then the checkpoint; True when no consume queue was left dirty.

        `sync(file, start, end)` msyncs a range (the consume-queue flush thread's, through
        ctypes); None = mmap.flush on this thread. The logics timestamp advances only when
        nothing was left dirty, to the store time read before the round.
        """
        stamp = self.commitlog.last_store_timestamp  # every unit of a record stored by now is in
        complete = True
        for cq in list(self.consume_queues.values()):
            if not cq.mfq.flush_ranges(least_pages, sync):
                complete = False
        cp = self.checkpoint
        if cp is not None:
            if complete:
                cp.logics_msg_timestamp = max(cp.logics_msg_timestamp, stamp)
            full = self.index.files[:-1]
            if full:
                cp.index_msg_timestamp = max(cp.index_msg_timestamp, full[-1].end_ts)
            cp.flush(sync)
        return complete

    def publish_stats(self) -> None:
        """Write the put counters into the stats page (the writer owns them)."""
        sp = self.stats_page
        if sp is not None:
            sp.set_pair(OFF_PUT_TIMES, self.put_times_total, self.put_size_total)

    def _stop_flusher(self) -> None:
        self._deleter.join()
        for fl in (self._allocator, self._flusher, self._cq_flusher):
            if fl is not None:
                fl.close()
        self._flusher = self._cq_flusher = None
        self._allocator = None

    def _after_flush(self, stamp: int | None = None) -> None:
        """Publish the flushed offset; `stamp`: store time of the last record flushed (default:
        the last appended, right when the whole log was flushed on this thread)."""
        cp = self.checkpoint
        if stamp is None:
            stamp = self.commitlog.last_store_timestamp
        if cp is not None and stamp:
            cp.physic_msg_timestamp = stamp
        if self.state is not None:
            self.state.set(OFF_FLUSHED_PHY, self.commitlog.flushed_offset)

    def tick(self, now_ms: int) -> int:
        """Periodic work: async flush, CQ flush + checkpoint, retention; returns ms to next tick."""
        cfg = self.cfg
        if self._index_disp is not None:
            self.dispatch_index(now_ms)
        self.publish_stats()
        flushing = False
        fl = self._flusher
        if fl is not None:
            # FlushRealTimeService: every flushIntervalCommitLog, when flushCommitLogLeastPages
            # pages are dirty (any, every flushCommitLogThoroughInterval), wake the flush thread
            if now_ms - self._last_flush_ms >= cfg.flushIntervalCommitLog:
                cl = self.commitlog
                dirty = cl.max_offset // OS_PAGE_SIZE - cl.flushed_offset // OS_PAGE_SIZE
                thorough = now_ms - self._last_thorough_ms >= cfg.flushCommitLogThoroughInterval
                if thorough:
                    self._last_thorough_ms = now_ms
                if dirty >= cfg.flushCommitLogLeastPages or (
                    thorough and cl.max_offset > cl.flushed_offset
                ):
                    fl.request()
                self._last_flush_ms = now_ms
        elif not cfg.is_sync_flush:
            cl = self.commitlog
            if self._flush_target > cl.flushed_offset:
                # FlushRealTimeService, a slice per tick: one msync of everything written in
                # flushIntervalCommitLog stalled the writer (and its requests) for up to ~170 ms
                cl.flush(0, FLUSH_BYTES_PER_TICK)
                self._after_flush()
            elif now_ms - self._last_flush_ms >= cfg.flushIntervalCommitLog:
                thorough = now_ms - self._last_thorough_ms >= cfg.flushCommitLogThoroughInterval
                if thorough:
                    self._last_thorough_ms = now_ms
                before = cl.flushed_offset
                cl.flush(0 if thorough else cfg.flushCommitLogLeastPages, FLUSH_BYTES_PER_TICK)
                # a round that started (enough pages were dirty) goes on in slices up to here
                self._flush_target = cl.max_offset if cl.flushed_offset != before else before
                self._after_flush()
                self._last_flush_ms = now_ms
            flushing = self._flush_target > cl.flushed_offset
        if cfg.is_sync_flush and self.commitlog.flushed_offset < self.commitlog.max_offset:
            self.flush(now_ms)
        if now_ms - self._last_cq_flush_ms >= cfg.flushIntervalConsumeQueue:
            self._last_cq_flush_ms = now_ms
            least = cfg.flushConsumeQueueLeastPages
            if now_ms - self._last_cq_thorough_ms >= cfg.flushConsumeQueueThoroughInterval:
                self._last_cq_thorough_ms = now_ms
                least = 0
            cqf = self._cq_flusher
            if cqf is not None:
                cqf.request_round(least)
            else:
                self.flush_logics(least)
        if now_ms - self._last_clean_ms >= cfg.cleanResourceInterval:
            self._last_clean_ms = now_ms
            self.clean_expired(now_ms)
            if self._allocator is not None:
                self._allocator.request()
            else:
                self.commitlog.mfq.preallocate_next()
        waits = [
            cfg.flushIntervalCommitLog - (now_ms - self._last_flush_ms),
            cfg.flushIntervalConsumeQueue - (now_ms - self._last_cq_flush_ms),
            cfg.cleanResourceInterval - (now_ms - self._last_clean_ms),
        ]
        # without the allocate thread, its warm-up here: a slice per tick so appends never wait long
        warming = self._allocator is None and self.commitlog.mfq.warm_next_step(WARM_BYTES_PER_TICK)
        if warming or flushing:
            waits.append(WARM_STEP_INTERVAL_MS)
        return max(1, min(waits))

    # ---- retention ---------------------------------------------------------------------------
    def _is_time_to_delete(self, now_ms: int) -> bool:
        hour = time.localtime(now_ms // 1000).tm_hour
        return any(int(h) == hour for h in self.cfg.deleteWhen.split(";") if h.strip())

    def _file_last_ts(self, i: int) -> int:
        files = self.commitlog.mfq.files
        if i + 1 < len(files):
            t = self.commitlog.first_store_timestamp(files[i + 1])
            if t >= 0:
                return t
        try:
            return int(os.path.getmtime(files[i].path) * 1000)
        except OSError:
            return 0

    def execute_delete_files_manually(self) -> None:
        """DELETE_EXPIRED_COMMITLOG: the next retention passes delete expired commit-log files
        whatever the hour (CleanCommitLogService.executeDeleteFilesManually)."""
        self.manual_delete_times = MAX_MANUAL_DELETE_FILE_TIMES

    def clean_expired(self, now_ms: int) -> int:
        """CleanCommitLogService + CleanConsumeQueueService; returns commit-log files deleted."""
        cfg = self.cfg
        ratio = self.disk_usage(self.commitlog.path) * 100
        clean_immediately = ratio >= cfg.diskSpaceCleanForciblyRatio
        space_full = ratio >= cfg.diskMaxUsedSpaceRatio or clean_immediately
        manual = self.manual_delete_times > 0
        if not (self._is_time_to_delete(now_ms) or space_full or manual):
            return 0
        if manual:
            self.manual_delete_times -= 1
        at_once = cfg.cleanFileForciblyEnable and clean_immediately
        expired_ms = cfg.fileReservedTime * 3_600_000
        files = self.commitlog.mfq.files
        n = 0
        for i in range(len(files) - 1):  # never the file being written
            if n >= DELETE_FILES_BATCH_MAX:
                break
            if at_once or now_ms >= self._file_last_ts(i) + expired_ms:
                n += 1
            else:
                break
        if n:
            self.commitlog.mfq.delete_first(n, self._deleter.unlink)
            log.info(
                "retention deleted commitlog files=%d min_offset=%d", n, self.commitlog.min_offset
            )
            self._clean_logics()
            self._publish()
            if self.state is not None:
                self.state.bump_generation()
        return n

    def _clean_logics(self) -> None:
        min_phy = self.commitlog.min_offset
        for cq in self.consume_queues.values():
            cq.delete_expired_files(min_phy)
        if self._index_mode != "process":  # else the index process deletes its own files
            self.index.delete_expired(min_phy)

    def clean_expired_consume_queues(self) -> int:
        """Drop consume queues whose last unit ends below the commit log's min offset
        (cleanExpiredConsumerQueue); an empty queue stays. Returns how many were dropped."""
        min_phy = self.commitlog.min_offset
        expired = [
            key
            for key, cq in self.consume_queues.items()
            if cq.get_max_offset_in_queue() > 0 and cq.max_phy_offset < min_phy
        ]
        self._drop_queues(expired)
        return len(expired)

    def delete_topics(self, topics: set[str] | list[str]) -> None:
        """Drop the consume queues of these topics."""
        self._drop_queues([k for k in self.consume_queues if k[0] in topics])
        for t in topics:
            shutil.rmtree(os.path.join(self.cq_root, t), ignore_errors=True)

    def _drop_queues(self, keys: list[tuple[str, int]]) -> None:
        """Unmap, delete and forget these consume queues; readers rescan."""
        for key in keys:
            self.consume_queues.pop(key).destroy()
            self.topic_queue_table.pop(key, None)
            shutil.rmtree(os.path.join(self.cq_root, key[0], str(key[1])), ignore_errors=True)
        if keys and self.state is not None:
            self.state.bump_generation()

    # ---- check -------------------------------------------------------------------------------
    def check(self) -> list[str]:
        """Cross-validate commit log, consume queues, index and checkpoint; list problems."""
        return check_store(self)


def disk_usage_ratio(path: str) -> float:
    """Used share (0..1) of the file system holding path (0.0 when it cannot be read)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return 0.0
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return 0.0
    return (total - st.f_bavail * st.f_frsize) / total


def check_store(store: DefaultMessageStore | MessageStoreReader) -> list[str]:
    """Problems found walking every record and every consume-queue unit."""
    problems: list[str] = []
    cl = store.commitlog
    min_phy, max_phy = store.min_phy_offset, store.max_phy_offset
    per_queue: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
    count = 0
    if cl.mfq.files:
        for req in cl.walk(min_phy, True):
            if req.phy_offset >= max_phy:
                break
            count += 1
            if req.sys_flag & 0xC not in _ROLLBACK_OR_PREPARED:
                per_queue.setdefault((req.topic, req.queue_id), []).append(
                    (req.queue_offset, req.phy_offset, req.size)
                )
        if cl.walk_end < max_phy:
            problems.append(
                f"commitlog: valid records end at {cl.walk_end}, max offset is {max_phy}"
            )
    for (topic, qid), recs in per_queue.items():
        cq = store._cq(topic, qid)
        if cq is None:
            problems.append(f"consumequeue {topic}/{qid}: missing ({len(recs)} records)")
            continue
        prev = -1
        for qoff, phy, size in recs:
            if prev >= 0 and qoff != prev + 1:
                problems.append(f"commitlog {topic}/{qid}: queue offset {qoff} follows {prev}")
            prev = qoff
            if qoff < cq.get_min_offset_in_queue():
                continue
            u = cq.get_unit(qoff)
            if u is None or u[0] != phy or u[1] != size:
                problems.append(
                    f"consumequeue {topic}/{qid}: unit {qoff} is {u}, record at {phy} size {size}"
                )
                break
        if recs and cq.get_max_offset_in_queue() != recs[-1][0] + 1:
            problems.append(
                f"consumequeue {topic}/{qid}: max offset {cq.get_max_offset_in_queue()}, "
                f"commitlog says {recs[-1][0] + 1}"
            )
    queues = store.consume_queues if isinstance(store, DefaultMessageStore) else {}
    for (topic, qid), cq in queues.items():
        lo, hi = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
        for off in range(lo, hi):
            u = cq.get_unit(off)
            if u is None:
                problems.append(f"consumequeue {topic}/{qid}: unit {off} unreadable")
                break
            if u[1] == PRE_BLANK_SIZE:
                continue
            if u[0] + u[1] > max_phy:
                problems.append(
                    f"consumequeue {topic}/{qid}: unit {off} points past the commitlog ({u[0]})"
                )
                break
            if u[0] >= min_phy and cl.record_size_at(u[0]) != u[1]:
                problems.append(
                    f"consumequeue {topic}/{qid}: unit {off} does not point at a record"
                )
                break
    for f in store.index.files:
        if f.index_count > 1 and f.end_phy >= max_phy:
            problems.append(
                f"index {f.file_name}: end phy {f.end_phy} beyond commitlog max {max_phy}"
            )
        if f.index_count > f.index_num:
            problems.append(f"index {f.file_name}: count {f.index_count} beyond capacity")
    if isinstance(store, DefaultMessageStore) and store.checkpoint is not None:
        cp = store.checkpoint
        last = cl.last_store_timestamp
        if last and cp.physic_msg_timestamp > last:
            problems.append(
                f"checkpoint: physic timestamp {cp.physic_msg_timestamp} after last record {last}"
            )
    if isinstance(store, DefaultMessageStore):
        for key, nxt in store.topic_queue_table.items():
            cq = store.consume_queues.get(key)
            if cq is not None and cq.get_max_offset_in_queue() != nxt:
                problems.append(
                    f"queue table {key}: next offset {nxt} != cq max {cq.get_max_offset_in_queue()}"
                )
    _ = count
    return problems


# ---- read-only view in another process --------------------------------------------------------
class MessageStoreReader(_StoreReadMixin):
    """A read-only view of a store written by another process."""

    def __init__(self, cfg: StoreConfig) -> None:
        self.cfg = cfg
        self.root = cfg.storePathRootDir
        self.commitlog = CommitLog(cfg, writable=False)
        self.cq_root = os.path.join(self.root, "consumequeue")
        self.index = IndexService(self.root, cfg.maxHashSlotNum, cfg.maxIndexNum, writable=False)
        self.state = StatePage(os.path.join(self.root, "state"), writable=False)
        self._queues: dict[tuple[str, int], ConsumeQueueView] = {}
        self._generation = -1
        self._cl_generation = -1
        self.commitlog.mfq.refresh()
        self.index.refresh()

    def _sync_generation(self) -> bool:
        g = self.state.generation
        if g != self._generation:
            self._generation = g
            return True
        return False

    def _cl_data(self, phy: int, size: int) -> memoryview | None:
        data = self.commitlog.get_data(phy, size)
        if data is None:
            self.commitlog.mfq.refresh()
            data = self.commitlog.get_data(phy, size)
        return data

    def _max_phy(self) -> int:
        return self.state.max_phy

    def _min_phy(self) -> int:
        return self.state.min_phy

    @property
    def flushed_offset(self) -> int:
        """Published flushed offset."""
        return self.state.flushed_phy

    def _refresh_index(self) -> None:
        self.index.refresh()

    @property
    def indexed_offset(self) -> int:
        """What the index owner published ("tick"/"process"), else the max offset."""
        if self.cfg.index_mode in ("tick", "process"):
            return self.state.get(OFF_INDEX_PHY)
        return self.state.max_phy

    def _cq(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        changed = self._sync_generation()
        if changed:
            self.commitlog.mfq.refresh()
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            if not os.path.isdir(os.path.join(self.cq_root, topic, str(queue_id))):
                return None
            cq = ConsumeQueueView(
                self.cq_root, topic, queue_id, self.cfg.mappedFileSizeConsumeQueue
            )
            self._queues[(topic, queue_id)] = cq
            changed = True
        max_phy = self.state.max_phy
        cq.sync(max_phy, self.state.min_phy, changed)
        return cq

    @property
    def consume_queues(self) -> dict[tuple[str, int], ConsumeQueueView]:
        """Queues opened so far."""
        return self._queues

    def check(self) -> list[str]:
        """check_store on this view."""
        return check_store(self)

    def close(self) -> None:
        """Unmap everything."""
        self.commitlog.close()
        for cq in self._queues.values():
            cq.close()
        self.index.close()
        self.state.close()
        if self.stats_page is not None:
            self.publish_stats()
            self.stats_page.close()
            self.stats_page = None


# ---- async flush --------------------------------------------------------------------------------
# ---- group commit -----------------------------------------------------------------------------
class GroupCommit:
    """Thread-safe SYNC_FLUSH helper (GroupCommitService): one fsync covers many writers.

    Writers append under `store.put_lock`, release it, then park on a private lock until the
    flushed offset covers their record. The flusher thread takes every record appended since the
    last flush in one fdatasync per touched file (only those files' dirty pages are written; the
    call releases the GIL so writers keep appending meanwhile), then releases every covered
    waiter at once.
    """

    def __init__(self, store: DefaultMessageStore, timeout_s: float | None = None) -> None:
        self.store = store
        self.timeout_s = timeout_s if timeout_s is not None else store.cfg.syncFlushTimeout / 1000
        self._mu = threading.Lock()
        self._kick = threading.Lock()
        self._kick.acquire()  # released (once) when a waiter arrives
        self._kicked = False
        self._waiters: list[tuple[int, Any]] = []
        self._flushed = store.flushed_offset
        self._stop = False
        self.fsyncs = 0
        self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
        self._thread.start()

    def put_and_wait(self, msg: MessageExtBrokerInner, now_ms: int) -> PutMessageResult:
        """Put under the store lock, then wait (without it) until a flush covers the record."""
        with self.store.put_lock:
            res = self.store.put_message(msg, now_ms)
        if res.status is not PutMessageStatus.PUT_OK:
            return res
        if not self.wait_flushed(res.end_offset):
            res.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        return res

    def wait_flushed(self, end_offset: int) -> bool:
        """Block until flushed >= end_offset (or timeout)."""
        if self._flushed >= end_offset:
            return True
        lk = threading.Lock()
        lk.acquire()
        with self._mu:
            if self._flushed >= end_offset:
                return True
            if self._stop:
                return False
            self._waiters.append((end_offset, lk))
            if not self._kicked:
                self._kicked = True
                self._kick.release()
        lk.acquire(timeout=self.timeout_s)
        return self._flushed >= end_offset

    def _flush_once(self) -> int:
        store = self.store
        cl = store.commitlog
        with store.put_lock:
            target = cl.max_offset
            todo = [
                (mf, min(mf.wrote_position, target - mf.file_from_offset))
                for mf in cl.mfq.files
                if mf.flushed_position < mf.wrote_position and mf.file_from_offset < target
            ]
        for mf, upto in todo:
            mf.sync_data()  # fdatasync: the file's dirty pages, GIL released
            mf.flushed_position = max(mf.flushed_position, upto)
        self.fsyncs += 1
        with store.put_lock:
            cl.mfq.flushed_where = max(cl.mfq.flushed_where, target)
            store._after_flush()
        return target

    def _run(self) -> None:
        while True:
            self._kick.acquire()
            with self._mu:
                self._kicked = False
                waiters = self._waiters
                self._waiters = []
                if self._stop:
                    for _end, lk in waiters:
                        lk.release()
                    return
            if not waiters:
                continue
            target = self._flush_once()
            keep = []
            with self._mu:
                self._flushed = max(self._flushed, target)
            for item in waiters:
                if item[0] <= target:
                    item[1].release()
                else:
                    keep.append(item)
            if keep:
                with self._mu:
                    self._waiters.extend(keep)
                    if not self._kicked:
                        self._kicked = True
                        self._kick.release()

    def close(self) -> None:
        """Stop the flusher thread (waiters still parked are released as not flushed)."""
        with self._mu:
            self._stop = True
            if not self._kicked:
                self._kicked = True
                self._kick.release()
        self._thread.join(timeout=5)
