"""How many bytes wait unread in each process's Unix stream sockets: the depth of the actor
channels (actors.runtime.channel), as `ss -x` shows it in Recv-Q.

Ours (RocketMQ has no such thing). Linux answers this over netlink (sock_diag, unix_diag with
UDIAG_SHOW_RQLEN): one dump of every Unix socket's inode and receive-queue length, matched to
processes by the `socket:[inode]` links of /proc/<pid>/fd. Listening sockets (whose queue is a
backlog of connections, not bytes) are left out. The parse is a plain function over the dump's
bytes; `unix_queue_bytes` does the I/O.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable

from deploy.procinfo import socket_inodes

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x01, 0x300
NLMSG_DONE, NLMSG_ERROR = 3, 2
UDIAG_SHOW_RQLEN = 0x10
UNIX_DIAG_RQLEN = 4
TCP_LISTEN = 10
ALL_STATES = 0xFFFFFFFF

_NLMSG = struct.Struct("=IHHII")  # len, type, flags, seq, pid
_REQ = struct.Struct("=BBHIIIII")  # family, protocol, pad, states, ino, show, cookie[2]
_MSG = struct.Struct("=BBBBII")  # family, type, state, pad, ino, cookie (first half)
_RTA = struct.Struct("=HH")  # len, type
_RQLEN = struct.Struct("=II")  # rqueue, wqueue


def _align(n: int) -> int:
    return (n + 3) & ~3


def parse_dump(data: bytes) -> tuple[dict[int, int], bool]:
    """({inode: bytes queued to read} of the stream sockets that are not listening, done) from
    one recv of a unix_diag dump; done once NLMSG_DONE is seen."""
    out: dict[int, int] = {}
    at = 0
    while at + _NLMSG.size <= len(data):
        length, kind, _flags, _seq, _pid = _NLMSG.unpack_from(data, at)
        if length < _NLMSG.size:
            break
        if kind == NLMSG_DONE:
            return out, True
        if kind == NLMSG_ERROR:
            (errno,) = struct.unpack_from("=i", data, at + _NLMSG.size)
            raise OSError(-errno, "sock_diag refused the dump")
        body = at + _NLMSG.size
        _family, stype, state, _pad, ino, _cookie = _MSG.unpack_from(data, body)
        rta = body + _MSG.size + 4  # the cookie's second half
        end = at + length
        while rta + _RTA.size <= end:
            rlen, rtype = _RTA.unpack_from(data, rta)
            if rlen < _RTA.size:
                break
            if rtype == UNIX_DIAG_RQLEN and stype == socket.SOCK_STREAM and state != TCP_LISTEN:
                out[ino] = _RQLEN.unpack_from(data, rta + _RTA.size)[0]
            rta += _align(rlen)
        at += _align(length)
    return out, False


def unix_queues() -> dict[int, int]:
    """{inode: unread bytes} of every Unix stream socket of this network namespace."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(5.0)
        req = _REQ.pack(socket.AF_UNIX, 0, 0, ALL_STATES, 0, UDIAG_SHOW_RQLEN, 0, 0)
        nl.send(_NLMSG.pack(_NLMSG.size + len(req), SOCK_DIAG_BY_FAMILY,
                            NLM_F_REQUEST | NLM_F_DUMP, 1, 0) + req)  # fmt: skip
        found: dict[int, int] = {}
        for _ in range(100_000):  # bounded: a dump is a few pages per thousand sockets
            part, done = parse_dump(nl.recv(1 << 16))
            found.update(part)
            if done:
                break
        return found


def unix_queue_bytes(pids: Iterable[int]) -> dict[int, int]:
    """{pid: unread bytes over its Unix stream sockets}."""
    queues = unix_queues()
    return {pid: sum(queues.get(ino, 0) for ino in socket_inodes(pid)) for pid in pids}
