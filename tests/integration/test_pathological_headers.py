"""Pathological headers in every serialization (100k-deep JSON or msgpack nesting, codes and
numbers no int holds, lengths beyond the header) close only their own connection, at the broker
and at the name server, and the log gets one warning line each: no ERROR, no traceback."""

from __future__ import annotations

import socket
import struct

import pytest

from deploy.wire import BlockingClient
from protocol.codes import SerializeType
from protocol.command import RemotingCommand
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    closed_by_server,
    start_up_process,
    wait_until,
)

pytestmark = pytest.mark.integration

DEEP = 100_000


def _frame(stype: int, header: bytes, body: bytes = b"") -> bytes:
    meta = (stype << 24) | len(header)
    return struct.pack(">ii", 4 + len(header) + len(body), meta) + header + body


JSON, BINARY, MSGPACK = SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK
PATHOLOGICAL = {
    "json-deep-array": _frame(JSON, b"[" * DEEP + b"]" * DEEP),
    "json-deep-object": _frame(JSON, b'{"a":' * DEEP + b"1" + b"}" * DEEP),
    "json-deep-before-code": _frame(JSON, b'{"extFields":' + b"[" * DEEP + b"]" * DEEP
                                    + b',"code":10}'),
    "json-deep-after-code": _frame(JSON, b'{"code":10,"extFields":{"a":' + b"[" * DEEP
                                   + b"]" * DEEP + b"}}"),
    "json-code-inf": _frame(JSON, b'{"code":1e999}'),
    "json-code-5000-digits": _frame(JSON, b'{"extFields":{},"code":' + b"9" * 5000 + b"}"),
    "json-flag-inf": _frame(JSON, b'{"code":10,"flag":1e999,"opaque":1}'),
    "msgpack-deep": _frame(MSGPACK, b"\x91" * DEEP + b"\xc0"),
    "msgpack-deep-in-header": _frame(MSGPACK, b"\x97\x0a" + b"\x91" * DEEP + b"\xc0"),
    "msgpack-opaque-2^63": _frame(MSGPACK, b"\x97\x0a\x00\x00\xcf" + b"\x80" + b"\x00" * 7
                                  + b"\x00\xc0\x80"),
    "binary-ext-beyond-header": _frame(BINARY, struct.pack(">hbhiii", 10, 0, 1, 1, 0, 0)
                                       + struct.pack(">i", 10**6)),
}


def test_pathological_headers_close_the_connection_with_one_warning(tmp_path) -> None:
    run, ns, broker, data = start_up_process(tmp_path)
    try:
        ping = {"broker": RemotingCommand.request(28),  # GET_BROKER_RUNTIME_INFO
                "namesrv": RemotingCommand.request(106)}  # GET_BROKER_CLUSTER_INFO
        for role, port in (("broker", broker), ("namesrv", ns)):
            addr = ("127.0.0.1", port)
            with BlockingClient(addr) as good:
                assert good.invoke(ping[role], RPC_TIMEOUT_S).code == 0
                for name, frame in PATHOLOGICAL.items():
                    with socket.create_connection(addr, timeout=5) as bad:
                        bad.sendall(frame)
                        assert closed_by_server(bad), f"{role} kept the connection of {name}"
                assert good.invoke(ping[role], RPC_TIMEOUT_S).code == 0  # still serving
        log_path = data / "actormq.log"
        n = len(PATHOLOGICAL) * 2

        def closing_lines() -> list[str]:
            return [ln for ln in log_path.read_text(errors="replace").splitlines()
                    if " WARNING " in ln and "closing" in ln]  # fmt: skip

        wait_until(lambda: len(closing_lines()) >= n, 10.0)
    finally:
        assert run.stop() == 0
    text = log_path.read_text(errors="replace")
    assert "Traceback" not in text
    assert " ERROR " not in text, [ln for ln in text.splitlines() if " ERROR " in ln][:5]
    assert len(closing_lines()) >= n, closing_lines()  # one warning line per connection
