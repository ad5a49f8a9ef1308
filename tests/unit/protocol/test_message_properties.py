"""protocol.message_properties' one rule for the properties the store reads (TAGS, KEYS,
UNIQ_KEY, DELAY): each agrees with Java's parse of the whole string
(MessageDecoder.string2messageProperties, ported as string_to_properties) on arbitrary
property strings, and DELAY with Integer.parseInt."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.message import Message
from protocol.message_properties import (
    DELAY,
    KEYS,
    TAGS,
    UNIQ_KEY,
    delay_level,
    delivery_tags_code,
    index_keys,
    java_parse_int,
    property_value,
    string_to_properties,
)

_pieces = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "DELAY", "XTAGS", "TAG", "\x01", "\x02",
                           "a", "b c", " ", "3", "+", "\u00e9", ""])  # fmt: skip
props_st = st.lists(_pieces, max_size=14).map("".join)


@given(props_st)
def test_property_value_is_javas_map_lookup(text: str) -> None:
    java = string_to_properties(text)
    raw = text.encode()
    for name in ("TAGS", "KEYS", "UNIQ_KEY", "DELAY"):
        got = property_value(raw, name.encode() + b"\x01")
        assert got == (java[name].encode() if name in java else None), (text, name)


@given(props_st)
def test_index_keys_are_build_index_keys(text: str) -> None:
    """IndexService.buildIndex: UNIQ_KEY, then KEYS split on " " without empty pieces."""
    java = string_to_properties(text)
    want = [java["UNIQ_KEY"]] if "UNIQ_KEY" in java else []
    want += [k for k in java.get("KEYS", "").split(" ") if k]
    assert index_keys(text.encode()) == [k.encode() for k in want]


def test_a_later_segment_wins_and_an_empty_value_is_dropped() -> None:
    assert property_value(b"TAGS\x01a\x02TAGS\x01b", TAGS) == b"b"
    assert property_value(b"TAGS\x01a\x02TAGS\x01", TAGS) == b"a"
    assert property_value(b"TAGS\x01\x02X\x01y", TAGS) is None
    assert property_value(b"\x01TAGS\x01v", TAGS) is None  # a segment with an empty name
    assert property_value(b"XTAGS\x01v\x02KEYS\x01TAGS\x01w", TAGS) is None
    assert property_value(b"UNIQ_KEY\x01u\x02KEYS\x01k1  k2 ", KEYS) == b"k1  k2 "
    assert index_keys(b"UNIQ_KEY\x01u\x02KEYS\x01k1  k2 ") == [b"u", b"k1", b"k2"]
    assert property_value(b"A\x01UNIQ_KEY\x01x", UNIQ_KEY) is None  # inside a value


@pytest.mark.parametrize(
    ("text", "want"),
    [("3", 3), ("+3", 3), ("-1", -1), ("0", 0), ("007", 7), ("99", 99), (" 2", None),
     ("3 ", None), ("abc", None), ("+", None), ("-", None), ("1_0", None), ("0x1", None),
     ("\u0663", 3), ("\uff12", 2), ("-\u0663", -3), ("\U0001d7d1", None), ("2147483647", 2**31 - 1),
     ("2147483648", None), ("-2147483648", -(2**31)), ("-2147483649", None),
     ("00000000000000000003", 3), ("\u00b2", None)],
)  # fmt: skip
def test_java_parse_int(text: str, want: int | None) -> None:
    """Integer.parseInt: a sign, then Unicode decimal digits of the BMP (Character.digit reads
    UTF-16 chars: a supplementary-plane digit is two surrogates it refuses), int range."""
    assert java_parse_int(text.encode()) == want


def test_delay_level_and_delivery_time() -> None:
    delays = [1000, 5000, 10000]
    assert delay_level(b"TAGS\x01a") == 0
    assert delay_level(b"DELAY\x01+3") == 3
    assert delay_level(b"DELAY\x01abc") is None
    assert delay_level(b"DELAY\x01abc\x02DELAY\x012") == 2  # the later segment wins
    assert delay_level(DELAY + b"\x02") == 0  # an empty value: no DELAY at all
    assert delivery_tags_code(3, 100, delays) == 10100
    assert delivery_tags_code(99, 100, delays) == 10100  # capped at the highest level
    assert delivery_tags_code(0, 100, delays) is None
    assert delivery_tags_code(-1, 100, delays) is None


def test_message_delay_time_level_reads_javas_grammar() -> None:
    """The client-side getter: 0 where Java's getDelayTimeLevel would throw."""
    assert Message("T", b"", properties={"DELAY": "+3"}).delay_time_level == 3
    assert Message("T", b"", properties={"DELAY": " 2"}).delay_time_level == 0
    assert Message("T", b"", properties={"DELAY": "1_0"}).delay_time_level == 0
    assert Message("T", b"", properties={"DELAY": "\u0663"}).delay_time_level == 3
