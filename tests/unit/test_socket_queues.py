"""The console's channel depth (deploy/console/socket_queues.py): the unix_diag dump parsed
from bytes built here, and the live reader against a socket pair with bytes left unread."""

from __future__ import annotations

import os
import socket
import struct

import pytest

from deploy.console import socket_queues as sq


def _msg(ino: int, rqueue: int, stype: int = socket.SOCK_STREAM, state: int = 1) -> bytes:
    body = struct.pack("=BBBBIII", socket.AF_UNIX, stype, state, 0, ino, 0, 0)
    attr = struct.pack("=HH", 12, sq.UNIX_DIAG_RQLEN) + struct.pack("=II", rqueue, 0)
    other = struct.pack("=HH", 6, 0) + b"ab" + b"\0\0"  # a name attribute, padded
    payload = body + other + attr
    return struct.pack("=IHHII", 16 + len(payload), sq.SOCK_DIAG_BY_FAMILY, 2, 1, 0) + payload


def _done() -> bytes:
    return struct.pack("=IHHII", 20, sq.NLMSG_DONE, 2, 1, 0) + b"\0\0\0\0"


def test_parse_dump_keeps_stream_sockets_that_do_not_listen() -> None:
    data = (_msg(7, 100) + _msg(8, 3, state=sq.TCP_LISTEN)
            + _msg(9, 50, stype=socket.SOCK_DGRAM) + _msg(10, 0))  # fmt: skip
    assert sq.parse_dump(data) == ({7: 100, 10: 0}, False)
    assert sq.parse_dump(_msg(11, 5) + _done()) == ({11: 5}, True)


def test_parse_dump_reports_a_refused_dump() -> None:
    err = struct.pack("=IHHII", 20, sq.NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", -1)
    with pytest.raises(OSError):
        sq.parse_dump(err)


def test_unread_bytes_of_a_socket_pair() -> None:
    a, b = socket.socketpair()
    try:
        a.sendall(b"x" * 1234)
        assert sq.unix_queues()[os.fstat(b.fileno()).st_ino] == 1234
        assert sq.unix_queue_bytes([os.getpid()])[os.getpid()] >= 1234
        b.recv(4096)
        assert sq.unix_queues()[os.fstat(b.fileno()).st_ino] == 0
    finally:
        a.close()
        b.close()
