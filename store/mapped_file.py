"""Memory-mapped store files and the queue of them.

Mirrors store/MappedFile.java and store/MappedFileQueue.java, RocketMQ 4.9.x.

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
import threading
from collections.abc import Callable, Iterator
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


class MappedFileQueue:
    """The ordered segments of one store directory (commitlog or one consume queue)."""

    def __init__(
        self,
        store_path: str,
        file_size: int,
        *,
        writable: bool = True,
        warm: bool = True,
        warm_flush_pages: int = 0,
        allocate_step: int = 0,
    ) -> None:
        self.store_path = store_path
        self.allocate_step = allocate_step  # > 0: files stay sparse (MappedFile.allocate_to)
        self.file_size = file_size
        self.writable = writable
        self.warm_files = warm
        self.warm_flush_pages = warm_flush_pages  # > 0: msync while warming (SYNC_FLUSH)
        self._next: MappedFile | None = None  # preallocated next segment (warmed in steps)
        self._next_warmed = 0  # bytes of _next warmed so far
        # _next is made by the allocate thread (store.allocate_service) and taken by the writer
        self.next_lock = threading.Lock()
        self.files: list[MappedFile] = []
        self.flushed_where = 0
        self.store_timestamp = 0

    # ---- loading -------------------------------------------------------------------------
    def load(self) -> bool:
        """Map every existing segment in order; returns False on a bad file name or size."""
        if not os.path.isdir(self.store_path):
            if self.writable:
                os.makedirs(self.store_path, exist_ok=True)
            return True
        names = sorted(n for n in os.listdir(self.store_path) if len(n) == 20 and n.isdigit())
        for name in names:
            path = os.path.join(self.store_path, name)
            if not self.writable and os.path.getsize(path) < self.file_size:
                # the newest file, still being created by the writer: refresh() maps it later
                log.info("store file not complete yet path=%s", path)
                break
            mf = MappedFile(path, self.file_size, writable=self.writable,
                            allocate_step=self.allocate_step)
            mf.wrote_position = self.file_size
            mf.flushed_position = self.file_size
            self.files.append(mf)
        return True

    def refresh(self) -> None:
        """Reader: pick up segments created or deleted since the last look (a segment deleted
        and made again under the same name, as a deleted topic's queue, is mapped anew)."""
        try:
            with os.scandir(self.store_path) as it:
                names = [e.name for e in it if len(e.name) == 20 and e.name.isdigit()]
        except FileNotFoundError:  # the whole queue was deleted
            names = []
        found: dict[str, int] = {}
        for name in names:  # st_ino, not the dirent's d_ino (overlay file systems differ there)
            try:
                found[name] = os.stat(os.path.join(self.store_path, name)).st_ino
            except FileNotFoundError:
                continue
        have = {mf.file_name: mf for mf in self.files}
        files: list[MappedFile] = []
        for name in sorted(found):
            mf = have.pop(name, None)
            if mf is not None and mf.inode != found[name]:
                have[name + "~"] = mf  # a new file under the old name: close the stale one
                mf = None
            if mf is None:
                try:
                    mf = MappedFile(
                        os.path.join(self.store_path, name), self.file_size, writable=False
                    )
                except (FileNotFoundError, ValueError):
                    continue
                mf.wrote_position = self.file_size
            files.append(mf)
        for gone in have.values():
            gone.close()
        self.files = files

    # ---- positions -----------------------------------------------------------------------
    def get_min_offset(self) -> int:
        """Global start offset of the first file, or -1 when empty."""
        return self.files[0].file_from_offset if self.files else -1

    def get_max_offset(self) -> int:
        """Global offset one past the last written byte."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.wrote_position

    def get_last_mapped_file(
        self, start_offset: int = 0, need_create: bool = True
    ) -> MappedFile | None:
        """The file being appended to; creates the first/next one when needed."""
        last = self.files[-1] if self.files else None
        if last is not None and not last.is_full():
            return last
        if not need_create:
            return last
        if last is None:
            create_offset = start_offset - start_offset % self.file_size
        else:
            create_offset = last.file_end_offset
        return self._create(create_offset)

    def warm(self, mf: MappedFile) -> None:
        """Warm mf as this queue warms its files (no-op when warming is off)."""
        if self.warm_files:
            mf.warm(self.warm_flush_pages)

    def _create(self, offset: int) -> MappedFile:
        path = os.path.join(self.store_path, offset2file_name(offset))
        # the whole take-or-create under the lock: the allocate thread must not make the same
        # segment meanwhile (it looks at files[-1] and the path, which change here)
        with self.next_lock:
            nxt = self._next
            self._next = None
            if nxt is not None and nxt.path == path and os.path.exists(path):
                mf = nxt  # preallocated and (partly) warmed off the put path: no second warm
                # (it would dirty every page again); pages not warmed yet fault on first append
            else:
                if nxt is not None:
                    nxt.close()
                os.makedirs(self.store_path, exist_ok=True)
                mf = MappedFile(path, self.file_size, writable=True, create=True,
                                allocate_step=self.allocate_step)
                self.warm(mf)
            self.files.append(mf)
        log.info("created mapped file path=%s size=%d", path, self.file_size)
        return mf

    def create_next(self) -> MappedFile:
        """Create the segment after the last one now (a consume queue's room for a batch
        whose units go past its last file); OSError when it cannot be made."""
        return self._create(self.files[-1].file_end_offset)

    def next_ready(self) -> bool:
        """The segment after the last one is preallocated: rolling into it creates nothing."""
        nxt = self._next  # one load: the allocate thread only ever replaces it whole
        return (
            nxt is not None
            and bool(self.files)
            and nxt.file_from_offset == self.files[-1].file_end_offset
        )

    def preallocate_next(self) -> None:
        """Create and map the next segment ahead of time (AllocateMappedFileService); OSError
        when it cannot be made (nothing is left behind)."""
        with self.next_lock:
            self._preallocate_next()

    def next_to_warm(self) -> tuple[MappedFile, int] | None:
        """(the preallocated next segment, bytes of it warmed so far), or None."""
        with self.next_lock:
            nxt = self._next
            return None if nxt is None else (nxt, self._next_warmed)

    def is_next(self, mf: MappedFile) -> bool:
        """mf is still the preallocated next segment (call with next_lock held)."""
        return self._next is mf

    def note_warmed(self, mf: MappedFile, upto: int) -> bool:
        """The allocate thread warmed mf up to `upto`; False once mf is no longer the next
        segment (the writer took it: warming it further would only compete with appends)."""
        with self.next_lock:
            if self._next is not mf:
                return False
            self._next_warmed = max(self._next_warmed, upto)
            return True

    def _preallocate_next(self) -> None:
        if not self.files:
            return
        nxt = self.files[-1].file_end_offset
        path = os.path.join(self.store_path, offset2file_name(nxt))
        if self._next is not None:
            if self._next.path == path:
                return
            self._next.close()
            self._next = None
        if not os.path.exists(path):
            # mapped now, warmed in steps by warm_next_step(): warming a whole segment at once
            # (up to 1 GiB of page faults) would stall the writer for hundreds of ms
            self._next = MappedFile(path, self.file_size, writable=True, create=True,
                                    allocate_step=self.allocate_step)
            self._next_warmed = 0 if self.warm_files else self.file_size

    def warm_next_step(self, max_bytes: int) -> bool:
        """Warm up to max_bytes more of the preallocated next segment; True while some is left."""
        mf = self._next
        if mf is None or self._next_warmed >= mf.file_size:
            return False
        start = self._next_warmed
        step = max(OS_PAGE_SIZE, max_bytes // OS_PAGE_SIZE * OS_PAGE_SIZE)
        mf.warm_range(start, start + step, self.warm_flush_pages)
        self._next_warmed = min(mf.file_size, start + step)
        return self._next_warmed < mf.file_size

    def find_mapped_file_by_offset(self, offset: int) -> MappedFile | None:
        """The segment holding global offset, or None."""
        files = self.files
        if not files:
            return None
        first = files[0].file_from_offset
        idx = (offset - first) // self.file_size
        if 0 <= idx < len(files):
            mf = files[idx]
            if mf.file_from_offset <= offset < mf.file_end_offset:
                return mf
        for mf in files:
            if mf.file_from_offset <= offset < mf.file_end_offset:
                return mf
        return None

    def __iter__(self) -> Iterator[MappedFile]:
        return iter(self.files)

    # ---- flushing ------------------------------------------------------------------------
    def flush(self, least_pages: int = 0, max_bytes: int = 0) -> bool:
        """Flush the file holding flushed_where onward (at most max_bytes when > 0, then the
        next call goes on); returns True when something was flushed."""
        mf = self.find_mapped_file_by_offset(self.flushed_where)
        if mf is None:
            mf = self.files[-1] if self.files else None
            if mf is None or mf.file_from_offset > self.flushed_where:
                if mf is not None:
                    self.flushed_where = mf.file_from_offset
                else:
                    return False
        before = self.flushed_where
        pos = mf.flush(least_pages, max_bytes)
        where = mf.file_from_offset + pos
        self.flushed_where = where
        if pos >= mf.file_size and max_bytes <= 0:
            # finished this file: continue with the next one if it has data
            nxt = self.find_mapped_file_by_offset(where)
            if nxt is not None and nxt.wrote_position > nxt.flushed_position:
                return self.flush(least_pages) or where != before
        return where != before

    def flush_ranges(self, least_pages: int = 0, sync: RangeSync | None = None) -> bool:
        """Flush every file's dirty range that has >= least_pages dirty pages (0 = any), through
        `sync` (None = mmap.flush); True when nothing was left dirty."""
        complete = True
        for mf in list(self.files):
            if mf.wrote_position <= mf.flushed_position:
                continue
            rng = mf.dirty_range(least_pages)
            if rng is None:  # dirty, but fewer pages than asked for
                complete = False
                continue
            start, wrote = rng
            if sync is None:
                mf.mm.flush(start, wrote - start)
            elif not sync(mf, start, wrote):
                complete = False
                continue
            mf.flushed_position = max(mf.flushed_position, wrote)
            if complete:  # flushed_where never passes a file left dirty (flush() resumes there)
                self.flushed_where = max(self.flushed_where, mf.file_from_offset + wrote)
        return complete

    # ---- truncation / deletion -----------------------------------------------------------
    def truncate_dirty_files(self, offset: int) -> None:
        """Drop everything at or after global offset (zero the partial file's tail)."""
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.file_end_offset > offset:
                if mf.file_from_offset <= offset:
                    pos = offset - mf.file_from_offset
                    mf.wrote_position = pos
                    mf.flushed_position = min(mf.flushed_position, pos)
                    mf.zero_from(pos)
                    keep.append(mf)
                else:
                    mf.destroy()
            else:
                keep.append(mf)
        self.files = keep
        self.flushed_where = min(self.flushed_where, offset)

    def delete_first(
        self, count: int, unlink: Callable[[str], None] | None = None
    ) -> list[MappedFile]:
        """Remove and destroy the first count files (see MappedFile.destroy for `unlink`)."""
        gone = self.files[:count]
        self.files = self.files[count:]
        for mf in gone:
            mf.destroy(unlink)
        return gone

    def reset_offset(self, offset: int) -> None:
        """Start an empty queue at offset (files named from there)."""
        self._drop_next()
        for mf in self.files:
            mf.destroy()
        self.files = []
        self.flushed_where = offset

    def close(self) -> None:
        """Unmap every file."""
        for mf in self.files:
            mf.close()
        self.files = []
        self._drop_next()

    def _drop_next(self) -> None:
        with self.next_lock:
            nxt, self._next = self._next, None
        if nxt is not None:
            nxt.close()
