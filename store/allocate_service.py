"""Creates and warms the commit log's next segment on a thread, ahead of the writer; deletes
expired segments on a thread.

Mirrors store/AllocateMappedFileService.java + MappedFile.warmMappedFile, RocketMQ 4.9.x: the
next file is created, mapped and pre-touched before the writer rolls into it, so no append takes
a first-touch page fault and no request waits for the warm-up.

Warming a segment is page faults: MADV_POPULATE_WRITE of 8 MiB was measured at 6.8 ms here, and
mmap.madvise holds the GIL through it, so warming in the writer's tick stalled its requests for
that long every few milliseconds until a whole segment (1 GiB: ~0.9 s) was warm. This thread
calls madvise (and, when warming flushes, msync) through ctypes, which releases the GIL.

Deleting is the same story the other way round: unlinking a 1 GiB segment whose pages are in
the page cache was measured at 484 ms here (the kernel drops every cached page), so retention's
unlinks go to a thread too (RocketMQ's CleanCommitLogService is not on the put path either).
Only names that are never created again are deleted this way: segments below the log's min
offset.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Final

from store.flush_service import MS_SYNC, Msync, ServiceThread, ctypes_errno, map_address
from store.mapped_file import MADV_POPULATE_WRITE, OS_PAGE_SIZE, MappedFile
from store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

WARM_CHUNK: Final = 8 * 1024 * 1024
TOUCH_STEP: Final = 1024 * 1024  # the fallback's writes per next_lock hold (the writer may wait)


class AllocateMappedFileService(ServiceThread):
    """A daemon thread that preallocates and warms mfq's next segment when asked."""

    NAME = "allocate-mapped-file"

    def __init__(
        self, mfq: MappedFileQueue, madvise: Msync, msync: Msync | None = None,
        chunk: int = WARM_CHUNK,
    ) -> None:  # fmt: skip
        self.mfq = mfq
        self._madvise = madvise
        self._msync = msync
        self.chunk = max(OS_PAGE_SIZE, chunk // OS_PAGE_SIZE * OS_PAGE_SIZE)
        self.rounds = 0
        self.warmed_bytes = 0
        self.error = ""  # why the last round could not make the next segment ("" = it could)
        super().__init__()

    def run_once(self) -> None:
        """Create and map the next segment if it is missing, then warm what is not warm yet
        (a close() during a warm-up ends it at its next chunk). A segment that cannot be made
        (a full disk) is tried again at the next request: the writer's clean pass makes one
        every cleanResourceInterval; logged once until a round makes it again."""
        mfq = self.mfq
        try:
            mfq.preallocate_next()
        except OSError as exc:
            if not self.error:
                log.warning("the next commit-log file cannot be preallocated (%s): tried again "
                            "every cleanResourceInterval", exc)
            self.error = str(exc)
            self.rounds += 1
            return
        if self.error:
            self.error = ""
            log.info("the next commit-log file is preallocated again")
        got = mfq.next_to_warm()
        if got is not None and mfq.warm_files:
            self._warm(*got)
        self.rounds += 1

    def _warm(self, mf: MappedFile, start: int) -> None:
        flush_pages = self.mfq.warm_flush_pages
        try:
            addr = map_address(mf.mm)
        except (ValueError, BufferError):  # closed meanwhile
            return
        pos = start
        while pos < mf.file_size and not self._stop and not mf.mm.closed:
            n = min(self.chunk, mf.file_size - pos)
            if self._madvise(addr + pos, n, MADV_POPULATE_WRITE) != 0:
                if mf.mm.closed:
                    return
                log.debug("madvise populate failed errno=%d: touching pages", ctypes_errno())
                if not self._touch(mf, pos, pos + n):
                    return  # the writer took the segment (or it was closed): no more writes
            if flush_pages > 0 and self._msync is not None:
                self._msync(addr + pos, n, MS_SYNC)  # SYNC_FLUSH: no dirty zeros left behind
            pos += n
            self.warmed_bytes += n
            if not self.mfq.note_warmed(mf, pos):
                return  # the writer took the segment

    def _touch(self, mf: MappedFile, start: int, end: int) -> bool:
        """Warm [start, end) of mf the writer's way (a zero byte written per page above its
        wrote position, GIL held), TOUCH_STEP at a time and only while mf is still the next
        segment nobody writes to: under next_lock, which the writer needs to take it, so no
        append can land between reading the wrote position and writing the zeros. False once
        the writer took it or it was closed."""
        mfq = self.mfq
        pos = start
        while pos < end and not self._stop:
            step = min(TOUCH_STEP, end - pos)
            with mfq.next_lock:
                if not mfq.is_next(mf) or mf.mm.closed:
                    return False
                try:
                    mf.warm_range(pos, pos + step)
                except (ValueError, OSError):
                    return False
            pos += step
        return True


class FileDeleter:
    """Unlinks retired segment files on daemon threads; join() waits for those still going."""

    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self.deleted = 0

    def unlink(self, path: str) -> None:
        """Delete path on a thread of its own (deletions are rare: one per segment)."""
        self._threads = [t for t in self._threads if t.is_alive()]
        t = threading.Thread(target=self._unlink, args=(path,), name="unlink-segment", daemon=True)
        self._threads.append(t)
        t.start()

    def _unlink(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self.deleted += 1
        log.info("deleted store file path=%s", path)

    def join(self, timeout_s: float = 30.0) -> None:
        """Wait (bounded) for the deletions going on."""
        for t in self._threads:
            t.join(timeout_s)
        self._threads = []
