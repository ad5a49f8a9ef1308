"""The client's typed records: Message, MessageExt, SendResult, PullResult and their enums.

Mirrors common/message/Message.java, MessageExt.java, client/producer/SendResult.java,
SendStatus.java, TransactionSendResult.java, LocalTransactionState.java and
client/consumer/PullResult.java / PullStatus.java, RocketMQ 4.9.x, as frozen dataclasses:
a record a user holds never changes under them. Wire names become snake_case; `MessageQueue`
is protocol.bodies.MessageQueue (frozen, ordered like Java's compareTo).

`Message.properties` holds the user's own properties; tags, keys and the delay level are
fields (on the wire they are the TAGS, KEYS and DELAY properties). A send refuses a property
named as a system one (MessageConst.STRING_HASH_SET: TAGS, UNIQ_KEY, TRAN_MSG, ...), a null or
blank name or value, and \x01 / \x02 anywhere (actors/client/validators.py). A received
`MessageExt` carries every property the broker stored (TAGS, KEYS, UNIQ_KEY, ... included):
to send one on, build a Message with its tags, keys and `user_properties` (the rest).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from protocol import message as wire
from protocol.bodies import MessageQueue

__all__ = [
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageQueue",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
    "TransactionSendResult",
]

# Properties that are fields of Message (set from them when a message is sent).
FIELD_PROPERTIES = frozenset(
    {wire.PROPERTY_TAGS, wire.PROPERTY_KEYS, wire.PROPERTY_DELAY_TIME_LEVEL}
)


def _keys_text(keys: str | Sequence[str] | None) -> str | None:
    if keys is None or isinstance(keys, str):
        return keys or None
    joined = wire.KEY_SEPARATOR.join(k for k in keys if k)
    return joined or None


@dataclass(frozen=True, slots=True)
class Message:
    """A message to send: topic, body, tags, keys (one string or several), properties."""

    topic: str
    body: bytes
    tags: str | None = None
    keys: str | None = None  # several keys: a list/tuple, kept space-separated as Java does
    properties: Mapping[str, str] = field(default_factory=dict, hash=False)
    delay_level: int = 0  # 1..18 on a default broker: 1s 5s 10s 30s 1m ... 2h
    flag: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.keys, str | None):
            object.__setattr__(self, "keys", _keys_text(self.keys))
        if not isinstance(self.body, bytes):
            object.__setattr__(self, "body", bytes(self.body))
        if type(self.properties) is not dict:
            object.__setattr__(self, "properties", dict(self.properties))

    @property
    def key_list(self) -> list[str]:
        """The keys as a list."""
        return [k for k in self.keys.split(wire.KEY_SEPARATOR) if k] if self.keys else []

    def wire_properties(self) -> dict[str, str]:
        """Every property as it goes on the wire (TAGS, KEYS, DELAY and the user's own)."""
        props = dict(self.properties)
        if self.tags:
            props[wire.PROPERTY_TAGS] = self.tags
        if self.keys:
            props[wire.PROPERTY_KEYS] = self.keys
        if self.delay_level > 0:
            props[wire.PROPERTY_DELAY_TIME_LEVEL] = str(self.delay_level)
        return props


@dataclass(frozen=True, slots=True)
class MessageExt(Message):
    """A stored message as a consumer (or a transaction check) receives it."""

    msg_id: str = ""  # UNIQ_KEY when the producer set one, else offset_msg_id
    offset_msg_id: str = ""  # store host + commit log offset (what queryMsgById takes)
    queue: MessageQueue = field(default_factory=MessageQueue)
    queue_offset: int = 0
    commitlog_offset: int = 0
    born_timestamp: int = 0
    store_timestamp: int = 0
    born_host: str = ""  # "ip:port"
    store_host: str = ""
    reconsume_times: int = 0
    sys_flag: int = 0
    body_crc: int = 0
    store_size: int = 0
    prepared_transaction_offset: int = 0
    transaction_id: str | None = None

    @property
    def queue_id(self) -> int:
        """The queue id (of `queue`)."""
        return self.queue.queue_id

    @property
    def broker_name(self) -> str:
        """The broker name (of `queue`)."""
        return self.queue.broker_name

    @property
    def user_properties(self) -> dict[str, str]:
        """The properties a producer may set (those not named in MessageConst.STRING_HASH_SET):
        what `Message(..., properties=...)` takes to send this message on."""
        return {k: v for k, v in self.properties.items() if k not in wire.STRING_HASH_SET}

    def property(self, name: str, default: str | None = None) -> str | None:
        """One property by name."""
        return self.properties.get(name, default)

    @classmethod
    def from_wire(cls, m: wire.MessageExt, broker_name: str = "") -> MessageExt:
        """Build from a decoded protocol.message.MessageExt (properties parsed here)."""
        props = m.properties
        tx_id = props.get(wire.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) if props.get(
            wire.PROPERTY_TRANSACTION_PREPARED) == "true" else None
        return cls(
            topic=m.topic,
            body=bytes(m.body),
            tags=props.get(wire.PROPERTY_TAGS),
            keys=props.get(wire.PROPERTY_KEYS),
            properties=props,
            delay_level=0,
            flag=m.flag,
            msg_id=m.msg_id,
            offset_msg_id=m.offset_msg_id,
            queue=MessageQueue(m.topic, broker_name, m.queue_id),
            queue_offset=m.queue_offset,
            commitlog_offset=m.commit_log_offset,
            born_timestamp=m.born_timestamp,
            store_timestamp=m.store_timestamp,
            born_host=m.born_address,
            store_host=m.store_address,
            reconsume_times=m.reconsume_times,
            sys_flag=m.sys_flag,
            body_crc=m.body_crc,
            store_size=m.store_size,
            prepared_transaction_offset=m.prepared_transaction_offset,
            transaction_id=tx_id,
        )


class SendStatus(enum.StrEnum):
    """How the broker stored a message (compare with the plain strings: == "SEND_OK")."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(frozen=True, slots=True)
class SendResult:
    """A send's outcome: status, ids, the queue and the queue offset it got."""

    status: SendStatus
    msg_id: str  # UNIQ_KEY (batches: the items' ids joined by ",")
    offset_msg_id: str  # the broker's store-host + commit-log-offset id(s)
    queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True

    @property
    def ok(self) -> bool:
        """True when the status is SEND_OK."""
        return self.status is SendStatus.SEND_OK


class LocalTransactionState(enum.StrEnum):
    """A local transaction's outcome (Java's spelling UNKNOW kept; UNKNOWN is an alias)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"
    UNKNOWN = "UNKNOW"  # an alias of UNKNOW


@dataclass(frozen=True, slots=True)
class TransactionSendResult:
    """A transactional send: the half message's SendResult and the local transaction's state."""

    send_result: SendResult
    local_state: LocalTransactionState

    def __getattr__(self, name: str) -> Any:
        return getattr(self.send_result, name)


class PullStatus(enum.Enum):
    """A pull's outcome (PULL_NOT_FOUND -> NO_NEW_MSG, PULL_RETRY_IMMEDIATELY ->
    NO_MATCHED_MSG, PULL_OFFSET_MOVED -> OFFSET_ILLEGAL)."""

    FOUND = 0
    NO_NEW_MSG = 1
    NO_MATCHED_MSG = 2
    OFFSET_ILLEGAL = 3


@dataclass(frozen=True, slots=True)
class PullResult:
    """PULL_MESSAGE's answer, messages still encoded in `body` (decoded by the consumer's
    PullAPIWrapper: actors/client/consumer/pull_api_wrapper.py)."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int = 0
    body: bytes | memoryview = b""  # the received frame's records (a view of it, not a copy)
