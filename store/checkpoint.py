"""Store checkpoint: three timestamps in a one-page file.

Mirrors store/StoreCheckpoint.java, RocketMQ 4.9.x.

Layout (big-endian, file is 4096 bytes)::

    0  8  physicMsgTimestamp   store time of the last flushed commit-log record
    8  8  logicsMsgTimestamp   store time of the last record dispatched and flushed to a CQ
    16 8  indexMsgTimestamp    end time of the last index file flushed when full
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
from typing import Final

from store.mapped_file import RangeSync, allocate

log = logging.getLogger(__name__)

CHECKPOINT = struct.Struct(
    ">q"  # physicMsgTimestamp
    "q"  # logicsMsgTimestamp
    "q"  # indexMsgTimestamp
)
CHECKPOINT_FILE_SIZE: Final = 4096


class StoreCheckpoint:
    """The mmap'd checkpoint file."""

    def __init__(self, path: str, *, writable: bool = True) -> None:
        self.path = path
        self.writable = writable
        flags = os.O_RDWR | os.O_CREAT if writable else os.O_RDONLY
        fd = os.open(path, flags, 0o644)
        try:
            if writable and os.fstat(fd).st_size < CHECKPOINT_FILE_SIZE:
                allocate(fd, path, 0, CHECKPOINT_FILE_SIZE, unlink_on_error=False)
            access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
            self.mm = mmap.mmap(fd, CHECKPOINT_FILE_SIZE, access=access)
        finally:
            os.close(fd)
        self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp = (
            CHECKPOINT.unpack_from(self.mm, 0)
        )

    def flush(self, sync: RangeSync | None = None) -> None:
        """Write the three timestamps and msync (through `sync(self, 0, size)` when given)."""
        CHECKPOINT.pack_into(
            self.mm,
            0,
            self.physic_msg_timestamp,
            self.logics_msg_timestamp,
            self.index_msg_timestamp,
        )
        if sync is None:
            self.mm.flush()
        else:
            sync(self, 0, CHECKPOINT_FILE_SIZE)

    def min_timestamp(self, index_safe: bool = False) -> int:
        """min(physic, logics) - 3000 ms (and index when messageIndexSafe)."""
        m = min(self.physic_msg_timestamp, self.logics_msg_timestamp)
        if index_safe:
            m = min(m, self.index_msg_timestamp)
        return max(0, m - 3000)

    def close(self) -> None:
        """Unmap."""
        self.mm.close()
