"""Protocol error tree: everything the sans-IO layer raises on bad input.

Mirrors remoting/exception/RemotingCommandException.java, RocketMQ 4.9.x. Like h11's
RemoteProtocolError, every error here is about bytes or fields a peer sent; the caller closes
the connection (frame-level errors) or answers with an error response (HeaderFieldError).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

__all__ = [
    "BadFrameLengthError",
    "BadHeaderError",
    "BadHeaderLengthError",
    "FrameTooLargeError",
    "HeaderFieldError",
    "ProtocolError",
    "UnknownSerializeTypeError",
]


class ProtocolError(Exception):
    """Anything undecodable: a frame, a header or a header field."""


class FrameTooLargeError(ProtocolError):
    """A frame's length (length field included) exceeds the decoder's maximum."""


class BadFrameLengthError(ProtocolError):
    """A frame's total length is negative or too small to hold the header-length word."""


class BadHeaderLengthError(ProtocolError):
    """The header length points past the end of the frame."""


class UnknownSerializeTypeError(ProtocolError):
    """The serialize-type byte is none of JSON (0), ROCKETMQ (1) or MSGPACK (2)."""


class BadHeaderError(ProtocolError):
    """The header bytes do not parse (bad JSON, truncated binary, bad msgpack, bad field type)."""


class HeaderFieldError(ProtocolError):
    """A request header field is missing or malformed; answer with `code` and `remark`."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark

    def __reduce__(self) -> tuple[type[HeaderFieldError], tuple[int, str]]:
        """Pickle with both arguments (actor messages may carry this error)."""
        return (type(self), (self.code, self.remark))
