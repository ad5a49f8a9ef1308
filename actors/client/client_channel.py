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
    5      ...  payload    msgpack unless the kind says otherwise

    HELLO 1           actor -> user   [key]
    CONTROL 2         user -> actor   {"op": ..., ...}  (register / unregister / route ...)
    ROUTE 3           actor -> user   [topic, route JSON bytes | None]
    BROKER_REQUEST 4  actor -> user   [request_id, broker addr, encoded request frame]
    BROKER_ANSWER 5   user -> actor   [request_id, encoded response frame | None]
    ACK 6             actor -> user   [op id, ok, detail]
    PERSIST 7         actor -> user   [consumer group]   (persistConsumerOffset tick)
    BYE 8             user -> actor   []   (a clean close follows: not an orphaning)
"""

from __future__ import annotations

import errno
import logging
import socket
import struct
import threading
from typing import Any, Final

import msgpack

log = logging.getLogger(__name__)

HELLO: Final = 1
CONTROL: Final = 2
ROUTE: Final = 3
BROKER_REQUEST: Final = 4
BROKER_ANSWER: Final = 5
ACK: Final = 6
PERSIST: Final = 7
BYE: Final = 8
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


class ChannelError(Exception):
    """The peer wrote something that is not a record stream."""


def pack(obj: Any) -> bytes:
    """msgpack a payload."""
    return msgpack.packb(obj, use_bin_type=True)  # type: ignore[no-any-return]


def unpack(payload: memoryview | bytes) -> Any:
    """Inverse of pack."""
    return msgpack.unpackb(payload, raw=False)


def encode_record(kind: int, payload: bytes | bytearray | memoryview) -> bytes:
    """One record."""
    return HEAD.pack(1 + len(payload), kind) + bytes(payload)


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
            sock.sendall(encode_record(HELLO, pack([key])))
        except OSError:
            sock.close()
            raise
        return cls(sock, key)

    # -- writing ------------------------------------------------------------------------------
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
