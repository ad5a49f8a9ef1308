"""FrameServer on real loopback sockets: watched one descriptor at a time, maxConnections, the
rate-limited refusal line, nothing logged per connection, connections reset when a
reset_if_killed server's process is killed and closed gracefully when it closes them."""

from __future__ import annotations

import logging
import select
import socket
import time
from typing import Any

import pytest

from actors.runtime.tcp import REFUSAL_LOG_S, FrameServer, RefusalLog


class _Watcher:
    """Records watch / unwatch calls (what WatchingActor does with its epoll)."""

    def __init__(self) -> None:
        self.fds: set[int] = set()
        self.calls = 0

    def watch(self, fd: int) -> None:
        self.fds.add(fd)
        self.calls += 1

    def unwatch(self, fd: int) -> None:
        self.fds.discard(fd)
        self.calls += 1


def _serve(server: FrameServer, watcher: _Watcher, seconds: float) -> None:
    """Hand readiness of the watched descriptors to the server for a while (bounded)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ready, _, _ = select.select(list(watcher.fds), [], [], 0.01)
        for fd in ready:
            server.handle_ready(fd, time.monotonic(), time.monotonic_ns())


def _server(limit: int) -> tuple[FrameServer, _Watcher, list[Any]]:
    watcher = _Watcher()
    closed: list[Any] = []
    server = FrameServer(lambda conn, frames, ns: None, closed.append, watcher=watcher,
                         max_connections=limit, name="test")  # fmt: skip
    server.listen("127.0.0.1", 0)
    return server, watcher, closed


def test_accepts_and_closes_watching_one_descriptor_at_a_time(caplog: Any) -> None:
    server, watcher, closed = _server(100)
    port = server.listener.getsockname()[1]  # type: ignore[union-attr]
    try:
        with caplog.at_level(logging.DEBUG, logger="actors.runtime.tcp"):
            clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(50)]
            _serve(server, watcher, 0.3)
            assert len(server.conns) == 50
            assert watcher.fds == {server.listen_fd, *server.by_fd}
            for c in clients:
                c.close()
            _serve(server, watcher, 0.3)
        assert server.conns == {} and len(closed) == 50
        assert watcher.fds == {server.listen_fd}
        assert caplog.records == []  # nothing per connection
    finally:
        server.close_all()
    assert watcher.fds == set()


def test_connections_beyond_the_cap_are_closed_and_reported_once(caplog: Any) -> None:
    server, watcher, _closed = _server(3)
    port = server.listener.getsockname()[1]  # type: ignore[union-attr]
    held = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    extra = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    try:
        with caplog.at_level(logging.WARNING, logger="actors.runtime.tcp"):
            _serve(server, watcher, 0.3)
        assert len(server.conns) == 3
        for s in extra:
            s.settimeout(2.0)
            try:
                assert s.recv(1) == b""
            except ConnectionResetError:
                pass
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 1 and "maxConnections=3 reached" in lines[0], lines
        assert server.refusals.total == 4
    finally:
        for s in held + extra:
            s.close()
        server.close_all()


@pytest.mark.parametrize("gap_s", [0.0, REFUSAL_LOG_S])
def test_refusal_log_counts_between_lines(caplog: Any, gap_s: float) -> None:
    log = RefusalLog("x", 5)
    with caplog.at_level(logging.WARNING, logger="actors.runtime.tcp"):
        log.refused(("10.0.0.1", 1), 100.0)
        log.refused(("10.0.0.2", 2), 100.0 + gap_s / 2)
        log.refused(("10.0.0.3", 3), 100.0 + gap_s)
    lines = [r.getMessage() for r in caplog.records]
    if gap_s:
        assert len(lines) == 2 and "refused 2 connection(s)" in lines[1]
    else:
        assert len(lines) == 1 and log.pending == 2


def test_gathered_frames_reach_the_peer_whole_and_in_order_across_partial_writes() -> None:
    """Conn.queue keeps frames as views and writes them with one sendmsg; what a full socket
    did not take moves into the out buffer, ahead of frames queued later; frames queued beyond
    MAX_IOV join the out buffer behind the gathered ones."""
    from actors.runtime.tcp import MAX_IOV, Conn

    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    a.setblocking(False)
    b.setblocking(False)
    conn = Conn(1, a, ("127.0.0.1", 1), 1 << 20, time.monotonic())
    frames = [bytes([i % 251]) * (1000 + 7919 * i % 40000) for i in range(MAX_IOV + 40)]
    expected = b"".join(frames)
    got = bytearray()
    try:
        for i, f in enumerate(frames):  # more than MAX_IOV queued before the first flush
            conn.queue(memoryview(f) if i % 2 else f)
            assert not (conn.iov and conn.out)  # never both (a partial write would misorder)
            if i > MAX_IOV and i % 5 == 4:
                conn.flush()
                assert not (conn.iov and conn.out)
        for _ in range(10_000):  # bounded: drain the peer while flushing the rest
            done = conn.flush()
            try:
                while chunk := b.recv(1 << 16):
                    got += chunk
            except BlockingIOError:
                pass
            if done and len(got) == len(expected):
                break
        assert not conn.closed
        assert bytes(got) == expected
    finally:
        a.close()
        b.close()


def _serve_until_killed(reset_if_killed: bool, report: Any) -> None:
    """A forked child: one FrameServer, its port and each accept reported on a pipe, served
    until the parent kills it (bounded: 30 s)."""
    server, watcher, _closed = _server(10)
    server.reset_if_killed = reset_if_killed
    report.send(server.listener.getsockname()[1])  # type: ignore[union-attr]
    end = time.monotonic() + 30.0
    told = 0
    while time.monotonic() < end:
        _serve(server, watcher, 0.05)
        if len(server.conns) > told:
            told = len(server.conns)
            report.send(told)


@pytest.mark.parametrize("reset", [True, False], ids=["reset_if_killed", "default"])
def test_a_killed_servers_connections_are_reset_only_when_asked(reset: bool) -> None:
    """SIGKILL closes the process's descriptors: with reset_if_killed (the RemotingServer)
    every client reads ECONNRESET (a Java client then fails its pending requests at once),
    else the end of the stream (the name server)."""
    import multiprocessing
    import os
    import signal

    ctx = multiprocessing.get_context("fork")
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=_serve_until_killed, args=(reset, theirs), daemon=True)
    child.start()
    client = None
    try:
        assert ours.poll(10.0)
        port = ours.recv()
        client = socket.create_connection(("127.0.0.1", port), timeout=10.0)
        assert ours.poll(10.0) and ours.recv() == 1  # accepted
        assert child.pid is not None
        os.kill(child.pid, signal.SIGKILL)
        child.join(10.0)
        assert child.exitcode == -signal.SIGKILL
        if reset:
            with pytest.raises(ConnectionResetError):
                client.recv(1)
        else:
            assert client.recv(1) == b""
    finally:
        if client is not None:
            client.close()
        if child.is_alive() and child.pid is not None:
            os.kill(child.pid, signal.SIGKILL)
            child.join(10.0)


def test_the_servers_own_close_is_graceful_whoever_closes_last() -> None:
    """A close the server makes (idle, bad input, asked, shutdown) turns the reset off first:
    a processor holding a duplicate of the socket (actors.runtime.direct_reply) closes it
    later, and the client still gets the bytes written before and then the end of the stream."""
    import os

    from actors.runtime.tcp import LINGER_OFF, LINGER_RESET

    server, watcher, closed = _server(10)
    server.reset_if_killed = True
    port = server.listener.getsockname()[1]  # type: ignore[union-attr]
    client = socket.create_connection(("127.0.0.1", port), timeout=10.0)
    dup = None
    try:
        _serve(server, watcher, 0.2)
        [conn] = server.conns.values()
        assert conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, 8) == LINGER_RESET
        dup = socket.socket(fileno=os.dup(conn.fd))  # the direct-reply processor's copy
        assert server.send(conn.id, b"last words")
        assert server.flush(time.monotonic())
        server.close(conn.id, "idle")
        assert closed == [conn]
        assert dup.getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, 8) == LINGER_OFF
        dup.close()  # the last holder
        dup = None
        got = b""
        for _ in range(100):  # bounded
            chunk = client.recv(64)
            if not chunk:
                break
            got += chunk
        assert got == b"last words"
    finally:
        client.close()
        if dup is not None:
            dup.close()
        server.close_all()
