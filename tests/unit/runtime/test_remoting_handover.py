"""The RemotingServer hands a burst of requests for a spin group (the send group) over in two
writes: the first EARLY_HANDOVER requests as soon as they are routed, so the processor starts
on them, the rest with the pass's flush. Real sockets, no actor system: the server's routing
step is run on a burst read from one client connection."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from actors.remoting.actor import EARLY_HANDOVER, RemotingServer
from actors.remoting.router import RouteTable
from actors.runtime.channel import REQUEST, Channel, RecordDecoder
from actors.runtime.tcp import Conn
from deploy.bench.requests import send_request
from protocol.codes import RequestCode
from protocol.command import RemotingCommand


class _Route:
    """A RemotingServer with one processor channel per group, over socket pairs."""

    def __init__(self, spin: frozenset[str]) -> None:
        self.rs = RemotingServer()
        self.rs.spin_groups = spin
        self.rs.routes = RouteTable({int(RequestCode.SEND_MESSAGE_V2): "send"}, "admin")
        self.ends: dict[str, socket.socket] = {}
        for group in ("send", "admin"):
            ours, theirs = socket.socketpair()
            theirs.setblocking(False)
            self.rs.group_channel[group] = Channel(ours, name=group)
            self.ends[group] = theirs
        self.client, server_side = socket.socketpair()
        self.conn = Conn(1, server_side, ("127.0.0.1", 5555), 1 << 20, time.monotonic())

    def route(self, frames: list[bytes]) -> None:
        """One routing step over a burst (frames without their length prefix)."""
        rs = self.rs
        assert rs.routes is not None
        views = [memoryview(f) for f in frames]
        # no server listens here: the owner is only compared with rs.server (the main port)
        rs._route(rs.server, self.conn, self.conn.id, rs.routes, views,  # type: ignore[arg-type]
                  time.monotonic_ns())

    def received(self, group: str) -> list[tuple]:
        """The records the group's processor can read now."""
        data = b""
        while True:
            try:
                got = self.ends[group].recv(1 << 20)
            except BlockingIOError:
                break
            if not got:
                break
            data += got
        return RecordDecoder().feed(data)

    def close(self) -> None:
        for ch in self.rs.group_channel.values():
            ch.close()
        for end in self.ends.values():
            end.close()
        self.client.close()
        self.conn.sock.close()


@pytest.fixture
def route() -> Iterator[_Route]:
    r = _Route(frozenset({"send"}))
    yield r
    r.close()


def _burst(n: int) -> tuple[list[bytes], list[int]]:
    reqs = [send_request("BenchB", i % 4) for i in range(n)]
    return [r.encode()[4:] for r in reqs], [r.opaque for r in reqs]


def _opaques(records: list[tuple]) -> list[int]:
    assert all(rec[0] == REQUEST for rec in records)
    return [RemotingCommand.decode(rec[4]).opaque for rec in records]


def test_a_burst_reaches_the_send_processor_in_two_writes(route: _Route) -> None:
    frames, opaques = _burst(20)
    route.route(frames)
    first = route.received("send")
    assert _opaques(first) == opaques[:EARLY_HANDOVER]  # written while routing
    ch = route.rs.group_channel["send"]
    assert ch.out  # the rest waits for the pass's flush
    assert ch.flush()
    assert _opaques(route.received("send")) == opaques[EARLY_HANDOVER:]


def test_a_small_burst_is_one_write(route: _Route) -> None:
    frames, opaques = _burst(EARLY_HANDOVER)
    route.route(frames)
    assert route.received("send") == []  # nothing before the flush
    assert route.rs.group_channel["send"].flush()
    assert _opaques(route.received("send")) == opaques


def test_a_group_that_does_not_spin_gets_the_burst_in_one_write() -> None:
    r = _Route(frozenset())
    try:
        frames, opaques = _burst(20)
        r.route(frames)
        assert r.received("send") == []
        assert r.rs.group_channel["send"].flush()
        assert _opaques(r.received("send")) == opaques
    finally:
        r.close()


def test_a_burst_for_two_groups_keeps_each_ones_order(route: _Route) -> None:
    """Sends and another group's requests interleaved: the early write carries the first
    EARLY_HANDOVER sends only, and every group's records come in the client's order."""
    sends, send_opaques = _burst(30)
    others = [RemotingCommand.request(int(RequestCode.HEART_BEAT), None, b"{}") for _ in range(5)]
    frames: list[bytes] = []
    for i, f in enumerate(sends):
        frames.append(f)
        if i % 6 == 0 and others:
            frames.append(others.pop(0).encode()[4:])
    route.route(frames)
    assert _opaques(route.received("send")) == send_opaques[:EARLY_HANDOVER]
    assert route.received("admin") == []
    for ch in route.rs.group_channel.values():
        assert ch.flush()
    assert _opaques(route.received("send")) == send_opaques[EARLY_HANDOVER:]
    assert len(route.received("admin")) == 5
