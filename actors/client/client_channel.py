"""The direct channel between the user's process and its client actors.

Mirrors nothing in RocketMQ (a Java client is one process): it carries what must not ride a
Thespian message (0.4-1 ms each) between the user's process, where handlers, listeners and
futures live, and the client actors (MQClientInstance, the consumer services). The user's
process listens on a Unix socket (mode 0600, in its private runtime directory); each actor
connects and first sends HELLO naming its key. The channel is the broker's record channel
(actors.runtime.channel.Channel: its framing, socket tuning, read path and out buffer), read
with a KindDecoder and written under a lock (ChannelEnd). Both ends read everything available
in one pass and write once per pass.

Record layout (big-endian), one after another on the stream:

    offset size field
    0      4    rest_len   bytes after this field (kind byte + payload)
    4      1    kind       1-63 the foundation's (below), 64-255 free for the consumer side
    5      ...  payload    a typed record's fields as one msgpack array, in declaration order,
                           unless the kind says otherwise

Every kind is one typed record (actors.runtime.typed_record: a frozen dataclass naming its KIND,
registered in CLIENT_RECORDS), built and read only through `encode` / `read_record`; nothing
crosses as a bare list. The foundation's:

    Hello 1                 actor -> user   key
    Route 3                 actor -> user   topic, route JSON bytes | None, error | None
    BrokerRequest 4         actor -> user   request_id, broker addr, encoded request frame
    BrokerAnswer 5          user -> actor   request_id, encoded response frame | None
    Ack 6                   actor -> user   op id, ok, detail
    PersistConsumerOffset 7 actor -> user   consumer group (the persistConsumerOffset tick)
    Bye 8                   user -> actor   (a clean close follows: not an orphaning)
    RegisterProducer 9, UnregisterProducer 10, RegisterConsumer 11, UpdateConsumer 12,
    UnregisterConsumer 13, HeartbeatBroker 14, FetchRoute 15      user -> actor (the
                            instance's registrations; op_id, when set, is acknowledged by Ack)
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import ClassVar, Final

from actors.runtime.channel import TYPE_HDR, Channel, KindDecoder, add_record
from actors.runtime.typed_record import ChannelError as ChannelError  # what read_record raises
from actors.runtime.typed_record import RecordKinds, TypedRecord

log = logging.getLogger(__name__)

HELLO: Final = 1
ROUTE: Final = 3
BROKER_REQUEST: Final = 4
BROKER_ANSWER: Final = 5
ACK: Final = 6
PERSIST: Final = 7
BYE: Final = 8
REGISTER_PRODUCER: Final = 9
UNREGISTER_PRODUCER: Final = 10
REGISTER_CONSUMER: Final = 11
UPDATE_CONSUMER: Final = 12
UNREGISTER_CONSUMER: Final = 13
HEARTBEAT_BROKER: Final = 14
FETCH_ROUTE: Final = 15
FIRST_FREE_KIND: Final = 64
RUNTIME_DIR_PREFIX: Final = "amqc-"  # the user's process's runtime directory (the listener's)

MAX_RECORD: Final = 256 * 1024 * 1024  # a BrokerRequest carries a whole batch

Record = tuple[int, memoryview]


def encode_record(kind: int, payload: bytes | bytearray | memoryview) -> bytes:
    """One record."""
    return TYPE_HDR.pack(1 + len(payload), kind) + bytes(payload)


CLIENT_RECORDS: Final = RecordKinds("client channel")
record = CLIENT_RECORDS.register  # class decorator: a record type of this channel
read_record = CLIENT_RECORDS.read  # (kind, payload) -> its TypedRecord, else ChannelError


@record
@dataclass(frozen=True, slots=True)
class Hello(TypedRecord):
    """An actor's first record: the key of the handler it talks to."""

    KIND: ClassVar[int] = HELLO
    key: str


@record
@dataclass(frozen=True, slots=True)
class Route(TypedRecord):
    """A topic's route as the instance fetched it (None: no route), or why it could not."""

    KIND: ClassVar[int] = ROUTE
    topic: str
    route_json: bytes | None
    error: str | None


@record
@dataclass(frozen=True, slots=True)
class BrokerRequest(TypedRecord):
    """A broker-initiated request for something in the user's process."""

    KIND: ClassVar[int] = BROKER_REQUEST
    request_id: int
    broker_addr: str
    frame: bytes


@record
@dataclass(frozen=True, slots=True)
class BrokerAnswer(TypedRecord):
    """The answer to a BrokerRequest (None: none is owed)."""

    KIND: ClassVar[int] = BROKER_ANSWER
    request_id: int
    frame: bytes | None


@record
@dataclass(frozen=True, slots=True)
class Ack(TypedRecord):
    """A registration with an op_id was done."""

    KIND: ClassVar[int] = ACK
    op_id: int
    ok: bool
    detail: str


@record
@dataclass(frozen=True, slots=True)
class PersistConsumerOffset(TypedRecord):
    """persistConsumerOffset's tick for a consumer group whose core is in the user's process."""

    KIND: ClassVar[int] = PERSIST
    group: str


@record
@dataclass(frozen=True, slots=True)
class Bye(TypedRecord):
    """The user's process closes cleanly."""

    KIND: ClassVar[int] = BYE


@record
@dataclass(frozen=True, slots=True)
class RegisterProducer(TypedRecord):
    KIND: ClassVar[int] = REGISTER_PRODUCER
    group: str


@record
@dataclass(frozen=True, slots=True)
class UnregisterProducer(TypedRecord):
    KIND: ClassVar[int] = UNREGISTER_PRODUCER
    group: str
    op_id: int | None = None


@record
@dataclass(frozen=True, slots=True)
class RegisterConsumer(TypedRecord):
    KIND: ClassVar[int] = REGISTER_CONSUMER
    group: str
    data: bytes  # ConsumerData JSON
    op_id: int | None = None


@record
@dataclass(frozen=True, slots=True)
class UpdateConsumer(TypedRecord):
    KIND: ClassVar[int] = UPDATE_CONSUMER
    group: str
    data: bytes  # ConsumerData JSON


@record
@dataclass(frozen=True, slots=True)
class UnregisterConsumer(TypedRecord):
    KIND: ClassVar[int] = UNREGISTER_CONSUMER
    group: str
    op_id: int | None = None


@record
@dataclass(frozen=True, slots=True)
class HeartbeatBroker(TypedRecord):
    """A pull was refused: that broker lost this client's registration."""

    KIND: ClassVar[int] = HEARTBEAT_BROKER
    addr: str


@record
@dataclass(frozen=True, slots=True)
class FetchRoute(TypedRecord):
    KIND: ClassVar[int] = FETCH_ROUTE
    topic: str
    producer: bool = False


class ChannelEnd(Channel):
    """One end of the client channel: the runtime's Channel (its socket, out buffer and read
    path) reading typed records, with writes made thread-safe.

    send()/send_many()/queue()/flush() may be called from any thread; read_records() belongs
    to one thread (the event loop in the user's process, the actor in an actor)."""

    __slots__ = ("key", "lock", "on_pending_out")

    def __init__(self, sock: socket.socket, key: str = "") -> None:
        super().__init__(sock, "client", KindDecoder(MAX_RECORD))
        self.key = key
        self.lock = threading.Lock()
        self.on_pending_out: Callable[[ChannelEnd], None] | None = None  # called (outside
        # the lock) when bytes stay buffered

    def __repr__(self) -> str:
        return f"ChannelEnd(key={self.key!r}, fd={self.fd})"

    @classmethod
    def connect(cls, path: str, key: str, timeout_s: float = 5.0) -> ChannelEnd:
        """Connect to the user's process listener (blocking, bounded) and send HELLO."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        try:
            sock.connect(path)
            sock.sendall(encode_record(HELLO, Hello(key).encode()))
        except OSError:
            sock.close()
            raise
        return cls(sock, key)

    # -- writing ------------------------------------------------------------------------------
    def send_record(self, rec: TypedRecord) -> None:
        """Queue one typed record and write what the kernel takes now."""
        self.send_many([(rec.KIND, rec.encode())])

    def send_records(self, recs: Iterable[TypedRecord]) -> None:
        """Queue typed records and write what the kernel takes now (one send)."""
        self.send_many([(r.KIND, r.encode()) for r in recs])

    def send(self, kind: int, payload: bytes | bytearray | memoryview) -> None:
        """Queue one record and write what the kernel takes now."""
        self.send_many([(kind, payload)])

    def queue(self, kind: int, *parts: bytes | bytearray | memoryview) -> None:
        """Buffer one record made of parts without writing (the caller flushes later)."""
        with self.lock:
            if self.closed:
                return
            add_record(self.out, kind, *parts)

    def send_many(self, records: list[tuple[int, bytes | bytearray | memoryview]]) -> None:
        """Queue records and write what the kernel takes now (one send)."""
        with self.lock:
            if self.closed:
                return
            for kind, payload in records:
                add_record(self.out, kind, payload)
            left = not Channel.flush(self)
        if left and self.on_pending_out is not None:
            self.on_pending_out(self)

    def flush(self) -> bool:
        """Write what is buffered; True when nothing is left."""
        with self.lock:
            return Channel.flush(self)

    @property
    def has_out(self) -> bool:
        """True while bytes wait in the out buffer."""
        return bool(self.out)

    def close(self) -> None:
        """Close the socket (idempotent)."""
        with self.lock:
            self.closed = True
            self.out.clear()
        super().close()
