"""The stored message record and the batch item: their one layout, encoder and walker (the
properties string they carry, and the rule the store reads it by, are
protocol.message_properties').

Mirrors common/message/MessageDecoder.java (decode, encodeMessages) and store/CommitLog.java
(DefaultAppendMessageCallback, MessageExtBatchEncoder, calMsgLength, checkMessageAndReturnSize),
RocketMQ 4.9.x. The record
is the commit-log unit, the PULL_MESSAGE / QUERY_MESSAGE / VIEW_MESSAGE_BY_ID body and the HA
transfer unit; the batch item is what a SEND_BATCH_MESSAGE body holds. Nothing else in the
project declares either layout: writers use `write_record` / `encode_record_into` (a batch's
records `pack_record_tail` + `record_head_packer`), readers `record_at` / `iter_records` (and
a consumer's decode `plain_records`).

Record (big-endian; IPv4 born and store hosts; each IPv6 host adds 12 bytes)::

    off  size  field
    0    4     TOTALSIZE                 whole record, this field included
    4    4     MAGICCODE                 0xDAA320A7 (message) / 0xCBD43194 (end-of-file blank)
    8    4     BODYCRC                   crc32(body) & 0x7fffffff
    12   4     QUEUEID
    16   4     FLAG                      application flag
    20   8     QUEUEOFFSET               consume-queue index
    28   8     PHYSICALOFFSET            this record's commit-log offset
    36   4     SYSFLAG                   MessageSysFlag bits
    40   8     BORNTIMESTAMP             ms
    48   8/20  BORNHOST                  ip (4 or 16 bytes) + int port
    ..   8     STORETIMESTAMP            ms
    ..   8/20  STOREHOSTADDRESS          ip + int port
    ..   4     RECONSUMETIMES
    ..   8     PREPAREDTRANSACTIONOFFSET
    ..   4+B   BODY                      int length + bytes
    ..   1+T   TOPIC                     byte length (<= 127) + UTF-8
    ..   2+P   PROPERTIES                short length (<= 32767) + UTF-8 properties string

Total with IPv4 hosts = 91 + B + T + P. A commit-log file ends in a blank: int remaining bytes,
int BLANK_MAGIC_CODE.

Batch item (MessageDecoder.encodeMessages)::

    TOTALSIZE i, MAGICCODE i (0), BODYCRC i (0), FLAG i, BODY 4+B, PROPERTIES 2+P
"""

from __future__ import annotations

import functools
import socket
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import Any, Final, NamedTuple

from protocol.codes import MessageSysFlag

MESSAGE_MAGIC_CODE: Final = -626843481  # 0xDAA320A7 as a signed int
BLANK_MAGIC_CODE: Final = -875286124  # 0xCBD43194 as a signed int
END_FILE_MIN_BLANK_LENGTH: Final = 8  # int maxBlank + int BLANK_MAGIC_CODE

BORNHOST_V6_FLAG: Final = 0x10
STOREHOSTADDRESS_V6_FLAG: Final = 0x20
V6_FLAGS: Final = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG  # either host is IPv6

MAX_TOPIC_LENGTH: Final = 127
MAX_PROPERTIES_LENGTH: Final = 32767

# The whole fixed part of an IPv4/IPv4 record, packed in one call by the writers. Each host is
# the raw 8 bytes pack_host() returns (4-byte ip + int port).
RECORD_V4_HEAD: Final = struct.Struct(
    ">i"  # TOTALSIZE
    "i"  # MAGICCODE
    "i"  # BODYCRC
    "i"  # QUEUEID
    "i"  # FLAG
    "q"  # QUEUEOFFSET
    "q"  # PHYSICALOFFSET
    "i"  # SYSFLAG
    "q"  # BORNTIMESTAMP
    "8s"  # BORNHOST ip + port
    "q"  # STORETIMESTAMP
    "8s"  # STOREHOSTADDRESS ip + port
    "i"  # RECONSUMETIMES
    "q"  # PREPAREDTRANSACTIONOFFSET
    "i"  # body length
)
V4_FIXED_SIZE: Final = RECORD_V4_HEAD.size  # 88; + B + 1 + T + 2 + P = 91 + B + T + P
MIN_RECORD_SIZE: Final = V4_FIXED_SIZE + 3  # empty body, topic and properties
# The same part read by the walker as ints only (the hosts skipped: no bytes object per record).
_FIXED_V4_INTS = struct.Struct(">iiiiiqqiq8xq8xiqi")
# What a writer of a batch's records packs once: SYSFLAG .. PREPAREDTRANSACTIONOFFSET.
_HEAD_FRONT: Final = ">iiiiiqq"  # TOTALSIZE .. PHYSICALOFFSET
_TAIL_V4 = struct.Struct(">iq8sq8siq")
_TAIL_ANY: dict[tuple[int, int], struct.Struct] = {}
_HEAD_PACKERS: dict[int, Callable[..., bytes]] = {}

QUEUE_OFFSET_POS: Final = 20
PHYSICAL_OFFSET_POS: Final = 28
SYSFLAG_POS: Final = 36
BORN_TIMESTAMP_POS: Final = 40
BORN_HOST_POS: Final = 48
# ... and, with IPv4 hosts (each IPv6 host moves what follows it by 12):
STORE_TIMESTAMP_POS_V4: Final = 56
STORE_HOST_POS_V4: Final = 64
RECONSUME_TIMES_POS_V4: Final = 72

_TOTAL_MAGIC = struct.Struct(">ii")
_COMPRESSED: Final = int(MessageSysFlag.COMPRESSED_FLAG)
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")

# A SEND_BATCH_MESSAGE body item: TOTALSIZE, MAGICCODE, BODYCRC, FLAG, body length; body;
# short properties length; properties.
BATCH_ITEM_HEAD: Final = struct.Struct(">iiiii")
BATCH_ITEM_FIXED: Final = BATCH_ITEM_HEAD.size + 2  # 22
_ITEM_UNPACKERS: dict[int, Callable[[Any, int], tuple[Any, ...]]] = {}


@functools.lru_cache(maxsize=4096)
def topic_field(topic: str) -> bytes | None:
    """A record's topic field: its length byte and its UTF-8; None when no record can hold
    it (empty, or over MAX_TOPIC_LENGTH bytes)."""
    raw = topic.encode()
    if not raw or len(raw) > MAX_TOPIC_LENGTH:
        return None
    return bytes((len(raw),)) + raw


def java_string_hash(s: str) -> int:
    """Java String.hashCode() over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & 0xFFFFFFFF
    else:
        units = s.encode("utf-16-be")
        for i in range(0, len(units), 2):
            h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """CRC32 of the stored body, masked to 31 bits as RocketMQ stores it."""
    return zlib.crc32(body) & 0x7FFFFFFF


def pack_host(host: str, port: int) -> bytes:
    """Pack ip + port as stored: 4-byte IPv4 (IPv4-mapped IPv6 folded to 4) or 16-byte IPv6."""
    if host.startswith("::ffff:") and "." in host:
        host = host[7:]
    try:
        raw = socket.inet_pton(socket.AF_INET, host)
    except OSError:
        raw = socket.inet_pton(socket.AF_INET6, host)
    return raw + _I32.pack(port)


def unpack_host(raw: bytes | memoryview) -> tuple[str, int]:
    """Inverse of pack_host (8 or 20 bytes)."""
    ip = bytes(raw[:-4])
    port = _I32.unpack_from(raw, len(raw) - 4)[0]
    fam = socket.AF_INET if len(ip) == 4 else socket.AF_INET6
    return socket.inet_ntop(fam, ip), port


def host_length(sys_flag: int, v6_flag: int) -> int:
    """Stored length of the born (BORNHOST_V6_FLAG) or store host of a record with sys_flag."""
    return 20 if sys_flag & v6_flag else 8


def record_size(body_len: int, topic_len: int, props_len: int, sys_flag: int = 0) -> int:
    """Total stored length of a record with these part lengths (calMsgLength)."""
    size = MIN_RECORD_SIZE + body_len + topic_len + props_len
    if sys_flag & BORNHOST_V6_FLAG:
        size += 12
    if sys_flag & STOREHOSTADDRESS_V6_FLAG:
        size += 12
    return size


# ---- the encoder ------------------------------------------------------------------------------
def write_record(
    buf: Any, pos: int, total: int, crc: int, queue_id: int, flag: int, queue_offset: int,
    phy_offset: int, sys_flag: int, born_timestamp: int, born_host: bytes, store_timestamp: int,
    store_host: bytes, reconsume_times: int, prepared_offset: int,
    body: bytes | bytearray | memoryview, topic_with_length: bytes, properties: bytes,
) -> None:
    """Write one record of `total` bytes (record_size) at buf[pos:], as the commit log's writer
    does: `topic_with_length` is the length byte + the topic, the hosts pack_host() output (the
    V6 sysflag bits follow their lengths), `crc` body_crc(body)."""
    blen = len(body)
    if len(born_host) == 8 and len(store_host) == 8:
        RECORD_V4_HEAD.pack_into(
            buf, pos, total, MESSAGE_MAGIC_CODE, crc, queue_id, flag, queue_offset, phy_offset,
            sys_flag & ~V6_FLAGS, born_timestamp, born_host, store_timestamp, store_host,
            reconsume_times, prepared_offset, blen,
        )  # fmt: skip
        p = pos + V4_FIXED_SIZE
    else:
        tail = pack_record_tail(sys_flag, born_timestamp, born_host, store_timestamp, store_host,
                                reconsume_times, prepared_offset)  # fmt: skip
        head = record_head_packer(len(tail))(total, MESSAGE_MAGIC_CODE, crc, queue_id, flag,
                                              queue_offset, phy_offset, tail, blen)  # fmt: skip
        p = pos + len(head)
        buf[pos:p] = head
    buf[p : p + blen] = body
    p += blen
    tl = len(topic_with_length)
    buf[p : p + tl] = topic_with_length
    p += tl
    _I16.pack_into(buf, p, len(properties))
    buf[p + 2 : p + 2 + len(properties)] = properties


def pack_record_tail(
    sys_flag: int, born_timestamp: int, born_host: bytes, store_timestamp: int,
    store_host: bytes, reconsume_times: int, prepared_offset: int,
) -> bytes:
    """SYSFLAG .. PREPAREDTRANSACTIONOFFSET: the fields every record of a batch shares, packed
    once (48 bytes with IPv4 hosts); the V6 sysflag bits follow the hosts' lengths."""
    sys_flag &= ~V6_FLAGS
    if len(born_host) == 20:
        sys_flag |= BORNHOST_V6_FLAG
    if len(store_host) == 20:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    if not sys_flag & V6_FLAGS:
        return _TAIL_V4.pack(sys_flag, born_timestamp, born_host, store_timestamp, store_host,
                             reconsume_times, prepared_offset)  # fmt: skip
    key = (len(born_host), len(store_host))
    st = _TAIL_ANY.get(key)
    if st is None:
        st = _TAIL_ANY[key] = struct.Struct(f">iq{key[0]}sq{key[1]}siq")
    return st.pack(sys_flag, born_timestamp, born_host, store_timestamp, store_host,
                   reconsume_times, prepared_offset)  # fmt: skip


def record_head_packer(tail_length: int) -> Callable[..., bytes]:
    """pack(TOTALSIZE, MAGICCODE, BODYCRC, QUEUEID, FLAG, QUEUEOFFSET, PHYSICALOFFSET, tail,
    body length): a record's bytes up to its body, around a pack_record_tail() of this length."""
    f = _HEAD_PACKERS.get(tail_length)
    if f is None:
        f = _HEAD_PACKERS[tail_length] = struct.Struct(f"{_HEAD_FRONT}{tail_length}si").pack
    return f


def encode_record_into(
    buf: bytearray | memoryview, pos: int, *, body: bytes | bytearray | memoryview,
    topic: bytes, properties: bytes, queue_id: int, flag: int, queue_offset: int,
    phy_offset: int, sys_flag: int, born_timestamp: int, born_host: bytes,
    store_timestamp: int, store_host: bytes, reconsume_times: int = 0,
    prepared_transaction_offset: int = 0, crc: int | None = None,
) -> int:
    """write_record with named fields (`topic` without its length byte); returns the size."""
    v6 = (BORNHOST_V6_FLAG if len(born_host) == 20 else 0) | (
        STOREHOSTADDRESS_V6_FLAG if len(store_host) == 20 else 0)  # fmt: skip
    total = record_size(len(body), len(topic), len(properties), v6)
    write_record(buf, pos, total, body_crc(body) if crc is None else crc, queue_id, flag,
                 queue_offset, phy_offset, sys_flag, born_timestamp, born_host, store_timestamp,
                 store_host, reconsume_times, prepared_transaction_offset, body,
                 bytes((len(topic),)) + topic, properties)  # fmt: skip
    return total


def encode_record(**fields: Any) -> bytes:
    """Encode one record into new bytes (tests, tools; hosts default to 127.0.0.1:0)."""
    fields.setdefault("born_host", b"\x7f\x00\x00\x01\x00\x00\x00\x00")
    fields.setdefault("store_host", b"\x7f\x00\x00\x01\x00\x00\x00\x00")
    v6 = (BORNHOST_V6_FLAG if len(fields["born_host"]) == 20 else 0) | (
        STOREHOSTADDRESS_V6_FLAG if len(fields["store_host"]) == 20 else 0)  # fmt: skip
    out = bytearray(record_size(len(fields["body"]), len(fields["topic"]),
                                len(fields["properties"]), v6))  # fmt: skip
    encode_record_into(out, 0, **fields)
    return bytes(out)


# ---- the walker -------------------------------------------------------------------------------
class RecordError(ValueError):
    """A record that does not parse (bad magic, a length beyond the buffer, a torn tail)."""


def record_at(buf: Any, pos: int, end: int) -> tuple[int, ...] | None:
    """The record at buf[pos:end], without copying: (TOTALSIZE, BODYCRC, QUEUEID, FLAG,
    QUEUEOFFSET, PHYSICALOFFSET, SYSFLAG, BORNTIMESTAMP, STORETIMESTAMP, where the store host
    starts, RECONSUMETIMES, PREPAREDTRANSACTIONOFFSET, body start, body length, topic start,
    topic length, properties start, properties length); the born host starts at
    pos + BORN_HOST_POS. None when no record starts there (fewer than 8 bytes, an END_FILE
    blank, zeros: the end of what was written); RecordError when the bytes are not one whole
    record (checkMessageAndReturnSize's checks: magic, lengths adding up to TOTALSIZE)."""
    if pos + V4_FIXED_SIZE <= end:  # the common case (IPv4 hosts, a whole record) first
        (total, magic, crc, qid, flag, qoff, phy, sys_flag, born_ts, store_ts, reconsume,
         prepared, blen) = _FIXED_V4_INTS.unpack_from(buf, pos)  # fmt: skip
        if magic == MESSAGE_MAGIC_CODE and not sys_flag & V6_FLAGS and blen >= 0:
            rend = pos + total
            t = pos + V4_FIXED_SIZE + blen
            if t + 3 <= rend <= end and total >= MIN_RECORD_SIZE:
                tlen = buf[t]
                pa = t + 3 + tlen
                if pa <= rend and pa + _I16.unpack_from(buf, pa - 2)[0] == rend:
                    return (total, crc, qid, flag, qoff, phy, sys_flag, born_ts, store_ts,
                            pos + STORE_HOST_POS_V4, reconsume, prepared, pos + V4_FIXED_SIZE,
                            blen, t + 1, tlen, pa, rend - pa)  # fmt: skip
    return _record_at_checked(buf, pos, end)


# TOTALSIZE, MAGICCODE, QUEUEOFFSET, SYSFLAG and BODYLENGTH of an IPv4 record
_SPINE_V4 = struct.Struct(">ii12xq8xi44xi")
_NOT_PLAIN: Final = V6_FLAGS | _COMPRESSED
# a plain record's position, end, QUEUEOFFSET, topic length byte position, topic length
PlainSpan = tuple[int, int, int, int, int]


def plain_records(buf: Any, pos: int, end: int) -> tuple[list[PlainSpan], int]:
    """The run of plain records from pos (IPv4 hosts, body not compressed, each whole and
    checked as record_at checks it): (position, end, QUEUEOFFSET, where the topic's length
    byte is, the topic's length) each, and the position the run stopped at: `end`, or the
    first place that is not a plain record (record_at tells what is there). A consumer's
    decode of a pull body: five fields a record instead of record_at's eighteen, ~0.45 us a
    record less."""
    out: list[PlainSpan] = []
    append = out.append
    unpack = _SPINE_V4.unpack_from
    i16 = _I16.unpack_from
    while pos + V4_FIXED_SIZE <= end:
        total, magic, qoff, sys_flag, blen = unpack(buf, pos)
        rend = pos + total
        t = pos + V4_FIXED_SIZE + blen
        if magic != MESSAGE_MAGIC_CODE or sys_flag & _NOT_PLAIN or blen < 0 or t + 3 > rend \
                or rend > end:  # fmt: skip
            break
        tlen = buf[t]
        pa = t + 3 + tlen
        if pa > rend or pa + i16(buf, pa - 2)[0] != rend:
            break
        append((pos, rend, qoff, t, tlen))
        pos = rend
    return out, pos


def bodiless_record_at(buf: Any, pos: int) -> tuple[int, ...]:
    """record_at's tuple for an IPv4 record (read by record_at before) kept without its body:
    its fixed part (BODYLEN still the body's), then its topic and properties. The body start is
    where the topic's length is, with length 0."""
    (total, _magic, crc, qid, flag, qoff, phy, sys_flag, born_ts, store_ts, reconsume, prepared,
     _blen) = _FIXED_V4_INTS.unpack_from(buf, pos)  # fmt: skip
    t = pos + V4_FIXED_SIZE
    tlen = buf[t]
    pa = t + 3 + tlen
    return (total, crc, qid, flag, qoff, phy, sys_flag, born_ts, store_ts,
            pos + STORE_HOST_POS_V4, reconsume, prepared, t, 0, t + 1, tlen, pa,
            _I16.unpack_from(buf, pa - 2)[0])  # fmt: skip


def _record_at_checked(buf: Any, pos: int, end: int) -> tuple[int, ...] | None:
    """record_at for every other case: IPv6 hosts, the end, a blank, a bad record."""
    if pos + V4_FIXED_SIZE <= end:
        (total, magic, crc, qid, flag, qoff, phy, sys_flag, born_ts, store_ts, reconsume,
         prepared, blen) = _FIXED_V4_INTS.unpack_from(buf, pos)  # fmt: skip
    elif pos + 8 <= end:
        total, magic = _TOTAL_MAGIC.unpack_from(buf, pos)
        if magic == MESSAGE_MAGIC_CODE:
            raise RecordError(f"record of {total} bytes cut short at {end - pos}")
        crc = qid = flag = qoff = phy = sys_flag = born_ts = store_ts = reconsume = 0
        prepared = blen = 0
    else:
        return None
    if magic != MESSAGE_MAGIC_CODE:
        if magic == BLANK_MAGIC_CODE or (magic == 0 and total == 0):
            return None
        raise RecordError(f"bad magic code {magic}")
    rend = pos + total
    if total < MIN_RECORD_SIZE or rend > end:
        raise RecordError(f"bad total size {total}")
    if sys_flag & V6_FLAGS:
        sh = pos + BORN_HOST_POS + (20 if sys_flag & BORNHOST_V6_FLAG else 8) + 8
        p = sh + (20 if sys_flag & STOREHOSTADDRESS_V6_FLAG else 8)
        if p + 16 > rend:
            raise RecordError("truncated record")
        store_ts = _I64.unpack_from(buf, sh - 8)[0]
        reconsume = _I32.unpack_from(buf, p)[0]
        prepared = _I64.unpack_from(buf, p + 4)[0]
        blen = _I32.unpack_from(buf, p + 12)[0]
        body_at = p + 16
    else:
        sh = pos + STORE_HOST_POS_V4
        body_at = pos + V4_FIXED_SIZE
    t = body_at + blen
    if blen < 0 or t + 3 > rend:
        raise RecordError(f"bad body length {blen}")
    tlen = buf[t]
    pa = t + 1 + tlen
    if pa + 2 > rend:
        raise RecordError(f"bad topic length {tlen}")
    plen = _I16.unpack_from(buf, pa)[0]
    if plen < 0 or pa + 2 + plen != rend:
        raise RecordError(f"bad properties length {plen}")
    return (total, crc, qid, flag, qoff, phy, sys_flag, born_ts, store_ts, sh, reconsume,
            prepared, body_at, blen, t + 1, tlen, pa + 2, plen)  # fmt: skip


def iter_records(
    buf: Any, pos: int = 0, end: int | None = None
) -> Iterator[tuple[int, tuple[int, ...]]]:
    """record_at of each record from pos, yielding (position, fields); ends before the first
    place no record starts (RecordError as record_at raises it)."""
    end = len(buf) if end is None else end
    while True:
        r = record_at(buf, pos, end)
        if r is None:
            return
        yield pos, r
        pos += r[0]


class RecordFields(NamedTuple):
    """The fields of one stored record; body is a view, hosts/topic/properties bytes."""

    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    phy_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: bytes
    store_timestamp: int
    store_host: bytes
    reconsume_times: int
    prepared_transaction_offset: int
    body: memoryview
    topic: bytes
    properties: bytes


def decode_record_fields(buf: bytes | bytearray | memoryview, pos: int = 0) -> RecordFields:
    """Parse the record at buf[pos:] into named fields; RecordError when there is none."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    r = record_at(mv, pos, len(mv))
    if r is None:
        raise RecordError("no record")
    (total, crc, qid, flag, qoff, phy, sys_flag, born_ts, store_ts, sh, reconsume, prepared,
     ba, blen, ta, tlen, pa, plen) = r  # fmt: skip
    bh = pos + BORN_HOST_POS
    return RecordFields(
        total, MESSAGE_MAGIC_CODE, crc, qid, flag, qoff, phy, sys_flag, born_ts,
        bytes(mv[bh : bh + host_length(sys_flag, BORNHOST_V6_FLAG)]), store_ts,
        bytes(mv[sh : sh + host_length(sys_flag, STOREHOSTADDRESS_V6_FLAG)]), reconsume,
        prepared, mv[ba : ba + blen], bytes(mv[ta : ta + tlen]), bytes(mv[pa : pa + plen]),
    )  # fmt: skip


def read_total_and_magic(buf: Any, pos: int) -> tuple[int, int]:
    """(TOTALSIZE, MAGICCODE) at pos."""
    total, magic = _TOTAL_MAGIC.unpack_from(buf, pos)
    return total, magic


pack_properties_length: Final = _I16.pack  # PROPERTIES' short length (a batch's writer)


def pack_blank(remaining: int) -> bytes:
    """The END_FILE blank that fills the rest of a commit-log file."""
    return _TOTAL_MAGIC.pack(remaining, BLANK_MAGIC_CODE)


# ---- batch items ------------------------------------------------------------------------------
def encode_batch_item(flag: int, body: bytes, properties: bytes) -> list[bytes]:
    """One SEND_BATCH_MESSAGE item's pieces (MAGICCODE and BODYCRC 0, as the client sends)."""
    head = BATCH_ITEM_HEAD.pack(BATCH_ITEM_FIXED + len(body) + len(properties), 0, 0, flag,
                                len(body))  # fmt: skip
    return [head, body, _I16.pack(len(properties)), properties]


def batch_item_at(buf: Any, pos: int, end: int) -> tuple[int, int, int, int, int]:
    """The batch item at buf[pos:end]: (FLAG, body start, body length, properties start,
    properties length); read by its own lengths (TOTALSIZE ignored, as MessageExtBatchEncoder
    does). RecordError when it does not fit."""
    if pos + BATCH_ITEM_HEAD.size > end:
        raise RecordError(f"truncated batch item at {pos}")
    _total, _magic, _crc, flag, blen = BATCH_ITEM_HEAD.unpack_from(buf, pos)
    b = pos + BATCH_ITEM_HEAD.size
    if blen < 0 or b + blen + 2 > end:
        raise RecordError(f"bad batch item body length {blen} at {pos}")
    plen = _U16.unpack_from(buf, b + blen)[0]
    pa = b + blen + 2
    if pa + plen > end:
        raise RecordError(f"bad batch item properties length {plen} at {pos}")
    return flag, b, blen, pa, plen


def batch_item_unpacker(body_length: int) -> Callable[[Any, int], tuple[Any, ...]]:
    """unpack_from of (FLAG, body length, properties length) of an item whose body has this
    length, in one call (a batch's items often share one length)."""
    f = _ITEM_UNPACKERS.get(body_length)
    if f is None:
        if len(_ITEM_UNPACKERS) >= 256:
            _ITEM_UNPACKERS.clear()
        f = _ITEM_UNPACKERS[body_length] = struct.Struct(f">12xii{body_length}xH").unpack_from
    return f
