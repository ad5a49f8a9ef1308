"""MessageDecoder.decodes for the consumer (common/message/MessageDecoder.java of RocketMQ 4.9.x,
as PullAPIWrapper.processPullResult uses it): a FOUND pull body into the user's MessageExt
records, tag-filtered again on the client (the broker filters by tag hash only), MIN_OFFSET /
MAX_OFFSET set, the transaction id of a prepared message set.

This is the consumer's hot path: every pulled message passes it. The common IPv4 record is
read straight from the pull body; IPv6 hosts and compressed bodies go through
protocol.message's full decoder.

Lazily: unless the subscription filters by tag on the client, a record becomes a
`PulledMessageExt` holding its topic, body, queue and queue offset (what the ProcessQueue and
the consume service read) and a reference to its record; every other field (properties, ids,
hosts, timestamps, ...) is decoded from the record the first time any of them is read, all at
once, and the reference is then dropped. A handler that reads only bodies never pays for
the properties it does not read; one that reads a header field pays what an eager decode
costs. Equality, hashing, repr, copying and pickling see a fully decoded MessageExt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final, SupportsIndex

from actors.client.consumer.pooled_body_buffers import Lease
from actors.client.records import MessageExt
from protocol.bodies import EXPRESSION_TYPE_TAG, MessageQueue, SubscriptionData
from protocol.message import (
    PROPERTY_KEYS,
    PROPERTY_MAX_OFFSET,
    PROPERTY_MIN_OFFSET,
    PROPERTY_TAGS,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageDecodeError,
    decode_message_ext,
    parse_properties,
)
from protocol.record import (
    BORN_HOST_POS,
    V4_FIXED_SIZE,
    PlainSpan,
    RecordError,
    bodiless_record_at,
    plain_records,
    record_at,
    unpack_host,
)

log = logging.getLogger(__name__)

_HOSTS: dict[bytes, str] = {}
_HOST_HEX: dict[bytes, str] = {}


def _host(raw: bytes) -> str:
    s = _HOSTS.get(raw)
    if s is None:
        host, port = unpack_host(raw)
        s = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if len(_HOSTS) < 65_536:
            _HOSTS[raw] = s
    return s


def _offset_msg_id(store_host: bytes, phy: int) -> str:
    """The offset message id: store host and commit-log offset, upper-case hex."""
    prefix = _HOST_HEX.get(store_host)
    if prefix is None:
        prefix = store_host.hex().upper()
        if len(_HOST_HEX) < 65_536:
            _HOST_HEX[store_host] = prefix
    return f"{prefix}{phy & 0xFFFFFFFFFFFFFFFF:016X}"


_FIELDS: Final = ("topic", "body", "tags", "keys", "properties", "delay_level", "flag", "msg_id",
                  "offset_msg_id", "queue", "queue_offset", "commitlog_offset", "born_timestamp",
                  "store_timestamp", "born_host", "store_host", "reconsume_times", "sys_flag",
                  "body_crc", "store_size", "prepared_transaction_offset", "transaction_id")
_EAGER: Final = frozenset(("topic", "body", "queue", "queue_offset"))
_LAZY: Final = frozenset(_FIELDS) - _EAGER


def _slot(name: str) -> Any:
    """MessageExt's slot descriptor of a field."""
    return getattr(MessageExt, name)


def _setters() -> tuple[Callable[[Any, Any], None], ...]:
    """The slot setters of MessageExt in _FIELDS order (a frozen record is built once here)."""
    names = set(MessageExt.__dataclass_fields__)
    if names != set(_FIELDS):
        raise RuntimeError(f"MessageExt fields changed: {sorted(names ^ set(_FIELDS))}")
    return tuple(_slot(n).__set__ for n in _FIELDS)


(_S_TOPIC, _S_BODY, _S_TAGS, _S_KEYS, _S_PROPS, _S_DELAY, _S_FLAG, _S_MSG_ID, _S_OFFSET_ID,
 _S_QUEUE, _S_QOFF, _S_PHY, _S_BORN_TS, _S_STORE_TS, _S_BORN, _S_STORE, _S_RECONSUME, _S_SYSFLAG,
 _S_CRC, _S_SIZE, _S_PREPARED, _S_TX) = _setters()
_new = object.__new__
_FIXED: Final = V4_FIXED_SIZE  # where an IPv4 record's body starts
KEEP_MAX: Final = 64 * 1024  # a bytearray pull body up to this size is kept by its records
_HASH = MessageExt.__hash__


class PulledMessageExt(MessageExt):
    """A MessageExt read from a pull body whose header fields are decoded on first use.

    Until then its `properties` slot holds the record: (the pull body or its records without
    their bodies, the record's position, MIN/MAX_OFFSET, whether the record was kept without
    its body, the body buffer's Lease or None). The first read of a lazy field decodes them
    all, `properties` last, and the object becomes a plain MessageExt: its class has no slot
    of its own, so the switch is allowed, and every later read is a slot read. The eager
    fields are the base class's slots from the start (no `__getattr__` hook: a read costs
    what a MessageExt's does, 6 against 28 ns with one)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageExt):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _FIELDS)

    def __hash__(self) -> int:
        return _HASH(self)

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        """Pickled and copied as the MessageExt it decodes to."""
        _decode(self)
        return MessageExt.__reduce_ex__(self, protocol)


class _LazyField:
    """A header field of a PulledMessageExt: its first read decodes the record."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, o: MessageExt | None, owner: type | None = None) -> Any:
        if o is None:
            return self
        _decode(o)
        return getattr(o, self.name)


_G_STASH = _slot("properties").__get__  # the record, until decoded
_S_STASH = _S_PROPS
_SET_CLASS = object.__setattr__


def _decode(o: MessageExt) -> None:
    """Decode a PulledMessageExt's header fields and make it a MessageExt. Two threads may
    both decode it: `properties`, where the record was, is set last, so a reader that finds
    it set finds every field set."""
    rec = _G_STASH(o)
    if type(rec) is tuple:
        mv, pos, lo, hi, cut, _lease = rec
        _fill(o, mv, pos, lo, hi, None, cut)
    _SET_CLASS(o, "__class__", MessageExt)


for _name in _LAZY:
    setattr(PulledMessageExt, _name, _LazyField(_name))


def _fill(o: MessageExt, mv: bytes | bytearray | memoryview, pos: int, lo: str, hi: str,
          props: dict[str, str] | None = None, cut: bool = False) -> None:  # fmt: skip
    """Set every header field of o from its IPv4 record at pos (framing checked already;
    props: its properties when already parsed; cut: the record was kept without its body)."""
    r = bodiless_record_at(mv, pos) if cut else record_at(mv, pos, len(mv))
    assert r is not None  # decode_pull_messages read it
    (total, crc, _qid, flag, _qoff, phy, sys_flag, born_ts, store_ts, sh, reconsume, prepared,
     _ba, _blen, _ta, _tlen, pa, plen) = r  # fmt: skip
    born_host = bytes(mv[pos + BORN_HOST_POS : pos + BORN_HOST_POS + 8])
    store_host = bytes(mv[sh : sh + 8])
    if props is None:
        props = parse_properties(str(mv[pa : pa + plen], "utf-8", "replace")) if plen else {}
    props[PROPERTY_MIN_OFFSET] = lo
    props[PROPERTY_MAX_OFFSET] = hi
    offset_id = _offset_msg_id(store_host, phy)
    uniq = props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    _S_TAGS(o, props.get(PROPERTY_TAGS))
    _S_KEYS(o, props.get(PROPERTY_KEYS))
    _S_DELAY(o, 0)
    _S_FLAG(o, flag)
    _S_MSG_ID(o, uniq or offset_id)
    _S_OFFSET_ID(o, offset_id)
    _S_PHY(o, phy)
    _S_BORN_TS(o, born_ts)
    _S_STORE_TS(o, store_ts)
    _S_BORN(o, _host(born_host))
    _S_STORE(o, _host(store_host))
    _S_RECONSUME(o, reconsume)
    _S_SYSFLAG(o, sys_flag)
    _S_CRC(o, crc)
    _S_SIZE(o, total)
    _S_PREPARED(o, prepared)
    _S_TX(o, uniq if props.get(PROPERTY_TRANSACTION_PREPARED) == "true" else None)
    _S_PROPS(o, props)  # last: a lazy record's, where its record was (_decode)


def client_tags(subscription: SubscriptionData | None) -> frozenset[str] | None:
    """The tags a pulled message must carry to reach the handler (None: every message)."""
    if subscription is not None and not subscription.class_filter_mode and \
            subscription.expression_type == EXPRESSION_TYPE_TAG and subscription.tags_set:
        return frozenset(subscription.tags_set)
    return None


PullBodyScan = tuple[list[PlainSpan], int]  # plain_records of a pull body from its start


def scan_pull_body(body: bytes | bytearray | memoryview) -> PullBodyScan:
    """The run of plain records a pull body starts with, and where it stops (len(body): the
    body is all plain records, none compressed): what decode_pull_messages walks first, for a
    caller that wants the batch's count before the decode."""
    return plain_records(body, 0, len(body))


def decode_pull_messages(body: bytes | bytearray | memoryview, mq: MessageQueue,
                         subscription: SubscriptionData | None, min_offset: int,
                         max_offset: int, scan: PullBodyScan | None = None) -> list[MessageExt]:
    """processPullResult for a FOUND pull: the body's messages as user records.

    A record that does not decode ends the batch (what was decoded before it is kept), as
    MessageDecoder.decodes does; the next pull starts after the last offset the broker sent.
    Nothing returned refers to a memoryview body: it may be reused afterwards. A bytes or
    bytearray body is handed over: the lazy records may refer to it. `scan`: the body's
    scan_pull_body, when the caller made it already.
    """
    tags = client_tags(subscription)
    # The lazy records refer to a body handed over (bytes, or a bytearray up to KEEP_MAX
    # read for this answer alone), and each body is copied once, into its message. Over a
    # view (a pull ring's slot, reused once this returns) or a larger buffer they keep a copy
    # of each record without its body (`heads`): slicing the view costs more (1.52 against
    # 1.34 us a record, 32 x 1 KiB), but a cached batch of large messages is not held twice.
    owned = tags is None and (type(body) is bytes or (
        type(body) is bytearray and len(body) <= KEEP_MAX))  # fmt: skip
    heads = bytearray() if tags is None and not owned else None
    mv = body if isinstance(body, memoryview) else memoryview(body)
    lo, hi = str(min_offset), str(max_offset)
    out: list[MessageExt] = []
    n = len(mv)
    pos = 0
    kept = (0, 0)  # the last record kept in heads: its tail, not appended yet, and its end
    while True:
        if scan is None:
            spans, stop = plain_records(mv, pos, n)
        else:
            (spans, stop), scan = scan, None
        if spans:
            if tags is not None:
                _filtered_run(mv, spans, tags, mq, lo, hi, out)
            elif heads is None:
                _lazy_owned_run(body, mv, spans, mq, lo, hi, out)  # type: ignore[arg-type]
            else:
                kept = _lazy_run(mv, spans, heads, kept, mq, lo, hi, out)
        pos = stop
        try:  # what stopped the run: the end, an IPv6 or compressed record, a bad one
            r = record_at(mv, pos, n)
        except RecordError as exc:
            log.warning("pull body of %s: bad record at %d (%s); the rest is dropped", mq, pos,
                        exc)  # fmt: skip
            break
        if r is None:
            break
        try:
            m = _slow(mv, pos, mq, tags, lo, hi)
        except MessageDecodeError as exc:
            log.warning("pull body of %s: record at %d: %s", mq, pos, exc)
            break
        if m is not None:
            out.append(m)
        pos += r[0]
    if heads is not None:
        heads += mv[kept[0] : kept[1]]
    return out


def _lazy_owned_run(raw: bytes | bytearray, mv: memoryview, spans: list[PlainSpan],
                    mq: MessageQueue, lo: str, hi: str, out: list[MessageExt]) -> None:
    """Plain records of a body handed over, each a lazy record over the body itself (`mv`
    its view)."""
    append = out.append
    topic = mq.topic
    topic_raw = topic.encode()
    tlen_raw = len(topic_raw)
    starts = raw.startswith
    whole = type(raw) is bytes  # a bytes slice is a bytes copy; a bytearray's is not bytes
    lease = None if type(raw) is not bytearray else Lease(raw)  # offered back when they go
    new = _new
    cls = PulledMessageExt
    for pos, _end, qoff, t, tlen in spans:
        p = pos + _FIXED
        o = new(cls)
        _S_STASH(o, (raw, pos, lo, hi, False, lease))
        _S_TOPIC(o, topic if tlen == tlen_raw and starts(topic_raw, t + 1)
                 else str(mv[t + 1 : t + 1 + tlen], "utf-8", "replace"))  # fmt: skip
        _S_BODY(o, raw[p:t] if whole else mv[p:t].tobytes())  # type: ignore[arg-type]
        _S_QUEUE(o, mq)
        _S_QOFF(o, qoff)
        append(o)


def _lazy_run(mv: memoryview, spans: list[PlainSpan], heads: bytearray,
              kept: tuple[int, int], mq: MessageQueue, lo: str, hi: str,
              out: list[MessageExt]) -> tuple[int, int]:
    """Plain records of a view, each a lazy record over its copy in `heads` without its
    body (a record's head is appended with the tail of the record before it when they
    touch). The last copied record's tail and end, still to append."""
    append = out.append
    topic = mq.topic
    topic_raw = topic.encode()
    tlen_raw = len(topic_raw)
    new = _new
    cls = PulledMessageExt
    kept_tail, kept_end = kept
    for pos, end, qoff, t, tlen in spans:
        p = pos + _FIXED
        o = new(cls)
        if kept_end == pos:
            heads += mv[kept_tail:p]
        else:
            heads += mv[kept_tail:kept_end]
            heads += mv[pos:p]
        _S_STASH(o, (heads, len(heads) - _FIXED, lo, hi, True, None))
        kept_tail, kept_end = t, end
        _S_TOPIC(o, topic if tlen == tlen_raw and mv[t + 1 : t + 1 + tlen] == topic_raw
                 else str(mv[t + 1 : t + 1 + tlen], "utf-8", "replace"))  # fmt: skip
        _S_BODY(o, mv[p:t].tobytes())
        _S_QUEUE(o, mq)
        _S_QOFF(o, qoff)
        append(o)
    return kept_tail, kept_end


def _filtered_run(mv: memoryview, spans: list[PlainSpan], tags: frozenset[str],
                  mq: MessageQueue, lo: str, hi: str, out: list[MessageExt]) -> None:
    """Plain records under a client-side tag filter: those whose TAGS pass, decoded whole."""
    topic = mq.topic
    topic_raw = topic.encode()
    for pos, end, qoff, t, tlen in spans:
        pa = t + 3 + tlen
        props = parse_properties(str(mv[pa:end], "utf-8", "replace")) if end > pa else {}
        if props.get(PROPERTY_TAGS) not in tags:
            continue
        o = _new(MessageExt)
        _fill(o, mv, pos, lo, hi, props)
        raw = mv[t + 1 : t + 1 + tlen]
        _S_TOPIC(o, topic if raw == topic_raw else str(raw, "utf-8", "replace"))
        _S_BODY(o, bytes(mv[pos + _FIXED : t]))
        _S_QUEUE(o, mq)
        _S_QOFF(o, qoff)
        out.append(o)


def _slow(mv: memoryview, pos: int, mq: MessageQueue, tags: frozenset[str] | None, lo: str,
          hi: str) -> MessageExt | None:
    """An IPv6 or compressed record, through the full decoder."""
    w = decode_message_ext(mv, pos)
    if tags is not None and w.properties.get(PROPERTY_TAGS) not in tags:
        return None
    w.properties[PROPERTY_MIN_OFFSET] = lo
    w.properties[PROPERTY_MAX_OFFSET] = hi
    m = MessageExt.from_wire(w, mq.broker_name)
    return m if m.queue == mq else _with_queue(m, mq)


def _with_queue(m: MessageExt, mq: MessageQueue) -> MessageExt:
    import dataclasses

    return dataclasses.replace(m, queue=mq)
