"""The pull connections the pull actor makes and the user's process writes and reads
(actors.client.consumer.shared_pull_connection), over real sockets: the reader's framing across
arbitrary cuts, a frame longer than its buffer, a peer that closes or sends garbage; writes in
order, a full socket finished once it takes more, a failed write; and ConsumerServices on them
(the next pulls of a read leave before its decodes; pulls for a broker without a connection
wait for the one the pull actor makes, in order, or fail when it cannot; a closed connection
fails its pulls and the next pull asks for a new one; a pull whose time passes gets no
answer)."""

from __future__ import annotations

import os
import random
import select
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
from actors.client.consumer.consume_message_service import ConsumeExecutor
from actors.client.consumer.consumer_services import ConsumerServices
from actors.client.consumer.shared_pull_connection import (
    PullDeadlines,
    SharedPullConnections,
)
from actors.client.event_loop import EventLoop
from actors.client.records import PullStatus
from actors.client.remoting_conn import MAX_FRAME
from protocol.codes import RPC_TYPE_RESPONSE, ResponseCode
from protocol.command import RemotingCommand
from protocol.framing import FrameDecoder

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
        self.kept: list[cc.PullBody] = []  # each FOUND body as handed over

    def on_answers(self, answers: list[tuple[cc.PullAnswer, cc.PullBody]]) -> None:
        self.answers += [(a.rid, a.status, a.next_begin, bytes(t)) for a, t in answers]
        self.kept += [t for a, t in answers if a.status == PullStatus.FOUND.value]

    def on_lost(self, conn_id: int, addr: str, reason: str) -> None:
        self.lost.append((conn_id, addr, reason))


def _adopted(loop: EventLoop, seen: _Seen, user: socket.socket,
             conn_id: int) -> SharedPullConnections:  # fmt: skip
    """SharedPullConnections owning user's connection to ADDR (user's own copy is closed),
    telling `seen`."""
    conns = SharedPullConnections(loop, cc.PullCommandFrames(None, 0), PullDeadlines(),
                                  seen.on_answers, seen.on_lost)
    conns.adopt(conn_id, ADDR, os.dup(user.fileno()))
    user.close()
    return conns


@pytest.mark.parametrize("seed", range(6))
def test_the_reader_hands_over_every_answer_whole_across_any_cuts(loop: EventLoop,
                                                                  seed: int) -> None:
    """Answers written in random pieces arrive whole and in order: found bodies (one over
    1 MiB), no new message, a broker error with its remark (some longer than the reader's
    header buffer); each found body is handed over
    in a buffer of its own, holding the body alone, that no later read touches; then the
    broker closes and the reader says so once, with the connection closed."""
    rnd = random.Random(seed)
    big = rnd.randbytes((1 << 20) + 12345)
    want: list[tuple[int, int, int, bytes]] = []
    stream = b""
    for rid in range(1, 40):
        kind = rnd.randrange(5)
        if kind == 4:  # a header longer than the connection's header buffer
            long_remark = "busy " * rnd.randrange(900, 1200)
            stream += _answer(rid, ResponseCode.SYSTEM_BUSY, remark=long_remark)
            want.append((rid, cc.BROKER_ERROR, ResponseCode.SYSTEM_BUSY, long_remark.encode()))
        elif kind == 0:
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
    reader = _adopted(loop, seen, user, 3)
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
    found = [w[3] for w in want if w[1] == 0]
    assert all(type(k) is bytearray for k in seen.kept)
    assert [bytes(k) for k in seen.kept] == found  # as handed over: no later read reused them
    assert len({id(k) for k in seen.kept}) == len(found)
    broker.close()
    _wait(lambda: seen.lost, "the close")
    assert seen.lost == [(3, ADDR, "closed by peer")]
    assert not reader.conns


@pytest.mark.parametrize(("length", "why"), [
    (b"\xff\xff\xff\xff", "bad frame: bad frame length -1"),  # signed, as Java's int
    # one byte over FrameDecoder's limit (16 MiB with the length field): the same rule
    (struct.pack(">i", MAX_FRAME - 3), f"bad frame: frame of {MAX_FRAME + 1} bytes exceeds"),
    # a header longer than its frame
    (struct.pack(">iI", 8, 100), "bad frame: header length 100 exceeds frame of 8 bytes"),
])
def test_a_frame_that_cannot_be_one_closes_the_connection(loop: EventLoop, length: bytes,
                                                          why: str) -> None:  # fmt: skip
    broker, user = socket.socketpair()
    seen = _Seen()
    reader = _adopted(loop, seen, user, 1)
    broker.sendall(_answer(5, ResponseCode.PULL_NOT_FOUND) + length + b"junk")
    _wait(lambda: seen.lost, "the close")
    assert [a[0] for a in seen.answers] == [5]  # what came before is still handed over
    assert seen.lost[0][2].startswith(why), seen.lost
    assert not reader.conns
    with pytest.raises(OSError):  # our copy is closed: the broker sees the close
        for _ in range(100):  # bounded
            broker.sendall(b"x" * 65536)
    broker.close()


def _frames_of(sock: socket.socket, n: int) -> list[bytes]:
    """The next n frames the peer reads from sock (bounded in time)."""
    dec = FrameDecoder(MAX_FRAME)
    got: list[bytes] = []
    sock.settimeout(5)
    for _ in range(10_000):  # bounded: each recv waits at most 5 s
        if len(got) >= n:
            break
        data = sock.recv(65536)
        assert data, "closed before every frame arrived"
        got += [bytes(f) for f in dec.feed(data)]
    return got


def test_pulls_are_written_in_order_and_what_a_full_socket_leaves_follows(
        loop: EventLoop) -> None:
    """Frames written from several threads reach the broker whole, each thread's in its
    order; those a full socket did not take leave once it takes more (EPOLLOUT); a broker
    without a connection is not written."""
    broker, user = socket.socketpair()
    user.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    seen = _Seen()
    conns = _adopted(loop, seen, user, 1)
    assert conns.has(ADDR) and not conns.has("127.0.0.1:1")
    assert not conns.write("127.0.0.1:1", [b"lost"])
    frames = {t: [RemotingCommand(11, opaque=t * 1000 + i, body=b"b" * 3000).encode()
                  for i in range(200)] for t in range(3)}  # ~1.8 MB: more than the socket takes

    def writer(t: int) -> None:
        for i in range(0, 200, 5):
            assert conns.write(ADDR, frames[t][i : i + 5])

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert conns.conns[1].out, "the socket was full: some frames wait for EPOLLOUT"
    got = [RemotingCommand.decode(memoryview(f)).opaque for f in _frames_of(broker, 600)]
    for t in range(3):
        assert [o for o in got if o // 1000 == t] == [t * 1000 + i for i in range(200)]
    _wait(lambda: not conns.conns[1].out, "the out buffer drained")
    assert not seen.lost
    conns.close_all()
    broker.close()


def test_a_failed_write_closes_the_connection_and_is_told_once(loop: EventLoop) -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    user = socket.create_connection(srv.getsockname())
    peer, _ = srv.accept()
    seen = _Seen()
    conns = _adopted(loop, seen, user, 4)
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    peer.close()  # a reset
    for _ in range(200):  # bounded in count and time
        if not conns.write(ADDR, [b"x" * 1000]):
            break
        time.sleep(0.005)
    _wait(lambda: seen.lost, "the failure told")
    time.sleep(0.05)
    assert len(seen.lost) == 1 and seen.lost[0][:2] == (4, ADDR)
    assert seen.lost[0][2].startswith(("send failed", "recv failed", "closed by peer"))
    assert not conns.has(ADDR) and not conns.conns
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


def _records(end: ch.ChannelEnd, n: int) -> list[ch.Record]:
    """The next n records that arrive at a channel end (bounded in time; the end stays
    non-blocking, as the runtime keeps it)."""
    got: list[ch.Record] = []
    deadline = time.monotonic() + 5
    while len(got) < n and time.monotonic() < deadline:  # bounded in time
        select.select([end.sock], [], [], 0.1)
        records = end.read_records()
        assert records is not None, "the channel closed"
        got += records
    return got


def _actor_records(actor: ch.ChannelEnd, n: int) -> list[ch.TypedRecord]:
    return [ch.read_record(k, p) for k, p in _records(actor, n)]


def _services(loop: EventLoop) -> tuple[ConsumerServices, ch.ChannelEnd, ch.ChannelEnd]:
    """ConsumerServices over plain TCP with a pull channel (its end, and the pull actor's)."""
    handle = SimpleNamespace(runtime=SimpleNamespace(loop=loop), client_id="c@1",
                             config=SimpleNamespace(tls=None, credentials=None,
                                                    serialize_type=0))  # fmt: skip
    services = ConsumerServices(handle, 1000.0, 1000.0, 1000.0)  # type: ignore[arg-type]
    assert services.direct
    user_sock, actor_sock = socket.socketpair()
    end, actor = ch.ChannelEnd(user_sock), ch.ChannelEnd(actor_sock)
    end.take_fds()  # as the runtime's accepted ends do
    services.pull.on_open(end)
    return services, end, actor


def _hand_over(services: ConsumerServices, end: ch.ChannelEnd, actor: ch.ChannelEnd,
               conn_id: int) -> socket.socket:
    """Play the pull actor: hand a new connection over (ConnShared); the broker's end."""
    broker, conn = socket.socketpair()
    rec = cc.ConnShared(conn_id, ADDR)
    assert actor.send_with_fds(ch.encode_record(rec.KIND, rec.encode()), [conn.fileno()])
    conn.close()  # the pull actor keeps no copy
    _deliver(services, end)
    return broker


def _deliver(services: ConsumerServices, end: ch.ChannelEnd) -> None:
    """Hand the next records the pull actor wrote to the services, as the I/O thread does."""
    records = _records(end, 1)
    assert records
    done = threading.Event()

    def on_io() -> None:
        try:
            services.pull.on_records(end, records)
        finally:
            done.set()

    services.runtime.loop.call_soon(on_io)
    assert done.wait(5)


def _opaques(broker: socket.socket, n: int) -> list[int]:
    return [RemotingCommand.decode(memoryview(f)).opaque for f in _frames_of(broker, n)]


@pytest.fixture
def unconnected(loop: EventLoop) -> Iterator[tuple[ConsumerServices, ch.ChannelEnd,
                                                   ch.ChannelEnd, _Owner]]:  # fmt: skip
    """ConsumerServices with no broker connection yet: its pull channel's end, the pull
    actor's, and a PullCallback."""
    services, end, actor = _services(loop)
    try:
        yield services, end, actor, _Owner(services, [])
    finally:
        services.closed = True
        services.conns.close_all()
        end.close()
        actor.close()


@pytest.fixture
def shared(loop: EventLoop) -> Iterator[tuple[ConsumerServices, ch.ChannelEnd, socket.socket,
                                              list[str]]]:  # fmt: skip
    """ConsumerServices with one broker connection the pull actor handed over (the pull
    actor's channel end and the broker's end returned)."""
    services, end, actor = _services(loop)
    broker = _hand_over(services, end, actor, 9)
    assert list(services.conns.conns) == [9]
    events: list[str] = []
    write = services.conns.write

    def noting_write(addr: str, frames: list[bytes]) -> bool:
        events.append(f"write {len(frames)}")
        return write(addr, frames)

    services.conns.write = noting_write  # type: ignore[method-assign]
    try:
        yield services, actor, broker, events
    finally:
        services.closed = True
        services.conns.close_all()
        for s in (end, actor, broker):
            s.close()


def test_a_read_of_a_shared_connection_writes_its_next_pulls_before_its_decodes(
        shared: tuple[ConsumerServices, ch.ChannelEnd, socket.socket, list[str]]) -> None:
    services, _actor, broker, events = shared
    owner = _Owner(services, events)
    rids = [services.new_pull(owner) for _ in range(3)]  # as if sent before
    for rid in rids:
        services.deadlines.sent(rid, ADDR, 30_000)
    broker.sendall(b"".join(_answer(rid, body=b) for rid, b in zip(rids, [b"AA", b"BB", b"CC"],
                                                                      strict=True)))  # fmt: skip
    _wait(lambda: len(events) >= 4, "the pass")
    assert events == ["write 3", "decode AA", "decode BB", "decode CC"]
    # the next pulls went to the broker, each under its request id
    assert sorted(_opaques(broker, 3)) == sorted(services.deadlines.out)
    assert [r[:2] for r in owner.results] == [(rid, 0) for rid in rids]


def test_a_sparse_answers_next_pull_is_made_after_the_hand_over_to_its_worker(
        shared: tuple[ConsumerServices, ch.ChannelEnd, socket.socket, list[str]],
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """A single message handed to an idle consume worker with a fast handler: the worker
    runs it before the I/O thread makes the next pull (after_wake), and that pull is written
    in the pass's one write."""
    import actors.client.consumer.consumer_services as cs

    monkeypatch.setattr(cs, "HAND_OVER_S", 10.0)  # a loaded host's wake-up is not a failure
    services, _actor, broker, events = shared
    ex = ConsumeExecutor(2, "sparse")
    ex.start()
    try:
        _wait(lambda: ex.idle == 2, "idle workers")
        ex.cost_s = 1e-5  # measured fast: the pass hands the worker the GIL

        class _Handled:
            def run(self) -> None:
                events.append("handler")

        class _Sparse:
            def on_pull_result(self, answer: cc.PullAnswer, tail: memoryview) -> None:
                ex.submit([_Handled()])
                services.after_wake(lambda: (events.append("pull"), _pull(services, self)))

        rid = services.new_pull(_Sparse())  # type: ignore[arg-type]
        services.deadlines.sent(rid, ADDR, 30_000)
        broker.sendall(_answer(rid, body=b"M"))
        _wait(lambda: "write 1" in events, "the next pull's write")
        assert events == ["handler", "pull", "write 1"]
        assert len(_opaques(broker, 1)) == 1
    finally:
        assert ex.shutdown(5)


def test_a_shared_connection_that_closes_fails_its_pulls_and_the_next_pull_asks_again(
        shared: tuple[ConsumerServices, ch.ChannelEnd, socket.socket, list[str]]) -> None:
    services, actor, broker, events = shared
    owner = _Owner(services, events)
    rids = [_pull(services, owner) for _ in range(2)]
    other = services.new_pull(owner)
    services.deadlines.sent(other, "127.0.0.1:20911", 30_000)  # another broker's
    assert _opaques(broker, 2) == rids  # written on the connection, in order
    broker.close()
    _wait(lambda: len(owner.results) == 2, "the failed pulls")
    assert sorted(r[0] for r in owner.results) == sorted(rids)
    assert all(r[1] == cc.NO_ANSWER and r[2] == b"closed by peer" for r in owner.results)
    assert list(services.deadlines.out) == [other]  # the other broker's pull is still out
    assert not services.conns.conns
    again = _pull(services, owner)
    assert _actor_records(actor, 1) == [cc.ConnWanted(ADDR)]  # nothing was told before it
    assert services.deadlines.out.keys() == {other, again}


def test_pulls_wait_in_order_for_the_connection_the_pull_actor_makes(
        unconnected: tuple[ConsumerServices, ch.ChannelEnd, ch.ChannelEnd, _Owner]) -> None:
    """The first pulls for a broker ask for a connection once and wait; pulls made meanwhile
    wait behind them; once it is handed over they are written in order, then the next ones
    after them. A pull that timed out while waiting is not written."""
    services, end, actor, owner = unconnected
    first = [_pull(services, owner) for _ in range(3)]
    assert _actor_records(actor, 1) == [cc.ConnWanted(ADDR)]
    late = _pull(services, owner, timeout_ms=0)
    services._scan()  # the scan _start arms: `late` is out of time
    _wait(lambda: owner.results, "the time-out")
    assert owner.results == [(late, cc.NO_ANSWER, b"pull timed out")]
    more = _pull(services, owner)
    broker = _hand_over(services, end, actor, 1)
    after = _pull(services, owner)
    assert _opaques(broker, 5) == [*first, more, after]
    assert not services.conns.waiting
    # a second connection for the broker (an ask repeated) is closed, not used
    second = _hand_over(services, end, actor, 2)
    second.settimeout(5)
    assert second.recv(10) == b"" and list(services.conns.conns) == [1]
    second.close()
    broker.close()


def test_a_broker_whose_waiting_pulls_all_timed_out_asks_again(
        unconnected: tuple[ConsumerServices, ch.ChannelEnd, ch.ChannelEnd, _Owner]) -> None:
    """The pull actor never answered (its answer lost): once every pull waiting for the
    connection has timed out, the next pull asks again."""
    services, _end, actor, owner = unconnected
    rid = _pull(services, owner, timeout_ms=0)
    assert _actor_records(actor, 1) == [cc.ConnWanted(ADDR)]
    _pull(services, owner, timeout_ms=0)  # waits behind it: not asked twice
    services._scan()
    _wait(lambda: len(owner.results) == 2, "the time-outs")
    assert owner.results[0] == (rid, cc.NO_ANSWER, b"pull timed out")
    assert not services.conns.waiting
    _pull(services, owner)
    assert _actor_records(actor, 1) == [cc.ConnWanted(ADDR)]


def test_pulls_for_a_broker_the_pull_actor_cannot_reach_fail_and_ask_again(
        unconnected: tuple[ConsumerServices, ch.ChannelEnd, ch.ChannelEnd, _Owner]) -> None:
    services, end, actor, owner = unconnected
    rids = [_pull(services, owner) for _ in range(2)]
    assert _actor_records(actor, 1) == [cc.ConnWanted(ADDR)]
    failed = cc.ConnFailed(ADDR, "connection refused")
    actor.queue(failed.KIND, failed.encode())
    assert actor.flush()
    _deliver(services, end)
    assert owner.results == [(rid, cc.NO_ANSWER, b"connection refused") for rid in rids]
    assert not services.deadlines.out and not services.conns.waiting
    _pull(services, owner)
    assert _actor_records(actor, 1) == [cc.ConnWanted(ADDR)]


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
