"""Typed reads of request extFields with RocketMQ's decode rules.

Mirrors remoting/protocol/RemotingCommand.decodeCommandCustomHeader, RocketMQ 4.9.x: ints and
longs parse like Integer/Long.parseLong, booleans like Boolean.parseBoolean (plus the C++
client's "1"). A missing required field or a malformed number raises HeaderFieldError with
SYSTEM_ERROR and a remark naming the field, which processors turn into the error response.
"""

from __future__ import annotations

from protocol.codes import ResponseCode
from protocol.errors import HeaderFieldError

Ext = dict[str, str] | None


def missing(name: str) -> HeaderFieldError:
    """The error for an absent required field."""
    return HeaderFieldError(ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is null")


def req_str(ext: Ext, name: str) -> str:
    """A required string field."""
    if ext is None:
        raise missing(name)
    v = ext.get(name)
    if v is None:
        raise missing(name)
    return v


def opt_str(ext: Ext, name: str, default: str | None = None) -> str | None:
    """An optional string field ("" counts as absent)."""
    if ext is None:
        return default
    v = ext.get(name)
    return v if v else default


def _parse_int(name: str, v: str) -> int:
    try:
        return int(v)
    except ValueError:
        raise HeaderFieldError(
            ResponseCode.SYSTEM_ERROR, f"the custom field <{name}> is not a number: {v!r}"
        ) from None


def req_int(ext: Ext, name: str) -> int:
    """A required int/long field."""
    return _parse_int(name, req_str(ext, name))


def opt_int(ext: Ext, name: str, default: int | None = None) -> int | None:
    """An optional int/long field."""
    if ext is None:
        return default
    v = ext.get(name)
    if v is None or v == "":
        return default
    return _parse_int(name, v)


def opt_bool(ext: Ext, name: str, default: bool = False) -> bool:
    """Boolean.parseBoolean, plus "1" for the C++ client; absent => default."""
    if ext is None:
        return default
    v = ext.get(name)
    if v is None or v == "":
        return default
    return v == "1" or v.lower() == "true"
