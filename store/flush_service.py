"""Flush threads of the store writer: the commit log's and the consume queues' msyncs.

Mirrors store/CommitLog.java FlushRealTimeService and DefaultMessageStore.java
FlushConsumeQueueService, RocketMQ 4.9.x: each runs on its own thread so that a flush which waits
behind the disk's writeback never holds up an append.

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
from typing import TYPE_CHECKING, Any, Final

from store.mapped_file import MappedFile
from store.put_message_result import PutMessageResult, PutMessageStatus

if TYPE_CHECKING:
    from store.message_ext_broker_inner import MessageExtBrokerInner
    from store.message_store import DefaultMessageStore

log = logging.getLogger(__name__)

MS_SYNC: Final = 4  # <sys/mman.h> on Linux
Msync = Callable[[int, int, int], int]


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


class _MsyncThread(ServiceThread):
    """A ServiceThread whose rounds msync mapped files through ctypes."""

    NAME = "flush"

    def __init__(self, store: DefaultMessageStore, msync: Msync) -> None:
        self.store = store
        self._msync = msync
        self._addr: dict[str, tuple[Any, int]] = {}  # path -> (mmap, its address)
        self.rounds = 0
        super().__init__()

    def _address(self, mf: Any) -> int:
        hit = self._addr.get(mf.path)
        if hit is None or hit[0] is not mf.mm:
            if len(self._addr) > 256:
                self._addr.clear()
            hit = self._addr[mf.path] = (mf.mm, map_address(mf.mm))
        return hit[1]

    def _sync(self, mf: Any, start: int, end: int) -> bool:
        """msync [start, end) of mf (a MappedFile or the checkpoint; start page-aligned);
        False when it failed."""
        if mf.mm.closed:
            return False
        if self._msync(self._address(mf) + start, end - start, MS_SYNC) == 0:
            return True
        if not mf.mm.closed:  # a file closed under the round is expected; anything else is not
            log.warning("msync failed path=%s errno=%d", mf.path, ctypes_errno())
        return False


class CommitLogFlusher(_MsyncThread):
    """FlushRealTimeService: msync of the commit log up to what the writer had published.

    A round covers what was published when it started: the flushed offset never passes the
    published max offset, and the checkpoint's physic timestamp is the one read before it.
    """

    NAME = "commitlog-flush"

    def run_once(self) -> int:
        """msync what was published when called; returns the offset now known to be on disk."""
        store = self.store
        st = store.state
        cl = store.commitlog
        if st is None:
            return cl.flushed_offset
        stamp = cl.last_store_timestamp  # read first: every record stored by then is below target
        target = min(st.max_phy, cl.max_offset)
        done: list[tuple[MappedFile, int]] = []
        for mf in list(cl.mfq.files):
            rng = None if mf.mm.closed else mf.dirty_range(0, target - mf.file_from_offset)
            if rng is None:
                continue
            start, upto = rng
            if not self._sync(mf, start, upto):
                log.warning("commit log flushed offset stays at %d", cl.flushed_offset)
                return cl.flushed_offset
            done.append((mf, upto))
        with store._flush_mu:
            for mf, upto in done:
                mf.flushed_position = max(mf.flushed_position, upto)
            mfq = cl.mfq
            mfq.flushed_where = max(mfq.flushed_where, target)
            if store.state is not None:
                store._after_flush(stamp)
        self.rounds += 1
        return target


class ConsumeQueueFlusher(_MsyncThread):
    """FlushConsumeQueueService: msync of the consume queues, then the checkpoint.

    request(least_pages) asks for a round that skips files with fewer dirty pages (0 = all);
    the logics timestamp advances only after a round that left nothing dirty.
    """

    NAME = "cq-flush"

    def __init__(self, store: DefaultMessageStore, msync: Msync) -> None:
        self._least: int | None = None
        self._least_mu = threading.Lock()  # the writer asks while this thread takes the request
        super().__init__(store, msync)

    def request_round(self, least_pages: int) -> None:
        """Start a round; a pending round keeps the smaller least_pages (0 = flush all)."""
        with self._least_mu:
            cur = self._least
            self._least = least_pages if cur is None else min(cur, least_pages)
        self.request()

    def run_once(self) -> bool:
        """One round; True when every consume queue was flushed whole."""
        with self._least_mu:
            least = self._least or 0
            self._least = None
        store = self.store
        complete = store.flush_logics(least, self._sync)
        self.rounds += 1
        return complete


# ---- group commit -----------------------------------------------------------------------------
class GroupCommit:
    """Thread-safe SYNC_FLUSH helper (GroupCommitService): one fsync covers many writers.

    Writers append under `store.put_lock`, release it, then park on a private lock until the
    flushed offset covers their record. The flusher thread takes every record appended since the
    last flush in one fdatasync per touched file (only those files' dirty pages are written; the
    call releases the GIL so writers keep appending meanwhile), then releases every covered
    waiter at once.
    """

    def __init__(self, store: DefaultMessageStore, timeout_s: float | None = None) -> None:
        self.store = store
        self.timeout_s = timeout_s if timeout_s is not None else store.cfg.syncFlushTimeout / 1000
        self._mu = threading.Lock()
        self._kick = threading.Lock()
        self._kick.acquire()  # released (once) when a waiter arrives
        self._kicked = False
        self._waiters: list[tuple[int, Any]] = []
        self._flushed = store.flushed_offset
        self._stop = False
        self.fsyncs = 0
        self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
        self._thread.start()

    def put_and_wait(self, msg: MessageExtBrokerInner, now_ms: int) -> PutMessageResult:
        """Put under the store lock, then wait (without it) until a flush covers the record."""
        with self.store.put_lock:
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
        store = self.store
        cl = store.commitlog
        with store.put_lock:
            target = cl.max_offset
            todo = [
                (mf, min(mf.wrote_position, target - mf.file_from_offset))
                for mf in cl.mfq.files
                if mf.flushed_position < mf.wrote_position and mf.file_from_offset < target
            ]
        for mf, upto in todo:
            mf.sync_data()  # fdatasync: the file's dirty pages, GIL released
            mf.flushed_position = max(mf.flushed_position, upto)
        self.fsyncs += 1
        with store.put_lock:
            cl.mfq.flushed_where = max(cl.mfq.flushed_where, target)
            store._after_flush()
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
