"""Dispatching stored records: DefaultMessageStore's ReputMessageService and its dispatchers.

Mirrors store/DefaultMessageStore.java ReputMessageService (doReput: records past the reput
offset to the dispatchers, the arrival notices, the published max offset),
CommitLogDispatcherBuildConsumeQueue and CommitLogDispatcherBuildIndex, RocketMQ 4.9.x.

`dispatch` is the one path every record takes to its consume-queue unit and (index "sync") its
index entries: the commit log's put calls it for the record it just wrote, a slave's reput and
recovery's re-dispatch for each record they read back (CommitLogWalk), and the index dispatch
that follows the commit log ("tick" / "process") uses the same key rule (protocol.record).
A unit goes to every record that is not a prepared or rolled-back transaction message; index
entries to every one not rolled back.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final

from protocol.message import (
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from protocol.message_properties import index_keys
from protocol.record import BLANK_MAGIC_CODE, MESSAGE_MAGIC_CODE, read_total_and_magic
from store.build_index_dispatcher import CommitLogDispatcherBuildIndex
from store.commitlog import CommitLog
from store.consume_queue_table import ConsumeQueueTable
from store.running_flags import RunningFlags
from store.state_page import MAX_PHY_WORD, StatePage
from store.store_stats_service import StoreStatsService

log = logging.getLogger(__name__)

_PREPARED: Final = TRANSACTION_PREPARED_TYPE
_ROLLBACK: Final = TRANSACTION_ROLLBACK_TYPE
ArrivalListener = Callable[[str, int, int, int, int], None]


class ReputMessageService:
    """The consume-queue and index dispatch of stored records, and what readers may use."""

    def __init__(self, cq_table: ConsumeQueueTable, index: CommitLogDispatcherBuildIndex,
                 flags: RunningFlags, stats: StoreStatsService) -> None:  # fmt: skip
        self.cq_table = cq_table
        self.index = index
        self.index_inline = index.inline
        self.flags = flags  # WRITE_INDEX_FILE_ERROR when entries cannot be written
        self.stats = stats
        self.state: StatePage | None = None  # where the end of what is dispatched is published
        # MessageArrivingListener: (topic, queue id, the queue's next offset, tags code, now)
        self.arrival_listener: ArrivalListener | None = None
        self.reput_offset = 0  # a slave: end of the last record dispatched

    # ---- the dispatchers ---------------------------------------------------------------------
    def has_room(self, topic: str, queue_id: int, queue_offset: int, units: int,
                 keys: int) -> bool:  # fmt: skip
        """`units` consume-queue units from queue_offset and `keys` index entries ("sync") can
        be written without making a file."""
        if units:
            cq = self.cq_table.queues.get((topic, queue_id))
            if cq is None or not cq.has_room(queue_offset, units):
                return False
        return not keys or self.index.has_room(keys)

    def reserve(self, topic: str, queue_id: int, queue_offset: int, units: int, keys: int,
                now_ms: int) -> None:  # fmt: skip
        """Make the files has_room found missing; OSError (a full disk) with nothing written
        but, at most, empty files and pre-blank units (which change no queue offset)."""
        if units:
            cq = self.cq_table.find_or_create(topic, queue_id)
            if not cq.has_room(queue_offset, units):
                cq.reserve(queue_offset, units)
        if keys and not self.index.has_room(keys):
            self.index.reserve(keys, now_ms)

    def dispatch(self, topic: str, queue_id: int, phy: int, size: int, tags_code: int,
                 store_ts: int, queue_offset: int, sys_flag: int, keys: list[bytes] | None,
                 now_ms: int, end: int = -1) -> None:  # fmt: skip
        """doDispatch of one record: its consume-queue unit, then its index entries (keys:
        index_keys of its properties when the index is built here, else None); with `end`
        (the put of this one record) its end published and its arrival notified."""
        tran = sys_flag & TRANSACTION_TYPE_MASK
        to_queue = tran != _PREPARED and tran != _ROLLBACK
        if to_queue:
            cq = self.cq_table.queues.get((topic, queue_id))
            if cq is None:
                cq = self.cq_table.find_or_create(topic, queue_id)
            cq.put(phy, size, tags_code, queue_offset)
        if keys and tran != _ROLLBACK and not self.index.build(topic, keys, phy, store_ts, now_ms):
            self._index_error()
        if end >= 0:
            st = self.state
            if st is not None:
                st.words[MAX_PHY_WORD] = end
            listener = self.arrival_listener
            if to_queue and listener is not None:
                listener(topic, queue_id, queue_offset + 1, tags_code, now_ms)

    def dispatch_batch(self, topic: str, queue_id: int, units: list[int], queue_offset: int,
                       keys: list[bytes], key_phys: list[int], now_ms: int) -> None:  # fmt: skip
        """doDispatch of a batch's records (one queue, no transaction): their units (flat
        (phy, size, tagsCode) triples) in one pack, then their index entries at once."""
        self.cq_table.find_or_create(topic, queue_id).put_many(units, queue_offset)
        if keys and not self.index.build_batch(topic, keys, key_phys, now_ms):
            self._index_error()

    def _index_error(self) -> None:
        """Index entries of a stored record could not be written (IndexService logged why):
        the store takes no more puts until an index file can be written again (RunningFlags'
        WRITE_INDEX_FILE_ERROR, which Java never clears; here the disk check does)."""
        self.flags.make_index_file_error()

    def publish(self, end: int) -> None:
        """Readers may use the commit log up to end (everything below it is dispatched)."""
        st = self.state
        if st is not None:
            st.words[MAX_PHY_WORD] = end

    def published_end(self) -> int | None:
        """What was published last (None: no state page)."""
        st = self.state
        return st.max_phy if st is not None else None

    def notify(self, topic: str, queue_id: int, next_offset: int, tags_code: int,
               now_ms: int) -> None:  # fmt: skip
        """messageArrivingListener.arriving: a record of this queue and tags code arrived."""
        listener = self.arrival_listener
        if listener is not None:
            listener(topic, queue_id, next_offset, tags_code, now_ms)

    # ---- reading records back --------------------------------------------------------------------
    def reput(self, cl: CommitLog, now_ms: int) -> int:
        """doReput on a slave: dispatch every complete record past the reput offset, one
        arrival notice per queue and tags code with its new max, then publish the new end; a
        record still arriving stops it. The number dispatched."""
        end = cl.max_offset
        start = max(self.reput_offset, cl.min_offset)  # an empty slave's first file starts later
        arrivals: dict[tuple[str, int, int], int] = {}
        offsets: dict[tuple[str, int], int] = {}
        inline = self.index_inline
        last_ts = -1
        n = 0
        walk = cl.walk(start, False, end)
        for r in walk:
            keys = index_keys(r.properties) if inline else None
            self.dispatch(r.topic, r.queue_id, r.phy_offset, r.size, r.tags_code,
                          r.store_timestamp, r.queue_offset, r.sys_flag, keys, now_ms)  # fmt: skip
            tran = r.sys_flag & TRANSACTION_TYPE_MASK
            if tran != _PREPARED and tran != _ROLLBACK:
                qoff = r.queue_offset + 1
                offsets[(r.topic, r.queue_id)] = qoff
                arrivals[(r.topic, r.queue_id, r.tags_code)] = qoff
            last_ts = r.store_timestamp
            n += 1
        pos = max(walk.end, start)
        if pos < end and self._bad_record_at(cl, pos, end):
            log.error("reput: no valid record at phy=%d below end=%d: stopped", pos, end)
        if n:
            cl.note_reput(offsets, last_ts)
            self.stats.put_times_total += n
            self.stats.put_size_total += pos - start
        for (topic, qid, tc), qoff in arrivals.items():
            self.notify(topic, qid, qoff, tc, now_ms)
        self.reput_offset = pos
        self.publish(pos)
        return n

    @staticmethod
    def _bad_record_at(cl: CommitLog, pos: int, end: int) -> bool:
        """True when the bytes at pos are neither a record still arriving nor a file's end
        blank waiting for the next file (so the reput stopped at a bad record)."""
        mf = cl.mfq.find_mapped_file_by_offset(pos)
        if mf is None:
            return False
        p = pos - mf.file_from_offset
        if pos + 8 > end or p + 8 > mf.file_size:
            return False
        total, magic = read_total_and_magic(mf.mv, p)
        if magic == BLANK_MAGIC_CODE:  # a file's end: the next file has not arrived yet
            return False
        return magic != MESSAGE_MAGIC_CODE or pos + total <= end

    def redispatch(self, cl: CommitLog, start: int, end: int, index_end: int,
                   now_ms: int) -> tuple[int, int]:  # fmt: skip
        """Recovery: dispatch the records in [start, end) again (index entries only past
        index_end); (records dispatched, store time of the last or -1)."""
        n = 0
        last_ts = -1
        inline = self.index_inline
        for r in cl.walk(start, False):
            if r.phy_offset >= end:
                break
            keys = index_keys(r.properties) if inline and r.phy_offset > index_end else None
            self.dispatch(r.topic, r.queue_id, r.phy_offset, r.size, r.tags_code,
                          r.store_timestamp, r.queue_offset, r.sys_flag, keys, now_ms)  # fmt: skip
            last_ts = r.store_timestamp
            n += 1
        return n, last_ts
