"""Helpers: requests built the way real clients frame them (raw JSON headers, decoded)."""

from __future__ import annotations

import json
import struct
from typing import Any

from actors.core import Request
from protocol.command import RemotingCommand


def wire_cmd(
    code: int,
    ext: dict[str, Any] | None = None,
    body: bytes = b"",
    *,
    version: int = 409,
    language: str = "JAVA",
    oneway: bool = False,
    opaque: int = 7,
) -> RemotingCommand:
    """Frame a JSON header like a client (numbers/booleans allowed) and decode it."""
    header: dict[str, Any] = {
        "code": code,
        "language": language,
        "opaque": opaque,
        "flag": 2 if oneway else 0,
        "version": version,
    }
    if ext is not None:
        header["extFields"] = ext
    hb = json.dumps(header).encode()
    return RemotingCommand.decode(struct.pack(">i", len(hb)) + hb + body)


def wire_req(
    code: int,
    ext: dict[str, Any] | None = None,
    body: bytes = b"",
    *,
    conn_id: int = 1,
    peer: tuple[str, int] = ("127.0.0.1", 50000),
    **kw: Any,
) -> Request:
    """A Request around wire_cmd."""
    return Request(conn_id, peer, wire_cmd(code, ext, body, **kw), 0)


def register_body(topics: dict[str, dict[str, Any]], counter: int = 1, ts: int = 1000) -> bytes:
    """A RegisterBrokerBody as a Java broker writes it."""
    table = {
        name: {
            "order": False,
            "perm": t.get("perm", 6),
            "readQueueNums": t.get("q", 4),
            "topicFilterType": "SINGLE_TAG",
            "topicName": name,
            "topicSysFlag": t.get("sys", 0),
            "writeQueueNums": t.get("q", 4),
        }
        for name, t in topics.items()
    }
    obj = {
        "filterServerList": [],
        "topicConfigSerializeWrapper": {
            "dataVersion": {"counter": counter, "timestamp": ts},
            "topicConfigTable": table,
        },
    }
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()
