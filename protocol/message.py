"""Messages, stored-record decode/encode and offset message ids.

Mirrors common/message/Message.java, MessageExt.java, MessageDecoder.java, MessageConst.java
and common/sysflag/MessageSysFlag.java, RocketMQ 4.9.x. UNIQ_KEY ids live in
protocol/message_client_id_setter.py, batch bodies in protocol/message_batch.py.

Decoding is the consumer's hot path (a pull body is up to 32 records), so `MessageExt` is lazy
in three places, all invisible to callers:

- `properties` stays as the raw UTF-8 properties string until first read;
- `msg_id` (UNIQ_KEY, else offsetMsgId) and `offset_msg_id` are computed on first read.

The trick: `decode_*` builds the object without setting those slots, and an unset slot falls
through to `__getattr__`, which computes the value, stores it in the slot and returns it. Every
later read is a plain slot read. `dataclasses` equality, repr, replace and pickling all read the
attributes, so they see the computed values.

Compressed bodies (sysflag bit 0): zlib (compression type 0 or 3 in bits 8-10) is inflated on
decode and bit 0 is cleared, so re-encoding writes a plain body. LZ4 (1) and ZSTD (2) are not
available here: such bodies are left as stored and bit 0 stays set (`is_compressed` tells), so
nothing is lost and a caller with the codec can inflate them. A zlib body that does not inflate
is a decode error (which ends a `decode_messages` batch, as in Java).
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from protocol.message_properties import (
    NAME_VALUE_SEPARATOR,
    PROPERTY_SEPARATOR,
    java_parse_int,
    properties_to_string,
)
from protocol.record import (
    BORN_HOST_POS,
    BORNHOST_V6_FLAG,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    STOREHOSTADDRESS_V6_FLAG,
    RecordError,
    encode_record_into,
    host_length,
    java_string_hash,
    pack_host,
    record_at,
    record_size,
    unpack_host,
)

log = logging.getLogger(__name__)

# --- property names (MessageConst) -------------------------------------------------------------
PROPERTY_KEYS: Final = "KEYS"
PROPERTY_TAGS: Final = "TAGS"
PROPERTY_WAIT_STORE_MSG_OK: Final = "WAIT"
PROPERTY_DELAY_TIME_LEVEL: Final = "DELAY"
PROPERTY_RETRY_TOPIC: Final = "RETRY_TOPIC"
PROPERTY_REAL_TOPIC: Final = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID: Final = "REAL_QID"
PROPERTY_TRANSACTION_PREPARED: Final = "TRAN_MSG"
PROPERTY_PRODUCER_GROUP: Final = "PGROUP"
PROPERTY_MIN_OFFSET: Final = "MIN_OFFSET"
PROPERTY_MAX_OFFSET: Final = "MAX_OFFSET"
PROPERTY_BUYER_ID: Final = "BUYER_ID"
PROPERTY_ORIGIN_MESSAGE_ID: Final = "ORIGIN_MESSAGE_ID"
PROPERTY_TRANSFER_FLAG: Final = "TRANSFER_FLAG"
PROPERTY_CORRECTION_FLAG: Final = "CORRECTION_FLAG"
PROPERTY_MQ2_FLAG: Final = "MQ2_FLAG"
PROPERTY_RECONSUME_TIME: Final = "RECONSUME_TIME"
PROPERTY_MSG_REGION: Final = "MSG_REGION"
PROPERTY_TRACE_SWITCH: Final = "TRACE_ON"
PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: Final = "UNIQ_KEY"
PROPERTY_MAX_RECONSUME_TIMES: Final = "MAX_RECONSUME_TIMES"
PROPERTY_CONSUME_START_TIMESTAMP: Final = "CONSUME_START_TIME"
PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET: Final = "TRAN_PREPARED_QUEUE_OFFSET"
PROPERTY_TRANSACTION_CHECK_TIMES: Final = "TRANSACTION_CHECK_TIMES"
PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS: Final = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_INSTANCE_ID: Final = "INSTANCE_ID"
PROPERTY_CORRELATION_ID: Final = "CORRELATION_ID"
PROPERTY_MESSAGE_REPLY_TO_CLIENT: Final = "REPLY_TO_CLIENT"
PROPERTY_MESSAGE_TTL: Final = "TTL"
PROPERTY_REPLY_MESSAGE_ARRIVE_TIME: Final = "ARRIVE_TIME"
PROPERTY_PUSH_REPLY_TIME: Final = "PUSH_REPLY_TIME"
PROPERTY_CLUSTER: Final = "CLUSTER"
PROPERTY_MESSAGE_TYPE: Final = "MSG_TYPE"
PROPERTY_INNER_MULTI_DISPATCH: Final = "INNER_MULTI_DISPATCH"
PROPERTY_INNER_MULTI_QUEUE_OFFSET: Final = "INNER_MULTI_QUEUE_OFFSET"
PROPERTY_START_DELIVER_TIME: Final = "__STARTDELIVERTIME"
KEY_SEPARATOR: Final = " "
# MessageConst.STRING_HASH_SET: the names the system sets, which Message.putUserProperty refuses
# (not in it, so a user may set them: TRAN_PREPARED_QUEUE_OFFSET, TRANSACTION_CHECK_TIMES,
# CHECK_IMMUNITY_TIME_IN_SECONDS, INNER_MULTI_DISPATCH)
STRING_HASH_SET: Final = frozenset({
    PROPERTY_TRACE_SWITCH, PROPERTY_MSG_REGION, PROPERTY_KEYS, PROPERTY_TAGS,
    PROPERTY_WAIT_STORE_MSG_OK, PROPERTY_DELAY_TIME_LEVEL, PROPERTY_RETRY_TOPIC,
    PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID, PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_PRODUCER_GROUP, PROPERTY_MIN_OFFSET, PROPERTY_MAX_OFFSET, PROPERTY_BUYER_ID,
    PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_TRANSFER_FLAG, PROPERTY_CORRECTION_FLAG,
    PROPERTY_MQ2_FLAG, PROPERTY_RECONSUME_TIME, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    PROPERTY_MAX_RECONSUME_TIMES, PROPERTY_CONSUME_START_TIMESTAMP, PROPERTY_INSTANCE_ID,
    PROPERTY_CORRELATION_ID, PROPERTY_MESSAGE_REPLY_TO_CLIENT, PROPERTY_MESSAGE_TTL,
    PROPERTY_REPLY_MESSAGE_ARRIVE_TIME, PROPERTY_PUSH_REPLY_TIME, PROPERTY_CLUSTER,
    PROPERTY_MESSAGE_TYPE, PROPERTY_INNER_MULTI_QUEUE_OFFSET,
})  # fmt: skip

# --- MessageSysFlag -----------------------------------------------------------------------------
COMPRESSED_FLAG: Final = 0x1
MULTI_TAGS_FLAG: Final = 0x2
TRANSACTION_NOT_TYPE: Final = 0x0
TRANSACTION_PREPARED_TYPE: Final = 0x4
TRANSACTION_COMMIT_TYPE: Final = 0x8
TRANSACTION_ROLLBACK_TYPE: Final = 0xC
TRANSACTION_TYPE_MASK: Final = 0xC
NEED_UNWRAP_FLAG: Final = 0x40
INNER_BATCH_FLAG: Final = 0x80
COMPRESSION_TYPE_MASK: Final = 0x700
COMPRESSION_LZ4: Final = 1
COMPRESSION_ZSTD: Final = 2
COMPRESSION_ZLIB: Final = 3
# What a Java producer sets for a zlib-compressed body.
COMPRESSED_ZLIB_SYSFLAG: Final = COMPRESSED_FLAG | (COMPRESSION_ZLIB << 8)
COMPRESS_BODY_OVER: Final = 4096  # compressMsgBodyOverHowmuch
COMPRESS_LEVEL: Final = 5


def transaction_type(sys_flag: int) -> int:
    """The transaction type bits (sys_flag & 0xC)."""
    return sys_flag & TRANSACTION_TYPE_MASK


def reset_transaction_type(sys_flag: int, tx_type: int) -> int:
    """sys_flag with its transaction type replaced by tx_type."""
    return (sys_flag & ~TRANSACTION_TYPE_MASK) | (tx_type & TRANSACTION_TYPE_MASK)


def compression_type(sys_flag: int) -> int:
    """Compression algorithm from bits 8-10; 0 (old clients) means zlib, returned as 3."""
    ctype = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    return COMPRESSION_ZLIB if ctype == 0 else ctype


def is_compressed(sys_flag: int) -> bool:
    """Whether the body is stored compressed (bit 0)."""
    return bool(sys_flag & COMPRESSED_FLAG)


def needs_consume_queue(sys_flag: int) -> bool:
    """Only NOT_TYPE and COMMIT_TYPE records are dispatched to a consume queue."""
    t = sys_flag & TRANSACTION_TYPE_MASK
    return t in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)


def compress_body(body: bytes, level: int = COMPRESS_LEVEL) -> bytes:
    """zlib-compress a body the way a Java producer does (send with COMPRESSED_ZLIB_SYSFLAG)."""
    return zlib.compress(body, level)


def tags_code(tags: str | None) -> int:
    """Consume-queue tag hash: Java String.hashCode of the tag, 0 for no tag."""
    return java_string_hash(tags) if tags else 0


# --- errors -------------------------------------------------------------------------------------
class MessageDecodeError(RecordError):
    """A stored record or batch body that does not decode (a ValueError)."""


# --- message classes ----------------------------------------------------------------------------
_ZERO_HOST: Final = b"\x00\x00\x00\x00\x00\x00\x00\x00"


@dataclass(slots=True)
class Message:
    """A message as a producer builds it: topic, body, flag and properties."""

    topic: str = ""
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def tags(self) -> str | None:
        """The TAGS property."""
        return self.properties.get(PROPERTY_TAGS)

    @tags.setter
    def tags(self, value: str | None) -> None:
        self._set(PROPERTY_TAGS, value)

    @property
    def keys(self) -> str | None:
        """The KEYS property (business keys separated by a space)."""
        return self.properties.get(PROPERTY_KEYS)

    @keys.setter
    def keys(self, value: str | Iterable[str] | None) -> None:
        if value is not None and not isinstance(value, str):
            value = KEY_SEPARATOR.join(value)
        self._set(PROPERTY_KEYS, value)

    @property
    def key_list(self) -> list[str]:
        """KEYS split on the key separator, empty pieces dropped."""
        keys = self.properties.get(PROPERTY_KEYS)
        return [k for k in keys.split(KEY_SEPARATOR) if k] if keys else []

    @property
    def delay_time_level(self) -> int:
        """The DELAY property as Integer.parseInt reads it
        (protocol.message_properties.java_parse_int); 0 when absent or not a number there
        (where Java's getDelayTimeLevel would throw)."""
        v = self.properties.get(PROPERTY_DELAY_TIME_LEVEL)
        level = java_parse_int(v.encode()) if v else 0
        return level if level is not None else 0

    @delay_time_level.setter
    def delay_time_level(self, level: int) -> None:
        self._set(PROPERTY_DELAY_TIME_LEVEL, str(level) if level > 0 else None)

    @property
    def wait_store_msg_ok(self) -> bool:
        """The WAIT property; absent means true."""
        return self.properties.get(PROPERTY_WAIT_STORE_MSG_OK, "true") != "false"

    @wait_store_msg_ok.setter
    def wait_store_msg_ok(self, value: bool) -> None:
        self._set(PROPERTY_WAIT_STORE_MSG_OK, "true" if value else "false")

    @property
    def uniq_key(self) -> str | None:
        """The client-generated UNIQ_KEY property."""
        return self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    def _set(self, name: str, value: str | None) -> None:
        if value is None:
            self.properties.pop(name, None)
        else:
            self.properties[name] = value


@dataclass(slots=True)
class MessageExt(Message):
    """A stored message as decoded from a record (see the module docstring on laziness)."""

    queue_id: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: bytes = _ZERO_HOST  # pack_host() form: 4 or 16 byte ip + int port
    store_timestamp: int = 0
    store_host: bytes = _ZERO_HOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0
    store_size: int = 0
    # "" means "derive on first read" (UNIQ_KEY else offsetMsgId / from store host + offset).
    msg_id: str = field(default="", compare=False)
    offset_msg_id: str = field(default="", compare=False)
    _raw_properties: bytes | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.msg_id:
            del self.msg_id
        if not self.offset_msg_id:
            del self.offset_msg_id

    if not TYPE_CHECKING:

        def __getattr__(self, name):
            # Only reached when a lazy slot is still unset.
            if name == "properties":
                raw = self._raw_properties
                props = parse_properties(raw.decode("utf-8", "replace")) if raw else {}
                self.properties = props
                self._raw_properties = None
                return props
            if name == "offset_msg_id":
                value = create_offset_msg_id(self.store_host, self.commit_log_offset)
                self.offset_msg_id = value
                return value
            if name == "msg_id":
                value = self.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
                if not value:
                    value = self.offset_msg_id
                self.msg_id = value
                return value
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def born_address(self) -> str:
        """Born host as "ip:port"."""
        return _host_str(self.born_host)

    @property
    def store_address(self) -> str:
        """Store host as "ip:port"."""
        return _host_str(self.store_host)

    @property
    def is_compressed(self) -> bool:
        """True when the body is still compressed (an algorithm we could not inflate)."""
        return bool(self.sys_flag & COMPRESSED_FLAG)

    @property
    def tags_code(self) -> int:
        """Java hash of TAGS (0 when no tag)."""
        return tags_code(self.properties.get(PROPERTY_TAGS))


_PROPERTIES_SLOT = Message.__dict__["properties"]  # member descriptor; no __getattr__ fallback


def parse_properties(s: str) -> dict[str, str]:
    """string_to_properties, about twice as fast (same rules: empty names/values dropped)."""
    out: dict[str, str] = {}
    for seg in s.split(PROPERTY_SEPARATOR):
        k, _, v = seg.partition(NAME_VALUE_SEPARATOR)
        if k and v:
            out[k] = v
    return out


def _host_str(raw: bytes) -> str:
    host, port = unpack_host(raw)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _raw_properties_of(msg: MessageExt) -> bytes:
    """The properties string bytes, without parsing when the raw form is still current."""
    raw = msg._raw_properties
    if raw is not None:
        try:
            _PROPERTIES_SLOT.__get__(msg, type(msg))
        except AttributeError:
            return raw  # never parsed, never replaced
    return properties_to_string(msg.properties).encode()


def stored_properties(msg: MessageExt) -> bytes:
    """A decoded message's properties string as stored, unparsed (re-encoded only when its
    properties were read or replaced since): for readers that parse many at once."""
    return _raw_properties_of(msg)


# --- record decode ------------------------------------------------------------------------------
def _inflate(body: bytes, sys_flag: int) -> tuple[bytes, int]:
    """Inflate a zlib body and clear bit 0; other algorithms are left as stored."""
    ctype = (sys_flag & COMPRESSION_TYPE_MASK) >> 8
    if ctype not in (0, COMPRESSION_ZLIB):
        return body, sys_flag
    try:
        return zlib.decompress(body), sys_flag & ~COMPRESSED_FLAG
    except zlib.error as exc:
        raise MessageDecodeError(f"compressed body does not inflate: {exc}") from exc


def _decode_at(
    mv: memoryview, pos: int, end_buf: int, decompress: bool, check_crc: bool
) -> MessageExt:
    """Decode the record at mv[pos:] (protocol.record's walker); raises MessageDecodeError."""
    try:
        r = record_at(mv, pos, end_buf)
    except RecordError as exc:
        raise MessageDecodeError(str(exc)) from exc
    if r is None:
        raise MessageDecodeError("no record")
    (total, crc, qid, flag, qoff, phy, sys_flag, born_ts, store_ts, sh, reconsume, prepared,
     ba, blen, ta, tlen, pa, plen) = r  # fmt: skip
    body = bytes(mv[ba : ba + blen])
    if check_crc and zlib.crc32(body) & 0x7FFFFFFF != crc:
        raise MessageDecodeError(f"body crc mismatch at phy_offset={phy}")
    if decompress and sys_flag & COMPRESSED_FLAG:
        body, sys_flag = _inflate(body, sys_flag)
    bh = pos + BORN_HOST_POS
    m = _new_ext(MessageExt)
    m.topic = str(mv[ta : ta + tlen], "utf-8", "replace")
    m.body = body
    m.flag = flag
    m._raw_properties = bytes(mv[pa : pa + plen])
    m.queue_id = qid
    m.queue_offset = qoff
    m.commit_log_offset = phy
    m.sys_flag = sys_flag
    m.born_timestamp = born_ts
    m.born_host = bytes(mv[bh : bh + host_length(sys_flag, BORNHOST_V6_FLAG)])
    m.store_timestamp = store_ts
    m.store_host = bytes(mv[sh : sh + host_length(sys_flag, STOREHOSTADDRESS_V6_FLAG)])
    m.reconsume_times = reconsume
    m.prepared_transaction_offset = prepared
    m.body_crc = crc
    m.store_size = total
    return m


_new_ext = object.__new__


def decode_message_ext(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    decompress: bool = True,
    check_crc: bool = False,
) -> MessageExt:
    """Decode the stored record at buf[pos:] (its length is the result's store_size)."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    if pos < 0:
        raise MessageDecodeError(f"negative position {pos}")
    return _decode_at(mv, pos, len(mv), decompress, check_crc)


def decode_messages(
    buf: bytes | bytearray | memoryview, *, decompress: bool = True, check_crc: bool = False
) -> list[MessageExt]:
    """Decode concatenated records (a pull body); a record that fails ends the batch quietly."""
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    out: list[MessageExt] = []
    append = out.append
    n = len(mv)
    pos = 0
    while pos < n:
        try:
            m = _decode_at(mv, pos, n, decompress, check_crc)
        except MessageDecodeError as exc:
            log.debug("decode_messages stops at pos=%d of %d: %s", pos, n, exc)
            break
        append(m)
        pos += m.store_size
    return out


def encode_message_ext(msg: MessageExt) -> bytes:
    """Encode a MessageExt as a stored record (body as given; CRC recomputed from it)."""
    topic = msg.topic.encode()
    if not 0 < len(topic) <= MAX_TOPIC_LENGTH:
        raise ValueError(f"topic length {len(topic)} not in 1..{MAX_TOPIC_LENGTH}")
    props = _raw_properties_of(msg)
    if len(props) > MAX_PROPERTIES_LENGTH:
        raise ValueError(f"properties length {len(props)} > {MAX_PROPERTIES_LENGTH}")
    born, store = msg.born_host, msg.store_host
    if len(born) not in (8, 20) or len(store) not in (8, 20):
        raise ValueError("born_host/store_host must be pack_host() bytes (8 or 20)")
    body = msg.body
    v6 = (BORNHOST_V6_FLAG if len(born) == 20 else 0) | (
        STOREHOSTADDRESS_V6_FLAG if len(store) == 20 else 0)  # fmt: skip
    out = bytearray(record_size(len(body), len(topic), len(props), v6))
    encode_record_into(
        out, 0, body=body, topic=topic, properties=props, queue_id=msg.queue_id, flag=msg.flag,
        queue_offset=msg.queue_offset, phy_offset=msg.commit_log_offset, sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp, born_host=born, store_timestamp=msg.store_timestamp,
        store_host=store, reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset,
    )  # fmt: skip
    return bytes(out)


# --- message ids --------------------------------------------------------------------------------
def create_offset_msg_id(store_host: bytes, phy_offset: int) -> str:
    """offsetMsgId: upper hex of store ip + int port + long commit-log offset (32 or 56 chars)."""
    return (bytes(store_host) + phy_offset.to_bytes(8, "big", signed=True)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """Parse an offsetMsgId into (host, port, phy_offset); 32 chars is IPv4, 56 is IPv6."""
    if len(msg_id) not in (32, 56):
        raise ValueError(f"offset msg id must be 32 or 56 hex chars, got {len(msg_id)}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError as exc:
        raise ValueError(f"offset msg id is not hex: {msg_id!r}") from exc
    host, port = unpack_host(raw[:-8])
    return host, port, int.from_bytes(raw[-8:], "big", signed=True)


__all__ = [
    "Message",
    "MessageDecodeError",
    "MessageExt",
    "compress_body",
    "compression_type",
    "create_offset_msg_id",
    "decode_message_ext",
    "decode_messages",
    "decode_offset_msg_id",
    "encode_message_ext",
    "pack_host",
    "parse_properties",
    "tags_code",
    "transaction_type",
]
