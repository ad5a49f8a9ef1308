"""Every record that crosses the client channel is typed: built and read only as its dataclass,
round-tripped exactly, and a record that is not one (unknown kind, wrong shape, not msgpack)
is a ChannelError, never a crash or a half-read record."""

from __future__ import annotations

import pytest

from actors.client import client_channel as ch
from actors.client.consumer import consumer_channel as cc
from actors.runtime.channel import KindDecoder
from actors.runtime.typed_record import TypedRecord, pack
from protocol.bodies import MessageQueue

MQ1 = MessageQueue("T", "broker-a", 1)
MQ2 = MessageQueue("T", "broker-b", 0)
CMD = cc.PullCommand(7, "127.0.0.1:10911", "g", "T", 1, 42, 32, 3, 40, 15_000, None, 0, "TAG",
                     30_000)  # fmt: skip

SAMPLES: list[TypedRecord] = [
    ch.Hello("pull:client@1"),
    ch.Route("T", b'{"queueDatas":[]}', None),
    ch.Route("T", None, "no route"),
    ch.BrokerRequest(3, "127.0.0.1:10911", b"\x00\x01frame"),
    ch.BrokerAnswer(3, None),
    ch.Ack(9, False, "consumer group registered already"),
    ch.PersistConsumerOffset("g"),
    ch.Bye(),
    ch.RegisterProducer("pg"),
    ch.UnregisterProducer("pg", 4),
    ch.RegisterConsumer("g", b"{}", 5),
    ch.UpdateConsumer("g", b"{}"),
    ch.UnregisterConsumer("g", None),
    ch.HeartbeatBroker("127.0.0.1:10911"),
    ch.FetchRoute("T", True),
    cc.Pull((CMD, cc.PullCommand(8, "a:1", "g", "%RETRY%g", 0, 0, 32, 2, 0, 15_000, "*", 5,
                                 "TAG", 30_000))),
    cc.Assign("g", (cc.QueueLock(MQ1, True, 1234), cc.QueueLock(MQ2))),
    cc.LockStates("g", (cc.QueueLock(MQ1, False, 0),)),
    cc.Revoke("g", (MQ1, MQ2)),
    cc.Revoked("g", (MQ2,)),
    cc.Relay("g", 11, "127.0.0.1:10911", b"frame"),
    cc.RelayAnswer(11, b"answer"),
    cc.PersistGroup("g"),
    cc.RebalanceNow("g"),
    cc.QueuesChanged("g", "T", (MQ1, MQ2), (MQ1,)),
    cc.RingShared(1, 4 << 20),
    cc.RingRetired(1),
    cc.RingRefused(2),
    cc.ConnShared(3, "127.0.0.1:10911"),
    cc.ConnWanted("127.0.0.1:10911"),
    cc.ConnFailed("127.0.0.1:10911", "connection refused"),
    cc.RingRelease(((1, 0), (1, 4096), (2, 0))),
]


def test_every_kind_has_a_sample() -> None:
    assert {type(r) for r in SAMPLES} == set(ch.CLIENT_RECORDS.types.values())


@pytest.mark.parametrize("rec", SAMPLES, ids=lambda r: type(r).__name__)
def test_a_record_round_trips_through_the_stream(rec: TypedRecord) -> None:
    stream = ch.encode_record(rec.KIND, rec.encode())
    ((kind, payload),) = KindDecoder(ch.MAX_RECORD).feed(stream)
    assert ch.read_record(kind, payload) == rec


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        (200, pack(["x"])),  # no such kind
        (cc.PULL_RESULT, b"\x00" * 40),  # raw, never a typed record
        (ch.ACK, pack([1, True])),  # a field short
        (ch.ACK, pack({"op_id": 1})),  # not a row
        (ch.HELLO, b"\xc1"),  # not msgpack
        (cc.ASSIGN, pack(["g", [["T", "b", "x", 0, 0]]])),  # queue id not a number
        (cc.PULL, pack([[[1, 2, 3]]])),  # a command of 3 fields
        (cc.REVOKE, pack(["g", "not rows"])),
        (cc.PULL_AT, b"\x00" * 65),  # raw, never a typed record
        (cc.RING_RELEASE, pack([[[1]]])),  # a token without its ring
        (cc.RING_SHARED, pack([1])),  # a field short
    ],
)
def test_what_is_not_a_record_is_a_channel_error(kind: int, payload: bytes) -> None:
    with pytest.raises(ch.ChannelError):
        ch.read_record(kind, memoryview(payload))


def test_records_are_frozen() -> None:
    rec = cc.Revoke("g", (MQ1,))
    with pytest.raises(AttributeError):
        rec.group = "h"  # type: ignore[misc]


def test_a_pull_at_says_where_the_body_lies() -> None:
    head = cc.pull_result_head(7, 0, 33, 0, 99, 0)
    ref = cc.RingRef(1, 4096, 4200, 31000)
    answer, got = cc.read_pull_at(memoryview(head + cc.pull_at_ref(ref)))
    assert got == ref and answer == cc.PullAnswer(7, 0, 33, 0, 99, 0)
    with pytest.raises(ch.ChannelError):
        cc.read_pull_at(memoryview(head + cc.pull_at_ref(ref) + b"x"))
