"""Consume queue: fixed 20-byte units pointing into the commit log, one queue per topic/qid.

Mirrors store/ConsumeQueue.java, RocketMQ 4.9.x.

Unit layout (big-endian)::

    off size field
    0   8    commitLogOffset   phy offset of the record
    8   4    size              record size in bytes (Integer.MAX_VALUE in a pre-blank unit)
    12  8    tagsCode          tag hash, or the delivery time in SCHEDULE_TOPIC_XXXX

Files hold `mappedFileSizeConsumeQueue / 20` units (300 000 by default) and are named by the
byte offset of their first unit. A unit is *visible* to readers only when size > 0 and
phy + size <= the published commit-log max offset: the writer publishes that offset after it
has written both the record and its unit, so a reader never follows a half-written unit. A
reader tests a unit the writer may be writing (the first one past that offset) by loading its
size before its phy (`unit_visible`); that relies, as the state page does, on stores becoming
visible to other processes in program order (x86-64).
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable
from typing import Final

from store.mapped_file import MappedFile
from store.mapped_file_queue import MappedFileQueue

log = logging.getLogger(__name__)

CQ_UNIT = struct.Struct(
    ">q"  # commitLogOffset
    "i"  # size
    "q"  # tagsCode
)
CQ_UNIT_SIZE: Final = CQ_UNIT.size  # 20
_UNIT_PHY = struct.Struct(">q")
_UNIT_SIZE = struct.Struct(">i")
PRE_BLANK_SIZE: Final = 0x7FFFFFFF
# a file's blocks are allocated this much ahead of its units (MappedFile.allocate_to): the
# file stays as small as what it holds, as Java's sparse one does (a whole file is 5.7 MiB a
# queue by default), and a full disk is an OSError before a put writes, never a store into a
# hole (SIGBUS: store.mapped_file.allocate)
ALLOCATE_STEP: Final = 64 * 1024  # 3,276 units
_units_cache: dict[int, struct.Struct] = {}


def units_struct(n: int) -> struct.Struct:
    """A Struct unpacking n consecutive units in one call."""
    s = _units_cache.get(n)
    if s is None:
        s = _units_cache[n] = struct.Struct(">" + "qiq" * n)
    return s


class ConsumeQueue:
    """One topic/queue's consume queue."""

    def __init__(
        self, root: str, topic: str, queue_id: int, file_size: int, *, writable: bool = True
    ) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.units_per_file = file_size // CQ_UNIT_SIZE
        self.path = os.path.join(root, topic, str(queue_id))
        # not pre-touched: a 20-byte unit takes one first-touch fault per ~200 units, while
        # populating each new queue's 6 MB file cost ~3 ms (7 us/msg for 2000 msgs per topic)
        self.mfq = MappedFileQueue(self.path, file_size, writable=writable, warm=False,
                                   allocate_step=min(ALLOCATE_STEP, file_size))
        self.writable = writable
        self.min_logic_offset = 0  # byte offset
        self.max_phy_offset = 0  # end (phy + size) of the last unit
        self._max_pos = 0  # byte offset one past the last unit (writer)
        self._cur: MappedFile | None = None

    # ---- load / recover -----------------------------------------------------------------
    def load(self) -> bool:
        """Map the files."""
        return self.mfq.load()

    def recover(self) -> None:
        """Find the end of the written units (a zero size ends them) and truncate after it."""
        files = self.mfq.files
        # a last file without a unit behind one that is not full: made by reserve() for a batch
        # whose units never got there (Java's recover stops at the first file not full too)
        while (
            len(files) > 1
            and CQ_UNIT.unpack_from(files[-1].mv, 0)[1] == 0
            and CQ_UNIT.unpack_from(files[-2].mv, self.file_size - CQ_UNIT_SIZE)[1] == 0
        ):
            files.pop().destroy()
        if not files:
            self._max_pos = 0
            return
        last = files[-1]
        lo, hi = 0, self.units_per_file
        mv = last.mv
        while lo < hi:  # first unit with size 0
            mid = (lo + hi) // 2
            if CQ_UNIT.unpack_from(mv, mid * CQ_UNIT_SIZE)[1] != 0:
                lo = mid + 1
            else:
                hi = mid
        end_pos = last.file_from_offset + lo * CQ_UNIT_SIZE
        self.mfq.truncate_dirty_files(end_pos)
        self._max_pos = end_pos
        self._cur = None
        self.min_logic_offset = max(self.min_logic_offset, self.mfq.get_min_offset())
        u = self.get_unit(self.get_max_offset_in_queue() - 1)
        self.max_phy_offset = u[0] + u[1] if u is not None and u[1] != PRE_BLANK_SIZE else 0

    def truncate_dirty(self, phy_offset: int) -> None:
        """Drop units whose record starts at or after phy_offset."""
        hi = self.get_max_offset_in_queue()
        lo = self._first_unit_at_or_after(phy_offset, self.get_min_offset_in_queue(), hi)
        if lo < hi:
            pos = lo * CQ_UNIT_SIZE
            self.mfq.truncate_dirty_files(pos)
            self._max_pos = pos
            self._cur = None
            prev = self.get_unit(lo - 1) if lo > 0 else None
            self.max_phy_offset = prev[0] + prev[1] if prev and prev[1] != PRE_BLANK_SIZE else 0

    # ---- writer --------------------------------------------------------------------------
    def put(self, phy: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """Append a unit at queue_offset (duplicates are skipped, gaps pre-blanked)."""
        pos = queue_offset * CQ_UNIT_SIZE
        cur = self._cur
        if pos != self._max_pos or cur is None or pos - cur.file_from_offset >= self.file_size:
            if pos < self._max_pos:
                return True  # already dispatched (recovery re-put)
            cur = self._prepare(pos)
        p = pos - cur.file_from_offset
        if p + CQ_UNIT_SIZE > cur.allocated:  # a put reserved it; a re-put / slave's dispatch
            cur.allocate_to(p + CQ_UNIT_SIZE)
        CQ_UNIT.pack_into(cur.mm, p, phy, size, tags_code)
        cur.wrote_position = p + CQ_UNIT_SIZE
        self._max_pos = pos + CQ_UNIT_SIZE
        self.max_phy_offset = phy + size
        return True

    def put_many(self, units: list[int], first_queue_offset: int) -> None:
        """Append consecutive units (flat phy, size, tagsCode triples) in one pack when they fit."""
        n = len(units) // 3
        pos = first_queue_offset * CQ_UNIT_SIZE
        cur = self._cur
        if (
            n
            and pos == self._max_pos
            and cur is not None
            and pos + n * CQ_UNIT_SIZE <= cur.file_from_offset + self.file_size
        ):
            p = pos - cur.file_from_offset
            if p + n * CQ_UNIT_SIZE > cur.allocated:
                cur.allocate_to(p + n * CQ_UNIT_SIZE)
            units_struct(n).pack_into(cur.mm, p, *units)
            cur.wrote_position = p + n * CQ_UNIT_SIZE
            self._max_pos = pos + n * CQ_UNIT_SIZE
            self.max_phy_offset = units[-3] + units[-2]
            return
        for i in range(n):
            j = 3 * i
            self.put(units[j], units[j + 1], units[j + 2], first_queue_offset + i)

    def has_room(self, queue_offset: int, n: int) -> bool:
        """Units [queue_offset, queue_offset + n) can be appended without creating a file."""
        pos = queue_offset * CQ_UNIT_SIZE
        cur = self._cur
        if pos < self._max_pos:
            return True  # already there (a re-put): put() skips them
        if cur is None or pos != self._max_pos:
            return False
        end = pos + n * CQ_UNIT_SIZE
        if end <= cur.file_from_offset + cur.allocated:
            return True
        # crossing into the next files: each made and allocated as far as the units go (reserve)
        for mf in self.mfq.files:
            if mf.file_end_offset > pos and mf.file_from_offset < end and (
                    mf.allocated < min(end, mf.file_end_offset) - mf.file_from_offset):
                return False
        return end <= self.mfq.files[-1].file_end_offset

    def reserve(self, queue_offset: int, n: int) -> None:
        """Create the files units [queue_offset, queue_offset + n) go to, before the put writes
        anything (their record included): OSError (a full disk) fails the put with nothing
        written but, at most, empty files and pre-blank units, which change no queue offset.
        A file made here for a batch may follow one that is not full yet: recover() and the
        readers' sync() allow for that."""
        pos = queue_offset * CQ_UNIT_SIZE
        if pos < self._max_pos:
            return
        self._prepare(pos)
        end = pos + n * CQ_UNIT_SIZE
        mfq = self.mfq
        while mfq.files[-1].file_end_offset < end:
            mfq.create_next()
        for mf in mfq.files:
            if mf.file_end_offset > pos and mf.file_from_offset < end:
                mf.allocate_to(min(end, mf.file_end_offset) - mf.file_from_offset)

    def _prepare(self, pos: int) -> MappedFile:
        """Slow path: first file, roll, or a gap before pos."""
        mfq = self.mfq
        if not mfq.files:
            start = pos - pos % self.file_size
            mfq.flushed_where = start
            mf = mfq.get_last_mapped_file(start)
            assert mf is not None
            self.min_logic_offset = pos
            self._max_pos = start
            if pos > start:
                log.info(
                    "pre-blank consume queue topic=%s qid=%d upto=%d",
                    self.topic,
                    self.queue_id,
                    pos,
                )
        while self._max_pos < pos:  # pre-blank / gap fill
            mf = self._file_for_append()
            p = self._max_pos - mf.file_from_offset
            mf.allocate_to(p + CQ_UNIT_SIZE)
            CQ_UNIT.pack_into(mf.mm, p, 0, PRE_BLANK_SIZE, 0)
            mf.wrote_position = p + CQ_UNIT_SIZE
            self._max_pos += CQ_UNIT_SIZE
        mf = self._file_for_append()
        self._cur = mf
        return mf

    def _file_for_append(self) -> MappedFile:
        # by offset: reserve() may have made the file after this one already
        mf = self.mfq.find_mapped_file_by_offset(self._max_pos)
        if mf is None:
            mf = self.mfq.get_last_mapped_file(self._max_pos)
        assert mf is not None
        if mf.file_from_offset + mf.wrote_position != self._max_pos:
            mf.wrote_position = self._max_pos - mf.file_from_offset
        return mf

    def flush(self, least_pages: int = 0) -> bool:
        """msync dirty units."""
        return self.mfq.flush(least_pages)

    # ---- readers ---------------------------------------------------------------------------
    def get_max_offset_in_queue(self) -> int:
        """Next queue offset to be written (= units ever written)."""
        return self._max_pos // CQ_UNIT_SIZE

    def get_min_offset_in_queue(self) -> int:
        """First queue offset still readable."""
        return self.min_logic_offset // CQ_UNIT_SIZE

    def get_unit(self, queue_offset: int) -> tuple[int, int, int] | None:
        """(phy, size, tagsCode) at queue_offset, or None when out of range / file missing."""
        if queue_offset < 0 or queue_offset >= self.get_max_offset_in_queue():
            return None
        pos = queue_offset * CQ_UNIT_SIZE
        mf = self.mfq.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        return CQ_UNIT.unpack_from(mf.mv, pos - mf.file_from_offset)  # type: ignore[return-value]

    def get_index_buffer(self, queue_offset: int) -> tuple[memoryview, int] | None:
        """Units from queue_offset to the end of its file's written part, and their count."""
        pos = queue_offset * CQ_UNIT_SIZE
        if pos < self.min_logic_offset:
            return None
        mf = self.mfq.find_mapped_file_by_offset(pos)
        if mf is None:
            return None
        p = pos - mf.file_from_offset
        end_pos = min(self._max_pos - mf.file_from_offset, self.file_size)
        if end_pos <= p:
            return None
        return mf.mv[p:end_pos], (end_pos - p) // CQ_UNIT_SIZE

    def roll_next_file(self, queue_offset: int) -> int:
        """First queue offset of the file after the one holding queue_offset."""
        return queue_offset + self.units_per_file - queue_offset % self.units_per_file

    def get_offset_in_queue_by_time(
        self, ts_ms: int, store_time_of: Callable[[int, int], int]
    ) -> int:
        """Binary search by store timestamp (§9.8); store_time_of(phy, size) -> ts or -1."""
        lo, hi = self.get_min_offset_in_queue(), self.get_max_offset_in_queue() - 1
        if hi < lo:
            return 0

        def t(off: int) -> int:
            u = self.get_unit(off)
            if u is None or u[1] == PRE_BLANK_SIZE:
                return -1
            return store_time_of(u[0], u[1])

        left, right = lo, hi
        while left <= right:
            mid = (left + right) // 2
            ts = t(mid)
            if ts < 0:
                left = mid + 1
            elif ts == ts_ms:
                # leftmost exact match
                while mid > lo and t(mid - 1) == ts_ms:
                    mid -= 1
                return mid
            elif ts < ts_ms:
                left = mid + 1
            else:
                right = mid - 1
        # right = last smaller, left = first larger
        cands = []
        if lo <= right <= hi and t(right) >= 0:
            cands.append((ts_ms - t(right), right))
        if lo <= left <= hi and t(left) >= 0:
            cands.append((t(left) - ts_ms, left))
        if not cands:
            return lo if left > hi else 0
        cands.sort()
        return cands[0][1]

    def delete_expired_files(self, min_phy: int) -> int:
        """Delete whole files whose last unit points below min_phy; returns files deleted."""
        files = self.mfq.files
        n = 0
        for mf in files[:-1]:
            last = CQ_UNIT.unpack_from(mf.mv, self.file_size - CQ_UNIT_SIZE)
            if last[1] != PRE_BLANK_SIZE and last[0] + last[1] > min_phy:
                break
            n += 1
        if n:
            self.mfq.delete_first(n)
        self.correct_min_offset(min_phy)
        return n

    def correct_min_offset(self, min_phy: int) -> None:
        """Set the min offset to the first unit whose record is still in the commit log."""
        files = self.mfq.files
        if not files:
            return
        lo = max(files[0].file_from_offset, self.min_logic_offset) // CQ_UNIT_SIZE
        lo = self._first_unit_at_or_after(min_phy, lo, self.get_max_offset_in_queue())
        self.min_logic_offset = lo * CQ_UNIT_SIZE

    def _first_unit_at_or_after(self, phy: int, lo: int, hi: int) -> int:
        """Binary search in [lo, hi): the first queue offset whose unit points at or past phy."""
        while lo < hi:
            mid = (lo + hi) // 2
            u = self.get_unit(mid)
            if u is not None and u[1] != PRE_BLANK_SIZE and u[0] >= phy:
                hi = mid
            else:
                lo = mid + 1
        return lo

    def destroy(self) -> None:
        """Delete every file of this queue."""
        for mf in self.mfq.files:
            mf.destroy()
        self.mfq.files = []
        self._max_pos = 0
        self._cur = None

    def close(self) -> None:
        """Unmap."""
        self.mfq.close()
        self._cur = None


class ConsumeQueueView(ConsumeQueue):
    """Read-only consume queue in a reader process; visibility is bounded by the published max."""

    def __init__(self, root: str, topic: str, queue_id: int, file_size: int) -> None:
        super().__init__(root, topic, queue_id, file_size, writable=False)
        self.cl_max = 0
        self.cl_min = 0
        self._synced: tuple[int, int] | None = None  # (cl_max, cl_min) of the last full look
        self._min_key: tuple[int, int] | None = None  # (cl_min, first file) of the min's

    def sync(self, cl_max: int, cl_min: int, refresh: bool) -> None:
        """Recompute the visible range from the published commit-log limits (nothing to do
        when they and the files are what the last look saw: a pull loop over a queue nobody
        writes pays two binary searches per pull otherwise)."""
        if not refresh and self._synced == (cl_max, cl_min) and self.mfq.files:
            return
        self.cl_max = cl_max
        self.cl_min = cl_min
        if refresh or not self.mfq.files:
            self.mfq.refresh()
        files = self.mfq.files
        if not files:
            self._max_pos = 0
            self.min_logic_offset = 0
            self._synced = self._min_key = None
            return
        last = files[-1]
        # visible units are a prefix of the last file: binary search the first invisible one
        lo, hi = 0, self.units_per_file
        start_lo = (self._max_pos - last.file_from_offset) // CQ_UNIT_SIZE
        if 0 <= start_lo <= hi and self._visible(last, start_lo - 1 if start_lo else -1):
            lo = start_lo
        mv = last.mv
        while lo < hi:
            mid = (lo + hi) // 2
            if unit_visible(mv, mid * CQ_UNIT_SIZE, cl_max):
                lo = mid + 1
            else:
                hi = mid
        if lo == self.units_per_file and not refresh:
            # the last known file is full: the writer may have rolled to a new one
            n = len(files)
            self.mfq.refresh()
            if len(self.mfq.files) != n:
                self.sync(cl_max, cl_min, False)
                return
        if lo == 0 and len(files) > 1:
            # an empty freshly created file: the previous one is full, unless the writer made
            # it ahead for a batch (reserve) and is still filling the previous one
            prev = files[-2]
            plo, phi = self.units_per_file, self.units_per_file
            if not unit_visible(prev.mv, (phi - 1) * CQ_UNIT_SIZE, cl_max):
                plo, phi = 0, phi - 1
                while plo < phi:
                    mid = (plo + phi) // 2
                    if unit_visible(prev.mv, mid * CQ_UNIT_SIZE, cl_max):
                        plo = mid + 1
                    else:
                        phi = mid
            self._max_pos = prev.file_from_offset + plo * CQ_UNIT_SIZE
        else:
            self._max_pos = last.file_from_offset + lo * CQ_UNIT_SIZE
        # the first unit at or past cl_min only moves with cl_min or the first file (units
        # appended behind it leave it where it is)
        min_key = (cl_min, files[0].file_from_offset)
        if refresh or min_key != self._min_key:
            self.min_logic_offset = files[0].file_from_offset
            self.correct_min_offset(cl_min)
            self._min_key = min_key
        self._synced = (cl_max, cl_min)

    def _visible(self, mf: MappedFile, i: int) -> bool:
        if i < 0:
            return True
        if (i + 1) * CQ_UNIT_SIZE > len(mf.mv):
            return False
        return unit_visible(mf.mv, i * CQ_UNIT_SIZE, self.cl_max)


def unit_visible(mv: memoryview, pos: int, cl_max: int) -> bool:
    """Whether the unit at byte pos is written and its record lies below cl_max, read while the
    writer may be writing it: size first, then phy, in two loads. The writer stores phy before
    size (one pack_into, field by field), so a size seen non-zero comes with its whole phy. One
    unpack of the unit loads phy first: a unit written between its two loads read as phy 0 with
    its real size, "visible", and a get then skipped its record as not stored yet."""
    size: int = _UNIT_SIZE.unpack_from(mv, pos + 8)[0]
    if size <= 0:
        return False
    if size == PRE_BLANK_SIZE:
        return True
    phy: int = _UNIT_PHY.unpack_from(mv, pos)[0]
    return phy + size <= cl_max
