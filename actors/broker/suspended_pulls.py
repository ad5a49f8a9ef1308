"""The pull processor's side of long polling: the pulls it handed to the hold service.

Mirrors the two calls between broker/processor/PullMessageProcessor.java and broker/
longpolling/PullRequestHoldService.java, RocketMQ 4.9.x: suspendPullRequest (a pull that
found nothing is parked) and executeRequestWhenWakeup (a woken pull is run again without
suspending it). The hold service is an actor of its own here (actors.broker.pull_hold_service),
joined to the pull actor by a link: a suspended pull goes to it as a HoldPull record and comes
back as a WakePull carrying its token.

What stays here is what the pull actor needs to answer every pull it handed over whatever
dies: the request itself, and the ledger token its observer (the RemotingServer's request
ledger, actors.runtime.request_ledger) gave for it, so that

- the pull actor's death: the RemotingServer answers every held pull from its ledger;
- the hold service's death (its link closes): every pull handed to it is answered here at once
  with PULL_RETRY_IMMEDIATELY from the offset it asked for (the client pulls again at once);
- no hold service yet (between a death and its replacement's link): pulls are kept here,
  recorded in the ledger all the same, and handed over when the link comes; one whose hold
  time passes meanwhile is due for its wake-up run (`overdue`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from actors.core import HoldObserver, Link, Request
from actors.runtime.link_records import ConnGone, HoldPull
from protocol.codes import RPC_ONEWAY
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand

PULL_AGAIN_REMARK: Final = "[HOLD_SERVICE_REPLACED]the service holding this pull was replaced"


@dataclass(slots=True)
class Suspended:
    """One pull handed over (or waiting for a hold service)."""

    req: Request
    record: HoldPull
    ledger: object  # what the observer gave for it
    sent: bool = False  # handed to the current hold service


class SuspendedPulls:
    """token -> the pull it stands for; pure bookkeeping (the link is an output port)."""

    def __init__(self) -> None:
        self.observer: HoldObserver | None = None
        self.link: Link | None = None  # to the hold service
        self.open: dict[int, Suspended] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self.open)

    def suspend(self, req: Request, topic: str, queue_id: int, offset: int, now_ms: int,
                timeout_ms: int, tag_codes: tuple[int, ...] | None,
                sql: str | None) -> None:  # fmt: skip
        """suspendPullRequest: record it, and hand it over when a hold service is linked."""
        self._next += 1
        token = self._next
        rec = HoldPull(token, req.conn_id, topic, queue_id, offset, now_ms, timeout_ms,
                       tag_codes, sql)  # fmt: skip
        ledger = self.observer.held(req, offset) if self.observer is not None else None
        s = self.open[token] = Suspended(req, rec, ledger)
        link = self.link
        if link is not None and link.alive:
            link.send(rec)
            s.sent = True

    def woken(self, token: int) -> Request | None:
        """WakePull: the request to run again (None: its connection went meanwhile). The
        caller answers it, then calls answered()."""
        s = self.open.get(token)
        return s.req if s is not None else None

    def answered(self, token: int) -> None:
        """The woken pull's answer is queued: its ledger entry goes with it."""
        s = self.open.pop(token, None)
        if s is not None and self.observer is not None:
            self.observer.released(s.ledger)

    def linked(self, link: Link) -> None:
        """A (new) hold service: what waited for one goes to it."""
        self.link = link
        for s in self.open.values():
            if not s.sent:
                link.send(s.record)
                s.sent = True

    def unlinked(self, link: Link) -> list[tuple[int, RemotingCommand]]:
        """The hold service died: (conn, PULL_RETRY_IMMEDIATELY) for every pull it had; their
        ledger entries are released (the caller queues the answers)."""
        if link is not self.link:
            return []  # an older one: what it had was answered when it went
        self.link = None
        out: list[tuple[int, RemotingCommand]] = []
        for token in [t for t, s in self.open.items() if s.sent]:
            s = self.open.pop(token)
            cmd = s.req.cmd
            if not cmd.flag & RPC_ONEWAY:
                out.append((s.req.conn_id, pull_again(cmd, s.record.offset)))
            if self.observer is not None:
                self.observer.released(s.ledger)
        return out

    def overdue(self, now_ms: int) -> list[int]:
        """Tokens of pulls no hold service took whose hold time is over (to run again)."""
        return [t for t, s in self.open.items()
                if not s.sent and now_ms >= s.record.suspend_ms + s.record.timeout_ms]  # fmt: skip

    def next_due_ms(self, now_ms: int) -> int | None:
        """Milliseconds until the first pull kept here is overdue (None: none kept here)."""
        due = [s.record.suspend_ms + s.record.timeout_ms for s in self.open.values() if not s.sent]
        return max(0, min(due) - now_ms) if due else None

    def drop_connection(self, conn_id: int) -> int:
        """The connection closed: forget its pulls (the hold service is told); how many."""
        gone = [t for t, s in self.open.items() if s.req.conn_id == conn_id]
        for token in gone:
            s = self.open.pop(token)
            if self.observer is not None:
                self.observer.released(s.ledger)
        link = self.link
        if gone and link is not None and link.alive:
            link.send(ConnGone(conn_id))
        return len(gone)


def pull_again(cmd: RemotingCommand, offset: int) -> RemotingCommand:
    """PULL_RETRY_IMMEDIATELY back to `offset`: the client pulls again from where it was."""
    text = str(offset)
    return cmd.make_response(RS.PULL_RETRY_IMMEDIATELY, PULL_AGAIN_REMARK, {
        "suggestWhichBrokerId": "0", "nextBeginOffset": text, "minOffset": text,
        "maxOffset": text})  # fmt: skip

