"""Master-slave replication units: what HA connections carry and where a master starts.

Mirrors store/ha/HAService.java, HAConnection.java and HAService.HAClient, RocketMQ 4.9.x
(spec §10). No sockets here: the broker's HA actors own them and feed these decoders.

- slave -> master: an 8-byte big-endian offset report (the slave's commit-log max offset).
- master -> slave: [phyOffset 8][bodySize 4][bodySize raw commit-log bytes from phyOffset];
  a frame never crosses a commit-log file and carries at most haTransferBatchSize bytes; a
  header-only frame (bodySize 0) is the master's heartbeat.
"""

from __future__ import annotations

import struct
from typing import Final

HEADER: Final = struct.Struct(">qi")  # phyOffset, bodySize
REPORT: Final = struct.Struct(">q")
HEADER_SIZE: Final = HEADER.size  # 12
MAX_BODY: Final = 64 * 1024 * 1024  # a larger bodySize means a corrupt stream


class HAStreamError(Exception):
    """The peer sent something that is not an HA stream."""


def master_start_offset(report: int, max_offset: int, file_size: int) -> int:
    """Where a master starts transferring: the reported offset, or, for an empty slave (0),
    the start of the master's last commit-log file (WriteSocketService)."""
    if report != 0:
        return report
    return max_offset - max_offset % file_size


class ReportDecoder:
    """Master side: the last complete 8-byte report in what a slave sent."""

    __slots__ = ("_rest",)

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, data: bytes) -> int | None:
        """Consume data; the last complete report in it, or None when none completed."""
        buf = self._rest + data if self._rest else data
        whole = len(buf) - len(buf) % 8
        self._rest = buf[whole:]
        if not whole:
            return None
        value: int = REPORT.unpack_from(buf, whole - 8)[0]
        if value < 0:
            raise HAStreamError(f"negative offset report {value}")
        return value


class TransferDecoder:
    """Slave side: complete (phyOffset, body) frames out of the master's stream; the bodies are
    memoryviews over the bytes fed (nothing copied but an unfinished frame's tail)."""

    __slots__ = ("_rest",)

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, data: bytes) -> list[tuple[int, memoryview]]:
        """Consume data; the frames it completed, in order (heartbeats have an empty body)."""
        buf = self._rest + data if self._rest else data
        mv = memoryview(buf)
        out: list[tuple[int, memoryview]] = []
        pos = 0
        n = len(buf)
        while n - pos >= HEADER_SIZE:
            phy, size = HEADER.unpack_from(buf, pos)
            if phy < 0 or size < 0 or size > MAX_BODY:
                raise HAStreamError(f"bad transfer header offset={phy} size={size}")
            end = pos + HEADER_SIZE + size
            if end > n:
                break
            out.append((phy, mv[pos + HEADER_SIZE : end]))
            pos = end
        self._rest = bytes(mv[pos:]) if pos < n else b""
        return out

    @property
    def pending(self) -> int:
        """Bytes of an incomplete frame held back."""
        return len(self._rest)
