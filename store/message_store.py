"""The message store façade: one writer process, any number of read-only reader processes.

Mirrors store/DefaultMessageStore.java (load, start, shutdown, the flush and clean schedule,
the put / get / query entry points), RocketMQ 4.9.x. DefaultMessageStore builds and wires the
parts, each of which owns its state:

    CommitLog                     the files, the write path, queue offsets, flush services
    ConsumeQueueTable             the consume queues
    CommitLogDispatcherBuildIndex the index (and its lagging modes)
    ReputMessageService           the one dispatch of records to queues and index
    StoreRecovery                 recovery at load
    CleanCommitLogService         retention of commit-log files, the disk check
    CleanConsumeQueueService      consume-queue / index files below the commit log
    FlushConsumeQueueService      the consume queues' and the checkpoint's flush
    MessageStoreRead              getMessage, queryMessage and the offset look-ups
    StoreStatsService             the put and get counters

The writer appends a record and dispatches it synchronously to its consume queue and the
index, then publishes the new max offset in the shared state page (after the bytes), then
notifies `arrival_listener`. Readers map the same files read-only and trust only data below
the published max offset. Time is always a parameter (`now_ms`); nothing here reads a clock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
from collections.abc import Callable
from struct import Struct
from typing import Final

from store.build_index_dispatcher import CommitLogDispatcherBuildIndex
from store.checkpoint import StoreCheckpoint
from store.clean_consume_queue_service import CleanConsumeQueueService
from store.clean_service import CleanCommitLogService
from store.commitlog import CREATE_RETRY_MS as CREATE_RETRY_MS
from store.commitlog import CommitLog
from store.config import StoreConfig
from store.consume_queue import ConsumeQueue
from store.consume_queue_table import ConsumeQueueTable
from store.flush_service import FlushConsumeQueueService, load_msync, load_range_call
from store.index import IndexService
from store.mapped_file import RangeSync
from store.message_ext_broker_inner import MessageExtBatch, MessageExtBrokerInner
from store.message_store_read import MessageStoreRead, MessageStoreReadSide
from store.message_store_reader import check_store
from store.put_message_result import PutMessageResult, PutMessageStatus
from store.recovery import StoreRecovery
from store.reput_message_service import ArrivalListener, ReputMessageService
from store.running_flags import NOT_WRITEABLE_MASK, RunningFlags
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
from store.stats_page import OFF_BOOT_MS, StatsPage, stats_path
from store.store_stats_service import StoreStatsService

log = logging.getLogger(__name__)

# The next commit-log segment is warmed in slices between requests (no allocate thread): a whole
# 1 GiB segment at once stalled the writer for 170-300 ms (sends then failed fast).
WARM_BYTES_PER_TICK: Final = 8 * 1024 * 1024
WARM_STEP_INTERVAL_MS: Final = 2

# struct flock on Linux x86-64 / arm64: l_type, l_whence, l_start, l_len, l_pid (0 for OFD)
_FLOCK: Final = Struct("@hhqqi4x")
_F_OFD_SETLK: Final = fcntl.F_OFD_SETLK


def _record_lock(fd: int) -> None:
    """Write-lock byte 0 of fd without waiting (OSError when another holder has it)."""
    try:
        fcntl.fcntl(fd, _F_OFD_SETLK, _FLOCK.pack(fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0))
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)  # a kernel without OFD locks


class DefaultMessageStore(MessageStoreReadSide):
    """The single writer of one store directory."""

    def __init__(self, cfg: StoreConfig) -> None:
        self.cfg = cfg
        self.root = cfg.storePathRootDir
        os.makedirs(self.root, exist_ok=True)
        self.checkpoint: StoreCheckpoint | None = None
        self.state: StatePage | None = None
        self.stats_page: StatsPage | None = None
        self.running_flags = RunningFlags()
        self.stats = StoreStatsService()
        self.recovered_abnormally = False
        # ASYNC_FLUSH flushes and the next segment's warm-up on threads (ctypes); False: all of
        # it on the writer's thread, in slices
        self.flush_thread_enabled = True
        self.cq_table = ConsumeQueueTable(self.root, cfg.mappedFileSizeConsumeQueue,
                                          self._bump_generation)  # fmt: skip
        self.index_builder = CommitLogDispatcherBuildIndex(cfg)
        self.reput = ReputMessageService(self.cq_table, self.index_builder, self.running_flags,
                                         self.stats)  # fmt: skip
        self.commitlog = CommitLog(cfg, dispatcher=self.reput, stats=self.stats,
                                   on_new_file=self._bump_generation,
                                   on_flushed=self._after_flush)  # fmt: skip
        self.clean_commitlog = CleanCommitLogService(cfg, self.commitlog, self.running_flags,
                                                     self.cq_table.root)  # fmt: skip
        self.clean_consume_queue = CleanConsumeQueueService(self.cq_table, self.index_builder)
        self.cq_flush: FlushConsumeQueueService | None = None
        self.read = MessageStoreRead(self, self.stats)
        self._slave = cfg.brokerRole == "SLAVE"
        self._running = False
        self._accepting = False  # running and not a slave (the flags are checked per put)
        self._lock_fd: int | None = None

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
        self.reput.state = self.state
        self.checkpoint = StoreCheckpoint(os.path.join(self.root, "checkpoint"))
        self.commitlog.mfq.load()
        self.cq_table.load()
        self.index_builder.load()
        if abnormal:
            log.warning("abort file found: abnormal recovery root=%s", self.root)
        StoreRecovery(self.cfg, self.commitlog, self.cq_table, self.index_builder,
                      self.checkpoint, self.reput).recover(abnormal, clean_end, now_ms)  # fmt: skip
        if self._slave:  # recovery ends the log at its last whole record, every one dispatched
            self.reput.reput_offset = self.commitlog.max_offset
        self.index_builder.setup(self.commitlog, self.state, indexed_word)
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
        self._accepting = not self._slave
        threads = self.flush_thread_enabled
        msync = load_msync() if threads else None
        madvise = load_range_call("madvise") if threads else None
        try:
            self.commitlog.start(now_ms, self._slave, msync, madvise if msync else None)
        except OSError as exc:
            raise RuntimeError(f"the first commit-log file cannot be created: {exc}") from None
        self.index_builder.first_file(now_ms)
        if self.cq_flush is None:
            self.cq_flush = FlushConsumeQueueService(self.cfg, self.flush_logics, msync)
        self.cq_flush.start(now_ms)
        if self.stats_page is None:
            self.stats_page = StatsPage(stats_path(self.cfg.storePathRootDir), writable=True)
            self.stats_page.set(OFF_BOOT_MS, now_ms)
            self.publish_stats()
        self.clean_commitlog.start(now_ms)
        self.check_disk_space(now_ms)  # a store started on a full disk refuses puts at once
        self.index_builder.spawn_process()

    def _stop_services(self) -> None:
        self.clean_commitlog.deleter.join()
        self.commitlog.stop_services()
        if self.cq_flush is not None:
            self.cq_flush.close()
            self.cq_flush = None

    def shutdown(self, now_ms: int = 0) -> None:
        """Flush everything, write the checkpoint, remove the abort marker, unlock."""
        if self.state is None:
            return
        self._running = self._accepting = False
        self.dispatch_index(now_ms)
        self.index_builder.stop_process(self.commitlog.max_offset)
        self._stop_services()
        self.flush(now_ms)
        if not self.flush_logics(0):  # every consume queue's dirty range, then the checkpoint
            log.warning("store shutdown: a consume queue could not be flushed")
        self.index_builder.close(flush=True)
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
        self.cq_table.close()
        cp.close()
        self.reput.state = None
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
        self.index_builder.stop_process(0, kill=True)
        self._stop_services()
        self.index_builder.close(flush=False)
        self.commitlog.close()
        self.cq_table.close()
        if self.checkpoint is not None:
            self.checkpoint.close()
        self.reput.state = None
        if self.state is not None:
            self.state.close()
            self.state = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # ---- what the parts tell the store -----------------------------------------------------------
    def _bump_generation(self) -> None:
        """A file or a queue was made or dropped: readers rescan."""
        if self.state is not None:
            self.state.bump_generation()

    def _after_flush(self, stamp: int) -> None:
        """The commit log was flushed: the checkpoint's physic time (the store time of the
        last record flushed) and the state page's flushed offset."""
        cp = self.checkpoint
        if cp is not None and stamp:
            cp.physic_msg_timestamp = stamp
        if self.state is not None:
            self.state.set(OFF_FLUSHED_PHY, self.commitlog.flushed_offset)

    def _published_max(self) -> int:
        """The end of what readers may use: a slave's reput offset (its log may end inside a
        record still arriving), else the commit log's end."""
        return self.reput.reput_offset if self._slave else self.commitlog.max_offset

    def _publish(self) -> None:
        st = self.state
        if st is not None:
            st.set(OFF_MIN_PHY, self.commitlog.min_offset)
            st.set(OFF_FLUSHED_PHY, self.commitlog.flushed_offset)
            st.set(OFF_MAX_PHY, self._published_max())
            if self.index_builder.mode in ("sync", "off"):
                st.set(OFF_INDEX_PHY, self._published_max())

    # ---- puts ------------------------------------------------------------------------------
    def put_message(self, msg: MessageExtBrokerInner, now_ms: int) -> PutMessageResult:
        """putMessage (checkStoreStatus, then CommitLog.put_message)."""
        if not self._accepting or self.running_flags.flag_bits & NOT_WRITEABLE_MASK:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        return self.commitlog.put_message(msg, now_ms)

    def put_message_fields(
        self, topic: str, qid: int, body: bytes | memoryview, pb: bytes, sys_flag: int,
        flag: int, born_ts: int, born_host: bytes, store_host: bytes, reconsume_times: int,
        tags_code: int | None, now_ms: int,
    ) -> tuple[int, int, int] | PutMessageStatus:
        """putMessage from a message's fields, with no message or result object: (phy, size,
        queue offset) or the refusing status (CommitLog.put_message_fields)."""
        if not self._accepting or self.running_flags.flag_bits & NOT_WRITEABLE_MASK:
            return PutMessageStatus.SERVICE_NOT_AVAILABLE
        return self.commitlog.put_message_fields(topic, qid, body, pb, sys_flag, flag, born_ts,
                                                 born_host, store_host, reconsume_times,
                                                 tags_code, now_ms)  # fmt: skip

    def put_messages(self, batch: MessageExtBatch, now_ms: int) -> PutMessageResult:
        """putMessages (checkStoreStatus, then CommitLog.put_messages)."""
        if not self._accepting or self.running_flags.flag_bits & NOT_WRITEABLE_MASK:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        return self.commitlog.put_messages(batch, now_ms)

    def append_to_commit_log(self, start: int, data: bytes | memoryview, now_ms: int) -> bool:
        """A slave: the raw commit-log bytes a master sent for offset `start`
        (CommitLog.appendData), then the reput that gives complete records their units; False
        when `start` is not this log's end or the bytes do not fit its file (the HA client
        reconnects)."""
        if not self._running:
            return False
        cl = self.commitlog
        if not cl.append_data(start, data, now_ms):
            return False
        if not data:
            return True
        try:
            self.reput.reput(cl, now_ms)
        except OSError as exc:  # a consume-queue file: the next bytes' reput goes on from here
            cl.create_gate.note_failed(now_ms, exc)
            return True
        cl.create_gate.note_created()
        return True

    # ---- flush / tick ----------------------------------------------------------------------
    def flush(self, now_ms: int = 0) -> int:
        """Flush the commit log; returns the flushed offset."""
        return self.commitlog.flush(0)

    @property
    def flushed_offset(self) -> int:
        """Commit-log offset known to be on disk."""
        return self.commitlog.flushed_offset

    def flush_logics(self, least_pages: int = 0, sync: RangeSync | None = None) -> bool:
        """Flush the consume queues (files with >= least_pages dirty pages; 0 = every one),
        then the checkpoint; True when no consume queue was left dirty.

        `sync(file, start, end)` msyncs a range (the consume-queue flush thread's, through
        ctypes); None = mmap.flush on this thread. The logics timestamp advances only when
        nothing was left dirty, to the store time read before the round.
        """
        stamp = self.commitlog.last_store_timestamp  # every unit of a record stored by now is in
        complete = self.cq_table.flush(least_pages, sync)
        cp = self.checkpoint
        if cp is not None:
            if complete:
                cp.logics_msg_timestamp = max(cp.logics_msg_timestamp, stamp)
            index_ts = self.index_builder.last_full_file_end_ts()
            if index_ts:
                cp.index_msg_timestamp = max(cp.index_msg_timestamp, index_ts)
            cp.flush(sync)
        return complete

    def publish_stats(self) -> None:
        """Write the put counters into the stats page (the writer owns them)."""
        if self.stats_page is not None:
            self.stats.publish_puts(self.stats_page)

    def tick(self, now_ms: int) -> int:
        """Periodic work: flushes, the disk check, retention, the next segment; ms to the next."""
        if self.index_builder.lagging:
            self.dispatch_index(now_ms)
        self.publish_stats()
        cl = self.commitlog
        waits = []
        flushing = False
        wait, flushing = cl.flush_service.tick(now_ms)
        waits.append(wait)
        if self.cq_flush is not None:
            waits.append(self.cq_flush.tick(now_ms))
        clean = self.clean_commitlog
        if clean.disk_check_due(now_ms):
            self.check_disk_space(now_ms)
        if clean.clean_due(now_ms):
            self.clean_expired(now_ms)
            cl.request_allocation(now_ms)  # (again after a full disk: it retries here)
        if cl.create_gate.failing and cl.mfq.next_ready():
            cl.create_gate.note_created()  # the allocate thread made the next file: space again
        waits.append(clean.next_due_ms(now_ms))
        # without the allocate thread, its warm-up here: a slice per tick so appends never wait
        warming = cl.allocator is None and cl.mfq.warm_next_step(WARM_BYTES_PER_TICK)
        if warming or flushing:
            waits.append(WARM_STEP_INTERVAL_MS)
        return max(1, min(waits))

    # ---- retention and the disk ------------------------------------------------------------------
    @property
    def disk_usage(self) -> Callable[[str], float]:
        """How full the partition holding a path is (0..1, -1 when unknown)."""
        return self.clean_commitlog.disk_usage

    @disk_usage.setter
    def disk_usage(self, usage: Callable[[str], float]) -> None:
        self.clean_commitlog.disk_usage = usage

    def check_disk_space(self, now_ms: int) -> bool:
        """The disk check (CleanCommitLogService.isSpaceFull); with a "sync" index, an index
        file that could not be written is tried again (Java keeps its flag until a restart).
        True while the disk is full."""
        full = self.clean_commitlog.check_disk_space()
        flags = self.running_flags
        if (flags.is_index_file_error() and self.index_builder.inline
                and self.index_builder.retry_after_error(now_ms)):  # fmt: skip
            flags.clear_index_file_error()
            log.info("index files can be written again: sends are accepted again")
        return full

    def execute_delete_files_manually(self) -> None:
        """DELETE_EXPIRED_COMMITLOG: the next retention passes run whatever the hour."""
        self.clean_commitlog.execute_delete_files_manually()

    def clean_expired(self, now_ms: int) -> int:
        """CleanCommitLogService + CleanConsumeQueueService; returns commit-log files deleted."""
        n = self.clean_commitlog.delete_expired(now_ms)
        if n:
            self.clean_consume_queue.run(self.commitlog.min_offset)
            self._publish()
            self._bump_generation()
        return n

    def clean_expired_consume_queues(self) -> int:
        """cleanExpiredConsumerQueue; how many queues were dropped."""
        dropped = self.clean_consume_queue.expired_queues(self.commitlog.min_offset)
        for key in dropped:
            self.commitlog.topic_queue_table.pop(key, None)
        return len(dropped)

    def delete_topics(self, topics: set[str] | list[str]) -> None:
        """Drop the consume queues of these topics (deleteTopics)."""
        for key in self.cq_table.delete_topics(topics):
            self.commitlog.topic_queue_table.pop(key, None)

    # ---- the index -----------------------------------------------------------------------------
    @property
    def index(self) -> IndexService:
        """The index files (read-only ones when an index process owns them)."""
        return self.index_builder.index

    @property
    def indexed_offset(self) -> int:
        """Commit-log offset below which every record's index entries are written."""
        return self.index_builder.indexed_offset(self.commitlog.max_offset)

    def dispatch_index(self, now_ms: int, max_records: int = 1 << 30) -> int:
        """"tick" mode: index records appended since the last call; returns records walked."""
        return self.index_builder.dispatch(self._published_max(), now_ms, max_records)

    def refresh_index(self) -> None:
        """Before a query: the index as far as its owner wrote it."""
        self.index_builder.refresh(self._published_max(), self.commitlog.last_store_timestamp)

    # ---- the view the read side uses (StoreView) -----------------------------------------------
    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue, or None when there is none."""
        return self.cq_table.queues.get((topic, queue_id))

    @property
    def consume_queues(self) -> dict[tuple[str, int], ConsumeQueue]:
        """Every consume queue."""
        return self.cq_table.queues

    @property
    def topic_queue_table(self) -> dict[tuple[str, int], int]:
        """The next queue offset of each queue (CommitLog's topicQueueTable)."""
        return self.commitlog.topic_queue_table

    def commit_log_data(self, phy: int, size: int) -> memoryview | None:
        """size bytes at phy, or None when that file is gone."""
        return self.commitlog.get_data(phy, size)

    @property
    def max_phy_offset(self) -> int:
        """What readers may use of the commit log."""
        return self._published_max()

    @property
    def min_phy_offset(self) -> int:
        """The commit log's first offset."""
        return self.commitlog.min_offset

    def writer_state(
        self,
    ) -> tuple[dict[tuple[str, int], ConsumeQueue], dict[tuple[str, int], int],
               StoreCheckpoint | None]:  # fmt: skip
        """The writer's own queues, queue table and checkpoint (check_store)."""
        return self.cq_table.queues, self.commitlog.topic_queue_table, self.checkpoint

    def check(self) -> list[str]:
        """Cross-validate commit log, consume queues, index and checkpoint; list problems."""
        return check_store(self)

    # ---- the put side's figures and hooks ------------------------------------------------------
    @property
    def arrival_listener(self) -> ArrivalListener | None:
        """Called after each dispatched record's queue and tags code (long polling)."""
        return self.reput.arrival_listener

    @arrival_listener.setter
    def arrival_listener(self, listener: ArrivalListener | None) -> None:
        self.reput.arrival_listener = listener

    @property
    def put_times_total(self) -> int:
        """Messages put (a slave: dispatched) since start."""
        return self.stats.put_times_total

    @property
    def put_size_total(self) -> int:
        """Their record bytes."""
        return self.stats.put_size_total
