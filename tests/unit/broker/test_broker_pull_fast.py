"""The pull core's fast path (fast_path, taken by the processor host) answers byte for byte what
the general path (decode + process + encode) does, commits the same offsets, holds the same
pulls, and takes only what it may."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from broker_kit import Broker, FastPathSide, heartbeat_body, pull_ext, send_ext, wire_cmd

from protocol.codes import RequestCode as RC
from protocol.codes import ResponseCode as RS
from protocol.codes import SerializeType

NOW = 1_700_000_000_000
SUSPEND, SUB = 2, 4
COMMIT = 1


class Side(FastPathSide):
    """One broker whose pull core runs under a ProcessorHost, with or without the fast path."""

    def __init__(self, root: str, fast: bool, **bc: Any) -> None:
        super().__init__(Broker(root, **bc), "pull", fast)
        for qid in range(2):
            for i in range(40):
                tags = "TAGS\x01" + ("a" if i % 2 else "b")
                r = self.broker.call(RC.SEND_MESSAGE_V2,
                                     send_ext("T", queue_id=qid, props=f"WAIT\x01true\x02{tags}"),
                                     b"m%d" % i, now_ms=NOW)  # fmt: skip
                assert r is not None and r.code == RS.SUCCESS
        r = self.broker.call(RC.HEART_BEAT, None, heartbeat_body("c1", "CG", "T"), now_ms=NOW)
        assert r is not None and r.code == RS.SUCCESS

    def run(self, frame: bytes) -> bytes:  # type: ignore[override]
        """Handle one request frame at NOW."""
        return super().run(frame, NOW)

    def offset(self, group: str, qid: int) -> int:
        """The committed offset in the shared table (-1: none)."""
        return int(self.broker.ctxs["pull"].offsets.query_offset(group, "T", qid))


@pytest.fixture
def sides(tmp_path) -> Iterator[tuple[Side, Side]]:
    fast, slow = Side(str(tmp_path / "fast"), True), Side(str(tmp_path / "slow"), False)
    yield fast, slow
    fast.close()
    slow.close()


def frame(ext: dict[str, Any], opaque: int, st: int = int(SerializeType.JSON),
          oneway: bool = False) -> bytes:  # fmt: skip
    """A PULL_MESSAGE request frame without its length prefix, its JSON header as a client
    writes it (numbers mixed in); msgpack: our own encoder's."""
    if st == int(SerializeType.JSON):
        header = {"code": int(RC.PULL_MESSAGE), "extFields": ext, "flag": 2 if oneway else 0,
                  "language": "JAVA", "opaque": opaque, "serializeTypeCurrentRPC": "JSON",
                  "version": 409}  # fmt: skip
        hb = json.dumps(header, separators=(",", ":")).encode()
        return struct.pack(">i", len(hb)) + hb
    cmd = wire_cmd(RC.PULL_MESSAGE, ext, b"", opaque=opaque, oneway=oneway)
    cmd.serialize_type = st
    return cmd.encode()[4:]


CASES: list[tuple[str, dict[str, Any], bool]] = [  # (name, pull_ext kwargs, fast answers it)
    ("found, registered subscription", {"sys_flag": SUSPEND | COMMIT, "commit": 5}, True),
    ("found, subscription in the pull", {"sys_flag": SUB, "sub": "*", "queue_id": 1}, True),
    ("found, tag filter", {"sys_flag": SUB, "sub": "a", "offset": 3}, True),
    ("found, middle of the queue", {"sys_flag": SUSPEND, "offset": 17, "queue_id": 1}, True),
    ("not found, answered", {"sys_flag": SUB | COMMIT, "sub": "*", "offset": 40, "commit": 40},
     True),
    ("not found, held", {"sys_flag": SUSPEND | COMMIT, "offset": 40, "commit": 39}, True),
    ("offset moved", {"sys_flag": SUSPEND, "offset": 99}, True),
    ("bad queue id", {"sys_flag": SUSPEND, "queue_id": 9}, False),
    ("unknown group", {"sys_flag": SUB, "sub": "*", "group": "NEW"}, False),
    ("no subscription", {"sys_flag": SUSPEND, "group": "OTHER"}, False),
]


@pytest.mark.parametrize("name,kw,taken", CASES, ids=[c[0] for c in CASES])
def test_fast_pull_answers_as_the_general_path(
    sides: tuple[Side, Side], name: str, kw: dict[str, Any], taken: bool
) -> None:
    fast, slow = sides
    f = frame(pull_ext("T", **kw), 77)
    out = fast.run(f)
    assert out == slow.run(f)
    assert fast.taken == int(taken)
    group, qid = kw.get("group", "CG"), kw.get("queue_id", 0)
    assert fast.offset(group, qid) == slow.offset(group, qid)
    if kw.get("sys_flag", 0) & COMMIT:
        assert fast.offset(group, qid) == kw["commit"]
    assert len(fast.core.suspended) == len(slow.core.suspended)


def test_a_held_fast_pull_is_woken_by_an_arrival(sides: tuple[Side, Side]) -> None:
    fast, slow = sides
    f = frame(pull_ext("T", sys_flag=SUSPEND, offset=40), 78)
    assert fast.run(f) == slow.run(f) == b""
    assert len(fast.core.suspended) == 1
    for side in sides:
        side.broker.outbox.take()  # the heartbeat's notices
        r = side.broker.call(RC.SEND_MESSAGE_V2, send_ext("T", props="WAIT\x01true"), b"late",
                             now_ms=NOW)  # fmt: skip
        assert r is not None and r.code == RS.SUCCESS
    woken = [[(c, cmd.encode()) for c, cmd in side.broker.outbox.take()] for side in sides]
    assert woken[0] == woken[1]
    assert [c for c, _ in woken[0]] == [3]  # the held pull's connection, answered FOUND
    assert b'"remark":"FOUND"' in woken[0][0][1] and b'"opaque":78' in woken[0][0][1]


def test_msgpack_and_oneway_pulls_take_the_general_path(sides: tuple[Side, Side]) -> None:
    fast, slow = sides
    f = frame(pull_ext("T", sys_flag=SUSPEND), 79, st=int(SerializeType.MSGPACK))
    assert fast.run(f) == slow.run(f) != b""
    f = frame(pull_ext("T", sys_flag=SUSPEND), 80, oneway=True)  # oneway: no answer
    assert fast.run(f) == slow.run(f) == b""
    assert fast.taken == 0
