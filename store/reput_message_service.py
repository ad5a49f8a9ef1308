"""Dispatching stored records: DefaultMessageStore's ReputMessageService and dispatchers.

Mirrors store/DefaultMessageStore.java ReputMessageService, CommitLogDispatcherBuildConsumeQueue,
CommitLogDispatcherBuildIndex and store/CommitLog.java appendData (an HA slave), RocketMQ 4.9.x.
"""

from __future__ import annotations

import logging

from protocol.record import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    index_keys,
    read_total_and_magic,
)
from store.build_index_dispatcher import key_hashes
from store.commitlog import (
    ROLLBACK_OR_PREPARED,
    TRANSACTION_ROLLBACK_TYPE,
    DispatchRequest,
)
from store.consume_queue import (
    ConsumeQueue,
)
from store.message_store_fields import MessageStoreFields
from store.state_page import (
    MAX_PHY_WORD,
)

log = logging.getLogger(__name__)




class ReputMessageMixin(MessageStoreFields):
    """ReputMessageService: consume-queue units and index entries of stored records."""

    def _dispatch(
        self, req: DispatchRequest, index_end: int, now_ms: int, notify: bool = True
    ) -> None:
        """Build the CQ unit and index entries of one record (recovery path)."""
        tran = req.sys_flag & 0xC
        if tran not in ROLLBACK_OR_PREPARED:
            cq = self._find_or_create_cq(req.topic, req.queue_id)
            cq.put(req.phy_offset, req.size, req.tags_code, req.queue_offset)
        if (
            self._index_inline
            and tran != TRANSACTION_ROLLBACK_TYPE
            and req.phy_offset > index_end
        ):
            keys = index_keys(req.properties)
            info = self._topic_info(req.topic) if keys else None
            if info is not None:
                hashes = key_hashes(info[1], info[2], keys)
                self.index.put_hashes(hashes, req.phy_offset, req.store_timestamp, now_ms)

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
        try:
            mf = cl.mfq.get_last_mapped_file(start)  # the first file where the master's starts
        except OSError as exc:  # a full disk: the HA client reconnects and tries again
            self.note_create_failed(now_ms, exc)
            return False
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
        try:
            self._reput(now_ms)
        except OSError as exc:  # a consume-queue file: the next bytes' reput goes on from here
            self.note_create_failed(now_ms, exc)
            return True
        self.note_files_created()
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
            if req.sys_flag & 0xC not in ROLLBACK_OR_PREPARED:
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
            st.words[MAX_PHY_WORD] = pos
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
        total, magic = read_total_and_magic(mf.mv, p)
        if magic == BLANK_MAGIC_CODE:  # a file's end: the next file has not arrived yet
            return False
        return magic != MESSAGE_MAGIC_CODE or pos + total <= end
