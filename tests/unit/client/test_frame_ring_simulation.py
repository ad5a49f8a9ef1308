"""Pull answers shared through rings (actors.client.frame_ring): RingSpace under seeded random
reservations and out-of-order releases, the reader over real sockets, the claim of a frame by
its answer, and the user's read-only mapping.

A failing seed is printed by the assertion and replays exactly (`SEEDS` below)."""

from __future__ import annotations

import mmap
import os
import random
import socket
import struct
from collections.abc import Callable, Iterator

import pytest

from actors.client.consumer.message_decoder import decode_pull_messages
from actors.client.frame_ring import (
    MappedRings,
    PullRings,
    Recv,
    RingReader,
    RingRef,
    RingSpace,
)
from tests.unit.client.test_pull_api_wrapper import MQ, record, reference

SEEDS = range(2000)


def _check_space(seed: int) -> None:
    rnd = random.Random(seed)
    size = rnd.choice([64, 100, 1000, 4096])
    space = RingSpace(size)
    live: dict[int, int] = {}  # logical start -> n
    for step in range(300):
        if live and (rnd.random() < 0.45 or len(live) > 20):
            start = rnd.choice(sorted(live))  # any order, not only the oldest
            del live[start]
            space.release(start)
        else:
            n = rnd.randint(1, size if rnd.random() < 0.05 else max(1, size // 3))
            start = space.reserve(n)
            if not live:
                assert start is not None, f"seed {seed} step {step}: empty ring refused {n}"
            if start is None:
                continue
            phys = start % size
            assert phys + n <= size, f"seed {seed} step {step}: a reservation wraps"
            for other, m in live.items():
                o = other % size
                assert phys + n <= o or o + m <= phys, \
                    f"seed {seed} step {step}: [{phys}, {phys + n}) overlaps [{o}, {o + m})"
            live[start] = n
        assert space.head - space.tail <= size, f"seed {seed} step {step}: over-committed"
        assert space.live == len(live), f"seed {seed} step {step}: live count"
        if live:
            assert space.tail <= min(live), f"seed {seed} step {step}: tail passed a live one"
    for start in list(live):
        space.release(start)
    assert space.live == 0 and space.tail == space.head
    assert space.reserve(size) is not None, f"seed {seed}: the emptied ring is not whole"


def test_ring_space_keeps_live_reservations_apart_in_every_seed() -> None:
    for seed in SEEDS:
        _check_space(seed)


def test_ring_space_refuses_what_it_cannot_hold_and_unknown_releases() -> None:
    space = RingSpace(100)
    a = space.reserve(60)
    assert a == 0 and space.reserve(50) is None  # 40 left
    b = space.reserve(40)
    assert b == 60
    with pytest.raises(ValueError):
        space.release(10)
    space.release(b)  # out of order: the tail waits for a
    assert space.tail == 0 and space.reserve(1) is None
    space.release(a)
    assert space.tail == space.head == 100 and space.reserve(100) == 100
    with pytest.raises(ValueError):
        space.reserve(101)


class _Env:
    """The user's process as the pull actor sees it (rings handed over, rings retired), and
    what a test opens: closed after it."""

    def __init__(self) -> None:
        self.announced: list[tuple[int, int, bool, int]] = []
        self.retired: list[int] = []
        self.refuse = False
        self._closers: list[Callable[[], object]] = []

    def __call__(self, ring) -> bool:  # type: ignore[no-untyped-def]
        if self.refuse:
            return False
        self.announced.append((ring.ring_id, ring.space.size, ring.single, os.dup(ring.fd)))
        os.close(ring.fd)
        ring.fd = None
        return True

    def pull_rings(self, size: int) -> PullRings:
        rings = PullRings(self, self.retired.append, size=size)
        self._closers.append(rings.close)
        return rings

    def pair(self) -> tuple[socket.socket, socket.socket]:
        """(our non-blocking end, the broker's end)."""
        a, b = socket.socketpair()
        a.setblocking(False)
        self._closers += [a.close, b.close]
        return a, b

    def closing(self, close: Callable[[], object]) -> None:
        self._closers.append(close)

    def close(self) -> None:
        for close in reversed(self._closers):
            close()
        for *_, fd in self.announced:
            os.close(fd)


@pytest.fixture
def env() -> Iterator[_Env]:
    e = _Env()
    yield e
    e.close()


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _read_all(reader: RingReader, source: Recv, want: int,
              before: Callable[[], object] | None = None) -> list[bytes]:  # fmt: skip
    """Read `want` frames (each freed once copied out), calling `before` ahead of each read."""
    got: list[bytes] = []
    for _ in range(100_000):
        if before is not None:
            before()
        slots, closing = reader.read(source)
        assert closing is None
        for slot in slots:
            got.append(bytes(slot.ring.view[slot.at : slot.at + slot.size]))
            assert slot.ring.view.obj is slot.ring.mm
            reader.rings.settle(slot)
        if len(got) == want:
            return got
    raise AssertionError(f"read {len(got)} of {want} frames")


@pytest.mark.parametrize("seed", range(20))
def test_frames_arrive_whole_in_the_ring_however_the_stream_is_cut(env: _Env, seed: int) -> None:
    rnd = random.Random(seed)
    rings = env.pull_rings(64 * 1024)
    a, b = env.pair()
    reader = RingReader(rings, 16 * 1024 * 1024)
    payloads = [os.urandom(rnd.choice([4, 9, 300, 5000, 20_000, 70_000])) for _ in range(40)]
    stream = b"".join(_frame(p) for p in payloads)
    pos = 0

    def send_some() -> None:
        nonlocal pos
        if pos < len(stream):
            n = rnd.randint(1, 9000)
            b.sendall(stream[pos : pos + n])
            pos += n

    got = _read_all(reader, a, len(payloads), send_some)
    assert got == payloads, f"seed {seed}"
    assert reader.ring is not None and reader.ring.space.live == 0
    singles = [r[0] for r in env.announced if r[2]]
    assert len(singles) == sum(len(p) > 16 * 1024 for p in payloads)  # a quarter of 64 KiB
    assert set(rings.rings) == {reader.ring.ring_id}, "a used single ring was kept"
    assert env.retired == singles, "a single ring closed without being retired"


def test_a_full_ring_pauses_the_connection_until_a_release(env: _Env) -> None:
    rings = env.pull_rings(4096)
    a, b = env.pair()
    reader = RingReader(rings, 1 << 20)
    b.sendall(_frame(b"x" * 1000) * 5)
    slots, closing = reader.read(a)
    assert closing is None and len(slots) == 4 and reader.paused  # 4 x 1000 of 4096
    assert not rings.announce_failed  # a release resumes it: no timer
    for s in slots:
        s.claimed = True  # forwarded: held until the user's process releases them
    assert reader.read(a) == ([], None) and reader.paused
    ring = reader.ring
    assert ring is not None
    rings.release(ring.ring_id, slots[0].token)
    more, _ = reader.read(a)
    assert not reader.paused and [bytes(s.ring.view[s.at : s.at + s.size]) for s in more] \
        == [b"x" * 1000]  # fmt: skip
    rings.settle(more[0])  # not forwarded: free at once (behind the live ones)
    rings.release(ring.ring_id, slots[1].token)  # the bytes the next frame needs
    b.sendall(_frame(b"y" * 10) + struct.pack(">i", 1 << 21))
    more, closing = reader.read(a)
    assert len(more) == 1  # the framing's one length rule, its limit the reader's 1 MiB
    assert closing == f"bad frame: frame of {(1 << 21) + 4} bytes exceeds the limit of {1 << 20}"
    with pytest.raises(ValueError):
        rings.release(ring.ring_id, 12345)


def test_a_ring_that_cannot_be_handed_over_holds_reading_back(env: _Env) -> None:
    env.refuse = True
    rings = env.pull_rings(4096)
    a, b = env.pair()
    reader = RingReader(rings, 1 << 20)
    b.sendall(_frame(b"z" * 100))
    assert reader.read(a) == ([], None) and reader.paused
    assert rings.announce_failed  # no release can come for it: the actor retries on a timer
    env.refuse = False
    assert _read_all(reader, a, 1) == [b"z" * 100] and not reader.paused
    assert not rings.announce_failed


def test_an_answer_claims_its_frame_and_the_user_reads_it_there(env: _Env) -> None:
    rings = env.pull_rings(1 << 16)
    a, b = env.pair()
    mapped = MappedRings()
    env.closing(mapped.close)
    reader = RingReader(rings, 1 << 20)
    b.sendall(_frame(b"HEADER" + b"the body"))
    (slot,) = _read_all_slots(reader, a)
    frame = slot.ring.view[slot.at : slot.at + slot.size]
    assert rings.claim(frame[6:]) is None  # not the frame being dispatched
    rings.current = slot
    assert rings.claim(memoryview(b"the body")) is None  # not a view of the ring
    ref = rings.claim(frame[6:])
    assert ref == RingRef(slot.ring.ring_id, slot.token, slot.at + 6, 8)
    assert rings.claim(frame[6:]) is None  # claimed once
    rings.current = None
    rings.settle(slot)
    assert slot.ring.space.live == 1  # held for the user's process
    ring_id, size, _single, fd = env.announced.pop()
    mapped.add(ring_id, size, fd)
    assert bytes(mapped.view(ref)) == b"the body"
    with pytest.raises(ValueError):
        mapped.view(RingRef(ring_id, 0, size - 2, 8))
    mapped.done(ref)
    assert mapped.take_owed() == [(ring_id, slot.token)] and mapped.take_owed() == []
    del frame
    rings.release(ring_id, slot.token)
    assert slot.ring.space.live == 0


def _read_all_slots(reader: RingReader, sock: socket.socket) -> list:  # type: ignore[type-arg]
    for _ in range(1000):
        slots, closing = reader.read(sock)
        assert closing is None
        if slots:
            return slots
    raise AssertionError("no frame")


def test_messages_decoded_from_a_mapping_keep_nothing_of_it() -> None:
    """A pull body read from a ring: each body is copied once into its message, and once the
    decode returns the mapping can be closed (no record holds a view of it); every field
    still reads as the full decoder's."""
    body = b"".join([record(0), record(1, v6=True), record(2, tags=None), record(3),
                     record(4, prepared=True), record(5, compressed=True)])
    fd = os.memfd_create("test-ring")
    os.write(fd, b"\0" * 7 + body)
    mm = mmap.mmap(fd, 7 + len(body), prot=mmap.PROT_READ)
    view = memoryview(mm)
    msgs = decode_pull_messages(view[7:], MQ, None, 5, 99)
    view.release()
    mm.close()  # BufferError if a message kept a view of the ring
    assert msgs == reference(body)
    assert all(type(m.body) is bytes for m in msgs)
    assert msgs[4].transaction_id == msgs[4].msg_id and msgs[0].born_host == "10.0.0.1:9000"


class _Owner:
    group = "cg"

    def __init__(self) -> None:
        self.answers: list[tuple[int, bytes]] = []

    def on_pull_result(self, answer, tail) -> None:  # type: ignore[no-untyped-def]
        self.answers.append((answer.status, bytes(tail)))


def test_the_user_side_reads_answers_in_place_and_survives_a_ring_it_cannot_map(env: _Env) -> None:
    """ConsumerServices' pull channel: a ring handed over with its memfd is mapped and its
    answers read from it, each answer's space released in the pass's write; an answer in a
    ring it could not map reaches its owner as no answer (pulled again later), and is
    released too."""
    from types import SimpleNamespace

    from actors.client import client_channel as ch
    from actors.client.consumer import consumer_channel as cc
    from actors.client.consumer.consumer_services import ConsumerServices

    tls = SimpleNamespace(tls=SimpleNamespace(enable=True), credentials=None,  # rings: TLS
                          serialize_type=0)
    services = ConsumerServices(SimpleNamespace(runtime=SimpleNamespace(loop=None),  # type: ignore[arg-type]
                                                client_id="c@1", config=tls),
                                1000.0, 1000.0, 1000.0)  # fmt: skip
    user_sock, actor_sock = socket.socketpair()
    end = ch.ChannelEnd(user_sock)
    end.take_fds()
    actor = ch.ChannelEnd(actor_sock)
    for close in (services.rings.close, end.close, actor.close):
        env.closing(close)
    rings = env.pull_rings(1 << 16)
    services.pull.on_open(end)
    slot = rings.reserve(RingReader(rings, 1 << 20), 12)
    assert slot is not None
    slot.ring.view[slot.at : slot.at + 12] = b"HEADERbodyXY"
    ring_id, size, _single, fd = env.announced.pop()
    shared = cc.RingShared(ring_id, size)
    assert actor.send_with_fds(ch.encode_record(shared.KIND, shared.encode()), [fd])
    os.close(fd)
    owner = _Owner()
    good, lost = services.new_pull(owner), services.new_pull(owner)
    head = cc.pull_result_head(good, 0, 10, 0, 10, 0)
    actor.send(cc.PULL_AT, head + cc.pull_at_ref(RingRef(ring_id, slot.token, slot.at + 6, 6)))
    head = cc.pull_result_head(lost, 0, 10, 0, 10, 0)
    actor.send(cc.PULL_AT, head + cc.pull_at_ref(RingRef(ring_id + 5, 0, 0, 6)))
    for _ in range(100):
        records = end.read_records()
        assert records is not None
        if records:
            services.pull.on_records(end, records)
        if len(owner.answers) == 2:
            break
    assert owner.answers == [(0, b"bodyXY"), (cc.NO_ANSWER, b"pull ring not mapped")]
    (released,) = [ch.read_record(k, p) for k, p in actor.read_records() or []]
    assert released == cc.RingRelease(((ring_id, slot.token), (ring_id + 5, 0)))
    rings.release(ring_id, slot.token)


def test_a_stalled_connection_holds_back_only_its_own_ring(env: _Env) -> None:
    """A broker that stops mid-frame pins its connection's ring, not the others'."""
    rings = env.pull_rings(8192)
    (a1, b1), (a2, b2) = env.pair(), env.pair()
    stalled, busy = RingReader(rings, 1 << 20), RingReader(rings, 1 << 20)
    b1.sendall(_frame(b"s" * 1500)[:700])  # cut mid-frame, and nothing more comes
    assert stalled.read(a1) == ([], None)
    for i in range(50):  # 50 x 1 KiB through a ring of 8 KiB
        b2.sendall(_frame(bytes([i]) * 1000))
        (slot,), closing = busy.read(a2)
        assert closing is None and slot.ring is not stalled.ring
        assert bytes(slot.ring.view[slot.at : slot.at + slot.size]) == bytes([i]) * 1000
        rings.settle(slot)
    assert not busy.paused


def test_a_closed_connection_frees_its_half_read_frame_and_retires_its_ring(env: _Env) -> None:
    """RemotingClient in ring mode: the broker's connection closes while it waits for space
    and then mid-frame, with answers still held by the user's process: the half-read frame
    is freed at once, nothing waits for space any more, and the ring is retired (closed,
    RingRetired) once the held answers are released."""
    from actors.client.remoting_client import RemotingClient

    rings = env.pull_rings(16384)
    server = socket.create_server(("127.0.0.1", 0))
    client = RemotingClient(rings=rings)
    env.closing(server.close)
    env.closing(client.close)
    addr = f"127.0.0.1:{server.getsockname()[1]}"
    answers: list[object] = []
    client.invoke_async_frame(addr, 1, _frame(b"\x00" * 8), 3000,
                              lambda resp, err: answers.append((resp, err)))
    client.flush_all()
    peer, _ = server.accept()
    sixth = _frame(b"z" * 3000)
    peer.sendall(_frame(b"y" * 3000) * 5 + sixth[:1500])  # then it dies mid-frame
    conn = client._by_fd[client.fds()[0]]
    reader = conn.ring_reader
    assert reader is not None
    held = _read_all_slots(reader, conn.sock)
    assert len(held) == 5 and reader.paused  # 15,000 of 16,384 held: the sixth waits
    for slot in held:
        slot.claimed = True  # forwarded: the user's process holds them
    ring = held[0].ring
    rings.release(ring.ring_id, held[0].token)
    assert reader.resume() and reader.read(conn.sock) == ([], None)  # half of it read
    assert ring.space.live == 5  # four held, the sixth half-read
    peer.close()
    client.close_channel(addr, "closed by peer")
    assert not rings.paused and reader.ring is None
    assert ring.space.live == 4 and env.retired == []  # answers are still out
    for slot in held[1:]:
        rings.release(ring.ring_id, slot.token)
    assert env.retired == [ring.ring_id] and ring.ring_id not in rings.rings
    assert answers and isinstance(answers[0][1], Exception)  # failFast of the request


def test_a_refused_ring_is_not_claimed(env: _Env) -> None:
    rings = env.pull_rings(4096)
    a, b = env.pair()
    reader = RingReader(rings, 1 << 20)
    b.sendall(_frame(b"HEADbody") * 2)
    first, second = _read_all_slots(reader, a)
    rings.current = first
    assert rings.claim(first.ring.view[first.at + 4 : first.at + 8]) is not None
    rings.refuse(first.ring.ring_id)
    rings.current = second
    assert rings.claim(second.ring.view[second.at + 4 : second.at + 8]) is None
    rings.current = None
    rings.settle(second)


def test_over_tls_the_session_decrypts_straight_into_the_ring(env: _Env, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A TLS connection's frames are decrypted into their reservations (no plaintext copy
    first), however the ciphertext is cut."""
    import ssl
    import subprocess
    import threading

    from actors.client.remoting_conn import ChannelWrapper, ReadBuffer, TlsPlaintext
    from actors.runtime.tls import TlsSession, handshake_blocking

    cert, key = tmp_path / "c.pem", tmp_path / "c.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=t",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True, timeout=60,
                   stdin=subprocess.DEVNULL)  # fmt: skip
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.check_hostname = False
    client_ctx.verify_mode = ssl.CERT_NONE
    ours, broker = socket.socketpair()
    env.closing(ours.close)
    env.closing(broker.close)
    payloads = [os.urandom(n) for n in (10, 5000, 40_000, 300, 70_000, 4)]
    stream = b"".join(_frame(p) for p in payloads)

    def serve() -> None:
        with server_ctx.wrap_socket(broker, server_side=True) as tls:
            for i in range(0, len(stream), 7000):  # records cut across frames
                tls.sendall(stream[i : i + 7000])
            tls.recv(1)  # until the client is done

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    session = TlsSession(client_ctx, server_side=False)
    handshake_blocking(ours, session, 10.0)
    ours.setblocking(False)
    conn = ChannelWrapper("broker:1", ours, session)
    rings = env.pull_rings(64 * 1024)
    reader = RingReader(rings, 1 << 20)
    assert _read_all(reader, TlsPlaintext(conn, ReadBuffer().view), len(payloads)) == payloads
    ours.setblocking(True)
    ours.sendall(session.encrypt(b"x"))
    server.join(10)
    assert not server.is_alive()
