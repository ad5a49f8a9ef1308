"""The pull connections the pull actor writes and the user's process reads
(actors.client.consumer.shared_pull_connection), over real sockets: the reader's framing across
arbitrary cuts, a frame longer than its buffer, a peer that closes or sends garbage; the pull
actor's RemotingClient sharing a connection, writing it unread, and a failed write; and
ConsumerServices on a shared connection (the next pulls of a read leave before its decodes; a
closed connection fails its pulls and tells the pull actor; a pull whose time passes gets no
answer)."""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from actors.client import client_channel as ch
from actors.client.consumer import consumer_channel as cc
from actors.client.consumer.consumer_services import ConsumerServices
from actors.client.consumer.shared_pull_connection import (
    READ_BUF,
    PullAnswerReader,
    PullDeadlines,
)
from actors.client.errors import RemotingConnectError, RemotingSendRequestError
from actors.client.event_loop import EventLoop
from actors.client.remoting_client import RemotingClient
from actors.client.remoting_conn import MAX_FRAME, ChannelWrapper
from protocol.codes import RPC_TYPE_RESPONSE, ResponseCode
from protocol.command import RemotingCommand

ADDR = "127.0.0.1:10911"


def _answer(rid: int, code: int = ResponseCode.SUCCESS, body: bytes = b"",
            remark: str | None = None) -> bytes:  # fmt: skip
    ext = {"nextBeginOffset": "7", "minOffset": "0", "maxOffset": "9",
           "suggestWhichBrokerId": "0"}  # fmt: skip
    return RemotingCommand(code, opaque=rid, flag=RPC_TYPE_RESPONSE, remark=remark,
                           ext_fields=ext, body=body).encode()  # fmt: skip


def _wait(cond: Callable[[], Any], what: str, timeout_s: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:  # bounded in time
        got = cond()
        if got:
            return got
        time.sleep(0.005)
    raise AssertionError(f"not within {timeout_s} s: {what}")


@pytest.fixture
def loop() -> Iterator[EventLoop]:
    lp = EventLoop("test-pull-io")
    try:
        yield lp
    finally:
        lp.stop()


class _Seen:
    """What a reader handed over: (rid, status, next_begin, body copied during the pass)."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, int, int, bytes]] = []
        self.lost: list[tuple[int, str, str]] = []

    def on_answers(self, answers: list[tuple[cc.PullAnswer, memoryview]]) -> None:
        self.answers += [(a.rid, a.status, a.next_begin, bytes(t)) for a, t in answers]

    def on_lost(self, conn_id: int, addr: str, reason: str) -> None:
        self.lost.append((conn_id, addr, reason))


@pytest.mark.parametrize("seed", range(6))
def test_the_reader_hands_over_every_answer_whole_across_any_cuts(loop: EventLoop,
                                                                  seed: int) -> None:
    """Answers written in random pieces arrive whole and in order: found bodies (one longer
    than the read buffer, whose larger buffer is let go after it), no new message, a broker
    error with its remark; then the broker closes and the reader says so once, with the
    connection closed."""
    rnd = random.Random(seed)
    big = rnd.randbytes(READ_BUF + 12345)
    want: list[tuple[int, int, int, bytes]] = []
    stream = b""
    for rid in range(1, 40):
        kind = rnd.randrange(4)
        if kind == 0:
            body = b"m%d" % rid * rnd.randrange(1, 500)
            stream += _answer(rid, body=body)
            want.append((rid, 0, 7, body))
        elif kind == 1:
            stream += _answer(rid, ResponseCode.PULL_NOT_FOUND)
            want.append((rid, 1, 7, b""))
        elif kind == 2:
            stream += _answer(rid, ResponseCode.SYSTEM_BUSY, remark="busy")
            want.append((rid, cc.BROKER_ERROR, ResponseCode.SYSTEM_BUSY, b"busy"))
        else:
            stream += _answer(rid, body=big if rid == 20 else b"x" * rid)
            want.append((rid, 0, 7, big if rid == 20 else b"x" * rid))
    broker, user = socket.socketpair()
    seen = _Seen()
    reader = PullAnswerReader(loop, seen.on_answers, seen.on_lost)
    reader.adopt(3, ADDR, os.dup(user.fileno()))
    user.close()
    pos = 0
    while pos < len(stream):  # bounded: every piece is at least one byte
        n = rnd.choice([1, 3, 7, 100, 5000, 70000])
        broker.sendall(stream[pos : pos + n])
        pos += n
        if rnd.random() < 0.3:
            time.sleep(0.001)
    _wait(lambda: len(seen.answers) == len(want), f"{len(want)} answers")
    got = seen.answers
    assert got == want
    # the long answer's buffer went with it
    _wait(lambda: len(reader.conns[3].buf) == READ_BUF, "the buffer back to its size")
    broker.close()
    _wait(lambda: seen.lost, "the close")
    assert seen.lost == [(3, ADDR, "closed by peer")]
    assert not reader.conns


@pytest.mark.parametrize(("length", "why"), [
    (b"\xff\xff\xff\xff", "bad frame: bad frame length -1"),  # signed, as Java's int
    # one byte over FrameDecoder's limit (16 MiB with the length field): the same rule
    (struct.pack(">i", MAX_FRAME - 3), f"bad frame: frame of {MAX_FRAME + 1} bytes exceeds"),
])
def test_a_frame_that_cannot_be_one_closes_the_connection(loop: EventLoop, length: bytes,
                                                          why: str) -> None:  # fmt: skip
    broker, user = socket.socketpair()
    seen = _Seen()
    reader = PullAnswerReader(loop, seen.on_answers, seen.on_lost)
    reader.adopt(1, ADDR, os.dup(user.fileno()))
    user.close()
    broker.sendall(_answer(5, ResponseCode.PULL_NOT_FOUND) + length + b"junk")
    _wait(lambda: seen.lost, "the close")
    assert [a[0] for a in seen.answers] == [5]  # what came before is still handed over
    assert seen.lost[0][2].startswith(why), seen.lost
    assert not reader.conns
    with pytest.raises(OSError):  # our copy is closed: the broker sees the close
        for _ in range(100):  # bounded
            broker.sendall(b"x" * 65536)
    broker.close()


def _sharing_client(shared: list[tuple[int, str, int]], closed: list[tuple[int, str]],
                    take: bool = True) -> RemotingClient:
    """The pull actor's RemotingClient: each plain connection handed to `shared` (a copy of
    its descriptor), each closed one noted in `closed`."""
    def share(conn: ChannelWrapper) -> bool:
        if take:
            shared.append((conn.serial, conn.addr, os.dup(conn.fd)))
        return take

    client = RemotingClient(share=share)
    client.on_shared_closed = lambda conn, why: closed.append((conn.serial, why))
    return client


def test_a_shared_connection_is_written_not_read_and_its_failed_write_is_reported() -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    addr = f"127.0.0.1:{srv.getsockname()[1]}"
    shared: list[tuple[int, str, int]] = []
    closed: list[tuple[int, str]] = []
    client = _sharing_client(shared, closed)
    client.hold_writes = True  # as in the pull actor's pass: written by flush_all
    try:
        client.write_frame(addr, b"one")
        client.write_frame(addr, b"two")
        peer, _ = srv.accept()
        assert [(i, a) for i, a, _fd in shared] == [(1, addr)]
        assert client.fds() == [], "a shared connection is not read here"
        assert client.flush_all()
        peer.settimeout(5)
        got = b""
        for _ in range(10):  # bounded
            got += peer.recv(100)
            if len(got) >= 6:
                break
        assert got == b"onetwo"
        # the user's process holds a copy of the socket: it reads what the broker answers
        peer.sendall(b"answer")
        user = socket.socket(fileno=shared[0][2])
        user.settimeout(5)
        assert user.recv(100) == b"answer"
        user.close()
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        peer.close()  # a reset: the next writes fail
        for _ in range(100):  # bounded in count and time
            try:
                client.write_frame(addr, b"x" * 1000)
            except RemotingSendRequestError:
                pass
            client.flush_all()
            if closed:
                break
            time.sleep(0.01)
        assert closed and closed[0][0] == 1 and closed[0][1].startswith("send failed")
        assert not client.addrs()
    finally:
        client.close()
        srv.close()


def test_a_connection_that_cannot_be_shared_is_not_kept() -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    addr = f"127.0.0.1:{srv.getsockname()[1]}"
    client = _sharing_client([], [], take=False)
    try:
        with pytest.raises(RemotingConnectError):
            client.write_frame(addr, b"pull")
        assert not client.addrs()
        peer, _ = srv.accept()
        peer.settimeout(5)
        assert peer.recv(10) == b""  # closed again at once
        peer.close()
        closed_port = socket.create_server(("127.0.0.1", 0))
        dead = f"127.0.0.1:{closed_port.getsockname()[1]}"
        closed_port.close()
        with pytest.raises(RemotingConnectError):
            client.write_frame(dead, b"pull")
    finally:
        client.close()
        srv.close()


def test_a_connection_its_reader_closed_is_closed_here_without_telling_it_back() -> None:
    """The user's process closed its copy (ConnClosed): the pull actor closes the one it
    writes, and does not send a ConnClosed back; the next pull makes a new connection, shared
    again under a new serial. A failure found here (the client closing) is told."""
    srv = socket.create_server(("127.0.0.1", 0))
    addr = f"127.0.0.1:{srv.getsockname()[1]}"
    shared: list[tuple[int, str, int]] = []
    closed: list[tuple[int, str]] = []
    client = _sharing_client(shared, closed)
    try:
        client.write_frame(addr, b"one")
        client.close_shared(2, "not this one")  # no such serial: nothing happens
        assert client.addrs() == [addr]
        client.close_shared(1, "the user's process: closed by peer")
        assert client.addrs() == [] and closed == []
        client.write_frame(addr, b"two")
        assert [serial for serial, _a, _fd in shared] == [1, 2]
        client.close()
        assert closed == [(2, "client closed")]
    finally:
        for _serial, _a, fd in shared:
            os.close(fd)
        client.close()
        srv.close()


def test_deadlines_fail_by_broker_and_by_time() -> None:
    d = PullDeadlines()
    d.sent(1, "a:1", 1000)
    d.sent(2, "b:1", 1000)
    d.sent(3, "a:1", 60_000)
    d.answered(2)
    assert sorted(d.of_broker("a:1")) == [1, 3]
    d.sent(4, "b:1", 0)
    d.sent(5, "b:1", 60_000)
    assert d.expired(time.monotonic()) == [4]
    assert d.all() == [5] and not d.out


# -- ConsumerServices on a shared connection ---------------------------------------------------
class _Owner:
    """A PullCallback that pulls again at once and decodes after the pulls left (its early
    pull), noting both."""

    group = "cg"

    def __init__(self, services: ConsumerServices, events: list[str]) -> None:
        self.services = services
        self.events = events
        self.results: list[tuple[int, int, bytes]] = []
        self.lock = threading.Lock()

    def on_pull_result(self, answer: cc.PullAnswer, tail: memoryview) -> None:
        with self.lock:
            self.results.append((answer.rid, answer.status, bytes(tail)))
        if answer.status != 0:
            return
        _pull(self.services, self)

        def decode() -> None:
            self.events.append("decode " + bytes(tail).decode())

        self.services.after_pulls_sent(decode)


def _pull(services: ConsumerServices, owner: object, timeout_ms: int = 30_000) -> int:
    rid = services.new_pull(owner)  # type: ignore[arg-type]
    services.send_pull(cc.PullCommand(rid, ADDR, "cg", "T", 0, 1, 32, 0, 0, 15_000, None, 0,
                                      None, timeout_ms))  # fmt: skip
    return rid


class _NotingEnd(ch.ChannelEnd):
    __slots__ = ("events",)

    def __init__(self, sock: socket.socket, events: list[str]) -> None:
        super().__init__(sock)
        self.events = events

    def send_records(self, recs: Any) -> None:
        records = list(recs)
        self.events.append("write " + ",".join(type(r).__name__ for r in records))
        super().send_records(records)


def _actor_records(actor: ch.ChannelEnd, n: int) -> list[ch.TypedRecord]:
    got: list[ch.TypedRecord] = []
    actor.sock.settimeout(5)
    for _ in range(100):  # bounded
        got += [ch.read_record(k, p) for k, p in actor.read_records() or []]
        if len(got) >= n:
            break
    return got


@pytest.fixture
def shared(loop: EventLoop) -> Iterator[tuple[ConsumerServices, ch.ChannelEnd, socket.socket,
                                              list[str]]]:  # fmt: skip
    """ConsumerServices over plain TCP with a pull channel and one shared broker connection
    (the broker's end returned)."""
    handle = SimpleNamespace(runtime=SimpleNamespace(loop=loop), client_id="c@1",
                             config=SimpleNamespace(tls=None))  # fmt: skip
    services = ConsumerServices(handle, 1000.0, 1000.0, 1000.0)  # type: ignore[arg-type]
    assert services.direct
    events: list[str] = []
    user_sock, actor_sock = socket.socketpair()
    end, actor = _NotingEnd(user_sock, events), ch.ChannelEnd(actor_sock)
    end.take_fds()  # as the runtime's accepted ends do
    services.pull.on_open(end)
    broker, conn = socket.socketpair()
    rec = cc.ConnShared(9, ADDR)
    assert actor.send_with_fds(ch.encode_record(rec.KIND, rec.encode()), [conn.fileno()])
    conn.close()  # the pull actor's copy, as good as closed here
    records = None
    for _ in range(100):  # bounded
        records = end.read_records()
        if records:
            break
    assert records
    services.pull.on_records(end, records)
    assert list(services.reader.conns) == [9]
    try:
        yield services, actor, broker, events
    finally:
        services.closed = True
        services.reader.close_all()
        for s in (end, actor, broker):
            s.close()


def test_a_read_of_a_shared_connection_writes_its_next_pulls_before_its_decodes(
        shared: tuple[ConsumerServices, ch.ChannelEnd, socket.socket, list[str]]) -> None:
    services, actor, broker, events = shared
    owner = _Owner(services, events)
    rids = [services.new_pull(owner) for _ in range(3)]  # as if sent before
    for rid in rids:
        services.deadlines.sent(rid, ADDR, 30_000)
    broker.sendall(b"".join(_answer(rid, body=b) for rid, b in zip(rids, [b"AA", b"BB", b"CC"],
                                                                      strict=True)))  # fmt: skip
    _wait(lambda: len(events) >= 4, "the pass")
    assert events == ["write Pull", "decode AA", "decode BB", "decode CC"]
    (pull,) = _actor_records(actor, 1)
    assert isinstance(pull, cc.Pull) and len(pull.commands) == 3
    assert {c.rid for c in pull.commands} == set(services.deadlines.out)  # the new ones are out
    assert [r[:2] for r in owner.results] == [(rid, 0) for rid in rids]


def test_a_shared_connection_that_closes_fails_its_pulls_and_tells_the_pull_actor(
        shared: tuple[ConsumerServices, ch.ChannelEnd, socket.socket, list[str]]) -> None:
    services, actor, broker, events = shared
    owner = _Owner(services, events)
    rids = [_pull(services, owner) for _ in range(2)]
    other = services.new_pull(owner)
    services.deadlines.sent(other, "127.0.0.1:20911", 30_000)  # another broker's
    assert len(_actor_records(actor, 2)) == 2  # the two pulls left, a record each
    broker.close()
    _wait(lambda: len(owner.results) == 2, "the failed pulls")
    assert sorted(r[0] for r in owner.results) == sorted(rids)
    assert all(r[1] == cc.NO_ANSWER and r[2] == b"closed by peer" for r in owner.results)
    (closed,) = _actor_records(actor, 1)
    assert closed == cc.ConnClosed(9, "closed by peer")
    assert list(services.deadlines.out) == [other]  # the other broker's pull is still out
    assert not services.reader.conns


def test_a_shared_connections_pull_times_out(
        shared: tuple[ConsumerServices, ch.ChannelEnd, socket.socket, list[str]]) -> None:
    services, _actor, _broker, events = shared
    owner = _Owner(services, events)
    services.closed = False
    services.runtime.loop.call_later(0.0, services._scan)  # the scan _start arms
    rid = _pull(services, owner, timeout_ms=50)
    _wait(lambda: owner.results, "the time-out", 5.0)
    assert owner.results == [(rid, cc.NO_ANSWER, b"pull timed out")]
    services.closed = True
