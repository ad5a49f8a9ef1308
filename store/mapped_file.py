"""Memory-mapped store files.

Mirrors store/MappedFile.java, RocketMQ 4.9.x (the queue of them: store.mapped_file_queue).

A MappedFile is one preallocated segment named by its 20-digit start offset. The writer maps it
read-write and pre-touches every page (RocketMQ's warmMappedFile) so appends never take a
first-touch page fault; readers in other processes map the same file read-only. There is no
transient store pool here, so the committed position always equals the wrote position.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
from collections.abc import Callable
from typing import Any, Final

log = logging.getLogger(__name__)

OS_PAGE_SIZE = mmap.PAGESIZE
MADV_POPULATE_WRITE: Final = 23  # Linux >= 5.14


# msync of [start, end) of a mapped file (anything with .mm and .path); False when it failed
RangeSync = Callable[[Any, int, int], bool]


def allocate(fd: int, path: str, offset: int, length: int, *, unlink_on_error: bool) -> None:
    """Allocate every block of [offset, offset + length) of the file (extending it), or raise
    OSError naming the file, with nothing half done: a writable mapping is only ever made over
    allocated blocks. A store through a mapping into a hole the file system cannot back (a
    full disk) is not an error the writer gets: it is SIGBUS, which kills the process, and in
    a Thespian actor (a Python handler for every signal) the faulting store runs again forever
    with the GIL held: the send actor spun at 100 % and answered nothing (issue #20).
    unlink_on_error: the file was just made for this, remove it again (its space with it)."""
    try:
        os.posix_fallocate(fd, offset, length)
    except OSError as exc:
        if unlink_on_error:  # (not truncated: a reader may have mapped it meanwhile)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        raise OSError(exc.errno, f"{exc.strerror}: allocating {length} bytes", path) from None


def offset2file_name(offset: int) -> str:
    """20-digit zero-padded file name (UtilAll.offset2FileName)."""
    return f"{offset:020d}"


class MappedFile:
    """One fixed-size mmap'd segment of a store file queue."""

    __slots__ = (
        "allocate_step",
        "allocated",
        "fd",
        "file_from_offset",
        "file_name",
        "file_size",
        "flushed_position",
        "inode",
        "mm",
        "mv",
        "path",
        "store_timestamp",
        "writable",
        "wrote_position",
    )

    def __init__(
        self, path: str, file_size: int, *, writable: bool = True, create: bool = False,
        allocate_step: int = 0,
    ) -> None:
        """allocate_step 0: the whole file is allocated when it is made (a commit-log file,
        which fills anyway); > 0: it stays sparse, as Java's are, and its blocks are allocated
        that many bytes at a time ahead of the writes (allocate_to; a consume-queue file of
        5.7 MiB per queue holds 20 bytes a message)."""
        self.path = path
        self.allocate_step = allocate_step
        self.file_name = os.path.basename(path)
        self.file_from_offset = int(self.file_name)
        self.file_size = file_size
        self.writable = writable
        self.wrote_position = 0
        self.flushed_position = 0
        self.store_timestamp = 0
        if writable:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                st = os.fstat(fd)
                size = st.st_size
                self.inode = st.st_ino
                # an existing sparse file: what is allocated is not known, allocate_to starts at 0
                self.allocated = 0 if allocate_step else file_size
                if size != file_size:
                    if size > file_size:
                        raise ValueError(f"{path}: size {size} larger than configured {file_size}")
                    if not create:
                        log.warning("extending short store file path=%s size=%d", path, size)
                    if allocate_step:
                        os.ftruncate(fd, file_size)
                        self.allocated = min(allocate_step, file_size)
                    allocate(fd, path, 0, self.allocated, unlink_on_error=size == 0)
                    if size == 0:
                        # measured here: the first store through a new file's mapping costs
                        # ~1.3 ms (0.05 ms when the first page was written with pwrite); a new
                        # consume queue would pay that on the put path
                        os.pwrite(fd, bytes(min(OS_PAGE_SIZE, file_size)), 0)
                self.mm = mmap.mmap(fd, file_size, access=mmap.ACCESS_WRITE)
            except BaseException:
                os.close(fd)
                raise
            self.fd = fd  # kept open for fdatasync (group commit)
        else:
            self.fd = -1
            self.allocated = 0
            fd = os.open(path, os.O_RDONLY)
            try:
                st = os.fstat(fd)
                size = st.st_size
                self.inode = st.st_ino
                if size < file_size:
                    # the writer is still creating it (O_CREAT, first page, then ftruncate):
                    # a mapping taken now would stay short for good; the next refresh maps it
                    raise ValueError(f"{path}: {size} of {file_size} bytes, still being created")
                self.mm = mmap.mmap(fd, file_size, access=mmap.ACCESS_READ)
            finally:
                os.close(fd)
        self.mv = memoryview(self.mm)

    def allocate_to(self, end: int) -> None:
        """Allocate the file's blocks up to `end` (bytes from its start) before they are written,
        allocate_step at a time; OSError (a full disk) with nothing written."""
        if end <= self.allocated:
            return
        stop = min(self.file_size, max(end, self.allocated + self.allocate_step))
        allocate(self.fd, self.path, self.allocated, stop - self.allocated, unlink_on_error=False)
        self.allocated = stop

    def warm(self, flush_pages: int = 0) -> None:
        """Touch every page from the wrote position on: appends take no faults (warmMappedFile).

        flush_pages > 0 (SYNC_FLUSH): msync every flush_pages pages while warming, as RocketMQ
        forces the buffer every flushLeastPagesWhenWarmMapedFile pages, so no file's worth of
        dirty zeros is left to background writeback competing with the group-commit fsyncs
        (measured: median flush per round 115-130 us -> 68-88 us). The cost is one
        write-protect fault per page on its first append (the pages are clean again).
        """
        self.warm_range(0, self.file_size, flush_pages)

    def warm_range(self, start: int, limit: int, flush_pages: int = 0) -> None:
        """warm() restricted to [start, limit) (start page-aligned), for warming in steps."""
        if not self.writable:
            return
        first = max(start, self.wrote_position // OS_PAGE_SIZE * OS_PAGE_SIZE)
        end = min(limit, self.file_size)
        chunk = flush_pages * OS_PAGE_SIZE if flush_pages > 0 else self.file_size
        for s in range(first, end, chunk):
            n = min(chunk, end - s)
            self._populate(s, n)
            if flush_pages > 0:
                self.mm.flush(s, n)

    def _populate(self, start: int, n: int) -> None:
        """Write-fault the pages of [start, start + n) (start page-aligned)."""
        try:
            self.mm.madvise(MADV_POPULATE_WRITE, start, n)
            return
        except (OSError, ValueError):
            pass
        # Write one zero byte per page above the wrote position (a C-level strided copy).
        lo = max(start, (self.wrote_position + OS_PAGE_SIZE - 1) // OS_PAGE_SIZE * OS_PAGE_SIZE)
        k = len(range(lo, start + n, OS_PAGE_SIZE))
        if k:
            self.mm[lo : start + n : OS_PAGE_SIZE] = bytes(k)

    @property
    def file_end_offset(self) -> int:
        """Global offset one past this file."""
        return self.file_from_offset + self.file_size

    @property
    def committed_position(self) -> int:
        """Committed position (no transient pool: equals the wrote position)."""
        return self.wrote_position

    def is_full(self) -> bool:
        """True when nothing more fits."""
        return self.wrote_position >= self.file_size

    def dirty_range(self, least_pages: int = 0, upto: int | None = None) -> tuple[int, int] | None:
        """(page-aligned start, end) of what is written but not flushed (up to `upto`), or None
        when nothing is, or when fewer than least_pages pages are and the file is not full
        (MappedFile.isAbleToFlush: a full file is flushed whatever least_pages says)."""
        wrote = self.wrote_position if upto is None else min(self.wrote_position, upto)
        flushed = self.flushed_position
        if wrote <= flushed:
            return None
        if (
            least_pages > 0
            and not self.is_full()
            and wrote // OS_PAGE_SIZE - flushed // OS_PAGE_SIZE < least_pages
        ):
            return None
        return flushed // OS_PAGE_SIZE * OS_PAGE_SIZE, wrote

    def flush(self, least_pages: int = 0, max_bytes: int = 0) -> int:
        """msync the dirty range (see dirty_range; at most max_bytes of it when max_bytes > 0);
        returns the flushed position."""
        rng = self.dirty_range(least_pages)
        if rng is None:
            return self.flushed_position
        start, end = rng
        if max_bytes > 0:
            end = min(end, start + max_bytes)
        self.mm.flush(start, end - start)
        self.flushed_position = end
        return end

    def sync_data(self) -> None:
        """fdatasync the file: writes its dirty pages (the unflushed range) and releases the GIL."""
        if self.fd >= 0:
            os.fdatasync(self.fd)
        else:
            self.mm.flush()

    def zero_from(self, pos: int) -> None:
        """Zero stale bytes from pos on (a dirty tail after truncation).

        Walks 1 MiB chunks and stops after 4 consecutive chunks that are already zero, so a
        preallocated file is not rewritten end to end.
        """
        if not self.writable or pos >= self.file_size:
            return
        chunk = 1 << 20
        zeros = bytes(chunk)
        clean_run = 0
        mv = self.mv
        while pos < self.file_size and clean_run < 4:
            end = min(pos + chunk, self.file_size)
            n = end - pos
            if mv[pos:end] == zeros[:n]:
                clean_run += 1
            else:
                clean_run = 0
                self.mm[pos:end] = zeros[:n]
            pos = end

    def close(self) -> None:
        """Unmap; a still-exported memoryview keeps the mapping alive until collected."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.mv.release()
        try:
            self.mm.close()
        except BufferError:
            log.debug("mapping still exported, left to GC path=%s", self.path)

    def destroy(self, unlink: Callable[[str], None] | None = None) -> None:
        """Unmap and delete the file (through `unlink(path)` when given, e.g. on a thread)."""
        self.close()
        if unlink is not None:
            unlink(self.path)
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        log.info("deleted store file path=%s", self.path)
