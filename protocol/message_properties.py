"""The properties string of a message: its one encoding and the one rule by which the store
reads a property from it.

Mirrors common/message/MessageDecoder.java (messageProperties2String, string2messageProperties)
and Message.getDelayTimeLevel, RocketMQ 4.9.x: name\x01value pairs joined by \x02. The store
reads TAGS, KEYS, UNIQ_KEY and DELAY straight from the encoded bytes (`property_value`) with
Java's result; the record layout that carries the string is protocol.record's.
"""

from __future__ import annotations

from typing import Any, Final

from protocol.java_number import parse_java_int

NAME_VALUE_SEPARATOR: Final = "\x01"
PROPERTY_SEPARATOR: Final = "\x02"

# ---- the properties a store reads: one rule (MessageDecoder.string2messageProperties) ----------
# Java parses the whole string into a map: segments split on \x02, a name up to the first \x01,
# segments with an empty name or value dropped, a later segment of the same name replacing an
# earlier one. These read one value straight from the encoded bytes with the same result.
TAGS: Final = b"TAGS\x01"
KEYS: Final = b"KEYS\x01"
UNIQ_KEY: Final = b"UNIQ_KEY\x01"
DELAY: Final = b"DELAY\x01"
_SEP: Final = b"\x02"


_SEP_NAMES: Final = {n: _SEP + n for n in (TAGS, KEYS, UNIQ_KEY, DELAY)}


def property_value(props: Any, name: bytes, start: int = 0, end: int = -1) -> bytes | None:
    """string2messageProperties(props).get(name) on the encoded bytes (props[start:end], end -1:
    to the end): the value of the last segment named `name` (given with its \x01,
    b"TAGS\x01") whose value is not empty; None when none is. (A mapped file works too, but
    an mmap's rfind took 1-7 us at some offsets of a 1 GiB map: copy the range first.)"""
    if end < 0:
        end = len(props)
    sep_name = _SEP_NAMES.get(name) or _SEP + name
    hi = end
    while True:
        i = props.rfind(sep_name, start, hi)
        if i >= 0:
            a = i + len(sep_name)
        elif props.find(name, start, start + len(name)) == start:
            a = start + len(name)
        else:
            return None
        j = props.find(_SEP, a, end)
        if j < 0:
            j = end
        if j > a:
            return props[a:j]  # type: ignore[no-any-return]
        if i < 0:
            return None
        hi = i  # an empty value: Java dropped that segment, an earlier one may stand


def java_parse_int(raw: bytes) -> int | None:
    """Integer.parseInt (radix 10) of a property value's UTF-8 bytes; None where it throws
    (protocol.java_number has Java's rules)."""
    return parse_java_int(raw.decode("utf-8", "replace"))


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


def index_keys(props: Any, start: int = 0, end: int = -1) -> list[bytes]:
    """IndexService.buildIndex's keys of a record's properties (props[start:end]): UNIQ_KEY,
    then each non-empty piece of KEYS split on single spaces (MessageConst.KEY_SEPARATOR);
    both read by property_value's rule."""
    if end < 0:
        end = len(props)
    uniq = property_value(props, UNIQ_KEY, start, end)
    keys = property_value(props, KEYS, start, end)
    if keys:
        out = keys.split(b" ")
        if b"" in out:
            out = [k for k in out if k]
        if uniq:
            out.insert(0, uniq)
        return out  # type: ignore[no-any-return]
    return [uniq] if uniq else []


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
