"""The messages the store writes: MessageExtBrokerInner and MessageExtBatch.

Mirrors common/message/MessageExtBrokerInner.java and MessageExtBatch.java, RocketMQ 4.9.x.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Final

from protocol.message import MessageExt

log = logging.getLogger(__name__)


LOCALHOST: Final = b"\x7f\x00\x00\x01\x00\x00\x00\x00"


@dataclass(slots=True)
class MessageExtBrokerInner:
    """A message to store (MessageExtBrokerInner)."""

    topic: str
    body: bytes | memoryview
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    queue_id: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = LOCALHOST
    store_host: bytes = LOCALHOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags_code: int | None = None  # None: the store hashes the TAGS property
    properties_string: str | bytes | None = None  # bytes: stored as they are
    # a delayed message being delivered (ScheduleMessageService.messageTimeup): stored under
    # its real topic with the DELAY its text still carries, as Java stores it, not parked again
    deliver_now: bool = False

    @classmethod
    def from_stored(
        cls,
        msg: MessageExt,
        topic: str,
        queue_id: int,
        properties: dict[str, str],
        *,
        store_host: bytes | None = None,
        reconsume_times: int | None = None,
    ) -> MessageExtBrokerInner:
        """A stored message put again elsewhere (delay delivery, send-back): same body, flag,
        sysflag and born time/host; new topic, queue and properties."""
        return cls(
            topic=topic,
            body=msg.body,
            flag=msg.flag,
            properties=properties,
            queue_id=queue_id,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_host=msg.store_host if store_host is None else store_host,
            reconsume_times=msg.reconsume_times if reconsume_times is None else reconsume_times,
        )


@dataclass(slots=True)
class MessageExtBatch:
    """A SEND_BATCH_MESSAGE body to expand into records (MessageExtBatch)."""

    topic: str
    body: bytes | memoryview
    queue_id: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = LOCALHOST
    store_host: bytes = LOCALHOST
    reconsume_times: int = 0
    batch_properties: str = ""
