"""Direct data-plane channels between co-located actors (Unix sockets, or TCP across hosts).

Mirrors the role of remoting/netty/NettyRemotingServer.java's executor hand-off, RocketMQ 4.9.x:
where Java passes a RemotingCommand to a processor's thread pool, we write a length-prefixed
record on a socket owned by the processor actor. Thespian only sets the channels up.

Record layout (big-endian), one after another on a stream socket:

    offset size field
    0      4    rest_len   bytes after this field (type byte + payload)
    4      1    rtype      REQUEST 1, REPLY 2, CONN_CLOSED 3, CLOSE_CONN 4, EVENTS 7,
                           APPLY 8, CALL 9, CONN_FD 10, LOCKS 11, LEDGER 12, LINK 13
                           (5 and 6 were the arrival notices' records, now LINK records)
    5      ...  payload:
       REQUEST     q conn_id | q recv_ns | I peer IPv4 | H peer port | frame (no length prefix)
       REPLY       q conn_id | encoded frame (with its 4-byte length: written to TCP as is)
       CALL        q conn_id | i opaque | encoded request frame (processor -> RemotingServer:
                   a request to the client whose answer, matched by opaque, comes back to the
                   processor that sent it; Broker2Client.callClient)
       CONN_CLOSED q conn_id                 (RemotingServer -> processors)
       CLOSE_CONN  q conn_id                 (processor -> RemotingServer: drop that client)
       EVENTS      msgpack [origin, {group: pickled event list}, pickled full list]
                   (processor -> RemotingServer, written before the replies of its batch)
       APPLY       pickled event list (RemotingServer -> the processors of its AUDIENCE)
       CONN_FD     q conn_id                 (RemotingServer -> a direct-reply processor, Unix
                   channels only: the connection's socket rides the same sendmsg as
                   SCM_RIGHTS; see actors.runtime.direct_reply)
       LOCKS       no payload                (the same, once per channel: the lock table)
       LEDGER      no payload                (RemotingServer -> a processor group that holds
                   requests, first on its Unix channel: the ledger page rides the sendmsg;
                   see actors.runtime.request_ledger)
       LINK        msgpack array: a typed record between a service actor and a processor
                   (actors.runtime.link_records: HoldPull, WakePull, TransferWait, ...), on
                   a link (a channel opened on the controller's ConnectLink, its first
                   record a LinkHello); REQUEST / REPLY records may travel on a link too.
                   A RemotingServer's channel starts with a LinkHello("RemotingServer"): the
                   processor tells its channels from links by their first record

Descriptors arrive in the order of their records: the reader queues what each recvmsg brings
(Channel.fds) and each CONN_FD / LOCKS / LEDGER record takes the next one.

Causal replication: a processor writes the events of a batch ahead of that batch's replies;
the RemotingServer copies them into the audience processors' channels before it writes those
replies to the clients, so any later request of a client that saw a reply queues behind them.
A processor that writes its answers to clients itself does so only for batches that emitted
no events; the others still answer here, behind their events.

The client channel (actors.client.client_channel, between a user's process and its client
actors) is this Channel with the same framing, its kind byte naming a typed record
(actors.runtime.typed_record) read by a KindDecoder instead of the records above.

Readers take everything available in one readiness pass; writers append to an out buffer
and flush it with one send per pass. Sockets are non-blocking both ways: what the kernel
does not take stays in the out buffer for the next pass.
"""

from __future__ import annotations

import errno
import logging
import os
import pickle
import socket
import struct
import threading
from array import array
from collections import deque
from collections.abc import Sequence
from typing import Any, ClassVar, Final, Protocol

import msgpack

from actors.runtime.typed_record import ChannelError

log = logging.getLogger(__name__)

REQUEST: Final = 1
REPLY: Final = 2
CONN_CLOSED: Final = 3
CLOSE_CONN: Final = 4
EVENTS: Final = 7
APPLY: Final = 8
CALL: Final = 9
CONN_FD: Final = 10
LOCKS: Final = 11
LEDGER: Final = 12
LINK: Final = 13

REC_LEN = struct.Struct(">I")
REQUEST_HDR = struct.Struct(
    ">I"  # rest_len
    "B"  # rtype = REQUEST
    "q"  # conn_id
    "q"  # recv_ns (time.monotonic_ns(), system-wide clock on Linux)
    "I"  # peer IPv4 as an unsigned int
    "H"  # peer port
)
CONN_HDR = struct.Struct(
    ">I"  # rest_len
    "B"  # rtype
    "q"  # conn_id
)
CALL_HDR = struct.Struct(
    ">I"  # rest_len
    "B"  # rtype = CALL
    "q"  # conn_id
    "i"  # opaque of the request (its answer carries it back)
)
TYPE_HDR = struct.Struct(">IB")
REQUEST_FIXED: Final = REQUEST_HDR.size - REC_LEN.size  # type byte + fixed fields
CONN_FIXED: Final = CONN_HDR.size - REC_LEN.size
CALL_FIXED: Final = CALL_HDR.size - REC_LEN.size
MAX_RECORD: Final = 64 * 1024 * 1024  # a record beyond this means a corrupt stream
SOCK_BUF: Final = 4 * 1024 * 1024
READ_CHUNK: Final = 1024 * 1024

# One scratch buffer per thread for recv_into (threads of a user's process read at once):
# sock.recv(n) allocates n bytes first, an mmap + munmap per call above 128 KiB (measured
# here: recv(1 MiB) of a 1 KiB record 9.2 us, recv_into + copy of what arrived 1.2 us).
_scratch = threading.local()


def _scratch_view() -> memoryview:
    try:
        view: memoryview = _scratch.view
    except AttributeError:
        view = _scratch.view = memoryview(bytearray(READ_CHUNK))
    return view


_FD_SPACE: Final = socket.CMSG_SPACE(16 * array("i").itemsize)  # descriptors per recvmsg

ChannelAddr = str | tuple[str, int]  # a Unix socket path, or (host, port) for TCP


def recv_available(sock: socket.socket, max_bytes: int) -> tuple[bytes, bool, OSError | None]:
    """Read what a non-blocking socket has now (up to about max_bytes).

    Returns (data, eof, error): eof when the peer closed or the socket failed (error set).
    """
    view = _scratch_view()
    chunks: list[bytes] = []
    total = 0
    while total < max_bytes:
        try:
            n = sock.recv_into(view)
        except (BlockingIOError, InterruptedError):
            break
        except OSError as exc:
            return b"".join(chunks), True, exc
        if not n:
            return b"".join(chunks), True, None
        chunks.append(view[:n].tobytes())
        total += n
        if n < READ_CHUNK:
            break
    if len(chunks) == 1:
        return chunks[0], False, None
    return b"".join(chunks), False, None


def recv_available_fds(
    sock: socket.socket, max_bytes: int, fds: deque[int]
) -> tuple[bytes, bool, OSError | None]:
    """recv_available for a Unix socket that may carry descriptors: those received are
    appended to `fds` in order (a recvmsg stops after a message that carried some)."""
    view = _scratch_view()
    chunks: list[bytes] = []
    total = 0
    while total < max_bytes:
        try:
            n, anc, _flags, _addr = sock.recvmsg_into([view], _FD_SPACE)
        except (BlockingIOError, InterruptedError):
            break
        except OSError as exc:
            return b"".join(chunks), True, exc
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array("i")
                got.frombytes(data[: len(data) - len(data) % got.itemsize])
                fds.extend(got)
        if not n:
            return b"".join(chunks), True, None
        chunks.append(view[:n].tobytes())
        total += n
        if n < READ_CHUNK and not anc:
            break
    return b"".join(chunks), False, None


# EBADF: the socket was closed by another thread of the process (a client's close)
PEER_GONE: Final = frozenset((errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.EBADF))


def send_out(sock: socket.socket, out: bytearray) -> tuple[bool, OSError | None]:
    """Send what a non-blocking socket takes of `out`, removing it from the buffer.

    Returns (empty, error): on a socket error the buffer is dropped and the error returned.
    """
    while out:
        try:
            sent = sock.send(out)
        except (BlockingIOError, InterruptedError):
            return False, None
        except OSError as exc:
            out.clear()
            return True, exc
        if sent == len(out):
            out.clear()
            return True, None
        del out[:sent]
    return True, None


def add_request(
    out: bytearray, conn_id: int, recv_ns: int, peer_ip: int, peer_port: int, frame: Any
) -> None:
    """Append a REQUEST record carrying `frame` (a frame without its length prefix)."""
    out += REQUEST_HDR.pack(
        REQUEST_FIXED + len(frame), REQUEST, conn_id, recv_ns, peer_ip, peer_port
    )
    out += frame


def add_reply(out: bytearray, conn_id: int, encoded: Any) -> None:
    """Append a REPLY record carrying a whole encoded frame (length prefix included)."""
    out += CONN_HDR.pack(CONN_FIXED + len(encoded), REPLY, conn_id)
    out += encoded


def add_call(out: bytearray, conn_id: int, opaque: int, encoded: Any) -> None:
    """Append a CALL record: a request frame for the client whose answer comes back here."""
    out += CALL_HDR.pack(CALL_FIXED + len(encoded), CALL, conn_id, opaque)
    out += encoded


def add_conn_record(out: bytearray, rtype: int, conn_id: int) -> None:
    """Append a CONN_CLOSED, CLOSE_CONN or CONN_FD record."""
    out += CONN_HDR.pack(CONN_FIXED, rtype, conn_id)


def add_record(out: bytearray, kind: int, *parts: Any) -> None:
    """Append a record of `kind` whose payload is `parts` one after another (copied once, into
    `out`): the framing of every channel record, the broker's and the client channel's."""
    out += TYPE_HDR.pack(1 + sum(map(len, parts)), kind)
    for part in parts:
        out += part


def add_locks(out: bytearray) -> None:
    """Append a LOCKS record (its descriptor rides the sendmsg)."""
    add_record(out, LOCKS)


def add_ledger(out: bytearray) -> None:
    """Append a LEDGER record (its descriptor rides the sendmsg)."""
    add_record(out, LEDGER)


def add_link(out: bytearray, payload: bytes) -> None:
    """Append a LINK record (an encoded actors.runtime.link_records record)."""
    add_record(out, LINK, payload)


class RoutedEvent(Protocol):
    """A replicated event: the processor groups it goes to (actors.broker.events.BrokerEvent)."""

    AUDIENCE: ClassVar[frozenset[str]]


def events_record(origin: str, events: Sequence[RoutedEvent]) -> bytes:
    """An EVENTS record: the events grouped by audience (origin excluded) plus the full list."""
    by_group: dict[str, list[RoutedEvent]] = {}
    for ev in events:
        for group in ev.AUDIENCE:
            if group != origin:
                by_group.setdefault(group, []).append(ev)
    payload = msgpack.packb(
        [origin, {g: pickle.dumps(evs, protocol=pickle.HIGHEST_PROTOCOL)
                  for g, evs in by_group.items()},
         pickle.dumps(events, protocol=pickle.HIGHEST_PROTOCOL)],
        use_bin_type=True,
    )
    return TYPE_HDR.pack(1 + len(payload), EVENTS) + payload


def add_apply(out: bytearray, blob: Any) -> None:
    """Append an APPLY record carrying a pickled event list."""
    add_record(out, APPLY, blob)


def ip_to_int(ip: str) -> int:
    """Pack a dotted IPv4 string (IPv4-mapped IPv6 accepted) as an unsigned int."""
    if ip.startswith("::ffff:"):
        ip = ip[7:]
    try:
        return int.from_bytes(socket.inet_aton(ip), "big")
    except OSError:
        return 0


def int_to_ip(value: int) -> str:
    """Inverse of ip_to_int."""
    return socket.inet_ntoa(value.to_bytes(4, "big"))


class RecordDecoder:
    """Splits a channel byte stream into records; keeps the partial tail between feeds."""

    __slots__ = ("_peers", "_rest")

    def __init__(self) -> None:
        self._rest = b""
        self._peers: dict[tuple[int, int], tuple[str, int]] = {}

    def feed(self, data: bytes) -> list[tuple[Any, ...]]:
        """Return complete records as tuples; frames are memoryviews over immutable bytes.

        REQUEST -> (1, conn_id, recv_ns, (ip, port), frame); REPLY -> (2, conn_id, frame);
        CALL -> (9, conn_id, opaque, frame);
        CONN_CLOSED / CLOSE_CONN / CONN_FD -> (rtype, conn_id); LOCKS -> (11,);
        LEDGER -> (12,);
        LINK -> (13, memoryview);
        EVENTS -> (7, origin, {group: bytes}, bytes); APPLY -> (8, memoryview).
        """
        buf = self._rest + data if self._rest else data
        view = memoryview(buf)
        size = len(buf)
        pos = 0
        records: list[tuple[Any, ...]] = []
        append = records.append
        peers = self._peers
        while size - pos >= 5:
            (rest_len,) = REC_LEN.unpack_from(buf, pos)
            end = pos + 4 + rest_len
            if rest_len < 1 or rest_len > MAX_RECORD:
                raise ChannelError(f"bad record length {rest_len}")
            if end > size:
                break
            rtype = buf[pos + 4]
            if rtype == REQUEST:
                if rest_len < REQUEST_FIXED:
                    raise ChannelError("short REQUEST record")
                _, _, conn_id, recv_ns, ip, port = REQUEST_HDR.unpack_from(buf, pos)
                peer = peers.get((ip, port))
                if peer is None:
                    if len(peers) > 65536:
                        peers.clear()
                    peer = peers[(ip, port)] = (int_to_ip(ip), port)
                append((REQUEST, conn_id, recv_ns, peer, view[pos + REQUEST_HDR.size : end]))
            elif rtype == REPLY:
                if rest_len < CONN_FIXED:
                    raise ChannelError("short REPLY record")
                _, _, conn_id = CONN_HDR.unpack_from(buf, pos)
                append((REPLY, conn_id, view[pos + CONN_HDR.size : end]))
            elif rtype == CALL:
                if rest_len < CALL_FIXED:
                    raise ChannelError("short CALL record")
                _, _, conn_id, opaque = CALL_HDR.unpack_from(buf, pos)
                append((CALL, conn_id, opaque, view[pos + CALL_HDR.size : end]))
            elif rtype in (CONN_CLOSED, CLOSE_CONN, CONN_FD):
                if rest_len != CONN_FIXED:
                    raise ChannelError("bad connection record")
                _, _, conn_id = CONN_HDR.unpack_from(buf, pos)
                append((rtype, conn_id))
            elif rtype == EVENTS:
                origin, by_group, full = msgpack.unpackb(view[pos + 5 : end], raw=False)
                append((EVENTS, origin, by_group, full))
            elif rtype == APPLY:
                append((APPLY, view[pos + 5 : end]))
            elif rtype == LINK:
                append((LINK, view[pos + 5 : end]))
            elif rtype in (LOCKS, LEDGER):
                if rest_len != 1:
                    raise ChannelError(f"bad record of type {rtype}")
                append((rtype,))
            else:
                raise ChannelError(f"unknown record type {rtype}")
            pos = end
        self._rest = bytes(view[pos:]) if pos < size else b""
        return records


class KindDecoder:
    """Splits a stream into (kind, payload view) records, keeping the partial tail: the reader
    of the client channel, whose kinds name actors.runtime.typed_record types."""

    __slots__ = ("_rest", "max_record")

    def __init__(self, max_record: int = MAX_RECORD) -> None:
        self._rest, self.max_record = b"", max_record

    def feed(self, data: bytes) -> list[tuple[int, memoryview]]:
        """Complete records in data (after what was kept from earlier feeds)."""
        buf = self._rest + data if self._rest else data
        view = memoryview(buf)
        size, pos = len(buf), 0
        out: list[tuple[int, memoryview]] = []
        limit = self.max_record
        while size - pos >= 5:
            rest_len, kind = TYPE_HDR.unpack_from(buf, pos)
            if rest_len < 1 or rest_len > limit:
                raise ChannelError(f"bad record length {rest_len}")
            end = pos + 4 + rest_len
            if end > size:
                break
            out.append((kind, view[pos + 5 : end]))
            pos = end
        self._rest = bytes(view[pos:]) if pos < size else b""
        return out


class StreamDecoder(Protocol):
    """What a Channel reads its stream with (RecordDecoder or KindDecoder)."""
    def feed(self, data: bytes) -> list[Any]: ...


def _tune(sock: socket.socket) -> None:
    sock.setblocking(False)
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, SOCK_BUF)
        except OSError:
            pass
    if sock.family != socket.AF_UNIX:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class OutBuffered:
    """A non-blocking socket with an out buffer (channel ends and client connections)."""

    __slots__ = ()
    sock: socket.socket
    out: bytearray
    closed: bool

    def flush(self) -> bool:
        """Send as much of the out buffer as the kernel takes; True when it is empty."""
        if not self.out:
            return True
        done, err = send_out(self.sock, self.out)
        if err is not None:
            self.closed = True  # type: ignore[misc]  # the slot is the subclass's
            if err.errno not in PEER_GONE:
                log.warning("%r send failed: %s", self, err)
        return done

    def close(self) -> None:
        """Close the socket (idempotent)."""
        self.closed = True  # type: ignore[misc]  # the slot is the subclass's
        try:
            self.sock.close()
        except OSError:
            pass


class Channel(OutBuffered):
    """One end of a channel: non-blocking socket, record decoder, out buffer. The broker's
    channels read RecordDecoder's records; the client channel (actors.client.client_channel)
    is this class reading typed records with a KindDecoder."""

    __slots__ = ("closed", "decoder", "fd", "fds", "name", "out", "sock")

    def __init__(self, sock: socket.socket, name: str = "",
                 decoder: StreamDecoder | None = None) -> None:  # fmt: skip
        _tune(sock)
        self.sock = sock
        self.fd = sock.fileno()
        self.name = name
        self.out = bytearray()
        self.decoder: StreamDecoder = RecordDecoder() if decoder is None else decoder
        self.closed = False
        self.fds: deque[int] | None = None  # descriptors received, when this end takes them

    def __repr__(self) -> str:
        return f"channel={self.name}"

    def take_fds(self) -> None:
        """Receive descriptors from now on (a Unix channel of a direct-reply processor)."""
        if self.fds is None and self.sock.family == socket.AF_UNIX:
            self.fds = deque()

    def next_fd(self) -> int | None:
        """The descriptor of the CONN_FD, LOCKS or LEDGER record just read (None: lost)."""
        return self.fds.popleft() if self.fds else None

    def send_with_fds(self, data: bytes, fds: list[int]) -> bool:
        """Send records carrying descriptors, after everything queued before them; False when
        the queue could not be written first or the socket took nothing (nothing sent)."""
        if not self.flush() or self.closed:
            return False
        try:
            sent = self.sock.sendmsg(
                [data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array("i", fds))]
            )
        except (BlockingIOError, InterruptedError):
            return False
        except OSError as exc:
            self.closed = True
            if exc.errno not in PEER_GONE:
                log.warning("%r send failed: %s", self, exc)
            return False
        if sent < len(data):  # the descriptors went with the first part
            self.out += memoryview(data)[sent:]
        return True

    def close(self) -> None:
        """Close the socket and any descriptor received but not taken."""
        super().close()
        while self.fds:
            try:
                os.close(self.fds.popleft())
            except OSError:
                pass

    def read_records(self, max_bytes: int = 16 * 1024 * 1024) -> list[Any] | None:
        """Read what is available now (bounded); None when the peer has closed or is corrupt."""
        if self.fds is None:
            data, eof, err = recv_available(self.sock, max_bytes)
        else:
            data, eof, err = recv_available_fds(self.sock, max_bytes, self.fds)
        if err is not None and err.errno not in PEER_GONE:
            log.warning("channel=%s recv failed: %s", self.name, err)
        try:
            records = self.decoder.feed(data) if data else []
        except ChannelError as exc:
            log.error("channel=%s corrupt stream: %s", self.name, exc)
            return None
        if eof and not records:
            return None
        if eof:
            self.closed = True
        return records


def listen_channel(addr: ChannelAddr, backlog: int = 64) -> socket.socket:
    """Open a non-blocking listening socket for `addr` (Unix path, mode 0600, or TCP
    (host, port) with SO_REUSEADDR; port 0 = any)."""
    if isinstance(addr, str):
        try:
            os.unlink(addr)
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError:
        sock.close()
        raise
    if isinstance(addr, str):
        os.chmod(addr, 0o600)
    sock.listen(backlog)
    sock.setblocking(False)
    return sock


def listen_address(sock: socket.socket) -> ChannelAddr:
    """The address others connect to for a socket from listen_channel."""
    name = sock.getsockname()
    return name if isinstance(name, str) else (name[0], name[1])


def connect_channel(
    addr: ChannelAddr, name: str = "", timeout_s: float = 5.0, token: bytes = b""
) -> Channel:
    """Connect (blocking, bounded) to a channel listener and return the non-blocking Channel;
    `token` (TCP channels) is written first: the listener drops connections without it."""
    if isinstance(addr, str):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(addr)
        if token:
            sock.sendall(token)
    except OSError:
        sock.close()
        raise
    return Channel(sock, name)


def accept_channels(listener: socket.socket, name: str = "") -> list[Channel]:
    """Accept every pending connection on a channel listener (Unix sockets: no token)."""
    return [Channel(sock, name) for sock in accept_all(listener)]


def accept_all(listener: socket.socket) -> list[socket.socket]:
    """Accept every pending connection on a listener (at most 64 a call)."""
    socks: list[socket.socket] = []
    for _ in range(64):
        try:
            sock, _addr = listener.accept()
        except (BlockingIOError, InterruptedError):
            break
        socks.append(sock)
    return socks
