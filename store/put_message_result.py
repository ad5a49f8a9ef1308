"""What a put returns: PutMessageStatus and PutMessageResult (store/PutMessageResult.java,
PutMessageStatus.java, RocketMQ 4.9.x), with the offset message id (MessageDecoder.createMessageId).
"""

from __future__ import annotations

import enum
import logging

from store.message_ext_broker_inner import LOCALHOST

log = logging.getLogger(__name__)


class PutMessageStatus(enum.Enum):
    """PutMessageStatus."""

    PUT_OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3
    SERVICE_NOT_AVAILABLE = 4
    CREATE_MAPEDFILE_FAILED = 5
    MESSAGE_ILLEGAL = 6
    PROPERTIES_SIZE_EXCEEDED = 7
    OS_PAGECACHE_BUSY = 8
    UNKNOWN_ERROR = 9


def offset_msg_id(store_host: bytes, phy_offset: int) -> str:
    """Upper-case hex of store ip + port + 8-byte phy offset (§5.5)."""
    return (store_host + phy_offset.to_bytes(8, "big")).hex().upper()


class PutMessageResult:
    """Result of a put; msg_ids are computed on first access."""

    __slots__ = (
        "_ids",
        "end_offset",
        "logics_offset",
        "msg_num",
        "offsets",
        "status",
        "store_host",
        "store_timestamp",
        "wrote_bytes",
        "wrote_offset",
    )

    def __init__(
        self,
        status: PutMessageStatus,
        wrote_offset: int = 0,
        wrote_bytes: int = 0,
        logics_offset: int = 0,
        store_timestamp: int = 0,
        msg_num: int = 0,
        end_offset: int = 0,
        store_host: bytes = LOCALHOST,
        offsets: list[int] | None = None,
    ) -> None:
        self.status = status
        self.wrote_offset = wrote_offset
        self.wrote_bytes = wrote_bytes
        self.logics_offset = logics_offset
        self.store_timestamp = store_timestamp
        self.msg_num = msg_num
        self.end_offset = end_offset
        self.store_host = store_host
        self.offsets = offsets
        self._ids: list[str] | None = None

    @property
    def ok(self) -> bool:
        """True for PUT_OK."""
        return self.status is PutMessageStatus.PUT_OK

    @property
    def msg_ids(self) -> list[str]:
        """Offset message ids of the stored records."""
        if self._ids is None:
            offs = (
                self.offsets
                if self.offsets is not None
                else ([self.wrote_offset] if self.ok else [])
            )
            self._ids = [offset_msg_id(self.store_host, o) for o in offs]
        return self._ids

    def __repr__(self) -> str:
        return (
            f"PutMessageResult({self.status.name}, wrote_offset={self.wrote_offset}, "
            f"logics_offset={self.logics_offset}, msg_num={self.msg_num})"
        )
