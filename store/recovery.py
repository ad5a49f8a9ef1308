"""Store recovery at load: DefaultMessageStore.recover with CommitLog.recoverNormally /
recoverAbnormally and DefaultMessageStore.loadConsumeQueue (store/DefaultMessageStore.java,
store/CommitLog.java, RocketMQ 4.9.x).
"""

from __future__ import annotations

import logging
import os

from protocol.record import read_total_and_magic
from store.consume_queue import (
    ConsumeQueue,
)
from store.message_store_fields import MessageStoreFields

log = logging.getLogger(__name__)


class StoreRecoveryMixin(MessageStoreFields):
    """Load the consume queues, find the commit log end, re-dispatch what is missing."""

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
        return read_total_and_magic(mf.mv, p) == (0, 0)

    def _rebuild_queue_table(self) -> None:
        self.topic_queue_table = {
            k: cq.get_max_offset_in_queue() for k, cq in self.consume_queues.items()
        }
