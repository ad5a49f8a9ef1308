"""Batch bodies of SEND_BATCH_MESSAGE: encode on the producer, walk and expand on the broker.

Mirrors common/message/MessageBatch.java with MessageDecoder.encodeMessages / decodeMessages
and store/CommitLog.java MessageExtBatchEncoder's property merge, RocketMQ 4.9.x.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from protocol.message import Message, MessageDecodeError, parse_properties
from protocol.message_properties import PROPERTY_SEPARATOR, properties_to_string
from protocol.record import MAX_PROPERTIES_LENGTH, RecordError, batch_item_at, encode_batch_item

log = logging.getLogger(__name__)


@dataclass(slots=True)
class BatchItem:
    """One message of a SEND_BATCH_MESSAGE body."""

    flag: int = 0
    body: bytes = b""
    properties: dict[str, str] = field(default_factory=dict)


def encode_batch(items: Iterable[BatchItem | Message]) -> bytes:
    """Encode items as a batch body (each carries its own properties, e.g. UNIQ_KEY)."""
    return encode_batch_raw((it.flag, bytes(it.body), properties_to_string(it.properties))
                            for it in items)  # fmt: skip


def encode_batch_raw(items: Iterable[tuple[int, bytes, str]]) -> bytes:
    """Encode (flag, body, properties string) items as a batch body."""
    parts: list[bytes] = []
    for flag, body, text in items:
        props = text.encode()
        if len(props) > MAX_PROPERTIES_LENGTH:
            raise ValueError(f"batch item properties length {len(props)} > 32767")
        parts += encode_batch_item(flag, body, props)
    return b"".join(parts)


class RawBatchItem(NamedTuple):
    """One batch item as the broker expands it: views into the body, properties as bytes."""

    flag: int
    body: memoryview
    properties: bytes
    body_crc: int


def iter_batch_raw(body: bytes | bytearray | memoryview) -> Iterator[RawBatchItem]:
    """Walk a batch body (fields read by their own lengths; TOTALSIZE is ignored, as in Java)."""
    mv = body if isinstance(body, memoryview) else memoryview(body)
    n = len(mv)
    pos = 0
    while pos < n:
        try:
            flag, b, blen, pa, plen = batch_item_at(mv, pos, n)
        except RecordError as exc:
            raise MessageDecodeError(str(exc)) from exc
        if plen > MAX_PROPERTIES_LENGTH:  # a negative short to Java's decoder
            raise MessageDecodeError(f"bad batch item properties length {plen} at {pos}")
        item_body = mv[b : b + blen]
        yield RawBatchItem(
            flag, item_body, bytes(mv[pa : pa + plen]), zlib.crc32(item_body) & 0x7FFFFFFF
        )
        pos = pa + plen


def decode_batch(body: bytes | bytearray | memoryview) -> list[BatchItem]:
    """Decode a batch body into items; raises MessageDecodeError on a malformed body."""
    return [
        BatchItem(
            it.flag, bytes(it.body), parse_properties(it.properties.decode("utf-8", "replace"))
        )
        for it in iter_batch_raw(body)
    ]


_SEP_BYTE: Final = PROPERTY_SEPARATOR.encode()


def merge_batch_properties(item_properties: bytes, batch_properties: bytes) -> bytes:
    """Item properties, then \\x02 unless either part is empty or the item already ends in it,
    then the batch-level properties (CommitLog.MessageExtBatchEncoder)."""
    if not batch_properties:
        return item_properties
    if not item_properties:
        return batch_properties
    if item_properties.endswith(_SEP_BYTE):
        return item_properties + batch_properties
    return item_properties + _SEP_BYTE + batch_properties


def expand_batch(
    body: bytes | bytearray | memoryview, batch_properties: bytes | str = b""
) -> list[RawBatchItem]:
    """Broker-side expansion: each item with merged properties and its body CRC."""
    bp = batch_properties.encode() if isinstance(batch_properties, str) else batch_properties
    out = []
    for it in iter_batch_raw(body):
        props = merge_batch_properties(it.properties, bp)
        if len(props) > MAX_PROPERTIES_LENGTH:
            raise MessageDecodeError(f"merged properties length {len(props)} > 32767")
        out.append(it._replace(properties=props))
    return out
