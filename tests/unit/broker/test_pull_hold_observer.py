"""PullRequestHoldService tells its observer (the pull actor's request ledger) of every pull it
parks and lets go: woken by an arrival, expired by the sweep, or dropped with its connection.
What the observer was told is what the RemotingServer would answer if the pull actor died."""

from __future__ import annotations

from actors.broker.pull_hold import HeldPull, PullRequestHoldService
from actors.core import Request
from protocol.codes import RequestCode
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


def held(conn_id: int, qid: int, offset: int, timeout_ms: int = 15_000) -> HeldPull:
    req = Request(conn_id, ("127.0.0.1", 1), RemotingCommand.request(int(RequestCode.PULL_MESSAGE)),
                  0)  # fmt: skip
    return HeldPull(req, "T", qid, offset, 0, timeout_ms, None)


def test_every_hold_is_released_exactly_once() -> None:
    svc = PullRequestHoldService()
    ledger = Ledger()
    svc.observer = ledger
    svc.suspend(held(1, 0, 5))
    svc.suspend(held(2, 0, 9))
    svc.suspend(held(1, 1, 3, timeout_ms=100))
    svc.suspend(held(3, 2, 0))
    assert sorted(ledger.open.values()) == [(1, 3), (1, 5), (2, 9), (3, 0)]
    woken = svc.notify_message_arriving("T", 0, 6, None, 10)  # 5 < 6: woken; 9 stays
    assert [h.pull_from_offset for h in woken] == [5]
    assert sorted(ledger.open.values()) == [(1, 3), (2, 9), (3, 0)]
    assert svc.drop_connection(1) == 1  # its connection closed
    assert sorted(ledger.open.values()) == [(2, 9), (3, 0)]
    expired = svc.check_hold_request(20_000, lambda topic, qid: 0)  # the sweep: hold time over
    assert sorted(h.conn_id for h in expired) == [2, 3]
    assert ledger.open == {} and len(svc) == 0
