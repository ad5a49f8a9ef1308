"""Links between a broker's actors (actors.runtime.links) and their typed records
(actors.runtime.link_records), over real Unix sockets, without Thespian."""

from __future__ import annotations

import os
import socket
from typing import Any

import msgpack
import pytest

from actors.runtime.channel import (
    LINK,
    REQUEST,
    Channel,
    ChannelError,
    RecordDecoder,
    accept_channels,
    listen_channel,
)
from actors.runtime.link_records import (
    ArrivalNotices,
    ConnGone,
    HoldPull,
    HoldsChanged,
    LinkHello,
    SlaveAcked,
    TransferDone,
    TransferWait,
    WakePull,
    decode,
    encode,
)
from actors.runtime.links import LINK_CONN_IDS, LinkTable, hello_of
from protocol.command import RemotingCommand

RECORDS: list[Any] = [
    LinkHello("pull"),
    ArrivalNotices((("T", 1, 5, 42, 1000), ("T", 2, 9, None, 0))),
    ArrivalNotices(()),
    HoldsChanged(True),
    HoldPull(3, 17, "T", 1, 40, 1000, 15_000, (12, -7), None),
    HoldPull(4, 17, "T", 1, 40, 1000, 15_000, None, "a > 1 AND b = 'x'"),
    WakePull(3),
    ConnGone(17),
    TransferWait(9, 17, 123_456, 5_000, False, b"\x00\x00\x00\x05frame"),
    TransferDone((9, 10)),
    SlaveAcked(123_456, 1),
]


@pytest.mark.parametrize("rec", RECORDS, ids=lambda r: type(r).__name__)
def test_every_record_round_trips(rec: Any) -> None:
    assert decode(encode(rec)) == rec


@pytest.mark.parametrize("payload", [
    b"\xc1",  # not msgpack
    msgpack.packb({"kind": 1}),  # not an array
    msgpack.packb([]),
    msgpack.packb([99, 1]),  # no such kind
    msgpack.packb([0, "a", "b"]),  # LinkHello has one field
    msgpack.packb(["0", "a"]),
], ids=["garbage", "map", "empty", "unknown-kind", "arity", "kind-not-int"])  # fmt: skip
def test_a_bad_record_is_a_channel_error(payload: bytes) -> None:
    with pytest.raises(ChannelError):
        decode(payload)


class Owner:
    """What a link's owner keeps: the channels to flush."""

    def __init__(self) -> None:
        self.dirty: set[Channel] = set()


def test_an_opened_link_says_hello_first_and_sends_requests_on_its_own_connection_id(
    tmp_path: Any,
) -> None:
    path = str(tmp_path / "peer.sock")
    listener = listen_channel(path)
    owner = Owner()
    table = LinkTable("schedule", owner)
    try:
        link = table.open("send", path, b"")
        [accepted] = _accept(listener)
        link.request(RemotingCommand.request(31201, {"k": "v"}, b"body"))
        link.send(HoldsChanged(False))
        assert link.ch in owner.dirty and table.is_link(link.ch)
        assert link.ch.flush()
        records = _read(accepted)
        hello = hello_of(records)
        assert hello == LinkHello("schedule")
        assert [r[0] for r in records] == [LINK, REQUEST, LINK]
        _, conn_id, _recv_ns, _peer, frame = records[1]
        assert conn_id == LINK_CONN_IDS["schedule"] < 0  # below every RemotingServer id
        assert RemotingCommand.decode(frame).code == 31201
        assert decode(records[2][1]) == HoldsChanged(False)
        # the side that accepts it: a link once its hello is read
        peer = table.accepted(accepted, hello)
        assert peer.role == "schedule" and table.get(accepted.fd) is peer
        # an RS channel and a link are flushed in that order
        rs = Channel(socket.socketpair()[0], "rs")
        others, links = table.flush_order({rs, link.ch})
        assert others == [rs] and links == [link.ch]
        rs.close()
        table.drop(link)
        assert "send" not in table.opened and table.get(link.ch.fd) is None
        assert link.alive
        link.ch.close()
        assert not link.alive
        link.send(HoldsChanged(True))  # a closed link takes nothing
        assert link.ch not in owner.dirty
    finally:
        table.close()
        listener.close()
        os.unlink(path)


def test_a_channel_that_starts_otherwise_is_no_link() -> None:
    assert hello_of([]) is None
    assert hello_of([(REQUEST, 1, 0, ("1.2.3.4", 5), b"")]) is None


def _accept(listener: socket.socket) -> list[Channel]:
    for _ in range(100):
        got = accept_channels(listener, "peer")
        if got:
            return got
    raise AssertionError("no connection")


def _read(ch: Channel) -> list[Any]:
    ch.sock.setblocking(True)
    ch.sock.settimeout(5.0)
    data = ch.sock.recv(1 << 16)
    return RecordDecoder().feed(data)
