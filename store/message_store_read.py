"""The read half of DefaultMessageStore, shared by the writer and read-only views.

Mirrors store/DefaultMessageStore.java getMessage, queryMessage, lookMessageByOffset,
getOffsetInQueueByTime, getCommitLogData and the queue offset look-ups, RocketMQ 4.9.x.
MessageStoreRead is built from a StoreView: the writer (DefaultMessageStore) or a read-only
view of another process's store (MessageStoreReader), each of which says which consume queue,
commit-log bytes and offsets readers may use; it counts its gets (StoreStatsService).
"""

from __future__ import annotations

import logging
from typing import Final, Protocol

from protocol.message import MessageExt, decode_message_ext
from store.commitlog import (
    CommitLog,
)
from store.config import StoreConfig
from store.consume_queue import (
    CQ_UNIT,
    CQ_UNIT_SIZE,
    PRE_BLANK_SIZE,
    ConsumeQueue,
)
from store.get_message_result import GetMessageResult, GetMessageStatus, whole_batch
from store.index import IndexService, key_hash
from store.index_dispatch import IndexDispatcher
from store.message_filter import CommitLogMessageFilter, MessageFilter
from store.query_message_result import QueryMessageResult
from store.store_stats_service import StoreStatsService

log = logging.getLogger(__name__)


QUERY_TAIL_SCAN_BYTES: Final = 32 << 20  # bound of the unindexed commit-log tail a query scans


class _HashSink:
    """Stands in for the index in a tail scan: keeps phy offsets whose key hash matches."""

    def __init__(self, kh: int, begin_ms: int, end_ms: int) -> None:
        self.kh, self.begin_ms, self.end_ms = kh, begin_ms, end_ms
        self.phys: list[int] = []

    def put_hash_batch(
        self, hashes: list[int], phys: list[int], tss: list[int], now_ms: int
    ) -> int:
        kh, b, e = self.kh, self.begin_ms, self.end_ms
        hits = zip(hashes, phys, tss, strict=True)
        self.phys += [p for h, p, t in hits if h == kh and b <= t <= e]
        return len(hashes)


def _scan_tail(
    cl: CommitLog, kb: bytes, start: int, max_phy: int, begin_ms: int, end_ms: int
) -> list[int]:
    """Phy offsets of records in [start, max_phy) (bounded) with key topic#key = kb."""
    sink = _HashSink(key_hash(kb), begin_ms, end_ms)
    IndexDispatcher(cl, sink, start).catch_up(min(max_phy, start + QUERY_TAIL_SCAN_BYTES), 0)
    return sink.phys


# ---- shared read side ------------------------------------------------------------------------
class StoreView(Protocol):
    """What the read side reads through: the writer, or a read-only view of its files."""

    cfg: StoreConfig
    commitlog: CommitLog

    @property
    def index(self) -> IndexService: ...

    @property
    def max_phy_offset(self) -> int: ...

    @property
    def min_phy_offset(self) -> int: ...

    @property
    def indexed_offset(self) -> int: ...

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None: ...

    def commit_log_data(self, phy: int, size: int) -> memoryview | None: ...

    def refresh_index(self) -> None: ...


class MessageStoreRead:
    """Read operations common to the writer and read-only views."""

    def __init__(self, view: StoreView, stats: StoreStatsService) -> None:
        self.view = view
        self.cfg = view.cfg
        self.commitlog = view.commitlog
        self.stats = stats

    def _cq(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self.view.consume_queue(topic, queue_id)

    def _max_phy(self) -> int:
        return self.view.max_phy_offset

    def _min_phy(self) -> int:
        return self.view.min_phy_offset

    def _cl_data(self, phy: int, size: int) -> memoryview | None:
        return self.view.commit_log_data(phy, size)

    def get_commit_log_data(self, phy: int, max_bytes: int) -> memoryview | None:
        """HA transfer (getCommitLogData): raw commit-log bytes from phy, at most max_bytes,
        never past phy's file nor the published max; None when there is nothing there."""
        end = self._max_phy()
        if phy >= end or phy < self._min_phy():
            return None
        fs = self.cfg.mappedFileSizeCommitLog
        n = min(max_bytes, end - phy, fs - phy % fs)
        return self._cl_data(phy, n) if n > 0 else None

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
        if max_num < 0:  # IndexService.queryOffset: new ArrayList(maxNum) throws
            raise ValueError(f"Illegal Capacity: {max_num}")
        self.view.refresh_index()
        res = QueryMessageResult()
        kb = f"{topic}#{key}".encode()
        max_phy, min_phy = self._max_phy(), self._min_phy()
        # records the index owner has not reached yet are found by scanning the commit-log tail
        indexed = self.view.indexed_offset
        index = self.view.index
        phys = index.query(kb, max_num, begin_ms, end_ms)
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
        if index.files:
            last = index.files[-1]
            res.index_last_update_timestamp = last.end_ts
            res.index_last_update_phyoffset = last.end_phy
        return res

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
        stats = self.stats
        if res.status is GetMessageStatus.FOUND:
            stats.get_found_total += 1
            stats.get_transferred_total += res.message_count
        else:
            stats.get_miss_total += 1
        return res

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
        if max_msgs < 0:  # new GetMessageResult(maxMsgNums): new ArrayList(-1) throws
            raise ValueError(f"Illegal Capacity: {max_msgs}")
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
        by_record = (filter.is_matched_by_commit_log
                     if isinstance(filter, CommitLogMessageFilter) else None)  # fmt: skip
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


class MessageStoreReadSide:
    """The read side of a store's interface, answered by its MessageStoreRead: one half of
    DefaultMessageStore (the writer) and of MessageStoreReader (a reader process's view)."""

    read: MessageStoreRead

    def get_message(
        self, group: str, topic: str, queue_id: int, offset: int, max_msgs: int,
        max_bytes: int | None = None, filter: MessageFilter | None = None, now_ms: int = 0, *,
        count_stats: bool = True,
    ) -> GetMessageResult:  # fmt: skip
        """DefaultMessageStore.getMessage (store.message_store_read)."""
        return self.read.get_message(group, topic, queue_id, offset, max_msgs, max_bytes,
                                     filter, now_ms, count_stats=count_stats)  # fmt: skip

    def get_commit_log_data(self, phy: int, max_bytes: int) -> memoryview | None:
        """getCommitLogData (what the HA service sends)."""
        return self.read.get_commit_log_data(phy, max_bytes)

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """Next queue offset to be written (0 for a missing queue)."""
        return self.read.get_max_offset_in_queue(topic, queue_id)

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        """First readable queue offset (-1 for a missing queue)."""
        return self.read.get_min_offset_in_queue(topic, queue_id)

    def get_commit_log_offset_in_queue(self, topic: str, queue_id: int, offset: int) -> int:
        """Phy offset of the unit at queue offset, or 0."""
        return self.read.get_commit_log_offset_in_queue(topic, queue_id, offset)

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, ts_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP."""
        return self.read.get_offset_in_queue_by_time(topic, queue_id, ts_ms)

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        """Store time of the message at queue offset, -1 if unavailable."""
        return self.read.get_message_store_timestamp(topic, queue_id, offset)

    def get_earliest_message_time(self, topic: str, queue_id: int) -> int:
        """Store time of the message at the queue's min offset, -1 if unavailable."""
        return self.read.get_earliest_message_time(topic, queue_id)

    def select_one_message_by_offset(
        self, phy_offset: int, size: int | None = None
    ) -> memoryview | None:
        """The stored record at phy_offset (its bytes), or None."""
        return self.read.select_one_message_by_offset(phy_offset, size)

    def look_message_by_offset(self, phy_offset: int) -> MessageExt | None:
        """The decoded message at phy_offset, or None."""
        return self.read.look_message_by_offset(phy_offset)

    def check_in_disk_by_commit_offset(self, phy_offset: int) -> bool:
        """True when the record is farther behind the max than the in-memory share of RAM."""
        return self.read.check_in_disk_by_commit_offset(phy_offset)

    def query_message(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int
    ) -> QueryMessageResult:
        """Records indexed under topic#key stored in [begin_ms, end_ms]."""
        return self.read.query_message(topic, key, max_num, begin_ms, end_ms)
