"""Retention and the disk check: DefaultMessageStore.CleanCommitLogService and
CleanConsumeQueueService.

Mirrors store/DefaultMessageStore.java (CleanCommitLogService: deleteExpiredFiles,
isSpaceToDelete, isSpaceFull; CleanConsumeQueueService, cleanExpiredConsumerQueue,
deleteTopics) and UtilAll.getDiskPartitionSpaceUsedPercent, RocketMQ 4.9.x.

The disk check (isSpaceFull, every min(cleanResourceInterval, 10 s) from the writer's tick):
above diskSpaceWarningLevelRatio (Java's -Drocketmq.broker.diskSpaceWarningLevelRatio, 0.90)
of the commit log's or the consume queues' partition the store is marked DISK_FULL
(RunningFlags) and refuses puts with SERVICE_NOT_AVAILABLE; below it, writeable again. Each
change is logged once. `disk_space_verdict` is the pure part.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from store.commitlog import SCHEDULE_TOPIC
from store.config import StoreConfig
from store.message_store_fields import MessageStoreFields
from store.running_flags import RunningFlags

log = logging.getLogger(__name__)


DELETE_FILES_BATCH_MAX: Final = 10
MAX_MANUAL_DELETE_FILE_TIMES: Final = 20  # retention passes a manual request keeps "due"
DISK_CHECK_INTERVAL_MS: Final = 10_000  # isSpaceFull's fixed period (Java: 10 s)


def disk_usage_ratio(path: str) -> float:
    """UtilAll.getDiskPartitionSpaceUsedPercent: the used share of the file system holding
    path, rounded up to a whole percent (0.93), as (total - free) / (used + available to this
    user); -1.0 when it cannot be read (the path does not exist)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return -1.0
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if st.f_blocks <= 0 or entire <= 0:
        return -1.0
    return -(-used * 100 // entire) / 100


def disk_util(cfg: StoreConfig, usage: Callable[[str], float] = disk_usage_ratio) -> str:
    """The disk part of a SERVICE_NOT_AVAILABLE remark (SendMessageProcessor.diskUtil):
    "CL:  0.95 CQ:  0.95 INDEX:  0.95", each -1.00 when unknown."""
    root = cfg.storePathRootDir
    ratios = (usage(cfg.commitlog_path), usage(os.path.join(root, "consumequeue")),
              usage(os.path.join(root, "index")))  # fmt: skip
    return "CL: %5.2f CQ: %5.2f INDEX: %5.2f" % ratios  # noqa: UP031 (Java's String.format)


@dataclass(frozen=True, slots=True)
class DiskSpaceVerdict:
    """What one disk check found (percent figures, -1 when unknown)."""

    physic: float  # commit log's partition
    logics: float  # consume queues' partition
    full: bool  # above the warning level: DISK_FULL set, puts refused
    changed: bool  # DISK_FULL was set or cleared by this check (log it)


def disk_space_verdict(
    flags: RunningFlags, physic_ratio: float, logics_ratio: float, warning_percent: float
) -> DiskSpaceVerdict:
    """isSpaceFull (and the flag part of isSpaceToDelete) on measured ratios (0..1, -1 when
    unknown): DISK_FULL set above warning_percent (strictly, like Java) of either partition,
    cleared otherwise. Pure: the flags are the only state it touches."""
    physic = round(physic_ratio * 100, 4) if physic_ratio >= 0 else -1.0
    logics = round(logics_ratio * 100, 4) if logics_ratio >= 0 else -1.0
    full = physic > warning_percent or logics > warning_percent
    changed = flags.get_and_make_disk_full() if full else not flags.get_and_make_disk_ok()
    return DiskSpaceVerdict(physic, logics, full, changed)


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

    def check_disk_space(self, now_ms: int) -> bool:
        """The disk check (isSpaceFull): mark the store full above the warning level, or OK
        again, logging each change once; True while full."""
        cfg = self.cfg
        v = disk_space_verdict(self.running_flags, self.disk_usage(self.commitlog.path),
                               self.disk_usage(self.cq_root),
                               cfg.diskSpaceWarningLevelRatio)  # fmt: skip
        if v.changed:
            if v.full:
                log.error("disk maybe full soon: commit log partition %.0f%% used, consume queue "
                          "partition %.0f%% (diskSpaceWarningLevelRatio %s%%), so mark disk full: "
                          "sends are refused until space is freed", v.physic, v.logics,
                          cfg.diskSpaceWarningLevelRatio)  # fmt: skip
            else:
                log.info("disk space OK: commit log partition %.0f%% used, consume queue "
                         "partition %.0f%%, so mark disk ok: sends are accepted again",
                         v.physic, v.logics)  # fmt: skip
        if self.running_flags.is_index_file_error() and self._index_inline:
            self._retry_index_file(now_ms)
        self._accepting = self._running and not self._slave and self.running_flags.is_writeable()
        return v.full

    def _retry_index_file(self, now_ms: int) -> None:
        """"sync" index after WRITE_INDEX_FILE_ERROR: writeable again once the index can take
        an entry (Java keeps the flag until a restart)."""
        try:
            self.index.reserve(1, now_ms)
        except OSError:
            return
        self.running_flags.clear_index_file_error()
        log.info("index files can be written again: sends are accepted again")

    def clean_expired(self, now_ms: int) -> int:
        """CleanCommitLogService + CleanConsumeQueueService; returns commit-log files deleted."""
        cfg = self.cfg
        ratio = self.disk_usage(self.commitlog.path) * 100
        # isSpaceToDelete: above diskMaxUsedSpaceRatio (or not measurable) expired files go
        # now, above diskSpaceCleanForciblyRatio any file does (cleanFileForciblyEnable)
        clean_immediately = ratio > cfg.diskSpaceCleanForciblyRatio
        space_full = ratio < 0 or ratio > cfg.diskMaxUsedSpaceRatio or clean_immediately
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
