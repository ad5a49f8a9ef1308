"""Decimal numbers as java.lang.Integer.parseInt and Long.parseLong read them (radix 10).

Mirrors what RocketMQ 4.9.x does with every number that arrives as text: a header field
(RemotingCommand.decodeCommandCustomHeader) and a property value (MessageAccessor /
getDelayTimeLevel). Java takes an optional sign, then one or more chars that
Character.digit reads as decimal digits: any Unicode decimal digit of the Basic Multilingual
Plane, since Java reads UTF-16 chars one at a time ("\u0663" is 3, "\uff11" is 1, a digit
beyond the BMP is two surrogates and throws). No spaces around it, no underscores, no empty
digits. Python's int() is wider: it strips whitespace and takes "1_000", so it is only
called once the text passed these rules (a field Java refuses must be refused here too:
the reference broker answers " 1" or "1_0" with SYSTEM_ERROR).
"""

from __future__ import annotations

from typing import Final

INT_MIN: Final = -(1 << 31)
INT_MAX: Final = (1 << 31) - 1
LONG_MIN: Final = -(1 << 63)
LONG_MAX: Final = (1 << 63) - 1


class NumberFormatError(ValueError):
    """java.lang.NumberFormatException: text Integer.parseInt / Long.parseLong refuse, where
    Java lets the exception end the request (the broker answers SYSTEM_ERROR)."""

    def __init__(self, text: str | bytes) -> None:
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        super().__init__(f'For input string: "{text}"')


def java_digits(text: str) -> bool:
    """True when Integer.parseInt / Long.parseLong read `text` as a number (range aside)."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    return digits.isdecimal() and (text.isascii() or max(text) <= "\uffff")


def parse_java_int(text: str, lo: int = INT_MIN, hi: int = INT_MAX) -> int | None:
    """Integer.parseInt (Long.parseLong with the long bounds) of text; None where it throws."""
    if not java_digits(text):
        return None
    v = int(text)
    return v if lo <= v <= hi else None
