"""The hold service's and GroupTransferService's cores alone: fake links, a fake store's queue
ends, a fake clock (the kit's tests run them wired to the real processors)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from actors.broker.config import BrokerConfig
from actors.broker.group_transfer import DONE_MS, GroupTransferService
from actors.broker.pull_hold_service import PullHoldServiceCore
from actors.runtime.link_records import (
    ArrivalNotices,
    ConnGone,
    HoldPull,
    HoldsChanged,
    SlaveAcked,
    TransferDone,
    TransferWait,
    WakePull,
)
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.record import java_string_hash


class FakeLink:
    def __init__(self, role: str) -> None:
        self.role = role
        self.alive = True
        self.sent: list[Any] = []

    def send(self, record: Any) -> None:
        self.sent.append(record)

    def request(self, cmd: RemotingCommand) -> None:
        raise AssertionError("these cores send no requests")

    def take(self) -> list[Any]:
        out, self.sent = self.sent, []
        return out


class QueueEnds:
    """get_max_offset_in_queue of a store: what the test says the queues hold."""

    def __init__(self) -> None:
        self.ends: dict[tuple[str, int], int] = {}

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.ends.get((topic, queue_id), 0)


def hold_core(**bc: Any) -> tuple[PullHoldServiceCore, QueueEnds, FakeLink, FakeLink]:
    store = QueueEnds()
    ctx = SimpleNamespace(broker_config=BrokerConfig(**bc), store=store)
    core = PullHoldServiceCore(ctx)  # type: ignore[arg-type]
    writer, pull = FakeLink("send"), FakeLink("pull")
    core.on_link(writer, 0)
    core.on_link(pull, 0)
    return core, store, writer, pull


def held(token: int, offset: int, queue_id: int = 0, conn: int = 5,
         tags: tuple[int, ...] | None = None) -> HoldPull:  # fmt: skip
    return HoldPull(token, conn, "T", queue_id, offset, 0, 15_000, tags, None)


def test_held_pulls_woken_by_notices_their_filter_passes() -> None:
    core, store, _writer, pull = hold_core()
    tag_a = java_string_hash("A")
    core.on_link_record(pull, held(1, 3, tags=(tag_a,)), 0)
    core.on_link_record(pull, held(2, 3, queue_id=1), 0)
    assert len(core.hold) == 2 and pull.take() == []
    store.ends[("T", 0)] = 4
    tag_b = java_string_hash("B")
    core.on_link_record(FakeLink("send"), ArrivalNotices((("T", 0, 4, tag_b, 1),)), 1)
    assert pull.take() == []  # tag B: not for it
    core.on_link_record(FakeLink("send"), ArrivalNotices((("T", 0, 5, tag_a, 1),)), 2)
    assert pull.take() == [WakePull(1)] and len(core.hold) == 1


def test_a_pull_whose_queue_moved_before_it_came_is_woken_as_it_comes() -> None:
    """Its notice reached the hold service first (another link): the queue end says so."""
    core, store, _writer, pull = hold_core()
    store.ends[("T", 0)] = 8
    core.on_link_record(pull, held(1, 7), 0)
    assert pull.take() == [WakePull(1)] and len(core.hold) == 0
    core.on_link_record(pull, held(2, 8), 0)  # nothing new: held
    assert pull.take() == [] and len(core.hold) == 1


def test_connections_and_dead_pull_actors_take_their_holds_with_them() -> None:
    core, store, _writer, pull = hold_core()
    other = FakeLink("pull")
    core.on_link_record(pull, held(1, 0, conn=5), 0)
    core.on_link_record(pull, held(2, 0, conn=6), 0)
    core.on_link_record(other, held(1, 0, conn=7), 0)
    core.on_link_record(pull, ConnGone(5), 0)
    assert len(core.hold) == 2
    core.on_link_lost(pull, 0)  # its pulls were answered from its ledger
    assert len(core.hold) == 1
    store.ends[("T", 0)] = 1
    core.on_link_record(FakeLink("send"), ArrivalNotices((("T", 0, 1, 0, 1),)), 1)
    assert other.take() == [WakePull(1)] and pull.take() == []


def test_holds_reported_at_once_and_none_after_a_quiet_delay() -> None:
    core, store, writer, pull = hold_core()
    core.end_batch(0)  # a new writer assumes pulls are held: "none" after the quiet delay
    assert writer.take() == [] and core.tick(0) == 200
    assert core.tick(200) is not None and writer.take() == [HoldsChanged(False)]
    core.on_link_record(pull, held(1, 0), 300)
    core.end_batch(300)
    assert writer.take() == [HoldsChanged(True)]  # at once
    store.ends[("T", 0)] = 1
    core.on_link_record(writer, ArrivalNotices((("T", 0, 1, 0, 1),)), 400)
    core.end_batch(400)
    core.on_link_record(pull, held(2, 1), 450)  # re-polled within the quiet delay
    core.end_batch(450)
    core.tick(600)
    assert writer.take() == []  # still holding: nothing to say


def test_a_new_writer_gets_a_recheck_of_every_held_queue() -> None:
    """A writer killed after a store may have sent no notice for it."""
    core, store, writer, pull = hold_core()
    core.on_link_record(pull, held(1, 0), 0)
    core.on_link_lost(writer, 1)
    store.ends[("T", 0)] = 1  # stored by the dying writer, no notice
    core.on_link(FakeLink("send"), 2)
    assert pull.take() == [WakePull(1)]


def test_a_slave_is_woken_by_the_sweep_only() -> None:
    core, store, writer, pull = hold_core(brokerRole="SLAVE", brokerId=1)
    core.on_link_record(pull, held(1, 0), 0)
    store.ends[("T", 0)] = 1
    core.on_link_record(writer, ArrivalNotices((("T", 0, 1, 0, 1),)), 1)
    assert pull.take() == []
    core.tick(0)
    core.tick(5_000)
    assert pull.take() == [WakePull(1)]


class Frames:
    def __init__(self) -> None:
        self.sent: list[tuple[int, RemotingCommand]] = []
        self.up = True  # a RemotingServer channel takes frames

    def send(self, conn_id: int, cmd: RemotingCommand) -> None:
        self.sent.append((conn_id, cmd))

    def call(self, conn_id: int, cmd: RemotingCommand) -> None:
        raise AssertionError("no calls")

    def close_conn(self, conn_id: int) -> None:
        raise AssertionError("no closes")

    def send_frame(self, conn_id: int, encoded: bytes) -> bool:
        if not self.up:
            return False
        self.sent.append((conn_id, RemotingCommand.decode(memoryview(encoded)[4:])))
        return True


def _wait(token: int, end: int, deadline: int, keep: bool = False) -> TransferWait:
    resp = RemotingCommand.request(310, opaque=100 + token).make_response(
        RS.SUCCESS, None, {"msgId": "X"})  # fmt: skip
    return TransferWait(token, 40 + token, end, deadline, keep, resp.encode())


def test_transfer_answers_what_the_slave_has_and_times_out_the_rest() -> None:
    out = Frames()
    core = GroupTransferService(SimpleNamespace(outbox=out))  # type: ignore[arg-type]
    send, ha = FakeLink("send"), FakeLink("HAService")
    for token, end in ((1, 100), (2, 300), (3, 200)):
        core.on_link_record(send, _wait(token, end, 3_000, keep=token == 3), 0)
    core.on_link_record(ha, SlaveAcked(250, 1), 10)
    assert sorted(c for c, _ in out.sent) == [41, 43] and [r.code for _, r in out.sent] == [0, 0]
    core.end_batch(10)
    assert send.take() == []  # reported a while later, not one wake-up of the writer a send
    assert core.tick(10 + DONE_MS) == 3_000 - 10 - DONE_MS
    assert send.take() == [TransferDone((1, 3))]
    out.sent.clear()
    assert core.tick(2_999) == 1
    assert core.tick(3_000) is None
    [(conn, resp)] = out.sent
    assert conn == 42 and resp.code == RS.FLUSH_SLAVE_TIMEOUT and resp.opaque == 102
    assert resp.ext_fields == {"msgId": "X"}
    core.on_link_record(send, _wait(4, 240, 9_000), 3_001)  # the slave has it already
    assert out.sent[-1][0] == 44
    core.on_link_lost(send, 3_002)  # its writer died: the answers stand, nobody is told
    core.end_batch(3_002)
    core.tick(4_000)
    assert send.take() == []


def test_transfer_timeout_keeps_a_replies_code() -> None:
    out = Frames()
    core = GroupTransferService(SimpleNamespace(outbox=out))  # type: ignore[arg-type]
    core.on_link_record(FakeLink("send"), _wait(1, 10, 5, keep=True), 0)
    core.tick(5)
    [(_, resp)] = out.sent
    assert resp.code == RS.SUCCESS


def test_a_replacement_without_its_channel_keeps_answers_until_one_takes_them() -> None:
    """A killed service's replacement may get the writer's waits (and the slave's ack) before
    its RemotingServer channel is up: an answer no channel took is neither lost nor reported
    done (the writer would forget it); it goes, and is reported, once a channel takes it."""
    out = Frames()
    out.up = False
    core = GroupTransferService(SimpleNamespace(outbox=out))  # type: ignore[arg-type]
    send, ha = FakeLink("send"), FakeLink("HAService")
    core.on_link_record(ha, SlaveAcked(500, 1), 0)
    core.on_link_record(send, _wait(1, 100, 3_000), 0)  # acked already: answered at once
    core.on_link_record(send, _wait(2, 900, 3_000), 0)
    core.on_link_record(ha, SlaveAcked(900, 1), 1)
    core.end_batch(1)
    assert out.sent == []
    nxt = core.tick(1 + DONE_MS)
    assert nxt is not None and nxt <= 5  # tried again soon, not at the next deadline
    assert send.take() == [] and out.sent == []
    out.up = True
    core.tick(10 + DONE_MS)  # the runtime ticks the core when a RemotingServer channel comes
    core.end_batch(10 + DONE_MS)  # and ends the batch after every timer
    assert sorted(c for c, _ in out.sent) == [41, 42]
    core.tick(10 + 2 * DONE_MS)
    assert send.take() == [TransferDone((1, 2))]
