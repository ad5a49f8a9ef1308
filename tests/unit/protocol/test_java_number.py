"""protocol.java_number reads numbers as Integer.parseInt / Long.parseLong do, and every
header field goes through it: what the reference broker answers with SYSTEM_ERROR (a space,
an underscore, a digit beyond the BMP) is a HeaderFieldError here too."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import HeaderFieldError
from protocol.headers import PullMessageRequestHeader, SendMessageRequestHeader, send_v2_fields
from protocol.java_number import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, parse_java_int

# The cases the reference 4.9.8 broker was asked (a SEND_MESSAGE_V2's queueId): None where it
# answered SYSTEM_ERROR with a NumberFormatException
REFERENCE = [("1", 1), (" 1", None), ("1 ", None), ("1_0", None), ("+1", 1), ("\uff11", 1),
             ("\U0001d7cf", None), ("\n1", None), ("-0", 0), ("01", 1), ("\u0661", 1),
             ("", None), ("+", None), ("-", None), ("+-1", None), ("0x1", None), ("1e3", None),
             ("\u00b2", None), ("2147483647", INT_MAX), ("2147483648", None),
             ("-2147483648", INT_MIN)]  # fmt: skip

_JAVA = re.compile(r"[+-]?[^\W_]+")  # a sign, then word chars with no underscore...


def model(text: str, lo: int, hi: int) -> int | None:
    """Java's rule spelled out char by char: ...each of them a BMP decimal digit."""
    if not _JAVA.fullmatch(text):
        return None
    digits = text.lstrip("+-")
    if len(text) - len(digits) > 1 or not all(c.isdecimal() and ord(c) <= 0xFFFF for c in digits):
        return None
    v = int(text)
    return v if lo <= v <= hi else None


@pytest.mark.parametrize(("text", "want"), REFERENCE)
def test_as_the_reference_reads_a_header_number(text: str, want: int | None) -> None:
    assert parse_java_int(text) == want
    ext = {"a": "g", "b": "T", "c": "TBW102", "d": "4", "e": text, "f": "0",
           "g": "1700000000000", "h": "0"}  # fmt: skip
    if want is None:
        with pytest.raises(HeaderFieldError, match="<e> is not a valid int"):
            SendMessageRequestHeader.from_ext_v2(ext)
        assert send_v2_fields(ext) is None  # the fast path leaves it to the general one
    else:
        assert SendMessageRequestHeader.from_ext_v2(ext).queue_id == want
        fields = send_v2_fields(ext)
        assert fields is not None and fields[1] == want


@given(st.text(alphabet=st.sampled_from("0123456789+-_ \t\n\u0661\uff11\U0001d7cfx"),
               max_size=22))
def test_matches_javas_rule_on_any_text(text: str) -> None:
    assert parse_java_int(text) == model(text, INT_MIN, INT_MAX)
    assert parse_java_int(text, LONG_MIN, LONG_MAX) == model(text, LONG_MIN, LONG_MAX)
    ext = {"consumerGroup": "g", "topic": "T", "queueId": "1", "queueOffset": text,
           "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0",
           "suspendTimeoutMillis": "0", "subVersion": "0"}  # fmt: skip
    want = model(text, LONG_MIN, LONG_MAX)  # queueOffset is a Long
    if want is None:
        with pytest.raises(HeaderFieldError):
            PullMessageRequestHeader.from_ext(ext)
    else:
        assert PullMessageRequestHeader.from_ext(ext).queue_offset == want
