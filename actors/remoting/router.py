"""Request-code extraction and the code -> processor-group table of the RemotingServer.

Mirrors remoting/netty/NettyRemotingAbstract.java processorTable + defaultRequestProcessor,
RocketMQ 4.9.x: the server looks at a request's code only, hands the untouched frame to the
processor registered for it and falls back to the default processor. Decoding the rest of
the header is the processor's job.
"""

from __future__ import annotations

import json
import re
import struct
from typing import Any, Final

import msgpack

from protocol.codes import RequestCode
from protocol.remoting_serializable import fastjson_int

JSON: Final = 0
ROCKETMQ: Final = 1
MSGPACK: Final = 2
_META = struct.Struct(">I")
_CODE = struct.Struct(">h")
_JSON_CODE: Final = re.compile(rb'\{"code":(-?[0-9]{1,10})[,}]')


class RouteError(Exception):
    """The frame's header cannot be read far enough to find the request code."""


def request_code(frame: Any) -> int:
    """The request code of a frame (everything after the 4-byte total length)."""
    if len(frame) < 4:
        raise RouteError("frame shorter than its header length field")
    (meta,) = _META.unpack_from(frame, 0)
    stype = meta >> 24
    hlen = meta & 0xFFFFFF
    if hlen > len(frame) - 4:
        raise RouteError(f"header length {hlen} beyond frame of {len(frame)} bytes")
    if stype == ROCKETMQ:
        if hlen < 21:
            raise RouteError("binary header shorter than 21 bytes")
        return int(_CODE.unpack_from(frame, 4)[0])
    if stype == JSON:
        # fast path: Java, Go and Node all write "code" first; one match, nothing copied
        m = _JSON_CODE.match(frame, 4, 4 + min(hlen, 24))
        if m is not None:
            return int(m.group(1))
    header = bytes(frame[4 : 4 + hlen])
    if stype == JSON:
        try:
            obj = json.loads(str(header, "utf-8", "replace"))  # as the processor's decode
        except (ValueError, RecursionError) as exc:  # RecursionError: deep nesting
            raise RouteError(f"invalid JSON header: {exc}") from None
        if not isinstance(obj, dict):
            raise RouteError("JSON header is not an object")
        code = fastjson_int(obj.get("code"), 0)  # what the processor's decode reads
        if code is None:
            raise RouteError(f"bad code {obj.get('code')!r:.100}")
        return code
    if stype == MSGPACK:
        try:
            obj = msgpack.unpackb(header, raw=False, strict_map_key=False)
        except Exception as exc:  # StackError (deep nesting) has no message: name the type
            raise RouteError(f"invalid msgpack header: {exc!r}") from None
        if isinstance(obj, dict):
            return _as_code(obj.get("code", obj.get(0, 0)))
        if isinstance(obj, list | tuple) and obj:
            return _as_code(obj[0])
        raise RouteError("msgpack header has no code")
    raise RouteError(f"unknown serialize type {stype}")


def _as_code(value: Any) -> int:
    if isinstance(value, bool):
        raise RouteError("boolean code")
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: 1e999 reads as inf
        raise RouteError(f"bad code {value!r:.100}") from None


class RouteTable:
    """Request code -> processor group name, with a default group."""

    __slots__ = ("by_code", "default")

    def __init__(self, code_groups: dict[int, str], default: str) -> None:
        self.by_code = dict(code_groups)
        self.default = default

    def group_for(self, code: int) -> str:
        """The group that serves `code`."""
        return self.by_code.get(code, self.default)


# What the VIP listener does not serve (BrokerController registers no pull processor there).
NOT_ON_FAST_PORT: Final = frozenset({int(RequestCode.PULL_MESSAGE)})


def fast_route_table(main: RouteTable) -> RouteTable:
    """The VIP port's table: the main one without PULL_MESSAGE (it falls to the default)."""
    return RouteTable(
        {c: g for c, g in main.by_code.items() if c not in NOT_ON_FAST_PORT}, main.default
    )
