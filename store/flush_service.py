"""The store's flush services: the commit log's (FlushRealTimeService, GroupCommitService) and
the consume queues' (FlushConsumeQueueService), each with its schedule and its thread.

Mirrors store/CommitLog.java FlushRealTimeService and GroupCommitService and
DefaultMessageStore.java FlushConsumeQueueService, RocketMQ 4.9.x: each flush runs on its own
thread so that one which waits behind the disk's writeback never holds up an append. The
CommitLog owns its two services and decides what a round covers (CommitLog.flush_round); the
consume queues' service runs the store's flush_logics. Without ctypes the writer's tick flushes
in slices instead.

mmap.flush holds the GIL through msync, so an msync on the writer's thread stalls every request
that writer serves: a consume-queue msync waiting behind a commit log's writeback was measured
at 180 ms in a broker tick. These threads call msync on the same ranges through ctypes, which
releases the GIL (fdatasync would too, but it writes back every dirty page of the file,
including a warmed segment's zero pages ahead of the data). msync only asks the kernel to write
pages back: a range whose file the writer closed meanwhile fails (ENOMEM) and is skipped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Final, Protocol

from store.config import StoreConfig
from store.mapped_file import OS_PAGE_SIZE, MappedFile, RangeSync
from store.mapped_file_queue import MappedFileQueue
from store.message_ext_broker_inner import MessageExtBrokerInner
from store.put_message_result import PutMessageResult, PutMessageStatus

log = logging.getLogger(__name__)

MS_SYNC: Final = 4  # <sys/mman.h> on Linux
Msync = Callable[[int, int, int], int]
# The periodic (ASYNC_FLUSH) commit-log msync on the writer's thread (no ctypes) goes in slices:
# one msync of everything written in flushIntervalCommitLog stalled the writer ~170 ms.
FLUSH_BYTES_PER_TICK: Final = 4 * 1024 * 1024


def load_range_call(name: str) -> Msync | None:
    """libc's `name(void *addr, size_t len, int flags) -> int` (msync, madvise) through ctypes,
    which releases the GIL during the call (mmap.flush and mmap.madvise do not)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        f = getattr(libc, name)
    except (OSError, AttributeError):
        return None
    f.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    f.restype = ctypes.c_int
    return f  # type: ignore[no-any-return]


def load_msync() -> Msync | None:
    """libc msync through ctypes (GIL released during the call)."""
    return load_range_call("msync")


def ctypes_errno() -> int:
    """errno of the last ctypes call on this thread."""
    import ctypes

    return ctypes.get_errno()


def map_address(mm: Any) -> int:
    """Start address of a writable mmap (the ctypes view is dropped at once, so the mapping can
    still be closed)."""
    import ctypes

    view = ctypes.c_char.from_buffer(mm)
    addr = ctypes.addressof(view)
    del view
    return addr


class ServiceThread:
    """A daemon thread that runs run_once() after each request() (common/ServiceThread.java:
    requests made while a round runs fold into one more round)."""

    NAME = "service"

    def __init__(self) -> None:
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name=self.NAME, daemon=True)
        self._thread.start()

    def request(self) -> None:
        """Start a round (one is enough however many requests arrive meanwhile)."""
        self._wake.set()

    def run_once(self) -> Any:
        """One round."""
        raise NotImplementedError

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stop:
                return
            try:
                self.run_once()
            except Exception:  # e.g. a file closed under the round: the service must live on
                log.exception("%s round failed; the next request retries", self.NAME)

    def close(self) -> None:
        """Stop after the round going on."""
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=60)


class MsyncThread(ServiceThread):
    """A ServiceThread whose rounds msync mapped files through ctypes (`sync` below)."""

    def __init__(self, name: str, msync: Msync, round_fn: Callable[[RangeSync], Any]) -> None:
        self.NAME = name
        self._msync = msync
        self._round = round_fn
        self._addr: dict[str, tuple[Any, int]] = {}  # path -> (mmap, its address)
        self.rounds = 0
        super().__init__()

    def run_once(self) -> Any:
        """One round."""
        out = self._round(self.sync)
        self.rounds += 1
        return out

    def _address(self, mf: Any) -> int:
        hit = self._addr.get(mf.path)
        if hit is None or hit[0] is not mf.mm:
            if len(self._addr) > 256:
                self._addr.clear()
            hit = self._addr[mf.path] = (mf.mm, map_address(mf.mm))
        return hit[1]

    def sync(self, mf: Any, start: int, end: int) -> bool:
        """msync [start, end) of mf (a MappedFile or the checkpoint; start page-aligned);
        False when it failed."""
        if mf.mm.closed:
            return False
        if self._msync(self._address(mf) + start, end - start, MS_SYNC) == 0:
            return True
        if not mf.mm.closed:  # a file closed under the round is expected; anything else is not
            log.warning("msync failed path=%s errno=%d", mf.path, ctypes_errno())
        return False


class FlushedLog(Protocol):
    """What the commit log's flush services read of CommitLog."""

    mfq: MappedFileQueue
    last_store_timestamp: int
    put_lock: Any

    @property
    def max_offset(self) -> int: ...


class FlushRealTimeService:
    """The commit log's flushing: flush() on the writer's thread, and FlushRealTimeService
    (ASYNC_FLUSH): every flushIntervalCommitLog, when flushCommitLogLeastPages pages are dirty
    (any, every flushCommitLogThoroughInterval), a flush of what was published, on its thread
    when there is one, else in slices on the writer's tick. SYNC_FLUSH: the tick flushes
    whatever is not flushed (the broker's send actor flushes before it answers). Every flush
    publishes through on_flushed(store time of the last record it covers)."""

    def __init__(self, cfg: StoreConfig, cl: FlushedLog, on_flushed: Callable[[int], None] | None,
                 published: Callable[[], int | None] | None) -> None:  # fmt: skip
        """published(): the end readers may use (None: the store is closed; no callable: the
        commit log's end)."""
        self.cfg = cfg
        self.cl = cl
        self._on_flushed = on_flushed
        self._published = published
        self._mu = threading.Lock()  # a flush's publishing: writer's thread vs this thread
        self.thread: MsyncThread | None = None
        self.last_flush_ms = 0
        self.last_thorough_ms = 0
        self.flush_target = 0  # end of the slice-by-slice round going on (no thread)

    @property
    def flushed_offset(self) -> int:
        """Offset known to be on disk."""
        return self.cl.mfq.flushed_where

    def start(self, now_ms: int, msync: Msync | None) -> None:
        """The intervals count from now; the thread (ASYNC_FLUSH, with ctypes' msync)."""
        self.last_flush_ms = self.last_thorough_ms = now_ms
        self.flush_target = 0
        if msync is not None and not self.cfg.is_sync_flush and self.thread is None:
            self.thread = MsyncThread("commitlog-flush", msync, self.flush_round)

    def flush(self, least_pages: int = 0, max_bytes: int = 0) -> int:
        """msync written bytes (files with >= least_pages dirty pages; at most max_bytes when
        > 0) on this thread and publish; returns the flushed offset."""
        mfq = self.cl.mfq
        with self._mu:
            mfq.flush(least_pages, max_bytes)
            if self._on_flushed is not None:
                self._on_flushed(self.cl.last_store_timestamp)
        return mfq.flushed_where

    def flushed_to(self, target: int, stamp: int, files: list[tuple[MappedFile, int]]) -> None:
        """A round (this thread's, GroupCommitService's) made each (file, position) and
        everything below target durable: record it and publish, with the store time of the
        last record it covers."""
        mfq = self.cl.mfq
        with self._mu:
            for mf, upto in files:
                mf.flushed_position = max(mf.flushed_position, upto)
            mfq.flushed_where = max(mfq.flushed_where, target)
            if self._on_flushed is not None:
                self._on_flushed(stamp)

    def tick(self, now_ms: int) -> tuple[int, bool]:
        """(ms until the next look, a round is going on in slices)."""
        cfg, cl = self.cfg, self.cl
        if cfg.is_sync_flush:
            if self.flushed_offset < cl.max_offset:
                self.flush()
            self.last_flush_ms = now_ms
            return cfg.flushIntervalCommitLog, False
        due = now_ms - self.last_flush_ms >= cfg.flushIntervalCommitLog
        if self.thread is not None:
            if due:
                dirty = cl.max_offset // OS_PAGE_SIZE - self.flushed_offset // OS_PAGE_SIZE
                thorough = self._thorough(now_ms)
                if dirty >= cfg.flushCommitLogLeastPages or (
                    thorough and cl.max_offset > self.flushed_offset
                ):
                    self.thread.request()
                self.last_flush_ms = now_ms
        elif self.flush_target > self.flushed_offset:
            self.flush(0, FLUSH_BYTES_PER_TICK)
        elif due:
            least = 0 if self._thorough(now_ms) else cfg.flushCommitLogLeastPages
            before = self.flushed_offset
            self.flush(least, FLUSH_BYTES_PER_TICK)
            # a round that started (enough pages were dirty) goes on in slices up to here
            self.flush_target = cl.max_offset if self.flushed_offset != before else before
            self.last_flush_ms = now_ms
        wait = cfg.flushIntervalCommitLog - (now_ms - self.last_flush_ms)
        return wait, self.thread is None and self.flush_target > self.flushed_offset

    def flush_round(self, sync: RangeSync) -> int:
        """The thread's round: msync of what was published when it started (the flushed offset
        never passes it), then the new flushed offset published with the store time read
        first; returns the offset now known to be on disk."""
        cl = self.cl
        stamp = cl.last_store_timestamp  # read first: every record stored by then is below
        published = self._published() if self._published is not None else cl.max_offset
        if published is None:
            return self.flushed_offset
        target = min(published, cl.max_offset)
        done: list[tuple[MappedFile, int]] = []
        for mf in list(cl.mfq.files):
            rng = None if mf.mm.closed else mf.dirty_range(0, target - mf.file_from_offset)
            if rng is None:
                continue
            start, upto = rng
            if not sync(mf, start, upto):
                log.warning("commit log flushed offset stays at %d", self.flushed_offset)
                return self.flushed_offset
            done.append((mf, upto))
        self.flushed_to(target, stamp, done)
        return target

    def _thorough(self, now_ms: int) -> bool:
        if now_ms - self.last_thorough_ms >= self.cfg.flushCommitLogThoroughInterval:
            self.last_thorough_ms = now_ms
            return True
        return False

    def close(self) -> None:
        """Stop the thread after its round."""
        if self.thread is not None:
            self.thread.close()
            self.thread = None


class FlushConsumeQueueService:
    """FlushConsumeQueueService: every flushIntervalConsumeQueue the consume queues with
    flushConsumeQueueLeastPages dirty pages (all of them every flushConsumeQueueThoroughInterval),
    then the checkpoint: `flush_logics(least_pages, sync)`, on its thread when there is one."""

    def __init__(self, cfg: StoreConfig, flush_logics: Callable[[int, RangeSync | None], bool],
                 msync: Msync | None) -> None:  # fmt: skip
        self.cfg = cfg
        self._flush_logics = flush_logics
        self._least: int | None = None
        self._least_mu = threading.Lock()  # the writer asks while the thread takes the request
        self.thread: MsyncThread | None = None
        if msync is not None:
            self.thread = MsyncThread("cq-flush", msync, self._run_round)
        self.last_flush_ms = 0
        self.last_thorough_ms = 0

    def start(self, now_ms: int) -> None:
        """The intervals count from now."""
        self.last_flush_ms = self.last_thorough_ms = now_ms

    def request_round(self, least_pages: int) -> None:
        """A round on the thread; a pending round keeps the smaller least_pages (0 = all)."""
        assert self.thread is not None
        with self._least_mu:
            cur = self._least
            self._least = least_pages if cur is None else min(cur, least_pages)
        self.thread.request()

    def _run_round(self, sync: RangeSync) -> bool:
        with self._least_mu:
            least = self._least or 0
            self._least = None
        return self._flush_logics(least, sync)

    def tick(self, now_ms: int) -> int:
        """A round when due; ms until the next."""
        cfg = self.cfg
        if now_ms - self.last_flush_ms >= cfg.flushIntervalConsumeQueue:
            self.last_flush_ms = now_ms
            least = cfg.flushConsumeQueueLeastPages
            if now_ms - self.last_thorough_ms >= cfg.flushConsumeQueueThoroughInterval:
                self.last_thorough_ms = now_ms
                least = 0
            if self.thread is not None:
                self.request_round(least)
            else:
                self._flush_logics(least, None)
        return cfg.flushIntervalConsumeQueue - (now_ms - self.last_flush_ms)

    def close(self) -> None:
        """Stop the thread after its round."""
        if self.thread is not None:
            self.thread.close()
            self.thread = None


# ---- group commit -----------------------------------------------------------------------------
class GroupCommitLog(FlushedLog, Protocol):
    """What GroupCommitService uses of the commit log."""

    flush_service: FlushRealTimeService


class GroupCommitStore(Protocol):
    """What GroupCommitService uses of the store: its put and its commit log."""

    cfg: StoreConfig

    @property
    def commitlog(self) -> GroupCommitLog: ...

    def put_message(self, msg: MessageExtBrokerInner, now_ms: int) -> PutMessageResult: ...


class GroupCommit:
    """Thread-safe SYNC_FLUSH helper (GroupCommitService): one fsync covers many writers.

    Writers put under the commit log's put lock, release it, then park on a private lock until
    the flushed offset covers their record. The flusher thread takes every record appended
    since the last flush in one fdatasync per touched file (CommitLog.group_flush: only those
    files' dirty pages are written; the call releases the GIL so writers keep appending
    meanwhile), then releases every covered waiter at once.
    """

    def __init__(self, store: GroupCommitStore, timeout_s: float | None = None) -> None:
        self.store = store
        self.timeout_s = timeout_s if timeout_s is not None else store.cfg.syncFlushTimeout / 1000
        self._mu = threading.Lock()
        self._kick = threading.Lock()
        self._kick.acquire()  # released (once) when a waiter arrives
        self._kicked = False
        self._waiters: list[tuple[int, Any]] = []
        self._flushed = store.commitlog.flush_service.flushed_offset
        self._stop = False
        self.fsyncs = 0
        self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
        self._thread.start()

    def put_and_wait(self, msg: MessageExtBrokerInner, now_ms: int) -> PutMessageResult:
        """Put under the put lock, then wait (without it) until a flush covers the record."""
        with self.store.commitlog.put_lock:
            res = self.store.put_message(msg, now_ms)
        if res.status is not PutMessageStatus.PUT_OK:
            return res
        if not self.wait_flushed(res.end_offset):
            res.status = PutMessageStatus.FLUSH_DISK_TIMEOUT
        return res
    def wait_flushed(self, end_offset: int) -> bool:
        """Block until flushed >= end_offset (or timeout)."""
        if self._flushed >= end_offset:
            return True
        lk = threading.Lock()
        lk.acquire()
        with self._mu:
            if self._flushed >= end_offset:
                return True
            if self._stop:
                return False
            self._waiters.append((end_offset, lk))
            if not self._kicked:
                self._kicked = True
                self._kick.release()
        lk.acquire(timeout=self.timeout_s)
        return self._flushed >= end_offset

    def _flush_once(self) -> int:
        """doCommit: fdatasync of every file written since the last round (the put lock held
        only to read what that is), then the new flushed offset."""
        cl = self.store.commitlog
        with cl.put_lock:
            target = cl.max_offset
            stamp = cl.last_store_timestamp
            todo = [
                (mf, min(mf.wrote_position, target - mf.file_from_offset))
                for mf in cl.mfq.files
                if mf.flushed_position < mf.wrote_position and mf.file_from_offset < target
            ]
        for mf, _upto in todo:
            mf.sync_data()  # fdatasync: the file's dirty pages, GIL released
        self.fsyncs += 1
        with cl.put_lock:
            cl.flush_service.flushed_to(target, stamp, todo)
        return target

    def _run(self) -> None:
        while True:
            self._kick.acquire()
            with self._mu:
                self._kicked = False
                waiters = self._waiters
                self._waiters = []
                if self._stop:
                    for _end, lk in waiters:
                        lk.release()
                    return
            if not waiters:
                continue
            target = self._flush_once()
            keep = []
            with self._mu:
                self._flushed = max(self._flushed, target)
            for item in waiters:
                if item[0] <= target:
                    item[1].release()
                else:
                    keep.append(item)
            if keep:
                with self._mu:
                    self._waiters.extend(keep)
                    if not self._kicked:
                        self._kicked = True
                        self._kick.release()

    def close(self) -> None:
        """Stop the flusher thread (waiters still parked are released as not flushed)."""
        with self._mu:
            self._stop = True
            if not self._kicked:
                self._kicked = True
                self._kick.release()
        self._thread.join(timeout=5)
