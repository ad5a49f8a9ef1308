"""Index files: hash index of message keys to commit-log offsets.

Mirrors store/index/IndexFile.java, IndexHeader.java and IndexService.java, RocketMQ 4.9.x.

File layout (big-endian)::

    header (40 bytes): beginTimestamp q, endTimestamp q, beginPhyOffset q, endPhyOffset q,
                       hashSlotCount i, indexCount i (starts at 1; entry 0 is never used)
    slots:   maxHashSlotNum x int  (newest entry index of the bucket, 0 = empty)
    entries: maxIndexNum x 20 bytes: keyHash i, phyOffset q, timeDiff i (s), prevIndex i

Keys are `topic#UNIQ_KEY` and `topic#k` for each KEYS entry; keyHash = abs(Java hashCode).
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import struct
import time
from itertools import repeat
from typing import Final

from protocol.record import java_string_hash
from store.mapped_file import MADV_POPULATE_WRITE, allocate

log = logging.getLogger(__name__)

INDEX_HEADER = struct.Struct(
    ">q"  # beginTimestamp
    "q"  # endTimestamp
    "q"  # beginPhyOffset
    "q"  # endPhyOffset
    "i"  # hashSlotCount
    "i"  # indexCount
)
INDEX_HEADER_SIZE: Final = INDEX_HEADER.size  # 40
INDEX_ENTRY = struct.Struct(
    ">i"  # keyHash
    "q"  # phyOffset
    "i"  # timeDiff (seconds since beginTimestamp)
    "i"  # prevIndex
)
INDEX_ENTRY_SIZE: Final = INDEX_ENTRY.size  # 20
_SLOT = struct.Struct(">i")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_INT_MAX: Final = 0x7FFFFFFF
ENTRIES_ALLOCATE_STEP: Final = 1 << 20  # entries' blocks allocated ahead, 1 MiB (52 k) at a time

# Java String.hashCode for ASCII bytes in two C calls: write each byte c as 31*q + r and parse
# the r digits and q digits as base-31 numerals; hash = R + 31*Q (mod 2**32).
_D31 = b"0123456789abcdefghijklmnopqrstu"
_TR = bytes(_D31[c % 31] for c in range(128)) + bytes(128)
_TQ = bytes(_D31[c // 31] for c in range(128)) + bytes(128)


def java_hash_bytes(b: bytes) -> int:
    """Java String.hashCode of UTF-8 bytes (fast path for ASCII), signed 32-bit."""
    if b.isascii():
        h = (int(b"0" + b.translate(_TR), 31) + 31 * int(b"0" + b.translate(_TQ), 31)) & 0xFFFFFFFF
        return h - 0x100000000 if h & 0x80000000 else h
    return java_string_hash(b.decode("utf-8", "replace"))


class TagCodes:
    """java_hash_bytes of TAGS values, remembered: bounded in count, and only short values
    (a client may send any tag; 32 KiB ones would make the cache large)."""

    __slots__ = ("codes",)
    LIMIT: Final = 65536
    MAX_CACHED_LEN: Final = 128

    def __init__(self) -> None:
        self.codes: dict[bytes, int] = {}

    def get(self, tags: bytes) -> int:
        """The hash of `tags` (tagsString2tagsCode)."""
        code = self.codes.get(tags)
        if code is None:
            code = java_hash_bytes(tags)
            if len(tags) <= self.MAX_CACHED_LEN:
                if len(self.codes) >= self.LIMIT:
                    self.codes.clear()
                self.codes[tags] = code
        return code


_POW31: Final = [pow(31, i, 1 << 32) for i in range(1024)]


def index_key_hash(prefix_h: int, key: bytes) -> int:
    """abs(hashCode(prefix + key)) from hashCode(prefix) (unsigned); -1 when not ASCII/too long.

    Java's hash is a polynomial in 31, so hash(a + b) = hash(a) * 31**len(b) + hash(b): the
    `topic#` prefix is hashed once per topic and only the key bytes per record.
    """
    n = len(key)
    if n >= 1024 or not key.isascii():
        return -1
    h = (
        prefix_h * _POW31[n] + int(b"0" + key.translate(_TR), 31)
        + 31 * int(b"0" + key.translate(_TQ), 31)
    ) & 0xFFFFFFFF  # fmt: skip
    if h == 0x80000000:
        return 0
    return 0x100000000 - h if h & 0x80000000 else h


# Same tables with \x01 (never inside a property value) mapped to b",": keys joined by \x01
# translate in one call and split into one numeral per key.
_TR_SEP = _TR[:1] + b"," + _TR[2:]
_TQ_SEP = _TQ[:1] + b"," + _TQ[2:]


def index_key_hashes(prefix_h: int | list[int], keys: list[bytes]) -> list[int]:
    """index_key_hash of many keys at once (one join, two translates, two C-level int maps).

    prefix_h is one prefix hash for every key or one per key. Keys must be non-empty and free
    of \x01; a non-ASCII or >= 1024-byte key gets -1.
    """
    pres = repeat(prefix_h) if isinstance(prefix_h, int) else prefix_h
    joined = b"\x01".join(keys)
    if not joined.isascii() or max(map(len, keys)) >= 1024:
        return [index_key_hash(ph, k) for ph, k in zip(pres, keys)]
    rs = map(int, joined.translate(_TR_SEP).split(b","), repeat(31))
    qs = map(int, joined.translate(_TQ_SEP).split(b","), repeat(31))
    p = _POW31
    return [
        h if (h := (ph * p[n] + r + 31 * q) & 0xFFFFFFFF) < 0x80000000
        else (0x100000000 - h) & 0x7FFFFFFF
        for ph, n, r, q in zip(pres, map(len, keys), rs, qs)
    ]  # fmt: skip


def key_hash(key: bytes) -> int:
    """abs(hashCode) as IndexFile.indexKeyHashMethod (Integer.MIN_VALUE -> 0)."""
    h = java_hash_bytes(key)
    return 0 if h == -0x80000000 else abs(h)


def _page_ceil(n: int) -> int:
    return (n + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE


def index_file_name(now_ms: int) -> str:
    """yyyyMMddHHmmssSSS in local time."""
    t = time.localtime(now_ms // 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{now_ms % 1000:03d}"


class IndexFile:
    """One index file."""

    def __init__(self, path: str, slot_num: int, index_num: int, *, writable: bool = True) -> None:
        self.path = path
        self.file_name = os.path.basename(path)
        self.slot_num = slot_num
        self.index_num = index_num
        self.file_size = INDEX_HEADER_SIZE + slot_num * 4 + index_num * INDEX_ENTRY_SIZE
        self.entries_base = INDEX_HEADER_SIZE + slot_num * 4
        self.writable = writable
        self.fd = -1
        created = False
        if writable:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size < self.file_size:
                    # the header and the slot table (written anywhere) allocated now, the entries
                    # (appended) ahead of the appends: a file of 400+ MB (the defaults) stays as
                    # small as what it holds, as Java's sparse one does, and a full disk is an
                    # OSError here, never a store into a hole (see mapped_file.allocate)
                    allocate(fd, path, 0, self.entries_base, unlink_on_error=size == 0)
                    os.ftruncate(fd, self.file_size)
                    created = True
                self.mm = mmap.mmap(fd, self.file_size, access=mmap.ACCESS_WRITE)
            except BaseException:
                os.close(fd)
                raise
            self.fd = fd  # kept for allocate_entries
        else:
            fd = os.open(path, os.O_RDONLY)
            try:
                self.mm = mmap.mmap(fd, self.file_size, access=mmap.ACCESS_READ)
            finally:
                os.close(fd)
        self.mv = memoryview(self.mm)
        self.reload_header()
        # entries below this end are allocated (an existing file's written ones at least)
        self.allocated_end = self.entries_base + self.index_count * INDEX_ENTRY_SIZE
        if created:
            # pre-touch the header and slot table (random writes); entries are appended in
            # order, one first-touch fault per ~200 entries, so they are left to fault lazily
            # (populating a whole 400 MB file cost ~0.2-0.5 s on the first put / at restart)
            with contextlib.suppress(OSError, ValueError):
                self.mm.madvise(MADV_POPULATE_WRITE, 0, _page_ceil(self.entries_base))

    def reload_header(self) -> None:
        """Reader: re-read the header."""
        (
            self.begin_ts,
            self.end_ts,
            self.begin_phy,
            self.end_phy,
            self.slot_count,
            self.index_count,
        ) = INDEX_HEADER.unpack_from(self.mv, 0)
        if self.index_count <= 0:
            self.index_count = 1

    def is_write_full(self) -> bool:
        """True when no entry fits."""
        return self.index_count >= self.index_num

    def allocate_entries(self, n: int) -> None:
        """Allocate the blocks of the next n entries (ENTRIES_ALLOCATE_STEP at a time) before
        they are written; OSError (a full disk) with nothing written."""
        end = min(self.file_size, self.entries_base + (self.index_count + n) * INDEX_ENTRY_SIZE)
        if end > self.allocated_end:
            stop = min(self.file_size, max(end, self.allocated_end + ENTRIES_ALLOCATE_STEP))
            allocate(self.fd, self.path, self.allocated_end, stop - self.allocated_end,
                     unlink_on_error=False)  # fmt: skip
            self.allocated_end = stop

    def put_hash_batch(
        self, hashes: list[int], phys: list[int], tss: list[int], start: int
    ) -> int:
        """Add entries hashes[start:] (phys/tss per entry); header written once; how many fitted.
        OSError when the room for them cannot be allocated (nothing written then)."""
        count = self.index_count
        n = min(len(hashes) - start, self.index_num - count)
        if n <= 0:
            return 0
        self.allocate_entries(n)
        if count <= 1:
            self.begin_phy = phys[start]
            self.begin_ts = tss[start]
        begin = self.begin_ts
        mm = self.mm
        slot_num = self.slot_num
        pos = self.entries_base + count * INDEX_ENTRY_SIZE
        slot_count = self.slot_count
        unpack_slot = _SLOT.unpack_from
        # a slot and the header are overwritten while the query actor reads them: write the
        # packed bytes (pack_into zero-fills its target first, and a reader may catch the zeros)
        slot_bytes = _SLOT.pack
        pack_entry = INDEX_ENTRY.pack_into  # a new entry, beyond what readers trust
        for i in range(start, start + n):
            kh = hashes[i]
            slot_pos = INDEX_HEADER_SIZE + (kh % slot_num) * 4
            prev = unpack_slot(mm, slot_pos)[0]
            if prev <= 0 or prev >= count:
                prev = 0
                slot_count += 1
            if begin <= 0:
                diff = 0
            else:
                diff = (tss[i] - begin) // 1000
                diff = 0 if diff < 0 else (_INT_MAX if diff > _INT_MAX else diff)
            pack_entry(mm, pos, kh, phys[i], diff, prev)
            mm[slot_pos : slot_pos + 4] = slot_bytes(count)
            count += 1
            pos += INDEX_ENTRY_SIZE
        last = start + n - 1
        self.slot_count = slot_count
        self.index_count = count
        self.end_phy = phys[last]
        self.end_ts = tss[last]
        mm[0:INDEX_HEADER_SIZE] = INDEX_HEADER.pack(
            self.begin_ts, self.end_ts, self.begin_phy, self.end_phy, slot_count, count
        )
        return n

    def select_phy_offsets(
        self, kh: int, max_num: int, begin_ms: int, end_ms: int, out: list[int]
    ) -> None:
        """Append phy offsets of entries with this hash stored in [begin_ms, end_ms]."""
        mv = self.mv
        count = self.index_count
        cur = _SLOT.unpack_from(mv, INDEX_HEADER_SIZE + (kh % self.slot_num) * 4)[0]
        steps = 0
        while 0 < cur < count and len(out) < max_num and steps < count:
            steps += 1
            h, phy, diff, prev = INDEX_ENTRY.unpack_from(
                mv, self.entries_base + cur * INDEX_ENTRY_SIZE
            )
            ts = self.begin_ts + diff * 1000
            if ts < begin_ms:
                break
            if h == kh and ts <= end_ms:
                out.append(phy)
            if prev <= 0 or prev >= cur:
                break
            cur = prev

    def is_time_matched(self, begin_ms: int, end_ms: int) -> bool:
        """True when the file's time range overlaps [begin_ms, end_ms]."""
        return not (self.end_ts < begin_ms or self.begin_ts > end_ms) or self.index_count <= 1

    def truncate_from_phy(self, phy_offset: int) -> int:
        """Drop entries with phy >= phy_offset (entries are in phy order); returns kept count."""
        count = self.index_count
        keep = count
        while keep > 1:
            phy = _Q.unpack_from(self.mv, self.entries_base + (keep - 1) * INDEX_ENTRY_SIZE + 4)[0]
            if phy < phy_offset:
                break
            keep -= 1
        if keep == count:
            return keep
        for i in range(count - 1, keep - 1, -1):  # unlink removed entries from their slots
            h, _phy, _d, prev = INDEX_ENTRY.unpack_from(
                self.mv, self.entries_base + i * INDEX_ENTRY_SIZE
            )
            slot_pos = INDEX_HEADER_SIZE + (h % self.slot_num) * 4
            cur = _SLOT.unpack_from(self.mm, slot_pos)[0]
            if cur == i:
                # the slot moves to the next entry down its chain; one removed too is unlinked
                # in its turn (the loop runs downwards), so kept entries further down stay
                # reachable (setting 0 there lost them from every query by that key)
                _SLOT.pack_into(self.mm, slot_pos, prev if 0 < prev < i else 0)
                if not 0 < prev < i:
                    self.slot_count = max(0, self.slot_count - 1)
        zero_start = self.entries_base + keep * INDEX_ENTRY_SIZE
        zero_end = self.entries_base + count * INDEX_ENTRY_SIZE
        self.mm[zero_start:zero_end] = bytes(zero_end - zero_start)
        self.index_count = keep
        if keep > 1:
            _h, phy, diff, _p = INDEX_ENTRY.unpack_from(
                self.mv, self.entries_base + (keep - 1) * INDEX_ENTRY_SIZE
            )
            self.end_phy = phy
            self.end_ts = self.begin_ts + diff * 1000
        else:
            self.end_phy = self.begin_phy
            self.end_ts = self.begin_ts
        INDEX_HEADER.pack_into(
            self.mm,
            0,
            self.begin_ts,
            self.end_ts,
            self.begin_phy,
            self.end_phy,
            self.slot_count,
            keep,
        )
        log.warning("truncated index file=%s entries=%d->%d", self.file_name, count, keep)
        return keep

    def flush(self) -> None:
        """msync the whole file."""
        if self.writable:
            self.mm.flush()

    def close(self) -> None:
        """Unmap."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.mv.release()
        try:
            self.mm.close()
        except BufferError:
            log.debug("index mapping still exported path=%s", self.path)

    def destroy(self) -> None:
        """Unmap and delete."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        log.info("deleted index file path=%s", self.path)


class IndexService:
    """The index files of a store: build on dispatch, query by key, roll when full."""

    def __init__(self, root: str, slot_num: int, index_num: int, *, writable: bool = True) -> None:
        self.path = os.path.join(root, "index")
        self.slot_num = slot_num
        self.index_num = index_num
        self.writable = writable
        self.files: list[IndexFile] = []
        self._last_name = ""
        self.error = ""  # why the last put could not write every entry ("" = it could)

    def load(self) -> None:
        """Map existing index files (oldest first)."""
        if self.writable:
            os.makedirs(self.path, exist_ok=True)
        if not os.path.isdir(self.path):
            return
        for name in sorted(os.listdir(self.path)):
            if len(name) == 17 and name.isdigit():
                try:
                    self.files.append(
                        IndexFile(
                            os.path.join(self.path, name),
                            self.slot_num,
                            self.index_num,
                            writable=self.writable,
                        )
                    )
                except (ValueError, OSError):
                    log.warning("skipping unreadable index file=%s", name)
        if self.files:
            self._last_name = self.files[-1].file_name

    def refresh(self) -> None:
        """Reader: pick up new/deleted files and reload headers."""
        if not os.path.isdir(self.path):
            return
        have = {f.file_name: f for f in self.files}
        files: list[IndexFile] = []
        for name in sorted(os.listdir(self.path)):
            if len(name) != 17 or not name.isdigit():
                continue
            f = have.pop(name, None)
            if f is None:
                try:
                    f = IndexFile(
                        os.path.join(self.path, name), self.slot_num, self.index_num, writable=False
                    )
                except (ValueError, OSError):
                    continue
            else:
                f.reload_header()
            files.append(f)
        for g in have.values():
            g.close()
        self.files = files

    @property
    def end_phy(self) -> int:
        """Last indexed phy offset (-1 when nothing indexed)."""
        for f in reversed(self.files):
            if f.index_count > 1:
                return f.end_phy
        return -1

    def _new_file(self, now_ms: int) -> IndexFile:
        name = index_file_name(now_ms)
        while name <= self._last_name:  # keep names unique and increasing
            now_ms += 1
            name = index_file_name(now_ms)
        self._last_name = name
        prev = self.files[-1] if self.files else None
        f = IndexFile(os.path.join(self.path, name), self.slot_num, self.index_num)
        if prev is not None:
            # seed the header from the previous file's end values
            f.begin_ts, f.end_ts, f.begin_phy, f.end_phy = (
                prev.end_ts,
                prev.end_ts,
                prev.end_phy,
                prev.end_phy,
            )
            INDEX_HEADER.pack_into(f.mm, 0, f.begin_ts, f.end_ts, f.begin_phy, f.end_phy, 0, 1)
        self.files.append(f)
        log.info("created index file=%s", name)
        return f

    def put_hashes(self, hashes: list[int], phy: int, store_ts: int, now_ms: int) -> int:
        """Index pre-computed key hashes of the record at phy; how many were written."""
        n = len(hashes)
        return self.put_hash_batch(hashes, [phy] * n, [store_ts] * n, now_ms)

    def put_hash_batch(
        self, hashes: list[int], phys: list[int], tss: list[int], now_ms: int
    ) -> int:
        """Index pre-hashed entries (one per key) in phy order; rolls files when full. Returns
        how many were written: fewer when an index file cannot be made or grown (a full disk;
        `error` says why, logged once until a put writes everything again): the caller puts
        the rest again later (IndexService.buildIndex's retryGetAndCreateIndexFile)."""
        done = 0
        try:
            files = self.files
            f = files[-1] if files else self._new_file(now_ms)
            if hashes:
                done = f.put_hash_batch(hashes, phys, tss, 0)
                while done < len(hashes):
                    f.flush()
                    f = self._new_file(now_ms)
                    done += f.put_hash_batch(hashes, phys, tss, done)
        except OSError as exc:
            if not self.error:
                log.error("index entries cannot be written (%s): indexing waits for disk space "
                          "(maxHashSlotNum=%d, maxIndexNum=%d: an index file takes %d bytes)",
                          exc, self.slot_num, self.index_num,
                          INDEX_HEADER_SIZE + self.slot_num * 4 + self.index_num * INDEX_ENTRY_SIZE
                          )  # fmt: skip
            self.error = str(exc)
            return done
        if self.error:
            log.info("index entries can be written again")
            self.error = ""
        return done

    def has_room(self, n: int) -> bool:
        """n entries fit the last file without making or growing one."""
        files = self.files
        if not files:
            return False
        f = files[-1]
        return (
            f.index_count + n <= f.index_num
            and f.entries_base + (f.index_count + n) * INDEX_ENTRY_SIZE <= f.allocated_end
        )

    def reserve(self, n: int, now_ms: int) -> None:
        """Make room for n entries (a new file when the last cannot take them, their blocks
        allocated) before a record is written; OSError (a full disk) with nothing written."""
        files = self.files
        if not files or files[-1].index_count + n > files[-1].index_num:
            if files:
                files[-1].flush()
            self._new_file(now_ms)
        self.files[-1].allocate_entries(n)

    def query(self, key: bytes, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Phy offsets of records whose key hashes like `key`, newest files first."""
        kh = key_hash(key)
        out: list[int] = []
        for f in reversed(self.files):
            if len(out) >= max_num:
                break
            if f.is_time_matched(begin_ms, end_ms):
                f.select_phy_offsets(kh, max_num, begin_ms, end_ms, out)
        return out

    def truncate_from_phy(self, phy_offset: int) -> None:
        """Drop index entries at or beyond phy_offset (whole newer files included)."""
        while (
            self.files and self.files[-1].begin_phy >= phy_offset and self.files[-1].index_count > 1
        ):
            self.files.pop().destroy()
        for f in reversed(self.files):
            if f.index_count <= 1:
                continue
            if f.end_phy < phy_offset:
                break
            f.truncate_from_phy(phy_offset)

    def delete_expired(self, min_phy: int) -> int:
        """Delete files (never the last) whose entries all lie below min_phy."""
        n = 0
        while len(self.files) > 1 and self.files[0].end_phy < min_phy:
            self.files.pop(0).destroy()
            n += 1
        return n

    def flush(self) -> None:
        """msync every file."""
        for f in self.files:
            f.flush()

    def close(self) -> None:
        """Unmap every file."""
        for f in self.files:
            f.close()
        self.files = []
