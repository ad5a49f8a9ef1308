"""The SparkBridge's requests and replies: RemotingCommands with JSON bodies.

Mirrors remoting/protocol/RemotingSerializable.java's use in RocketMQ (a request header plus a
JSON body, the answer's code and remark carrying errors), for actormq's own SparkBridgeCode
requests. Every request body names its query ({"query": {"id", "name", "kind"}}) and carries
the source options as the user gave them (strings); the bridge parses them with the same code
as the driver (actors.spark_bridge.options). Offsets travel in Spark's offset form,
{"topic": {"brokerName": {"queueId": offset}}}.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from protocol.codes import ResponseCode
from protocol.command import RemotingCommand


class BadBody(ValueError):
    """A request or reply body that is not the JSON object expected."""


def request(code: int, body: Mapping[str, Any]) -> RemotingCommand:
    """A bridge request with a JSON body."""
    return RemotingCommand.request(code, None, dumps(body))


def dumps(obj: Mapping[str, Any]) -> bytes:
    """Compact JSON."""
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


def loads(cmd: RemotingCommand) -> dict[str, Any]:
    """The JSON object body of a request or reply ({} when empty)."""
    raw = bytes(cmd.body)
    if not raw:
        return {}
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise BadBody(f"body is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise BadBody("body is not a JSON object")
    return obj


def ok(req: RemotingCommand, body: Mapping[str, Any], remark: str | None = None
       ) -> RemotingCommand:  # fmt: skip
    """SUCCESS with a JSON body."""
    return req.make_response(ResponseCode.SUCCESS, remark, None, dumps(body))
