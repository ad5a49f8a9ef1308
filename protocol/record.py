"""Stored-message record layout, properties string and Java string hash.

Mirrors common/message/MessageDecoder.java and store/CommitLog.java (MessageExtEncoder,
calMsgLength), RocketMQ 4.9.x. This one layout is the commit-log record, the PULL_MESSAGE /
QUERY_MESSAGE / VIEW_MESSAGE_BY_ID body and the HA transfer unit.

Layout (big-endian; IPv4 born and store hosts; each IPv6 host adds 12 bytes)::

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

Total with IPv4 hosts = 91 + B + T + P.
"""

from __future__ import annotations

import re
import socket
import struct
import zlib
from typing import Final, NamedTuple

MESSAGE_MAGIC_CODE: Final = -626843481  # 0xDAA320A7 as a signed int
BLANK_MAGIC_CODE: Final = -875286124  # 0xCBD43194 as a signed int
END_FILE_MIN_BLANK_LENGTH: Final = 8  # int maxBlank + int BLANK_MAGIC_CODE

BORNHOST_V6_FLAG: Final = 0x10
STOREHOSTADDRESS_V6_FLAG: Final = 0x20
V6_FLAGS: Final = BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG  # either host is IPv6

MAX_TOPIC_LENGTH: Final = 127
MAX_PROPERTIES_LENGTH: Final = 32767

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"

# Fixed part before BORNHOST: totalsize..borntimestamp.
_HEAD = struct.Struct(
    ">i"  # TOTALSIZE
    "i"  # MAGICCODE
    "i"  # BODYCRC
    "i"  # QUEUEID
    "i"  # FLAG
    "q"  # QUEUEOFFSET
    "q"  # PHYSICALOFFSET
    "i"  # SYSFLAG
    "q"  # BORNTIMESTAMP
)
HEAD_SIZE: Final = _HEAD.size  # 48
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_U8 = struct.Struct(">B")
# The whole fixed layout for the common IPv4/IPv4 case, packed in one call on the hot path.
# Each host is the raw 8 bytes pack_host() returns (4-byte ip + int port), so the store packs a
# record header straight from a message's fields. Public: the commit log writes with it too.
RECORD_V4_HEAD = struct.Struct(
    _HEAD.format  # TOTALSIZE .. BORNTIMESTAMP as above
    + "8s"  # BORNHOST ip + port
    "q"  # STORETIMESTAMP
    "8s"  # STOREHOSTADDRESS ip + port
    "i"  # RECONSUMETIMES
    "q"  # PREPAREDTRANSACTIONOFFSET
    "i"  # body length
)
_V4 = RECORD_V4_HEAD
V4_FIXED_SIZE: Final = _V4.size  # 88; + B + 1 + T + 2 + P = 91 + B + T + P

QUEUE_OFFSET_POS: Final = 20
PHYSICAL_OFFSET_POS: Final = 28
SYSFLAG_POS: Final = 36
BORN_TIMESTAMP_POS: Final = 40
BORN_HOST_POS: Final = 48


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


# ---- the properties a store reads: one rule (MessageDecoder.string2messageProperties) ----------
# Java parses the whole string into a map: segments split on \x02, a name up to the first \x01,
# segments with an empty name or value dropped, a later segment of the same name replacing an
# earlier one. These read one value straight from the encoded bytes with the same result.
TAGS: Final = b"TAGS\x01"
KEYS: Final = b"KEYS\x01"
UNIQ_KEY: Final = b"UNIQ_KEY\x01"
DELAY: Final = b"DELAY\x01"
_SEP: Final = b"\x02"
_JAVA_ASCII_INT: Final = re.compile(rb"[+-]?[0-9]+")
_INT_MIN: Final = -(2**31)
_INT_MAX: Final = 2**31 - 1


def property_value(props: bytes, name: bytes) -> bytes | None:
    """string2messageProperties(props).get(name) on the encoded bytes: the value of the last
    segment named `name` (given with its \x01, b"TAGS\x01") whose value is not empty; None
    when there is none."""
    end = len(props)
    sep_name = _SEP + name
    while True:
        i = props.rfind(sep_name, 0, end)
        if i >= 0:
            a = i + len(sep_name)
        elif props.startswith(name):
            a = len(name)
        else:
            return None
        j = props.find(_SEP, a)
        if j < 0:
            j = len(props)
        if j > a:
            return props[a:j]
        if i < 0:
            return None
        end = i  # an empty value: Java dropped that segment, an earlier one may stand


def java_parse_int(raw: bytes) -> int | None:
    """Integer.parseInt (radix 10) of a property value's UTF-8 bytes; None where it throws.

    Java takes an optional sign, then one or more chars Character.digit reads as decimal digits
    (any Unicode decimal digit of the BMP, as Java reads UTF-16 chars: "\u0663" is 3), within
    int range. No spaces, no underscores, no empty digits ("+" alone throws)."""
    if _JAVA_ASCII_INT.fullmatch(raw) is not None:
        v = int(raw)
    elif raw.isascii():
        return None
    else:
        text = raw.decode("utf-8", "replace")
        digits = text[1:] if text[:1] in ("+", "-") else text
        if not digits or any(ord(c) > 0xFFFF or not c.isdecimal() for c in digits):
            return None
        v = int(text)  # Python reads every Unicode decimal digit as Java does
    return v if _INT_MIN <= v <= _INT_MAX else None


def delay_level(props: bytes) -> int | None:
    """Message.getDelayTimeLevel of encoded properties: 0 without a DELAY property, else its
    Integer.parseInt; None where Java's parseInt throws (the put refuses such a message, and
    checkMessageAndReturnSize calls such a SCHEDULE_TOPIC_XXXX record bad)."""
    raw = property_value(props, DELAY)
    return 0 if raw is None else java_parse_int(raw)


def delivery_tags_code(level: int, store_timestamp: int, delays_ms: list[int]) -> int | None:
    """checkMessageAndReturnSize for a SCHEDULE_TOPIC_XXXX record with DELAY `level`: the level
    capped at the highest, then, above 0, ScheduleMessageService.computeDeliverTimestamp (the
    store time plus the level's delay); None when the tagsCode stays the TAGS hash."""
    level = min(level, len(delays_ms))
    return store_timestamp + delays_ms[level - 1] if level > 0 else None


def index_keys(props: bytes) -> list[bytes]:
    """IndexService.buildIndex's keys of a record: UNIQ_KEY, then each non-empty piece of KEYS
    split on single spaces (MessageConst.KEY_SEPARATOR)."""
    out = []
    uniq = property_value(props, UNIQ_KEY)
    if uniq is not None:
        out.append(uniq)
    keys = property_value(props, KEYS)
    if keys is not None:
        out += [k for k in keys.split(b" ") if k]
    return out


def properties_to_string(props: dict[str, str] | None) -> str:
    """Encode properties as name\\x01value pairs joined by \\x02 (no trailing separator)."""
    if not props:
        return ""
    return PROPERTY_SEPARATOR.join(
        f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in props.items() if v is not None
    )


def string_to_properties(s: str | None) -> dict[str, str]:
    """Decode a properties string, dropping segments with an empty name or value."""
    out: dict[str, str] = {}
    if not s:
        return out
    for seg in s.split(PROPERTY_SEPARATOR):
        i = seg.find(NAME_VALUE_SEPARATOR)
        if len(seg) >= 3 and 0 < i < len(seg) - 1:
            out[seg[:i]] = seg[i + 1 :]
    return out


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


def record_size(body_len: int, topic_len: int, props_len: int, sys_flag: int = 0) -> int:
    """Total stored length of a record with these part lengths."""
    size = 91 + body_len + topic_len + props_len
    if sys_flag & BORNHOST_V6_FLAG:
        size += 12
    if sys_flag & STOREHOSTADDRESS_V6_FLAG:
        size += 12
    return size


def encode_record_into(
    buf: bytearray | memoryview,
    pos: int,
    *,
    body: bytes | bytearray | memoryview,
    topic: bytes,
    properties: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    phy_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    crc: int | None = None,
) -> int:
    """Write one record at buf[pos:]; returns its total size.

    `born_host` / `store_host` are pack_host() output (8 or 20 bytes); the V6 sysflag bits are
    set from their lengths. `crc` may be passed when already known (batch re-encode, HA).
    """
    blen = len(body)
    tlen = len(topic)
    plen = len(properties)
    if crc is None:
        crc = zlib.crc32(body) & 0x7FFFFFFF
    if len(born_host) == 20:
        sys_flag |= BORNHOST_V6_FLAG
    else:
        sys_flag &= ~BORNHOST_V6_FLAG
    if len(store_host) == 20:
        sys_flag |= STOREHOSTADDRESS_V6_FLAG
    else:
        sys_flag &= ~STOREHOSTADDRESS_V6_FLAG
    total = 91 + blen + tlen + plen + (len(born_host) - 8) + (len(store_host) - 8)
    if len(born_host) == 8 and len(store_host) == 8:
        _V4.pack_into(
            buf, pos, total, MESSAGE_MAGIC_CODE, crc, queue_id, flag, queue_offset, phy_offset,
            sys_flag, born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
            prepared_transaction_offset, blen,
        )  # fmt: skip
        p = pos + V4_FIXED_SIZE
    else:
        _HEAD.pack_into(
            buf, pos, total, MESSAGE_MAGIC_CODE, crc, queue_id, flag, queue_offset, phy_offset,
            sys_flag, born_timestamp,
        )  # fmt: skip
        p = pos + HEAD_SIZE
        buf[p : p + len(born_host)] = born_host
        p += len(born_host)
        _I64.pack_into(buf, p, store_timestamp)
        p += 8
        buf[p : p + len(store_host)] = store_host
        p += len(store_host)
        _I32.pack_into(buf, p, reconsume_times)
        _I64.pack_into(buf, p + 4, prepared_transaction_offset)
        _I32.pack_into(buf, p + 12, blen)
        p += 16
    buf[p : p + blen] = body
    p += blen
    buf[p] = tlen
    buf[p + 1 : p + 1 + tlen] = topic
    p += 1 + tlen
    _I16.pack_into(buf, p, plen)
    buf[p + 2 : p + 2 + plen] = properties
    return total


def encode_record(**fields: object) -> bytes:
    """Encode one record into new bytes (convenience; the store uses encode_record_into)."""
    body = fields["body"]
    topic = fields["topic"]
    props = fields["properties"]
    assert isinstance(body, bytes | bytearray | memoryview)
    assert isinstance(topic, bytes) and isinstance(props, bytes)
    born = fields.get("born_host", b"\x7f\x00\x00\x01\x00\x00\x00\x00")
    store = fields.get("store_host", b"\x7f\x00\x00\x01\x00\x00\x00\x00")
    assert isinstance(born, bytes) and isinstance(store, bytes)
    size = 91 + len(body) + len(topic) + len(props) + len(born) - 8 + len(store) - 8
    out = bytearray(size)
    encode_record_into(out, 0, **fields)  # type: ignore[arg-type]
    return bytes(out)


class RecordFields(NamedTuple):
    """The fields of one stored record; body/topic/properties are views or bytes."""

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


class RecordError(ValueError):
    """A record that does not parse (bad magic, length beyond the buffer, torn tail)."""


def decode_record_fields(buf: bytes | bytearray | memoryview, pos: int = 0) -> RecordFields:
    """Parse the record at buf[pos:]; raises RecordError when it does not fit or is malformed."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    end_buf = len(mv)
    if pos + HEAD_SIZE > end_buf:
        raise RecordError("truncated record header")
    total, magic, crc, qid, flag, qoff, phy, sysflag, born_ts = _HEAD.unpack_from(mv, pos)
    if magic != MESSAGE_MAGIC_CODE:
        raise RecordError(f"bad magic code {magic}")
    if total < 91 or pos + total > end_buf:
        raise RecordError(f"bad total size {total}")
    end = pos + total
    p = pos + HEAD_SIZE
    bh_len = 20 if sysflag & BORNHOST_V6_FLAG else 8
    born_host = bytes(mv[p : p + bh_len])
    p += bh_len
    store_ts = _I64.unpack_from(mv, p)[0]
    p += 8
    sh_len = 20 if sysflag & STOREHOSTADDRESS_V6_FLAG else 8
    store_host = bytes(mv[p : p + sh_len])
    p += sh_len
    if p + 16 > end:
        raise RecordError("truncated record")
    reconsume = _I32.unpack_from(mv, p)[0]
    prepared = _I64.unpack_from(mv, p + 4)[0]
    blen = _I32.unpack_from(mv, p + 12)[0]
    p += 16
    if blen < 0 or p + blen + 1 > end:
        raise RecordError(f"bad body length {blen}")
    body = mv[p : p + blen]
    p += blen
    tlen = mv[p]
    p += 1
    if p + tlen + 2 > end:
        raise RecordError(f"bad topic length {tlen}")
    topic = bytes(mv[p : p + tlen])
    p += tlen
    plen = _I16.unpack_from(mv, p)[0]
    p += 2
    if plen < 0 or p + plen != end:
        raise RecordError(f"bad properties length {plen}")
    props = bytes(mv[p : p + plen])
    return RecordFields(
        total, magic, crc, qid, flag, qoff, phy, sysflag, born_ts, born_host, store_ts,
        store_host, reconsume, prepared, body, topic, props,
    )  # fmt: skip


def read_total_and_magic(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read (TOTALSIZE, MAGICCODE) at pos: what recovery needs to walk a commit log."""
    return _I32.unpack_from(buf, pos)[0], _I32.unpack_from(buf, pos + 4)[0]
