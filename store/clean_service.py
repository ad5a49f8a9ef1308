"""Retention: DefaultMessageStore.CleanCommitLogService and CleanConsumeQueueService.

Mirrors store/DefaultMessageStore.java (CleanCommitLogService, CleanConsumeQueueService,
cleanExpiredConsumerQueue, deleteTopics) and UtilAll.getDiskPartitionSpaceUsedPercent,
RocketMQ 4.9.x.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from typing import Final

from store.commitlog import SCHEDULE_TOPIC
from store.message_store_fields import MessageStoreFields

log = logging.getLogger(__name__)


DELETE_FILES_BATCH_MAX: Final = 10
MAX_MANUAL_DELETE_FILE_TIMES: Final = 20  # retention passes a manual request keeps "due"


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



class CleanServiceMixin(MessageStoreFields):
    """Delete expired commit-log files and the consume queues / index below them."""

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
        (cleanExpiredConsumerQueue); an empty queue stays, and so do the delay levels' queues
        (as in Java: ScheduleMessageService's offsets number them, and a level restarting at
        0 below its saved offset would never deliver what it parks next). Returns how many
        were dropped."""
        min_phy = self.commitlog.min_offset
        expired = [
            key
            for key, cq in self.consume_queues.items()
            if key[0] != SCHEDULE_TOPIC
            and cq.get_max_offset_in_queue() > 0
            and cq.max_phy_offset < min_phy
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
