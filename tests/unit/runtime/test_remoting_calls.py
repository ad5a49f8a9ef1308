"""The RemotingServer's routing of a client's answer to the processor that called it (CALL
records): told apart from the client's own requests in every header serialization."""

from __future__ import annotations

from typing import Any

import pytest

from actors.remoting.actor import _answer_channel
from protocol.codes import SerializeType
from protocol.command import RemotingCommand


@pytest.mark.parametrize("st", [SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK])
def test_answer_goes_to_the_caller_and_requests_do_not(st: int) -> None:
    ch: Any = object()
    calls: dict[int, tuple[Any, float]] = {77: (ch, 1e18)}
    request = RemotingCommand.request(30, {"topic": "T", "flag": "1"}, serialize_type=st,
                                      opaque=77)  # fmt: skip
    assert _answer_channel(calls, memoryview(request.encode()[4:])) is None
    assert 77 in calls  # a request with the same opaque leaves the call open
    answer = request.make_response(0, None, {"flag": "0"})
    assert _answer_channel(calls, memoryview(answer.encode()[4:])) is ch
    assert calls == {}
    assert _answer_channel(calls, memoryview(answer.encode()[4:])) is None  # answered once
    assert _answer_channel({1: (ch, 0.0)}, memoryview(b"\x00\x00\x00\x05{bad}")) is None
