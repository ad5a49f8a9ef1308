"""The message store facade: one writer process, any number of read-only reader processes.

Mirrors store/DefaultMessageStore.java (load, start, shutdown, the flush and clean schedule),
RocketMQ 4.9.x. Its services have their own homes, mixed into DefaultMessageStore: appending
(store/append_message_callback.py), ReputMessageService (store/reput_message_service.py),
recovery (store/recovery.py), CommitLogDispatcherBuildIndex (store/build_index_dispatcher.py),
CleanCommitLogService / CleanConsumeQueueService (store/clean_service.py) and the read side
(store/message_store_read.py).

The writer appends to the commit log and dispatches each record synchronously to its consume
queue and the index, then publishes the new max offset in the shared state page (after the
bytes), then calls `arrival_listener`. Readers map the same files read-only and trust only data
below the published max offset. Time is always a parameter (`now_ms`); nothing here reads a clock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import subprocess
import threading
from collections.abc import Callable
from struct import Struct
from typing import Any, Final

from protocol.record import batch_item_unpacker
from store.allocate_service import AllocateMappedFileService, FileDeleter
from store.append_message_callback import AppendMessageMixin
from store.build_index_dispatcher import BuildIndexMixin
from store.checkpoint import StoreCheckpoint
from store.clean_service import DISK_CHECK_INTERVAL_MS, CleanServiceMixin, disk_usage_ratio
from store.commitlog import (
    CommitLog,
)
from store.config import StoreConfig
from store.consume_queue import (
    ConsumeQueue,
)
from store.create_retry_gate import CreateRetryGate
from store.flush_service import (
    CommitLogFlusher,
    ConsumeQueueFlusher,
    load_msync,
    load_range_call,
)
from store.index import IndexService
from store.index_dispatch import IndexDispatcher
from store.mapped_file import OS_PAGE_SIZE, RangeSync
from store.message_store_reader import check_store
from store.recovery import StoreRecoveryMixin
from store.reput_message_service import ReputMessageMixin
from store.running_flags import RunningFlags
from store.state_page import (
    OFF_FLUSHED_PHY,
    OFF_HA_ACKED,
    OFF_HA_SLAVES,
    OFF_INDEX_PHY,
    OFF_MAX_PHY,
    OFF_MIN_PHY,
    OFF_WRITER_PID,
    StatePage,
)
from store.stats_page import (
    OFF_BOOT_MS,
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
# After a store file could not be created (a full disk), puts that need one are refused at once
# for this long before one tries again (the allocate thread retries every cleanResourceInterval)
CREATE_RETRY_MS: Final = 1000


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


class DefaultMessageStore(
    AppendMessageMixin, ReputMessageMixin, StoreRecoveryMixin, CleanServiceMixin, BuildIndexMixin
):
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
        self._unpack_memo: tuple[int, Any] = (0, batch_item_unpacker(0))
        self._delays = cfg.delay_levels_ms
        self._running = False
        self._accepting = False  # running, not a slave, and running_flags writeable
        self._slave = cfg.brokerRole == "SLAVE"
        self.running_flags = RunningFlags()  # DISK_FULL: the disk check (clean_service)
        self._create_gate = CreateRetryGate(CREATE_RETRY_MS)  # CREATE_MAPEDFILE_FAILED
        self._last_disk_check_ms = 0
        self._index_retry_ms = 0  # "tick" index: when entries a full disk left over go again
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
        # the HA service's words are this run's (a slave's ack of the last run, read before the
        # HA service starts, could answer SYNC_MASTER sends no slave has)
        self.state.set(OFF_HA_ACKED, 0)
        self.state.set(OFF_HA_SLAVES, 0)
        self._publish()
        self.state.bump_generation()
        return True

    def start(self, now_ms: int = 0) -> None:
        """Begin accepting puts."""
        if self.state is None:
            self.load(now_ms)
        self._running = True
        self._accepting = self.cfg.brokerRole != "SLAVE" and self.running_flags.is_writeable()
        self._last_flush_ms = self._last_cq_flush_ms = self._last_clean_ms = now_ms
        self._last_cq_thorough_ms = now_ms
        self._last_thorough_ms = now_ms
        self._flush_target = 0  # end of the async flush round going on in slices
        cl = self.commitlog
        # create + warm the first file now, not on the first put (a slave's first file starts
        # where the master's first byte for it falls: append_to_commit_log makes it)
        if not self._slave and not cl.mfq.files:
            try:
                cl._cur = cl.mfq.get_last_mapped_file(0)
            except OSError as exc:
                raise RuntimeError(f"the first commit-log file cannot be created: {exc}") from None
            self._on_new_file()
        elif cl._cur is not None and self.cfg.warmMapedFileEnable:
            cl.mfq.warm(cl._cur)  # after a restart: pre-touch the unwritten tail before serving
        self._preallocate_next(now_ms)
        # at start, before serving, the next segment is warmed whole (later ones in slices)
        while cl.mfq.warm_next_step(cl.file_size):
            pass
        if self._index_mode in ("sync", "tick") and not self.index.files:
            # the first index file, made now (a full disk: IndexService logs it, "sync" puts
            # with keys are refused until it can be made, "tick" indexing waits)
            self.index.put_hash_batch([], [], [], now_ms)
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
        self._last_disk_check_ms = now_ms
        self.check_disk_space(now_ms)  # a store started on a full disk refuses puts at once
        spawn = self.cfg.messageIndexProcessSpawn
        if self._index_mode == "process" and spawn and self._index_proc is None:
            self._spawn_index_process()

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

    # ---- consume queues ----------------------------------------------------------------------
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
        check_every = min(cfg.cleanResourceInterval, DISK_CHECK_INTERVAL_MS)
        if now_ms - self._last_disk_check_ms >= check_every:
            self._last_disk_check_ms = now_ms
            self.check_disk_space(now_ms)
        if now_ms - self._last_clean_ms >= cfg.cleanResourceInterval:
            self._last_clean_ms = now_ms
            self.clean_expired(now_ms)
            if self._allocator is not None:
                self._allocator.request()  # (again after a full disk: it retries here)
            else:
                self._preallocate_next(now_ms)
        if self._create_gate.failing and self.commitlog.mfq.next_ready():
            self.note_files_created()  # the allocate thread made the next file: space again
        waits = [
            cfg.flushIntervalCommitLog - (now_ms - self._last_flush_ms),
            cfg.flushIntervalConsumeQueue - (now_ms - self._last_cq_flush_ms),
            cfg.cleanResourceInterval - (now_ms - self._last_clean_ms),
            check_every - (now_ms - self._last_disk_check_ms),
        ]
        # without the allocate thread, its warm-up here: a slice per tick so appends never wait long
        warming = self._allocator is None and self.commitlog.mfq.warm_next_step(WARM_BYTES_PER_TICK)
        if warming or flushing:
            waits.append(WARM_STEP_INTERVAL_MS)
        return max(1, min(waits))

    def _preallocate_next(self, now_ms: int) -> None:
        """The next commit-log file, made on this thread (no allocate thread, or at start); a
        full disk leaves it to a put (or the next clean pass) to try again."""
        try:
            self.commitlog.mfq.preallocate_next()
        except OSError as exc:
            self.note_create_failed(now_ms, exc)

    # ---- check -------------------------------------------------------------------------------
    def check(self) -> list[str]:
        """Cross-validate commit log, consume queues, index and checkpoint; list problems."""
        return check_store(self)
