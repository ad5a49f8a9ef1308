"""Shared state page: the durable limits a reader process may rely on.

Not a RocketMQ file (RocketMQ readers live in the writer's JVM). Mirrors the role of
DefaultMessageStore's in-memory getMaxPhyOffset / flushed position for other processes.

Layout (native byte order, 8-byte aligned words)::

    0   magic          STATE_MAGIC
    8   generation     bumped whenever files are created or deleted (readers rescan dirs)
    16  max_phy        commit-log offset up to which records AND their CQ units are written
    24  flushed_phy    commit-log offset known to be on disk
    32  min_phy        first commit-log offset still stored
    40  writer_pid     pid of the writer (0 after a clean shutdown)
    48  index_phy      commit-log offset below which every record's index entries are written
                       (written by whoever owns the index: the writer, or the index process)
    56  ha_acked       the largest commit-log offset a slave has reported (written by the
                       master's HA service; push2SlaveMaxOffset)
    64  ha_slaves      connected slaves (written by the master's HA service)

The writer publishes max_phy only after writing the bytes and the consume-queue units; a reader
reads max_phy first and then only trusts data below it.

Every word is written and read through a memoryview cast to native int64 (`words`): one 8-byte
store or load each. struct.pack_into must not be used on this page: it zero-fills its target
before packing, and a reader in another process saw max_phy == 0 about once in 200 reads while
the writer was publishing (its pull answered a queue of 10,000 messages as empty).
"""

from __future__ import annotations

import mmap
import os
import sys
import tempfile
from typing import Final

from store.mapped_file import allocate

STATE_MAGIC: Final = 0x41434D5153544154
STATE_PAGE_SIZE: Final = 4096
OFF_MAGIC, OFF_GENERATION, OFF_MAX_PHY, OFF_FLUSHED_PHY, OFF_MIN_PHY, OFF_WRITER_PID = (
    0,
    8,
    16,
    24,
    32,
    40,
)
MAX_PHY_WORD: Final = OFF_MAX_PHY >> 3  # its index in StatePage.words
OFF_INDEX_PHY: Final = 48
OFF_HA_ACKED: Final = 56
OFF_HA_SLAVES: Final = 64


def map_words(
    path: str, size: int, magic: int, *, writable: bool, missing_ok: bool = False
) -> tuple[mmap.mmap, memoryview] | None:
    """Map a page of int64 words shared between processes: (mmap, its words); a writer makes
    the file and stamps `magic` in word 0. A reader gets None for a page not there (yet) when
    missing_ok, else the OSError."""
    try:
        fd = _create_or_open(path, size, magic) if writable else os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise
    try:
        if os.fstat(fd).st_size < size:
            if not writable:
                if missing_ok:
                    return None
                raise OSError(f"{path}: shorter than a {size}-byte page")
            allocate(fd, path, 0, size, unlink_on_error=False)  # never a hole under the map
        mm = mmap.mmap(fd, size, access=mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ)
    finally:
        os.close(fd)
    words = memoryview(mm).cast("q")  # one aligned 8-byte store or load per word
    if writable:
        words[0] = magic
    return mm, words


def _create_or_open(path: str, size: int, magic: int) -> int:
    """A read-write descriptor of the page at path. A page that is not there yet is made
    whole (allocated, magic stamped) under a name of its own and then linked into place, so
    no reader in another process ever opens it short; of two writers making it at once, the
    second opens the first's."""
    try:
        return os.open(path, os.O_RDWR)
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd, tmp = tempfile.mkstemp(".new", os.path.basename(path) + ".", os.path.dirname(path) or ".")
    try:
        os.fchmod(fd, 0o644)
        allocate(fd, tmp, 0, size, unlink_on_error=False)
        os.pwrite(fd, magic.to_bytes(8, sys.byteorder), 0)
        try:
            os.link(tmp, path)
        except FileExistsError:
            os.close(fd)
            return os.open(path, os.O_RDWR)
        return fd
    except BaseException:
        os.close(fd)
        raise
    finally:
        os.unlink(tmp)


class StatePage:
    """Writer or reader view of `<root>/state`."""

    def __init__(self, path: str, *, writable: bool) -> None:
        self.path = path
        self.writable = writable
        mapped = map_words(path, STATE_PAGE_SIZE, STATE_MAGIC, writable=writable)
        assert mapped is not None  # (missing_ok is off: a failure raised)
        self.mm, self.words = mapped

    def get(self, off: int) -> int:
        """Read one word."""
        return int(self.words[off >> 3])

    def set(self, off: int, value: int) -> None:
        """Write one word (a single aligned 8-byte store, never a zero-filled one first)."""
        self.words[off >> 3] = value

    @property
    def max_phy(self) -> int:
        """Published commit-log max offset."""
        return self.get(OFF_MAX_PHY)

    @property
    def flushed_phy(self) -> int:
        """Published flushed offset."""
        return self.get(OFF_FLUSHED_PHY)

    @property
    def min_phy(self) -> int:
        """Published min offset."""
        return self.get(OFF_MIN_PHY)

    @property
    def generation(self) -> int:
        """File-set generation."""
        return self.get(OFF_GENERATION)

    def bump_generation(self) -> None:
        """Tell readers to rescan directories."""
        self.set(OFF_GENERATION, self.get(OFF_GENERATION) + 1)

    def close(self) -> None:
        """Unmap."""
        self.words.release()
        self.mm.close()
