"""Message trace records, as RocketMQ 4.9's clients write them to RMQ_SYS_TRACE_TOPIC.

Mirrors client/trace/TraceDataEncoder.java, TraceContext, TraceBean, TraceType, TraceView and
TraceConstants, RocketMQ 4.9.x. A trace message's body is a run of records, each one a list
of fields separated by CONTENT_SPLITOR (\\x01) and ended by FIELD_SPLITOR (\\x02):
- Pub: type, timestamp, regionId, group, topic, msgId, tags, keys, storeHost, bodyLength,
  costTime, msgType ordinal, offsetMsgId, success;
- SubBefore (one per message of a consume call): type, timestamp, regionId, group, requestId,
  msgId, retryTimes, keys;
- SubAfter (one per message): type, requestId, msgId, costTime, success, keys, contextCode,
  timestamp, group (the last two since 4.9, not for the CLOUD access channel);
- EndTransaction: type, timestamp, regionId, group, topic, msgId, tags, keys, storeHost,
  msgType ordinal, transactionId, transactionState, fromTransactionCheck.
The trace message's keys are every record's msgId and the message's own keys, so a trace is
found by QUERY_MESSAGE on the trace topic with the message id as the key. Pure: no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

CONTENT_SPLITOR: Final = "\x01"
FIELD_SPLITOR: Final = "\x02"
TRACE_TOPIC: Final = "RMQ_SYS_TRACE_TOPIC"  # TopicValidator.RMQ_SYS_TRACE_TOPIC
GROUP_NAME_PREFIX: Final = "_INNER_TRACE_PRODUCER"
TRACE_INSTANCE_NAME: Final = "PID_CLIENT_INNER_TRACE_PRODUCER"
DEFAULT_REGION: Final = "DefaultRegion"  # MixAll.DEFAULT_TRACE_REGION_ID
KEY_SEPARATOR: Final = " "  # MessageConst.KEY_SEPARATOR


class TraceType(enum.Enum):
    """TraceType.java (the names are what the records carry)."""

    Pub = "Pub"
    SubBefore = "SubBefore"
    SubAfter = "SubAfter"
    EndTransaction = "EndTransaction"


class MessageType(enum.IntEnum):
    """common/message/MessageType.java (records carry the ordinal)."""

    Normal_Msg = 0
    Trans_Msg_Half = 1
    Trans_msg_Commit = 2
    Delay_Msg = 3


class ConsumeReturnType(enum.IntEnum):
    """ConsumeReturnType.java: a SubAfter record's contextCode is the ordinal."""

    SUCCESS = 0
    TIME_OUT = 1
    EXCEPTION = 2
    RETURNNULL = 3
    FAILED = 4


@dataclass
class TraceBean:
    """One message of a trace record (TraceBean.java; empty strings by default, as Java).
    A message without tags or keys has None there, written "null" as Java's StringBuilder
    writes it (an empty last field would be dropped by Java's String.split, and its decoder
    would fail on the short record)."""

    topic: str = ""
    msg_id: str = ""
    offset_msg_id: str = ""
    tags: str | None = ""
    keys: str | None = ""
    store_host: str = ""
    client_host: str = ""
    retry_times: int = 0
    body_length: int = 0
    msg_type: MessageType = MessageType.Normal_Msg
    transaction_id: str = ""
    transaction_state: str = ""  # LocalTransactionState name
    from_transaction_check: bool = False


@dataclass
class TraceContext:
    """One trace record and its messages (TraceContext.java)."""

    trace_type: TraceType
    time_stamp: int = 0
    region_id: str | None = ""
    group_name: str = ""
    cost_time: int = 0
    success: bool = True
    request_id: str = ""
    context_code: int = 0
    beans: list[TraceBean] = field(default_factory=list)
    cloud: bool = False  # AccessChannel.CLOUD: SubAfter without timestamp and group


def _java_bool(v: bool) -> str:
    return "true" if v else "false"


def _text(v: str | None) -> str:
    return "null" if v is None else v  # StringBuilder.append(null)


def encode(ctx: TraceContext) -> tuple[str, list[str]]:
    """encoderFromContextBean: (the record text, the trace message's keys)."""
    c, end = CONTENT_SPLITOR, FIELD_SPLITOR
    parts: list[str] = []
    t = ctx.trace_type
    if t is TraceType.Pub:
        b = ctx.beans[0]
        return encode_pub(ctx.time_stamp, ctx.region_id, ctx.group_name, b.topic, b.msg_id,
                          b.tags, b.keys, b.store_host, b.body_length, ctx.cost_time,
                          b.msg_type, b.offset_msg_id, ctx.success)  # fmt: skip
    if t is TraceType.SubBefore:
        for b in ctx.beans:
            parts.append(c.join((
                t.value, str(ctx.time_stamp), _text(ctx.region_id), _text(ctx.group_name),
                _text(ctx.request_id), _text(b.msg_id), str(b.retry_times),
                _text(b.keys))) + end)
    elif t is TraceType.SubAfter:
        for b in ctx.beans:
            head = c.join((t.value, _text(ctx.request_id), _text(b.msg_id), str(ctx.cost_time),
                           _java_bool(ctx.success), _text(b.keys), str(ctx.context_code))) + c
            if not ctx.cloud:
                head += c.join((str(ctx.time_stamp), _text(ctx.group_name))) + end
            parts.append(head)
    elif t is TraceType.EndTransaction:
        b = ctx.beans[0]
        parts.append(c.join((
            t.value, str(ctx.time_stamp), _text(ctx.region_id), _text(ctx.group_name),
            _text(b.topic), _text(b.msg_id), _text(b.tags), _text(b.keys), _text(b.store_host),
            str(int(b.msg_type)), _text(b.transaction_id), _text(b.transaction_state),
            _java_bool(b.from_transaction_check))) + end)
    keys: list[str] = []
    for b in ctx.beans:
        keys.append(b.msg_id)
        if b.keys:
            keys.extend(b.keys.split(KEY_SEPARATOR))
    return "".join(parts), keys


def encode_pub(time_stamp: int, region_id: str | None, group: str, topic: str, msg_id: str,
               tags: str | None, keys: str | None, store_host: str, body_length: int,
               cost_time: int, msg_type: MessageType, offset_msg_id: str,
               success: bool) -> tuple[str, list[str]]:  # fmt: skip
    """A Pub record from its fields (a traced producer's worker makes one per send)."""
    c = CONTENT_SPLITOR
    text = (f"Pub{c}{time_stamp}{c}{_text(region_id)}{c}{group}{c}{topic}{c}{msg_id}{c}"
            f"{_text(tags)}{c}{_text(keys)}{c}{store_host}{c}{body_length}{c}{cost_time}{c}"
            f"{int(msg_type)}{c}{offset_msg_id}{c}{_java_bool(success)}{FIELD_SPLITOR}")
    return text, [msg_id, *keys.split(KEY_SEPARATOR)] if keys else [msg_id]


def batch_body(records: Iterable[tuple[str, list[str]]]) -> tuple[bytes, str]:
    """AsyncDataSendTask: the trace message's body (the records one after another) and its
    KEYS property (the distinct keys, space separated)."""
    texts: list[str] = []
    keys: dict[str, None] = {}
    for text, ks in records:
        texts.append(text)
        for k in ks:
            keys.setdefault(k)
    return "".join(texts).encode("utf-8"), KEY_SEPARATOR.join(k for k in keys if k)


def _int(s: str) -> int:
    return int(s) if s.lstrip("-").isdigit() else 0


def decode(text: str) -> list[TraceContext]:
    """decoderFromTraceDataString: the records of a trace message's body (unknown types and
    short records are skipped; Java would throw on the latter)."""
    out: list[TraceContext] = []
    for record in text.split(FIELD_SPLITOR):
        f = record.split(CONTENT_SPLITOR)
        kind = f[0]
        try:
            if kind == "Pub" and len(f) >= 13:
                b = TraceBean(topic=f[4], msg_id=f[5], tags=f[6], keys=f[7], store_host=f[8],
                              body_length=_int(f[9]), msg_type=MessageType(_int(f[11])))
                ctx = TraceContext(TraceType.Pub, _int(f[1]), f[2], f[3], cost_time=_int(f[10]),
                                   beans=[b])  # fmt: skip
                if len(f) == 13:
                    ctx.success = f[12] == "true"
                else:
                    b.offset_msg_id, ctx.success = f[12], f[13] == "true"
                    if len(f) >= 15:
                        b.client_host = f[14]
                out.append(ctx)
            elif kind == "SubBefore" and len(f) >= 8:
                b = TraceBean(msg_id=f[5], retry_times=_int(f[6]), keys=f[7])
                out.append(TraceContext(TraceType.SubBefore, _int(f[1]), f[2], f[3],
                                        request_id=f[4], beans=[b]))  # fmt: skip
            elif kind == "SubAfter" and len(f) >= 6:
                b = TraceBean(msg_id=f[2], keys=f[5])
                ctx = TraceContext(TraceType.SubAfter, request_id=f[1], cost_time=_int(f[3]),
                                   success=f[4] == "true", beans=[b])  # fmt: skip
                if len(f) >= 7:
                    ctx.context_code = _int(f[6])
                if len(f) >= 9:
                    ctx.time_stamp, ctx.group_name = _int(f[7]), f[8]
                out.append(ctx)
            elif kind == "EndTransaction" and len(f) >= 13:
                b = TraceBean(topic=f[4], msg_id=f[5], tags=f[6], keys=f[7], store_host=f[8],
                              msg_type=MessageType(_int(f[9])), transaction_id=f[10],
                              transaction_state=f[11], from_transaction_check=f[12] == "true")
                out.append(TraceContext(TraceType.EndTransaction, _int(f[1]), f[2], f[3],
                                        beans=[b]))  # fmt: skip
        except ValueError:
            continue  # a msgType ordinal out of range: not a record we can show
    return out


@dataclass(frozen=True)
class TraceView:
    """One line of a message's trace (TraceView.java): what queryMsgTraceById prints."""

    msg_id: str
    trace_type: str  # Pub, SubBefore, SubAfter, EndTransaction
    group_name: str
    client_host: str  # the trace message's born host
    time_stamp: int
    cost_time: int
    status: str  # success / failed
    topic: str
    tags: str
    keys: str
    store_host: str
    offset_msg_id: str


def views_of(msg_id: str, body: bytes, born_host: str) -> list[TraceView]:
    """TraceView.decodeFromTraceTransData: the records of one trace message about msg_id."""
    views = []
    for ctx in decode(body.decode("utf-8", "replace")):
        b = ctx.beans[0]
        if b.msg_id != msg_id:
            continue
        views.append(TraceView(b.msg_id, ctx.trace_type.value, ctx.group_name, born_host,
                               ctx.time_stamp, ctx.cost_time,
                               "success" if ctx.success else "failed", b.topic, _text(b.tags),
                               _text(b.keys),
                               b.store_host, b.offset_msg_id))  # fmt: skip
    return views
