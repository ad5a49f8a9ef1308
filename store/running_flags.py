"""The store's access rights: RunningFlags (store/RunningFlags.java, RocketMQ 4.9.x).

A set of bits the writer consults before every put (DefaultMessageStore.checkStoreStatus): the
store is writeable only while none of NOT_WRITEABLE, WRITE_LOGICS_QUEUE_ERROR,
WRITE_INDEX_FILE_ERROR and DISK_FULL is set. DISK_FULL is set and cleared by the periodic disk
check (CleanCommitLogService.isSpaceFull, store.clean_service); each make_* / get_and_make_*
says whether it changed anything, so the caller logs a state change once, not per put.
A pure core: no I/O, no clock.
"""

from __future__ import annotations

from typing import Final

NOT_READABLE_BIT: Final = 1
NOT_WRITEABLE_BIT: Final = 1 << 1
WRITE_LOGICS_QUEUE_ERROR_BIT: Final = 1 << 2
WRITE_INDEX_FILE_ERROR_BIT: Final = 1 << 3
DISK_FULL_BIT: Final = 1 << 4
NOT_WRITEABLE_MASK: Final = (
    NOT_WRITEABLE_BIT | WRITE_LOGICS_QUEUE_ERROR_BIT | WRITE_INDEX_FILE_ERROR_BIT | DISK_FULL_BIT
)


class RunningFlags:
    """RunningFlags: the flag bits and their tests."""

    __slots__ = ("flag_bits",)

    def __init__(self) -> None:
        self.flag_bits = 0

    def is_readable(self) -> bool:
        """No NOT_READABLE bit."""
        return not self.flag_bits & NOT_READABLE_BIT

    def is_writeable(self) -> bool:
        """Puts are allowed: no bit that forbids writing is set."""
        return not self.flag_bits & NOT_WRITEABLE_MASK

    def is_cq_writeable(self) -> bool:
        """Consume-queue writes are allowed (a full disk does not stop them)."""
        return not self.flag_bits & (NOT_WRITEABLE_MASK & ~DISK_FULL_BIT)

    def is_disk_full(self) -> bool:
        """DISK_FULL is set."""
        return bool(self.flag_bits & DISK_FULL_BIT)

    def get_and_make_disk_full(self) -> bool:
        """Set DISK_FULL; True when the disk was marked OK before (a state change)."""
        was_ok = not self.flag_bits & DISK_FULL_BIT
        self.flag_bits |= DISK_FULL_BIT
        return was_ok

    def get_and_make_disk_ok(self) -> bool:
        """Clear DISK_FULL; True when the disk was already marked OK (no state change)."""
        was_ok = not self.flag_bits & DISK_FULL_BIT
        self.flag_bits &= ~DISK_FULL_BIT
        return was_ok

    def make_index_file_error(self) -> bool:
        """Set WRITE_INDEX_FILE_ERROR (an index file could not be made); True on a change."""
        changed = not self.flag_bits & WRITE_INDEX_FILE_ERROR_BIT
        self.flag_bits |= WRITE_INDEX_FILE_ERROR_BIT
        return changed

    def clear_index_file_error(self) -> None:
        """Clear WRITE_INDEX_FILE_ERROR (an index file could be made again)."""
        self.flag_bits &= ~WRITE_INDEX_FILE_ERROR_BIT

    def is_index_file_error(self) -> bool:
        """WRITE_INDEX_FILE_ERROR is set."""
        return bool(self.flag_bits & WRITE_INDEX_FILE_ERROR_BIT)
