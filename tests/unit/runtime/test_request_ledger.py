"""The request ledger (actors.runtime.request_ledger): what the RemotingServer answers for a
holding processor that died, from the frames it kept and the page the processor wrote.

The two sides share one memfd as in the broker (the writer maps a duplicate of the
descriptor); the processor's death is the writer simply stopping where the test leaves it.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from actors.runtime.request_ledger import (
    MAX_PARKED,
    TRIM_AT,
    ChannelLedgers,
    GroupGap,
    LedgerWriter,
    RequestLedger,
)
from protocol.codes import RequestCode, ResponseCode, SerializeType
from protocol.command import RemotingCommand

PULL = int(RequestCode.PULL_MESSAGE)
RETRY = int(ResponseCode.PULL_RETRY_IMMEDIATELY)


def pull(offset: int, serialize_type: int = SerializeType.JSON, oneway: bool = False
         ) -> RemotingCommand:  # fmt: skip
    ext = {"consumerGroup": "g", "topic": "T", "queueId": "1", "queueOffset": str(offset),
           "maxMsgNums": "32", "sysFlag": "2", "commitOffset": "0",
           "suspendTimeoutMillis": "15000", "subVersion": "0"}  # fmt: skip
    return RemotingCommand.request(PULL, ext, oneway=oneway, serialize_type=serialize_type)


def frame(cmd: RemotingCommand) -> memoryview:
    return memoryview(cmd.encode())[4:]  # as the RemotingServer routes it: no length prefix


def pair() -> tuple[RequestLedger, LedgerWriter]:
    ledger = RequestLedger()
    return ledger, LedgerWriter(os.dup(ledger.fd))


def answers(ledger: RequestLedger) -> dict[int, tuple[int, RemotingCommand]]:
    """opaque -> (conn_id, decoded answer) of ledger.orphans()."""
    out = {}
    for conn_id, data in ledger.orphans():
        cmd = RemotingCommand.decode(memoryview(data)[4:])
        assert cmd.is_response
        out[cmd.opaque] = (conn_id, cmd)
    return out


def assert_pull_again(cmd: RemotingCommand, offset: int, serialize_type: int) -> None:
    assert cmd.code == RETRY and cmd.serialize_type == serialize_type
    ext = cmd.ext_fields or {}
    # the four fields Java's PullMessageResponseHeader requires; the consumer's next pull
    # starts where this one asked (nothing skipped)
    assert (ext["nextBeginOffset"], ext["minOffset"], ext["maxOffset"]) == (str(offset),) * 3
    assert ext["suggestWhichBrokerId"] == "0"


def test_requests_past_handled_and_held_ones_are_answered_from_the_ledger() -> None:
    ledger, writer = pair()
    try:
        kept = [pull(10), pull(20, SerializeType.ROCKETMQ), pull(30, SerializeType.MSGPACK),
                pull(40, oneway=True), RemotingCommand.request(int(RequestCode.HEART_BEAT)),
                pull(50)]  # fmt: skip
        for i, cmd in enumerate(kept):
            ledger.routed_one(100 + i, frame(cmd))
        # the processor read the first two: #1 answered, #2 held; then it published
        writer.read = 2
        held = kept[1]
        assert writer.hold(101, held.opaque, held.serialize_type, 20) == 0
        writer.publish()
        # #6 came after: it is read, held, and the processor dies before publishing again
        writer.read = 6
        assert writer.hold(105, kept[5].opaque, kept[5].serialize_type, 50) == 1
        got = answers(ledger)
    finally:
        writer.close()
    assert kept[0].opaque not in got  # answered before `handled`
    assert kept[3].opaque not in got  # oneway: nothing to answer
    conn, a = got[kept[1].opaque]  # held
    assert conn == 101
    assert_pull_again(a, 20, SerializeType.ROCKETMQ)
    conn, a = got[kept[2].opaque]  # never read
    assert conn == 102
    assert_pull_again(a, 30, SerializeType.MSGPACK)
    conn, a = got[kept[4].opaque]  # not a pull: SYSTEM_BUSY
    assert (conn, a.code) == (104, int(ResponseCode.SYSTEM_BUSY))
    _, a = got[kept[5].opaque]  # above `handled` and held: answered (twice costs nothing)
    assert_pull_again(a, 50, SerializeType.JSON)


def test_a_released_slot_is_free_once_published() -> None:
    ledger, writer = pair()
    try:
        cmd = pull(7)
        ledger.routed_one(1, frame(cmd))
        writer.read = 1
        slot = writer.hold(1, cmd.opaque, cmd.serialize_type, 7)
        writer.publish()
        assert ledger.handled() == 1
        writer.release_later(slot)  # woken and answered...
        writer.publish()  # ...and the answer left the process
        assert writer.hold(2, 99, 0, 8) == slot  # the slot is used again
        writer.release_later(slot)
        writer.publish()
        assert answers(ledger) == {}
    finally:
        writer.close()


def test_a_slot_held_then_released_but_not_published_is_still_answered() -> None:
    ledger, writer = pair()
    try:
        cmd = pull(3)
        ledger.routed_one(1, frame(cmd))
        writer.read = 1
        writer.release_later(writer.hold(1, cmd.opaque, cmd.serialize_type, 3))
        writer.publish()
        writer.release_later(writer.hold(1, 4242, 0, 4))  # dies before the next publish
        got = answers(ledger)
    finally:
        writer.close()
    assert list(got) == [4242]
    assert_pull_again(got[4242][1], 4, SerializeType.JSON)


def test_kept_frames_are_trimmed_by_what_the_processor_published() -> None:
    ledger, writer = pair()
    try:
        for i in range(TRIM_AT - 1):
            ledger.routed_one(1, frame(pull(i)))
        writer.read = TRIM_AT - 1
        writer.publish()
        ledger.routed_one(1, frame(pull(999)))  # the TRIM_AT-th: trims
        assert [n for n, _c, _f in ledger.kept] == [TRIM_AT]
        [(_conn, cmd)] = answers(ledger).values()
        assert (cmd.ext_fields or {})["nextBeginOffset"] == "999"
    finally:
        writer.close()


def test_a_gap_keeps_at_most_max_parked_requests() -> None:
    gap = GroupGap([], 0.0)
    data = frame(pull(1))
    assert all(gap.park(1, 0, 0, 0, data) for _ in range(MAX_PARKED))
    assert not gap.park(1, 0, 0, 0, data)


class _Chan:
    """What ChannelLedgers reads of a channel."""

    def __init__(self, name: str) -> None:
        self.name = name


def test_gaps_open_on_a_ledger_channels_death_and_close_late() -> None:
    ledgers = ChannelLedgers(frozenset({"pull"}))
    ch: Any = _Chan("pull")
    ledgers.by_channel[ch] = led = RequestLedger()
    led.routed_one(5, frame(pull(11)))
    assert ledgers.gone(ch, 100.0) is True  # a new gap: its deadline wants a timer
    assert ledgers.gone(ch, 100.5) is False  # no ledger any more
    assert ledgers.park("pull", 6, 0, 0, 0, frame(pull(12)))
    assert not ledgers.park("send", 6, 0, 0, 0, frame(pull(12)))  # no gap for that group
    assert ledgers.late(102.9) == []
    [(group, gap)] = ledgers.late(103.0)
    assert group == "pull" and [c for c, _ in gap.answers] == [5] and len(gap.parked) == 1
    assert ledgers.gaps == {}


@pytest.mark.parametrize("st", [SerializeType.JSON, SerializeType.ROCKETMQ, SerializeType.MSGPACK])
def test_held_slots_carry_every_serialization(st: int) -> None:
    ledger, writer = pair()
    try:
        writer.hold(9, -5, st, 2**40)
        [(conn, data)] = ledger.orphans()
    finally:
        writer.close()
    cmd = RemotingCommand.decode(memoryview(data)[4:])
    assert (conn, cmd.opaque) == (9, -5)
    assert_pull_again(cmd, 2**40, st)
