"""Store recovery at load: DefaultMessageStore.recover with CommitLog.recoverNormally /
recoverAbnormally (store/DefaultMessageStore.java, store/CommitLog.java, RocketMQ 4.9.x).

The commit log's valid end is found (a clean shutdown's published end when it is plausible,
else a walk of the last files, or after a crash from the file the checkpoint's time points at);
everything past it is truncated (commit log, consume queues, index); then the records the
consume queues and the index are missing are dispatched again through ReputMessageService.
"""

from __future__ import annotations

import logging

from protocol.record import read_total_and_magic
from store.build_index_dispatcher import CommitLogDispatcherBuildIndex
from store.checkpoint import StoreCheckpoint
from store.commitlog import CommitLog
from store.config import StoreConfig
from store.consume_queue_table import ConsumeQueueTable
from store.dispatch_request import scan
from store.reput_message_service import ReputMessageService

log = logging.getLogger(__name__)


class StoreRecovery:
    """One recovery of a store at load."""

    def __init__(self, cfg: StoreConfig, commitlog: CommitLog, cq_table: ConsumeQueueTable,
                 index: CommitLogDispatcherBuildIndex, checkpoint: StoreCheckpoint,
                 reput: ReputMessageService) -> None:  # fmt: skip
        self.cfg = cfg
        self.commitlog = commitlog
        self.cq_table = cq_table
        self.index = index
        self.checkpoint = checkpoint
        self.reput = reput

    def recover(self, abnormal: bool, clean_end: int, now_ms: int) -> int:
        """Recover; clean_end: the end a clean shutdown published (-1: none). Returns how many
        records were dispatched again."""
        cl = self.commitlog
        files = cl.mfq.files
        check_crc = self.cfg.checkCRCOnRecover
        last_ts = -1
        if not files:
            end = reput_from = 0
        elif not abnormal and clean_end >= 0 and self._clean_end_plausible(clean_end):
            end = clean_end
            reput_from = min(max(self.cq_table.max_phy_offset(), cl.min_offset), end)
        else:
            ts_mark = self.checkpoint.min_timestamp(self.cfg.messageIndexSafe)
            if abnormal:  # recoverAbnormally: from the last file stored before the checkpoint
                idx = 0
                for i in range(len(files) - 1, -1, -1):
                    t = cl.checker.first_store_timestamp(files[i])
                    if 0 <= t <= ts_mark:
                        idx = i
                        break
            else:  # recoverNormally: the last three files
                idx = max(0, len(files) - 3)
            end, last_ts, mark = scan(cl.mfq, files[idx].file_from_offset, check_crc, ts_mark)
            if abnormal:
                # units and index entries of records stored before the checkpoint time are on
                # disk (StoreCheckpoint): re-dispatch only from there
                reput_from = mark
            else:
                reput_from = min(max(self.cq_table.max_phy_offset(), cl.min_offset), end)
        if files:
            cl.truncate_dirty(end)
            cl.set_recovered(end)
        self.cq_table.truncate_dirty(end)
        self.index.truncate(end)
        min_phy = cl.min_offset
        self.cq_table.correct_min_offset(min_phy)
        # re-dispatch what the consume queues / index are missing
        index_end = self.index.recovered_end()
        if self.index.inline and abnormal and index_end >= 0:
            reput_from = min(reput_from, max(index_end, min_phy))
        n = 0
        if reput_from < end:
            n, ts = self.reput.redispatch(cl, reput_from, end, index_end, now_ms)
            last_ts = max(last_ts, ts) if ts >= 0 else last_ts
        if last_ts < 0:
            last_ts = self.checkpoint.physic_msg_timestamp if end > 0 else 0
        cl.note_recovered(self.cq_table.queue_offsets(), last_ts)
        log.info("recovered store root=%s abnormal=%s end=%d redispatched=%d",
                 self.cfg.storePathRootDir, abnormal, end, n)  # fmt: skip
        return n

    def _clean_end_plausible(self, end: int) -> bool:
        """The end a clean shutdown published falls where nothing was written after it."""
        mfq = self.commitlog.mfq
        mf = mfq.find_mapped_file_by_offset(end)
        if mf is None:
            return end == mfq.files[-1].file_end_offset or end == mfq.files[0].file_from_offset
        p = end - mf.file_from_offset
        if p + 8 > mf.file_size:
            return True
        return read_total_and_magic(mf.mv, p) == (0, 0)
