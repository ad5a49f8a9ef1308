"""The ordered segments of one store directory (the commit log, or one consume queue).

Mirrors store/MappedFileQueue.java, RocketMQ 4.9.x: the files by start offset, the last one to
write (made on demand or preallocated), lookups by offset, the flushed position, truncation and
the positions recovery sets.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator

from store.mapped_file import OS_PAGE_SIZE, MappedFile, RangeSync, offset2file_name

log = logging.getLogger(__name__)


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

    def has_room(self, need: int, reserve: int, current: MappedFile | None) -> bool:
        """`need` bytes (plus `reserve`, what must stay free at a file's end) can be appended
        without creating a file: they fit the file being written (`current`, else the last
        one not full), or the next one is preallocated, or no file could ever hold them."""
        mf = current
        if mf is None:
            files = self.files
            mf = files[-1] if files and not files[-1].is_full() else None
        if mf is not None and need + reserve <= mf.file_size - mf.wrote_position:
            return True
        return need + reserve > self.file_size or self.next_ready()

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

    def set_recovered(self, end: int) -> None:
        """After recovery: every file's wrote and flushed positions from the valid end offset
        (recoverNormally's setFlushedWhere / setCommittedWhere over the files)."""
        for mf in self.files:
            if mf.file_end_offset <= end:
                mf.wrote_position = mf.file_size
                mf.flushed_position = mf.file_size
            else:
                mf.wrote_position = max(0, end - mf.file_from_offset)
                mf.flushed_position = mf.wrote_position
        self.flushed_where = end

    def select(self, offset: int, size: int) -> memoryview | None:
        """A view of `size` bytes at `offset` (selectMappedBuffer), or None when that file is
        gone or holds fewer bytes."""
        mf = self.find_mapped_file_by_offset(offset)
        if mf is None:
            return None
        p = offset - mf.file_from_offset
        if p + size > len(mf.mv):
            return None
        return mf.mv[p : p + size]

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
