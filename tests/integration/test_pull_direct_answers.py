"""Pull answers written by the pull actor itself (actors.runtime.direct_reply) on the real
broker: frames stay whole while the RemotingServer answers other codes on the same
connection, the shared socket is held exactly as long as the connection lives, a connection
the RemotingServer closes ends for the client, and a killed pull actor's replacement gets the
socket again.

The pull actor's descriptors are read from /proc/<pid>/fd and matched with the connection's
server-side socket inode from /proc/net/tcp.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from deploy.wire import BlockingClient
from protocol.codes import RPC_TYPE_RESPONSE, RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.framing import FrameDecoder
from protocol.message import decode_messages
from tests.integration.conftest import cluster_pids
from tests.integration.e2e_helpers import (
    RPC_TIMEOUT_S,
    broker_addr,
    closed_by_server,
    create_topic_cmd,
    heartbeat_cmd,
    msg_props,
    pull_cmd,
    role_pids,
    send_cmd,
    simple_cmd,
    start_real,
    wait_until,
)

pytestmark = pytest.mark.integration

TOPIC = "DirectReplyTopic"
GROUP = "direct_cg"
QUEUES = 4
PER_QUEUE = 64
BODY = b"d" * 1024
ROUNDS = 40
FOUND = int(ResponseCode.SUCCESS)
NOT_FOUND = int(ResponseCode.PULL_NOT_FOUND)
BUSY = int(ResponseCode.SYSTEM_BUSY)
RETRY = int(ResponseCode.PULL_RETRY_IMMEDIATELY)


def _server_inode(broker_port: int, client: socket.socket) -> int | None:
    """The inode of the broker's side of `client`'s connection (/proc/net/tcp)."""
    _host, port = client.getsockname()
    want_local = f"0100007F:{broker_port:04X}"
    want_remote = f"0100007F:{port:04X}"
    with open("/proc/net/tcp", encoding="ascii") as f:
        next(f)
        for line in f:
            cols = line.split()
            if cols[1] == want_local and cols[2] == want_remote:
                return int(cols[9])
    return None


def _holds(pid: int, inode: int) -> bool:
    """True when process `pid` has a descriptor on socket `inode`."""
    target = f"socket:[{inode}]"
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for name in names:
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}") == target:
                return True
        except OSError:
            continue
    return False


def _pull_pid(cluster: Any) -> int:
    pids = wait_until(lambda: role_pids(cluster_pids(cluster), "pull") or None, 15.0)
    assert pids and len(pids) == 1, pids
    return pids[0]


def _fill(addr: tuple[str, int]) -> None:
    with BlockingClient(addr) as cl:
        assert cl.invoke(create_topic_cmd(TOPIC, QUEUES), RPC_TIMEOUT_S).code == 0
        reqs = [send_cmd(TOPIC, BODY, msg_props(tags="t", keys=f"k{i}"), queue_id=i % QUEUES)
                for i in range(QUEUES * PER_QUEUE)]  # fmt: skip
        assert all(r.code == 0 for r in cl.invoke_many(reqs, RPC_TIMEOUT_S))


@pytest.fixture
def filled(local_cluster: Any) -> tuple[Any, tuple[str, int]]:
    """(cluster, broker address) of a real broker holding TOPIC's messages, answering its
    local clients' pulls directly too (by default only clients on other hosts)."""
    cluster = start_real(local_cluster, directReplyToLocalClients="true")
    addr = broker_addr(cluster)
    _fill(addr)
    return cluster, addr


def test_a_client_on_this_host_is_answered_by_the_remoting_server(local_cluster: Any) -> None:
    """By default the pull actor never gets a local client's socket: the RemotingServer writes
    its answers (the kernel moves a woken client onto its writer's CPU; written by the busy
    pull actor, a local consumer shared that CPU with it)."""
    cluster = start_real(local_cluster)
    addr = broker_addr(cluster)
    _fill(addr)
    pull_pid = _pull_pid(cluster)
    with socket.create_connection(addr, timeout=RPC_TIMEOUT_S) as sock:
        decoder = FrameDecoder()
        for i in range(3):
            resp = _exchange(sock, [pull_cmd(GROUP, TOPIC, i % QUEUES, 0)], decoder)
            assert next(iter(resp.values())).code == FOUND
        inode = _server_inode(addr[1], sock)
        assert inode is not None
        time.sleep(0.3)  # a socket passed would be in the pull actor by now
        assert not _holds(pull_pid, inode)


@dataclass
class Consumer:
    """A consumer's connection to the filled broker, and its frame decoder."""

    cluster: Any
    addr: tuple[str, int]
    sock: socket.socket
    decoder: FrameDecoder


@pytest.fixture
def consumer(filled: tuple[Any, tuple[str, int]]) -> Iterator[Consumer]:
    """One client connection to the filled broker (closed after the test)."""
    cluster, addr = filled
    sock = socket.create_connection(addr, timeout=RPC_TIMEOUT_S)
    try:
        yield Consumer(cluster, addr, sock, FrameDecoder())
    finally:
        sock.close()


def _exchange(sock: socket.socket, reqs: list[RemotingCommand], decoder: FrameDecoder,
              timeout_s: float = RPC_TIMEOUT_S, stale: frozenset[int] = frozenset(),
              ) -> dict[int, RemotingCommand]:  # fmt: skip
    """Write the requests in one go, read until each has its answer (bounded); answers to
    `stale` opaques (requests given up on) are skipped."""
    sock.settimeout(timeout_s)
    sock.sendall(b"".join(r.encode() for r in reqs))
    want = {r.opaque for r in reqs}
    got: dict[int, RemotingCommand] = {}
    deadline = time.monotonic() + timeout_s
    while want - set(got):
        assert time.monotonic() < deadline, f"no answer to {sorted(want - set(got))}"
        data = sock.recv(1 << 20)
        assert data, "the broker closed the connection"
        for frame in decoder.feed(data):  # a torn frame would fail to decode here
            resp = RemotingCommand.decode(frame)
            if not resp.flag & RPC_TYPE_RESPONSE or resp.opaque in stale:
                continue  # the broker's own call (consumer ids changed), or a late answer
            assert resp.opaque in want and resp.opaque not in got, resp.opaque
            got[resp.opaque] = resp
    return got


def test_pull_answers_and_other_answers_interleave_whole_on_one_connection(
    consumer: Consumer,
) -> None:
    cluster, addr, sock, decoder = consumer.cluster, consumer.addr, consumer.sock, consumer.decoder
    hb = heartbeat_cmd("direct@test", GROUP, {TOPIC: "*"})
    assert _exchange(sock, [hb], decoder)[hb.opaque].code == 0
    offsets = [0] * QUEUES
    seen = 0
    for i in range(ROUNDS):
        pulls = {q: pull_cmd(GROUP, TOPIC, q, offsets[q], max_nums=8, sys_flag=5,
                             commit_offset=offsets[q]) for q in range(QUEUES)}  # fmt: skip
        others = [  # answered by other processors, written by the RemotingServer
            simple_cmd(int(RequestCode.QUERY_CONSUMER_OFFSET), consumerGroup=GROUP,
                       topic=TOPIC, queueId=i % QUEUES),
            simple_cmd(int(RequestCode.GET_CONSUMER_LIST_BY_GROUP), consumerGroup=GROUP),
            heartbeat_cmd("direct@test", GROUP, {TOPIC: "*"}),
            simple_cmd(int(RequestCode.GET_MAX_OFFSET), topic=TOPIC, queueId=i % QUEUES),
        ]  # fmt: skip
        reqs = [pulls[0], others[0], pulls[1], others[1], pulls[2], others[2], pulls[3],
                others[3]]  # fmt: skip
        got = _exchange(sock, reqs, decoder)
        for other in others:
            assert got[other.opaque].code in (0, int(ResponseCode.QUERY_NOT_FOUND)), (
                got[other.opaque].code, got[other.opaque].remark)
        for q, req in pulls.items():
            resp = got[req.opaque]
            assert resp.code in (FOUND, NOT_FOUND), (resp.code, resp.remark)
            if resp.code == FOUND:
                msgs = decode_messages(bytes(resp.body), check_crc=True)
                assert [m.queue_offset for m in msgs] == list(
                    range(offsets[q], offsets[q] + len(msgs)))
                assert all(m.body == BODY for m in msgs)
                seen += len(msgs)
            offsets[q] = int(resp.ext_fields["nextBeginOffset"])
    assert seen == QUEUES * PER_QUEUE
    inode = _server_inode(addr[1], sock)
    assert inode is not None
    assert _holds(_pull_pid(cluster), inode), "the pull actor never got the socket"


def test_shared_socket_lives_exactly_as_long_as_the_connection(
    filled: tuple[Any, tuple[str, int]],
) -> None:
    cluster, addr = filled
    pull_pid = _pull_pid(cluster)
    socks = [socket.create_connection(addr, timeout=RPC_TIMEOUT_S) for _ in range(8)]
    try:
        inodes = []
        for sock in socks:
            resp = _exchange(sock, [pull_cmd(GROUP, TOPIC, 0, 0)], FrameDecoder())
            assert next(iter(resp.values())).code == FOUND
            inode = _server_inode(addr[1], sock)
            assert inode is not None
            inodes.append(inode)
        assert wait_until(lambda: all(_holds(pull_pid, i) for i in inodes) or None, 5.0)
        # the client closes: the pull actor lets go of its copy
        socks[0].close()
        assert wait_until(lambda: not _holds(pull_pid, inodes[0]) or None, 5.0)
        # the RemotingServer closes (unframeable input): the client sees the end at once
        # although the pull actor held a copy of the socket, and the copy goes too
        socks[1].sendall(struct.pack(">i", -5) + b"junk")
        assert closed_by_server(socks[1])
        assert wait_until(lambda: not _holds(pull_pid, inodes[1]) or None, 5.0)
        assert all(_holds(pull_pid, i) for i in inodes[2:])
    finally:
        for sock in socks:
            sock.close()


def test_a_killed_pull_actor_is_replaced_and_answers_the_same_connection(
    consumer: Consumer,
) -> None:
    cluster, addr, sock, decoder = consumer.cluster, consumer.addr, consumer.sock, consumer.decoder
    first = pull_cmd(GROUP, TOPIC, 0, 0)
    assert _exchange(sock, [first], decoder)[first.opaque].code == FOUND
    old = _pull_pid(cluster)
    os.kill(old, signal.SIGKILL)
    given_up: set[int] = set()

    def answered_by_new() -> bool | None:
        # a pull that reached the dead actor's channel is answered PULL_RETRY_IMMEDIATELY from
        # its offset once the replacement listens (actors.runtime.request_ledger); one that
        # came while there was none waits for the replacement
        req = pull_cmd(GROUP, TOPIC, 1, 0)
        try:
            resp = _exchange(sock, [req], decoder, 1.0, frozenset(given_up))[req.opaque]
        except TimeoutError:  # a slow replacement on a loaded host: its answer comes later
            given_up.add(req.opaque)
            return None
        assert resp.code in (FOUND, BUSY, RETRY), (resp.code, resp.remark)
        if resp.code == RETRY:
            assert (resp.ext_fields or {})["nextBeginOffset"] == "0"
        return resp.code == FOUND or None

    assert wait_until(answered_by_new, 15.0, 0.05), "the same connection was not served"
    new = _pull_pid(cluster)
    assert new != old
    inode = _server_inode(addr[1], sock)
    assert inode is not None

    def held_by_new() -> bool:
        # the socket rides with a request of the connection's; when the new channel could not
        # take a descriptor at once (its first records still being written), with the next
        # one (RemotingServer._share), and that request is answered through the channel
        if _holds(new, inode):
            return True
        answered_by_new()
        return _holds(new, inode)

    assert wait_until(held_by_new, 15.0, 0.05), "the replacement never got the socket"
    assert _pull_pid(cluster) == new
