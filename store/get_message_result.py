"""What a get returns: GetMessageStatus and GetMessageResult, and the whole-batch step of a get.

Mirrors store/GetMessageStatus.java and store/GetMessageResult.java, RocketMQ 4.9.x, and the
common case of DefaultMessageStore.getMessage's unit loop (whole_batch; the loop itself is
store.message_store_read.MessageStoreRead._get_message).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from operator import add
from typing import Any

from store.consume_queue import PRE_BLANK_SIZE, units_struct


class GetMessageStatus(enum.Enum):
    """GetMessageStatus."""

    FOUND = 0
    NO_MATCHED_MESSAGE = 1
    MESSAGE_WAS_REMOVING = 2
    OFFSET_FOUND_NULL = 3
    OFFSET_OVERFLOW_BADLY = 4
    OFFSET_OVERFLOW_ONE = 5
    OFFSET_TOO_SMALL = 6
    NO_MATCHED_LOGIC_QUEUE = 7
    NO_MESSAGE_IN_QUEUE = 8


class GetMessageResult:
    """Result of get_message; `buffers` are zero-copy views, `buffer` joins them once."""

    __slots__ = (
        "buffer_total_size",
        "buffers",
        "max_offset",
        "message_count",
        "message_queue_offsets",
        "min_offset",
        "next_begin_offset",
        "status",
        "suggest_pull_from_slave",
    )

    def __init__(
        self, status: GetMessageStatus, next_begin_offset: int, min_offset: int, max_offset: int
    ) -> None:
        self.status = status
        self.next_begin_offset = next_begin_offset
        self.min_offset = min_offset
        self.max_offset = max_offset
        self.message_count = 0
        self.buffer_total_size = 0
        self.buffers: list[memoryview] = []
        self.message_queue_offsets: list[int] = []
        self.suggest_pull_from_slave = False

    @property
    def buffer(self) -> bytes:
        """All returned records concatenated."""
        return b"".join(self.buffers)

    def release(self) -> None:
        """Drop the views into the mapped files."""
        for b in self.buffers:
            b.release()
        self.buffers = []

    def __repr__(self) -> str:
        return (
            f"GetMessageResult({self.status.name}, next={self.next_begin_offset}, "
            f"min={self.min_offset}, max={self.max_offset}, count={self.message_count})"
        )


def whole_batch(res: GetMessageResult, buf: memoryview, n: int, max_msgs: int,
                max_bytes: int | None, max_phy: int, min_phy: int, memory: int,
                mem_bytes: int, find: Callable[[int], Any]) -> bool:  # fmt: skip
    """Fill `res` with the next max_msgs records of the n units in `buf` when the get is the
    common one (no filter, records of one commit-log file, all in memory, within the transfer
    limits), in whole-list steps, exactly as the unit loop would; False (res untouched) when
    any of that does not hold. `find` maps a commit-log offset to its mapped file."""
    k = min(n, max_msgs)
    if k <= 0:
        return False
    flat = units_struct(min(n, k + 1)).unpack_from(buf, 0)
    phys, sizes = flat[0 : 3 * k : 3], flat[1 : 3 * k : 3]
    total = sum(sizes)
    lo = min(phys)
    if (PRE_BLANK_SIZE in sizes or total > mem_bytes or lo < min_phy or max_phy - lo > memory
            or (max_bytes is not None and total > max_bytes)):  # fmt: skip
        return False
    mf = find(lo)
    if mf is None or max(map(add, phys, sizes)) > min(mf.file_from_offset + mf.file_size,
                                                      max_phy):  # fmt: skip
        return False
    base = mf.file_from_offset
    mv = mf.mv
    res.buffers = [mv[p - base : p - base + size] for p, size in zip(phys, sizes)]
    res.message_queue_offsets = list(range(res.next_begin_offset, res.next_begin_offset + k))
    res.status = GetMessageStatus.FOUND
    res.next_begin_offset += k
    res.message_count = k
    res.buffer_total_size = total
    pulling = flat[3 * k] if len(flat) > 3 * k else phys[-1]  # the loop's last look
    res.suggest_pull_from_slave = max_phy - pulling > memory
    return True
