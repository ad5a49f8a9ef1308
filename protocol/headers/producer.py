"""The producer's headers: send, reply push, end transaction, transaction check.

Mirrors common/protocol/header/SendMessageRequestHeader.java (+ SendMessageRequestHeaderV2),
SendMessageResponseHeader.java, ReplyMessageRequestHeader.java, EndTransactionRequestHeader.java
and CheckTransactionStateRequestHeader.java, RocketMQ 4.9.x (spec §3.1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Final, Self

from protocol.codes import RequestCode
from protocol.headers.command_custom_header import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    CommandCustomHeader,
    Long,
    build_from_ext,
    build_to_ext,
    field_specs,
    header,
)
from protocol.java_number import java_digits

# SendMessageRequestHeaderV2's one-letter keys (codes 310 and 320).
SEND_V2_KEYS: Final[dict[str, str]] = {
    "producer_group": "a",
    "topic": "b",
    "default_topic": "c",
    "default_topic_queue_nums": "d",
    "queue_id": "e",
    "sys_flag": "f",
    "born_timestamp": "g",
    "flag": "h",
    "properties": "i",
    "reconsume_times": "j",
    "unit_mode": "k",
    "max_reconsume_times": "l",
    "batch": "m",
    "bname": "n",
}


@header
class SendMessageRequestHeader(CommandCustomHeader):
    """SEND_MESSAGE (10) long keys; SEND_MESSAGE_V2 (310) / SEND_BATCH_MESSAGE (320) via _v2."""

    # required here (SEND_MESSAGE's decode checks @CFNotNull); V2 reads them nullable
    producer_group: str | None
    topic: str
    default_topic: str | None
    default_topic_queue_nums: int | None
    queue_id: int
    sys_flag: int
    born_timestamp: Long
    flag: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool | None = None
    max_reconsume_times: int | None = None
    batch: bool | None = None
    bname: str | None = None

    @classmethod
    def from_ext_v2(cls, ext: Mapping[str, str] | None) -> Self:
        """Parse the V2 one-letter keys (a..n)."""
        return _send_from_v2(cls, ext)  # type: ignore[no-any-return]

    def to_ext_v2(self) -> dict[str, str]:
        """extFields with the V2 one-letter keys."""
        return _send_to_v2(self)


# SendMessageRequestHeaderV2.decode, the fast decode 4.9.8 gives codes 310, 320 and 325, checks
# no field: a missing one stays null and fails only where the send dereferences it (queueId,
# sysFlag, bornTimestamp and flag always; defaultTopic and its queue count only to create the
# topic; the topic in its check). Missing, a, c and d are null here too; the others are
# required as they are for SEND_MESSAGE (the same SYSTEM_ERROR, another remark).
V2_NULLABLE_KEYS: Final = frozenset({"a", "c", "d"})
SEND_V2_SPECS: Final = tuple(
    s._replace(required=False, default=None) if s.key in V2_NULLABLE_KEYS else s
    for s in field_specs(SendMessageRequestHeader, SEND_V2_KEYS)
)
_send_from_v2 = build_from_ext(SendMessageRequestHeader, SEND_V2_SPECS)
_send_to_v2 = build_to_ext(SendMessageRequestHeader, SEND_V2_SPECS)

V2_SEND_CODES: Final = frozenset(
    {RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2}
)


# (topic, queue_id, sys_flag, born_timestamp, flag, properties, reconsume_times)
SendV2Fields = tuple[str, int, int, int, int, str | None, int]


def send_v2_fields(ext: Mapping[str, str]) -> SendV2Fields | None:
    """A plain (non-batch) SEND_MESSAGE_V2's hot fields, read straight from the one-letter keys.

    None when it is a batch or anything is missing or malformed: from_ext_v2 then gives the
    header or the HeaderFieldError (this accepts exactly what from_ext_v2 accepts).
    """
    try:
        m = ext.get("m")
        if m is not None and m != "false":
            return None
        topic = ext["b"]
        e, f, g, h = ext["e"], ext["f"], ext["g"], ext["h"]
        d = ext.get("d")  # a, c and d may be missing (V2_NULLABLE_KEYS)
        j = ext.get("j")
        lv = ext.get("l")
        text = (d or "") + e + f + g + h + (j or "") + (lv or "")
        if not (text.isdecimal() and text.isascii()):  # a sign, another digit, a space...
            for v in (d, e, f, g, h, j, lv):  # ...as Integer.parseInt reads them
                if v is not None and not java_digits(v):
                    return None  # from_ext_v2 gives the error
        nums = 0 if d is None else int(d)
        queue_id = int(e)
        sys_flag = int(f)
        born = int(g)
        flag = int(h)
        reconsume = 0 if j is None else int(j)
        max_times = 0 if lv is None else int(lv)
    except (KeyError, ValueError, TypeError):
        return None
    lo = min(nums, queue_id, sys_flag, flag, reconsume, max_times)
    hi = max(nums, queue_id, sys_flag, flag, reconsume, max_times)
    if lo < INT32_MIN or hi > INT32_MAX or not INT64_MIN <= born <= INT64_MAX:
        return None
    if type(topic) is not str:
        return None
    return topic, queue_id, sys_flag, born, flag, ext.get("i"), reconsume


def decode_send_header(code: int, ext: Mapping[str, str] | None) -> SendMessageRequestHeader:
    """The send header for `code`: V2 one-letter keys for 310/320, long keys otherwise."""
    if code in V2_SEND_CODES:
        return SendMessageRequestHeader.from_ext_v2(ext)
    return SendMessageRequestHeader.from_ext(ext)


@header
class SendMessageResponseHeader(CommandCustomHeader):
    """Send response: offset msg id(s), queue written, first queue offset."""

    _KEYS: ClassVar[dict[str, str]] = {"msg_region": "MSG_REGION", "trace_on": "TRACE_ON"}

    msg_id: str
    queue_id: int
    queue_offset: Long
    transaction_id: str | None = None
    msg_region: str | None = None  # the broker always adds MSG_REGION (default DefaultRegion)
    trace_on: str | None = None  # and TRACE_ON ("true"/"false")


@header
class ReplyMessageRequestHeader(CommandCustomHeader):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326), broker -> the producer waiting for a reply: the
    reply's send header plus where and when it was stored (hosts written as Java's
    InetSocketAddress.toString(), "/ip:port")."""

    # required to decode (@CFNotNull); the broker passes on what a V2 send left null
    producer_group: str | None
    topic: str
    default_topic: str | None
    default_topic_queue_nums: int | None
    queue_id: int
    sys_flag: int
    born_timestamp: Long
    flag: int
    born_host: str
    store_host: str
    store_timestamp: Long
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False


@header
class EndTransactionRequestHeader(CommandCustomHeader):
    """END_TRANSACTION (37), oneway from producers."""

    producer_group: str
    tran_state_table_offset: Long
    commit_log_offset: Long
    commit_or_rollback: int
    msg_id: str
    from_transaction_check: bool | None = None
    transaction_id: str | None = None
    bname: str | None = None


@header
class CheckTransactionStateRequestHeader(CommandCustomHeader):
    """CHECK_TRANSACTION_STATE (39), broker to producer, oneway."""

    tran_state_table_offset: Long
    commit_log_offset: Long
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
    bname: str | None = None
