"""Commit-log retention and the disk check: DefaultMessageStore.CleanCommitLogService.

Mirrors store/DefaultMessageStore.java (CleanCommitLogService: deleteExpiredFiles,
isSpaceToDelete, isSpaceFull) and UtilAll.getDiskPartitionSpaceUsedPercent, RocketMQ 4.9.x.
The consume queues and index below the new commit-log start are CleanConsumeQueueService's
(store/clean_consume_queue_service.py).

The disk check (isSpaceFull, every min(cleanResourceInterval, 10 s) from the writer's tick):
above diskSpaceWarningLevelRatio (Java's -Drocketmq.broker.diskSpaceWarningLevelRatio, 0.90)
of the commit log's or the consume queues' partition the store is marked DISK_FULL
(RunningFlags) and refuses puts with SERVICE_NOT_AVAILABLE; below it, writeable again. Each
change is logged once. `disk_space_verdict` is the pure part.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from store.allocate_service import FileDeleter
from store.commitlog import CommitLog
from store.config import StoreConfig
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


class CleanCommitLogService:
    """Delete expired commit-log files (never the one being written) and watch the disk."""

    def __init__(self, cfg: StoreConfig, commitlog: CommitLog, flags: RunningFlags,
                 cq_root: str) -> None:  # fmt: skip
        self.cfg = cfg
        self.commitlog = commitlog
        self.flags = flags
        self.cq_root = cq_root
        self.disk_usage: Callable[[str], float] = disk_usage_ratio
        self.deleter = FileDeleter()  # the unlinks of expired segments, on threads
        self.manual_delete_times = 0  # passes left that run as if deleteWhen's hour had come
        self.last_clean_ms = 0
        self.last_disk_check_ms = 0

    def start(self, now_ms: int) -> None:
        """The intervals count from now."""
        self.last_clean_ms = self.last_disk_check_ms = now_ms

    def check_every_ms(self) -> int:
        """How often the disk is checked (isSpaceFull's period, at most cleanResourceInterval)."""
        return min(self.cfg.cleanResourceInterval, DISK_CHECK_INTERVAL_MS)

    def disk_check_due(self, now_ms: int) -> bool:
        """The disk check is due (its time is taken)."""
        if now_ms - self.last_disk_check_ms >= self.check_every_ms():
            self.last_disk_check_ms = now_ms
            return True
        return False

    def clean_due(self, now_ms: int) -> bool:
        """A retention pass is due (its time is taken)."""
        if now_ms - self.last_clean_ms >= self.cfg.cleanResourceInterval:
            self.last_clean_ms = now_ms
            return True
        return False

    def next_due_ms(self, now_ms: int) -> int:
        """ms until the disk check or the retention pass is due."""
        return min(self.cfg.cleanResourceInterval - (now_ms - self.last_clean_ms),
                   self.check_every_ms() - (now_ms - self.last_disk_check_ms))  # fmt: skip

    def _is_time_to_delete(self, now_ms: int) -> bool:
        hour = time.localtime(now_ms // 1000).tm_hour
        return any(int(h) == hour for h in self.cfg.deleteWhen.split(";") if h.strip())

    def _file_last_ts(self, i: int) -> int:
        files = self.commitlog.mfq.files
        if i + 1 < len(files):
            t = self.commitlog.checker.first_store_timestamp(files[i + 1])
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

    def check_disk_space(self) -> bool:
        """The disk check (isSpaceFull): mark the store full above the warning level, or OK
        again, logging each change once; True while full."""
        cfg = self.cfg
        v = disk_space_verdict(self.flags, self.disk_usage(self.commitlog.path),
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
        return v.full

    def delete_expired(self, now_ms: int) -> int:
        """deleteExpiredFiles: commit-log files past fileReservedTime at deleteWhen's hour, at
        once when the disk is above diskMaxUsedSpaceRatio (any file above
        diskSpaceCleanForciblyRatio with cleanFileForciblyEnable); the number deleted."""
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
        mfq = self.commitlog.mfq
        n = 0
        for i in range(len(mfq.files) - 1):  # never the file being written
            if n >= DELETE_FILES_BATCH_MAX:
                break
            if at_once or now_ms >= self._file_last_ts(i) + expired_ms:
                n += 1
            else:
                break
        if n:
            mfq.delete_first(n, self.deleter.unlink)
            log.info(
                "retention deleted commitlog files=%d min_offset=%d", n, self.commitlog.min_offset
            )
        return n
