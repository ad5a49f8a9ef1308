"""The pull actor's SuspendedPulls tell their observer (its request ledger) of every pull handed
to the hold service and let go: answered after a wake-up, dropped with its connection, or
answered PULL_RETRY_IMMEDIATELY when the hold service died. What the observer was told is what
the RemotingServer would answer if the pull actor died."""

from __future__ import annotations

from typing import Any

from actors.broker.suspended_pulls import SuspendedPulls
from actors.core import Request
from actors.runtime.link_records import ConnGone, HoldPull
from protocol.codes import RequestCode, ResponseCode
from protocol.command import RemotingCommand


class Ledger:
    """A HoldObserver keeping the tokens it handed out and has not had back."""

    def __init__(self) -> None:
        self.open: dict[int, tuple[int, int]] = {}  # token -> (conn_id, offset)
        self.next = 0

    def held(self, req: Request, offset: int) -> object:
        self.next += 1
        self.open[self.next] = (req.conn_id, offset)
        return self.next

    def released(self, token: object) -> None:
        assert isinstance(token, int)
        del self.open[token]  # each exactly once


class FakeLink:
    """The hold service's end as the pull core sees it."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.alive = True
        self.role = "hold"

    def send(self, record: Any) -> None:
        self.sent.append(record)

    def request(self, cmd: RemotingCommand) -> None:
        raise AssertionError("no requests go to the hold service")


def req(conn_id: int, opaque: int) -> Request:
    cmd = RemotingCommand.request(int(RequestCode.PULL_MESSAGE), opaque=opaque)
    return Request(conn_id, ("127.0.0.1", 1), cmd, 0)


def test_every_hold_is_released_exactly_once() -> None:
    pulls = SuspendedPulls()
    ledger = Ledger()
    pulls.observer = ledger
    link = FakeLink()
    pulls.linked(link)
    pulls.suspend(req(1, 11), "T", 0, 5, 0, 15_000, None, None)
    pulls.suspend(req(2, 12), "T", 0, 9, 0, 15_000, (7,), None)
    pulls.suspend(req(1, 13), "T", 1, 3, 0, 15_000, None, "a > 1")
    assert sorted(ledger.open.values()) == [(1, 3), (1, 5), (2, 9)]
    assert [type(r) for r in link.sent] == [HoldPull] * 3
    first = link.sent[0]
    assert (first.conn_id, first.topic, first.queue_id, first.offset) == (1, "T", 0, 5)
    assert link.sent[1].tag_codes == (7,) and link.sent[2].sql == "a > 1"
    # woken: run again and answered, then released
    woken = pulls.woken(first.token)
    assert woken is not None and woken.cmd.opaque == 11
    pulls.answered(first.token)
    assert sorted(ledger.open.values()) == [(1, 3), (2, 9)]
    assert pulls.woken(first.token) is None  # a second wake-up finds nothing
    # its connection closed: released, and the hold service is told
    assert pulls.drop_connection(1) == 1
    assert link.sent[-1] == ConnGone(1)
    assert sorted(ledger.open.values()) == [(2, 9)]
    # the hold service died: the rest is answered to be pulled again from where it was
    answers = pulls.unlinked(link)
    [(conn, resp)] = answers
    assert conn == 2 and resp.opaque == 12
    assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    assert resp.ext_fields["nextBeginOffset"] == "9"
    assert ledger.open == {} and len(pulls) == 0


def test_pulls_wait_for_a_hold_service_and_go_to_the_next_one() -> None:
    """Between a hold service's death and its replacement's link, suspended pulls stay here
    (recorded in the ledger); the next one gets them; one whose hold time passed meanwhile is
    due for its wake-up run here."""
    pulls = SuspendedPulls()
    ledger = Ledger()
    pulls.observer = ledger
    pulls.suspend(req(1, 21), "T", 0, 4, 1_000, 500, None, None)
    pulls.suspend(req(1, 22), "T", 1, 4, 1_000, 15_000, None, None)
    assert len(ledger.open) == 2
    assert pulls.next_due_ms(1_000) == 500
    [due] = pulls.overdue(1_500)
    assert pulls.woken(due) is not None
    pulls.answered(due)
    link = FakeLink()
    pulls.linked(link)
    [rec] = link.sent
    assert rec.queue_id == 1 and pulls.next_due_ms(2_000) is None
    assert pulls.unlinked(FakeLink()) == []  # not the linked one: nothing taken
    assert len(pulls) == 1 and len(ledger.open) == 1
