"""QUERY_MESSAGE result: store/QueryMessageResult.java, RocketMQ 4.9.x.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass(slots=True)
class QueryMessageResult:
    """QUERY_MESSAGE result: matching records and the index bounds."""

    buffers: list[memoryview] = field(default_factory=list)
    phy_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0

    @property
    def buffer(self) -> bytes:
        """Matching records concatenated."""
        return b"".join(self.buffers)

    @property
    def buffer_total_size(self) -> int:
        """Bytes in buffer."""
        return sum(len(b) for b in self.buffers)
