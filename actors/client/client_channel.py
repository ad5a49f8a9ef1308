"""The direct channel between the user's process and its client actors.

Mirrors nothing in RocketMQ (a Java client is one process): it carries what must not ride a
Thespian message (0.4-1 ms each) between the user's process, where handlers, listeners and
futures live, and the client actors (MQClientInstance, the consumer services). The user's
process listens on a Unix socket (mode 0600, in its private runtime directory); each actor
connects and first sends HELLO naming its key. Both ends read everything available in one
pass and write once per pass.

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

import errno
import logging
import socket
import struct
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from actors.runtime.typed_record import ChannelError, RecordKinds, TypedRecord

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

HEAD = struct.Struct(
    ">I"  # rest_len
    "B"  # kind
)
MAX_RECORD: Final = 256 * 1024 * 1024
SOCK_BUF: Final = 4 * 1024 * 1024
READ_CHUNK: Final = 1024 * 1024
_PEER_GONE: Final = frozenset((errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.EBADF))

Record = tuple[int, memoryview]


def encode_record(kind: int, payload: bytes | bytearray | memoryview) -> bytes:
    """One record."""
    return HEAD.pack(1 + len(payload), kind) + bytes(payload)


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


class RecordDecoder:
    """Splits the stream into (kind, payload view) records; keeps the partial tail."""

    __slots__ = ("_rest",)

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, data: bytes) -> list[Record]:
        """Complete records in data (after what was kept from earlier feeds)."""
        buf = self._rest + data if self._rest else data
        view = memoryview(buf)
        size, pos = len(buf), 0
        out: list[Record] = []
        while size - pos >= 5:
            rest_len, kind = HEAD.unpack_from(buf, pos)
            if rest_len < 1 or rest_len > MAX_RECORD:
                raise ChannelError(f"bad record length {rest_len}")
            end = pos + 4 + rest_len
            if end > size:
                break
            out.append((kind, view[pos + 5 : end]))
            pos = end
        self._rest = bytes(view[pos:]) if pos < size else b""
        return out


class ChannelEnd:
    """One end of a channel: a non-blocking socket, an out buffer, a record decoder.

    send()/send_many() are thread-safe; read_records() belongs to one thread (the event loop
    in the user's process, the actor in an actor)."""

    def __init__(self, sock: socket.socket, key: str = "") -> None:
        sock.setblocking(False)
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            try:
                sock.setsockopt(socket.SOL_SOCKET, opt, SOCK_BUF)
            except OSError:
                pass
        self.sock = sock
        self.fd = sock.fileno()
        self.key = key
        self.out = bytearray()
        self.decoder = RecordDecoder()
        self.closed = False
        self.lock = threading.Lock()
        self.on_pending_out: Any = None  # called (outside the lock) when bytes stay buffered

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
            out = self.out
            out += HEAD.pack(1 + sum(map(len, parts)), kind)
            for part in parts:
                out += part

    def send_many(self, records: list[tuple[int, bytes | bytearray | memoryview]]) -> None:
        """Queue records and write what the kernel takes now (one send)."""
        with self.lock:
            if self.closed:
                return
            out = self.out
            for kind, payload in records:
                out += HEAD.pack(1 + len(payload), kind)
                out += payload
            left = self._flush_locked()
        if left and self.on_pending_out is not None:
            self.on_pending_out(self)

    def flush(self) -> bool:
        """Write what is buffered; True when nothing is left."""
        with self.lock:
            return not self._flush_locked()

    def _flush_locked(self) -> bool:
        out = self.out
        while out:
            try:
                sent = self.sock.send(out)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError as exc:
                if exc.errno not in _PEER_GONE:
                    log.warning("%r send failed: %s", self, exc)
                out.clear()
                self.closed = True
                return False
            del out[:sent]
        return False

    @property
    def has_out(self) -> bool:
        """True while bytes wait in the out buffer."""
        return bool(self.out)

    # -- reading ------------------------------------------------------------------------------
    def read_records(self) -> list[Record] | None:
        """Records available now; None once the peer closed (or wrote garbage)."""
        chunks: list[bytes] = []
        eof = False
        while True:
            try:
                data = self.sock.recv(READ_CHUNK)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                if exc.errno not in _PEER_GONE:
                    log.warning("%r recv failed: %s", self, exc)
                eof = True
                break
            if not data:
                eof = True
                break
            chunks.append(data)
            if len(data) < READ_CHUNK:
                break
        try:
            records = self.decoder.feed(b"".join(chunks)) if chunks else []
        except ChannelError as exc:
            log.error("%r corrupt stream: %s", self, exc)
            return None
        if eof:
            self.closed = True
            return records or None
        return records

    def close(self) -> None:
        """Close the socket (idempotent)."""
        with self.lock:
            self.closed = True
            self.out.clear()
        try:
            self.sock.close()
        except OSError:
            pass
