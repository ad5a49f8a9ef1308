"""The RemotingServer's code routing (actors.remoting.router) refuses pathological headers with
a RouteError, which the server logs as one warning line before closing the connection."""

from __future__ import annotations

import pytest

from actors.remoting.router import RouteError, request_code
from protocol.codes import SerializeType

DEEP = 100_000


@pytest.mark.parametrize(
    ("stype", "header"),
    [
        (SerializeType.JSON, b"[" * DEEP + b"]" * DEEP),
        (SerializeType.JSON, b'{"extFields":' + b"[" * DEEP + b"]" * DEEP + b',"code":10}'),
        (SerializeType.JSON, b'{"a":' * DEEP + b"1" + b"}" * DEEP),
        (SerializeType.JSON, b'{"code":1e999}'),
        (SerializeType.JSON, b'{"code":-1e999,"opaque":1}'),
        (SerializeType.JSON, b'{"code":' + b"9" * 5000 + b"}"),
        (SerializeType.MSGPACK, b"\x91" * DEEP + b"\xc0"),
        (SerializeType.MSGPACK, b"\x97" + b"\x91" * DEEP + b"\xc0"),
        (SerializeType.MSGPACK, b"\x81\xa4code\xcb\x7f\xf0\x00\x00\x00\x00\x00\x00"),  # inf
    ],
    ids=["json-array", "json-before-code", "json-object", "json-inf", "json-minus-inf",
         "json-5000-digits", "msgpack-array", "msgpack-in-header", "msgpack-inf"],
)
def test_pathological_header_is_a_route_error(stype: int, header: bytes) -> None:
    """Deep nesting (json: RecursionError; msgpack: StackError) and codes no int can hold are
    a RouteError, never another exception (which the server would log as a traceback)."""
    frame = ((stype << 24) | len(header)).to_bytes(4, "big") + header
    with pytest.raises(RouteError):
        request_code(frame)
