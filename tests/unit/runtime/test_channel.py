"""Channel record codec, code routing and the processor host, without Thespian."""

from __future__ import annotations

import socket
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.core import Request
from actors.remoting.router import RouteError, RouteTable, request_code
from actors.runtime.channel import (
    CALL,
    CLOSE_CONN,
    CONN_CLOSED,
    LINK,
    REPLY,
    REQUEST,
    Channel,
    RecordDecoder,
    add_call,
    add_conn_record,
    add_link,
    add_reply,
    add_request,
    ip_to_int,
)
from actors.runtime.link_records import ArrivalNotices, encode
from actors.runtime.processor_host import ChannelOutbox, ProcessorHost
from protocol.codes import SerializeType
from protocol.command import RemotingCommand
from store.dispatch_request import DispatchFailed


def _stream() -> tuple[bytes, list[tuple]]:
    out = bytearray()
    add_request(out, 7, 123456789, ip_to_int("10.1.2.3"), 4567, b"\x00\x00\x00\x02{}body")
    add_reply(out, 7, b"\x00\x00\x00\x04abcd")
    add_conn_record(out, CONN_CLOSED, 7)
    add_conn_record(out, CLOSE_CONN, 8)
    add_link(out, encode(ArrivalNotices((("T", 1, 5, 42, 1000),))))
    add_call(out, (1 << 48) + 3, -5, b"\x00\x00\x00\x05call!")
    expected = [
        (REQUEST, 7, 123456789, ("10.1.2.3", 4567), b"\x00\x00\x00\x02{}body"),
        (REPLY, 7, b"\x00\x00\x00\x04abcd"),
        (CONN_CLOSED, 7),
        (CLOSE_CONN, 8),
        (LINK, encode(ArrivalNotices((("T", 1, 5, 42, 1000),)))),
        (CALL, (1 << 48) + 3, -5, b"\x00\x00\x00\x05call!"),
    ]
    return bytes(out), expected


def _norm(recs: list[tuple]) -> list[tuple]:
    return [tuple(bytes(x) if isinstance(x, memoryview) else x for x in r) for r in recs]


def test_records_round_trip() -> None:
    data, expected = _stream()
    assert _norm(RecordDecoder().feed(data)) == expected


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=30))
def test_records_split_anywhere(cuts: list[int]) -> None:
    data, expected = _stream()
    dec = RecordDecoder()
    got: list[tuple] = []
    pos = 0
    for c in cuts:
        got += _norm(dec.feed(data[pos : pos + c]))
        pos += c
    got += _norm(dec.feed(data[pos:]))
    assert got == expected


def test_request_code_all_serializations() -> None:
    for stype in (SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK):
        frame = RemotingCommand.request(310, {"a": "1"}, b"x", serialize_type=stype).encode()[4:]
        assert request_code(frame) == 310
    # JSON with code not first still routes
    hdr = b'{"opaque":1,"code":105}'
    assert request_code(len(hdr).to_bytes(4, "big") + hdr) == 105


def test_request_code_rejects_garbage() -> None:
    for frame in (b"\x00\x00", b"\x00\x00\x10\x00{}", b"\x00\x00\x00\x03{,}", b"\x07\x00\x00\x00"):
        try:
            request_code(frame)
        except RouteError:
            continue
        raise AssertionError(f"accepted {frame!r}")
    assert RouteTable({10: "send"}, "admin").group_for(99) == "admin"


class _Core:
    def __init__(self) -> None:
        self.closed: list[int] = []

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        if req.cmd.code == 1:
            raise ValueError("boom")
        return req.cmd.make_response(0, None, None, req.cmd.body)

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        self.closed.append(conn_id)

    def tick(self, now_ms: int) -> int | None:
        return None


def test_processor_host_batch() -> None:
    a, b = socket.socketpair()
    try:
        ch = Channel(a, "t")
        outbox = ChannelOutbox()
        core = _Core()
        host = ProcessorHost("send", core, outbox, max_wait_ms=200)
        now = time.monotonic_ns()
        reqs = [
            RemotingCommand.request(310, None, b"ok"),
            RemotingCommand.request(1),
            RemotingCommand.request(310, oneway=True),
            RemotingCommand.request(310),  # stale: waited 10 s
        ]
        recs = [
            (REQUEST, 1, now, ("1.2.3.4", 5), memoryview(reqs[0].encode()[4:])),
            (REQUEST, 1, now, ("1.2.3.4", 5), memoryview(reqs[1].encode()[4:])),
            (REQUEST, 1, now, ("1.2.3.4", 5), memoryview(reqs[2].encode()[4:])),
            (REQUEST, 1, now - 10_000_000_000, ("1.2.3.4", 5), memoryview(reqs[3].encode()[4:])),
            (CONN_CLOSED, 1),
        ]
        host.handle(ch, recs)
        replies = [
            RemotingCommand.decode(bytes(r[2])[4:]) for r in RecordDecoder().feed(bytes(ch.out))
        ]
        assert [(r.opaque, r.code) for r in replies] == [
            (reqs[0].opaque, 0), (reqs[1].opaque, 1), (reqs[3].opaque, 2)
        ]
        assert bytes(replies[0].body) == b"ok"
        assert "ValueError: boom" in replies[1].remark
        assert replies[2].remark.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy")
        assert replies[2].remark.endswith("size of queue: 1")
        assert core.closed == [1]
        assert ch in outbox.dirty
        assert ch.flush()
        assert len(b.recv(65536)) > 0
    finally:
        a.close()
        b.close()


def test_processor_host_sheds_only_its_shed_codes() -> None:
    """With shed codes set (the send group's sends), another code the group hosts
    (GET_ALL_DELAY_OFFSET, a reply) is served however long it waited."""
    a, b = socket.socketpair()
    try:
        ch = Channel(a, "t")
        host = ProcessorHost("send", _Core(), ChannelOutbox(), max_wait_ms=200,
                             shed=frozenset({310}))  # fmt: skip
        stale = time.monotonic_ns() - 10_000_000_000
        reqs = [RemotingCommand.request(45, None, b"live"), RemotingCommand.request(310)]
        host.handle(ch, [(REQUEST, 1, stale, ("1.2.3.4", 5), memoryview(r.encode()[4:]))
                         for r in reqs])  # fmt: skip
        replies = [
            RemotingCommand.decode(bytes(r[2])[4:]) for r in RecordDecoder().feed(bytes(ch.out))
        ]
        assert [(r.opaque, r.code) for r in replies] == [(reqs[0].opaque, 0), (reqs[1].opaque, 2)]
        assert bytes(replies[0].body) == b"live"
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("fast", [False, True])
def test_processor_host_lets_a_lost_store_state_end_its_process(fast: bool) -> None:
    """Any other exception of a core is answered SYSTEM_ERROR and the batch goes on; a
    DispatchFailed (a record written but not dispatched) goes through, from the fast path
    and from process() alike, so the actor ends and recovery redoes the dispatch, and
    nothing after it in the batch is run or answered."""
    a, b = socket.socketpair()
    try:
        ch = Channel(a, "t")

        class _Lost(_Core):
            def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
                if req.cmd.code == 310:
                    raise DispatchFailed("T-0 offset 1 at 4096: OSError()")
                return super().process(req, now_ms)

        class _FastLost(_Core):
            def fast_path(self, frame: memoryview, conn_id: int, peer: tuple[str, int],
                          now_ms: int) -> bytes | None:  # fmt: skip
                if RemotingCommand.decode(frame).code == 310:
                    raise DispatchFailed("T-0 offset 1 at 4096: OSError()")
                return None

        core = _FastLost() if fast else _Lost()
        host = ProcessorHost("send", core, ChannelOutbox(), max_wait_ms=200)
        assert (host.fast is not None) is fast
        now = time.monotonic_ns()
        reqs = [RemotingCommand.request(1), RemotingCommand.request(310),
                RemotingCommand.request(45)]  # fmt: skip
        recs = [(REQUEST, 1, now, ("1.2.3.4", 5), memoryview(r.encode()[4:])) for r in reqs]
        with pytest.raises(DispatchFailed):
            host.handle(ch, recs)
        replies = [
            RemotingCommand.decode(bytes(r[2])[4:]) for r in RecordDecoder().feed(bytes(ch.out))
        ]
        assert [(r.opaque, r.code) for r in replies] == [(reqs[0].opaque, 1)]
    finally:
        a.close()
        b.close()


def test_processor_host_hands_client_responses_to_the_core() -> None:
    """A response frame (a client answering a request a core sent) is never answered, and a
    core with on_client_response gets it; a core without one simply drops it."""
    a, b = socket.socketpair()
    try:
        ch = Channel(a, "t")
        got: list[tuple[int, int]] = []

        class _Relay(_Core):
            def on_client_response(self, cmd: RemotingCommand, now_ms: int) -> None:
                got.append((cmd.opaque, cmd.code))

        answer = RemotingCommand.request(307).make_response(0, None, None, b"info")
        rec = (REQUEST, 3, time.monotonic_ns(), ("1.2.3.4", 5), memoryview(answer.encode()[4:]))
        host = ProcessorHost("admin", _Relay(), ChannelOutbox(), max_wait_ms=200)
        host.handle(ch, [rec])
        assert got == [(answer.opaque, 0)] and bytes(ch.out) == b""
        plain = ProcessorHost("admin", _Core(), ChannelOutbox(), max_wait_ms=200)
        plain.handle(ch, [rec])
        assert bytes(ch.out) == b""
    finally:
        a.close()
        b.close()


def test_channel_reads_records_then_none_on_a_corrupt_stream() -> None:
    a, b = socket.socketpair()
    try:
        ch = Channel(a, "t")
        data, expected = _stream()
        b.sendall(data)
        got: list[tuple] = []
        for _ in range(100):  # bounded: the stream may arrive in pieces
            recs = ch.read_records()
            assert recs is not None
            got.extend(recs)
            if len(got) >= len(expected):
                break
            time.sleep(0.01)
        assert _norm(got) == expected
        b.sendall(b"\x00\x00\x00\x02\x7f\x00")  # record type 127 does not exist
        assert ch.read_records() is None
    finally:
        a.close()
        b.close()


def test_tcp_channel_token_handshake() -> None:
    """TCP channels carry pickled state events: a connection must send the token first, and a
    connection that sends nothing (or part of it) holds up neither accept nor the others."""
    import socket as socketlib

    from actors.runtime.channel import connect_channel, listen_address, listen_channel
    from actors.runtime.token_gate import TOKEN_TIMEOUT_S, TokenGate, channel_token

    token = channel_token()
    listener = listen_channel(("127.0.0.1", 0))
    addr = listen_address(listener)
    gate = TokenGate(token, "t")
    good = bad = silent = split = None
    got: list = []
    try:
        silent = connect_channel(addr, "silent")  # no token at all: held, then expired
        good = connect_channel(addr, "good", token=token)
        bad = connect_channel(addr, "bad", token=b"x" * len(token))
        split = socketlib.create_connection(addr)
        split.sendall(token[:5])  # the rest comes later
        t0 = time.monotonic()
        for _ in range(200):  # bounded: every connection accepted, then each one's bytes read
            gate.accept(listener, t0)
            for fd in gate.pending_fds():
                ch = gate.ready(fd)
                if ch is not None:
                    got.append(ch)
            if got and len(gate.pending_fds()) == 2:
                break
            time.sleep(0.005)
        assert len(got) == 1  # good; bad was closed at once, silent and split still pending
        assert len(gate.pending_fds()) == 2
        split.sendall(token[5:] + b"\x00\x00\x00\x0e\x02" + b"\x00" * 8 + b"\x00\x00\x00\x01x")
        for _ in range(200):  # bounded
            for fd in gate.pending_fds():
                ch = gate.ready(fd)
                if ch is not None:
                    got.append(ch)
            if len(got) == 2:
                break
            time.sleep(0.005)
        assert len(got) == 2
        recs = None
        for _ in range(50):  # the bytes after the token belong to the channel
            recs = got[1].read_records()
            if recs:
                break
            time.sleep(0.01)
        assert recs and recs[0][0] == 2 and recs[0][1] == 0
        assert gate.expire(t0 + TOKEN_TIMEOUT_S / 2) is not None  # silent: not late yet
        assert gate.expire(t0 + TOKEN_TIMEOUT_S) is None  # now closed
        assert gate.pending_fds() == []
        add_reply(good.out, 7, b"\x00\x00\x00\x01x")
        assert good.flush()
        recs = None
        for _ in range(50):
            recs = got[0].read_records()
            if recs:
                break
            time.sleep(0.01)
        assert recs and recs[0][1] == 7
    finally:
        for ch in (good, bad, silent):
            if ch is not None:
                ch.close()
        if split is not None:
            split.close()
        for ch in got:
            ch.close()
        gate.close()
        listener.close()


def test_threads_reading_channels_at_once_get_their_own_bytes() -> None:
    """The read path's scratch buffer is per thread: two threads reading their own channels
    at the same time (the user's process reads its client channels on its event loop while
    other threads read theirs) never see each other's bytes."""
    import threading

    from actors.runtime.channel import recv_available

    rounds, size = 2000, 32 * 1024  # one send fits a socketpair's buffer
    errors: list[str] = []

    def reader(tag: int) -> None:
        a, b = socket.socketpair()
        try:
            b.setblocking(False)
            payload = bytes([tag]) * size
            for i in range(rounds):
                a.sendall(payload)
                got = bytearray()
                deadline = time.monotonic() + 10.0
                while len(got) < size and time.monotonic() < deadline:
                    data, eof, err = recv_available(b, size)
                    assert not eof and err is None
                    got += data
                if got != payload:
                    errors.append(f"thread {tag} round {i}: {len(got)} bytes, "
                                  f"{sum(1 for x in got if x != tag)} foreign")
                    return
        finally:
            a.close()
            b.close()

    threads = [threading.Thread(target=reader, args=(t,)) for t in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60.0)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
