"""Direct replies: the connection lock table across processes, descriptor passing on a
channel, and whole-frame writes beside the RemotingServer's own, over real sockets."""

from __future__ import annotations

import multiprocessing
import os
import select
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from actors.runtime.channel import (
    CONN_FD,
    LOCKS,
    REPLY,
    Channel,
    add_conn_record,
    add_locks,
    add_reply,
)
from actors.runtime.direct_reply import ConnLocks, DirectReplies
from actors.runtime.processor_host import ChannelOutbox
from actors.runtime.tcp import Conn

WAIT_S = 10.0


def _hold(fd: int, conn_id: int, held_w: int, release_r: int) -> None:
    """Child process: take the connection's lock, say so, keep it until told (or WAIT_S)."""
    ConnLocks(fd).try_lock(conn_id)
    os.write(held_w, b"1")
    select.select([release_r], [], [], WAIT_S)


@contextmanager
def held_elsewhere(locks: ConnLocks, conn_id: int) -> Iterator[Any]:
    """Another process holds `conn_id`'s lock inside the block (released at its end)."""
    ctx = multiprocessing.get_context("fork")
    held_r, held_w = os.pipe()
    release_r, release_w = os.pipe()
    child = ctx.Process(target=_hold, args=(locks.fd, conn_id, held_w, release_r))
    child.start()
    try:
        ready, _, _ = select.select([held_r], [], [], WAIT_S)
        assert ready, "the child never took the lock"
        yield child
    finally:
        os.write(release_w, b"1")
        child.join(WAIT_S)
        if child.is_alive():
            child.kill()
            child.join(WAIT_S)
        for fd in (held_r, held_w, release_r, release_w):
            os.close(fd)


@pytest.fixture
def tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(server side, client side) of a real loopback TCP connection; the server side is
    non-blocking as the RemotingServer's sockets are."""
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname(), timeout=WAIT_S)
    server, _ = listener.accept()
    listener.close()
    server.setblocking(False)
    yield server, client
    server.close()
    client.close()


def _frame(n: int, fill: int = 0x41) -> bytes:
    return struct.pack(">I", n) + bytes([fill]) * n


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    got = bytearray()
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk:
            break
        got += chunk
    return bytes(got)


def test_a_lock_held_by_another_process_excludes_and_dies_with_it() -> None:
    locks = ConnLocks.create()
    try:
        with held_elsewhere(locks, 5) as child:
            assert not locks.try_lock(5)
            assert locks.try_lock(6)  # one byte per connection: the others are free
            locks.unlock(6)
            child.kill()  # a processor killed while writing: its lock goes with it
            child.join(WAIT_S)
            assert locks.try_lock(5)
            locks.unlock(5)
    finally:
        locks.close()


def test_a_lock_call_the_kernel_refuses_is_no_lock_and_no_crash() -> None:
    locks = ConnLocks.create()
    locks.close()  # EBADF from now on: writers wait (the channel path), nothing raises
    assert not locks.try_lock(1)
    assert not locks.try_lock(2)
    assert locks.refused == 2  # counted (and logged once), not taken for a held lock


def test_descriptors_travel_in_order_with_their_records() -> None:
    a_sock, b_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    rs, proc = Channel(a_sock, "rs"), Channel(b_sock, "pull")
    proc.take_fds()
    r1, w1 = os.pipe()
    r2, w2 = os.pipe()
    try:
        add_reply(rs.out, 3, b"\x00\x00\x00\x01x")  # queued before: written first
        records = bytearray()
        add_locks(records)
        add_conn_record(records, CONN_FD, 9)
        assert rs.send_with_fds(bytes(records), [r1, r2])
        assert not rs.out
        got = proc.read_records()
        assert got is not None
        assert [r[0] for r in got] == [REPLY, LOCKS, CONN_FD]
        assert got[2][1] == 9
        first, second = proc.next_fd(), proc.next_fd()
        assert first is not None and second is not None
        assert os.fstat(first).st_ino == os.fstat(r1).st_ino
        assert os.fstat(second).st_ino == os.fstat(r2).st_ino
        assert proc.next_fd() is None  # a record whose descriptor was lost reads as None
        os.close(first)
        os.close(second)
        # descriptors received and never taken are closed with the channel
        assert rs.send_with_fds(bytes(records), [r1, r2])
        assert proc.read_records() is not None
        pending = list(proc.fds or ())
        assert len(pending) == 2
        proc.close()
        for fd in pending:
            with pytest.raises(OSError):
                os.fstat(fd)
    finally:
        rs.close()
        proc.close()
        for fd in (r1, w1, r2, w2):
            os.close(fd)


def test_direct_write_sends_whole_frames_and_declines_what_it_cannot(
    tcp_pair: tuple[socket.socket, socket.socket],
) -> None:
    server, client = tcp_pair
    locks = ConnLocks.create()
    direct = DirectReplies()
    try:
        direct.adopt_locks(os.dup(locks.fd))
        direct.adopt(7, os.dup(server.fileno()))
        frame = _frame(33_000)
        assert direct.write(7, frame)
        assert _read_exactly(client, len(frame)) == frame
        assert not direct.write(8, frame)  # not shared with us: the channel's
        with held_elsewhere(locks, 7):  # the RemotingServer is writing a frame of its own
            assert not direct.write(7, frame)
        # a client that reads nothing: writes are whole until the queue has no room, then
        # declined (never a part of a frame)
        written = 0
        for _ in range(10_000):
            if not direct.write(7, _frame(200_000, 0x42)):
                break
            written += 1
        else:
            pytest.fail("the send queue never filled")
        assert direct.cut == 0
        assert direct.written == 1 + written  # the first frame, then the whole ones
        assert direct.declined == 3  # unknown connection, lock held, queue full
        client.settimeout(WAIT_S)
        for _ in range(written):
            assert _read_exactly(client, 200_004) == _frame(200_000, 0x42)
        assert direct.write(7, frame)  # room again once the client read
        assert _read_exactly(client, len(frame)) == frame
        direct.forget(7)
        assert not direct.write(7, frame)
    finally:
        direct.close_all()
        locks.close()


def test_remoting_conn_waits_for_the_lock_and_shuts_down_for_every_holder(
    tcp_pair: tuple[socket.socket, socket.socket],
) -> None:
    server, client = tcp_pair
    locks = ConnLocks.create()
    conn = Conn(4, server, ("127.0.0.1", 1), 1 << 20, 0.0)
    dup = os.dup(server.fileno())  # a processor's copy of the socket
    try:
        conn.share(locks)
        conn.queue(b"\x00\x00\x00\x03abc")
        with held_elsewhere(locks, 4):
            assert not conn.flush()  # a processor is mid-frame: nothing of ours goes out
            client.setblocking(False)
            with pytest.raises(BlockingIOError):
                client.recv(16)
            client.setblocking(True)
        assert conn.flush()
        assert not conn.locked
        client.settimeout(WAIT_S)
        assert _read_exactly(client, 7) == b"\x00\x00\x00\x03abc"
        conn.release()  # the server closes it: the client sees the end despite the duplicate
        assert client.recv(16) == b""
    finally:
        os.close(dup)
        locks.close()


def test_outbox_answers_directly_only_for_batches_without_events(
    tcp_pair: tuple[socket.socket, socket.socket],
) -> None:
    server, client = tcp_pair
    a_sock, b_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ch = Channel(b_sock, "pull")
    locks = ConnLocks.create()
    direct = DirectReplies()
    outbox = ChannelOutbox(direct)
    try:
        direct.adopt_locks(os.dup(locks.fd))
        outbox.adopt(CONN_FD, 7, os.dup(server.fileno()))
        frame = _frame(100)
        outbox.reply(ch, 7, frame)
        assert not ch.out  # held until the batch's events are known
        outbox.release(direct_ok=True)
        assert not ch.out
        client.settimeout(WAIT_S)
        assert _read_exactly(client, len(frame)) == frame
        outbox.reply(ch, 7, frame)
        outbox.release(direct_ok=False)  # the batch emitted events: behind them, on the channel
        assert bytes(ch.out).endswith(frame) and ch in outbox.dirty
        outbox.forget(7)
        assert 7 not in direct.conns
    finally:
        direct.close_all()
        ch.close()
        a_sock.close()
        locks.close()
