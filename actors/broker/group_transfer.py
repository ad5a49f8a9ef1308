"""GroupTransferService: a SYNC_MASTER's sends answered once a slave has their bytes.

Mirrors store/ha/HAService.GroupTransferService and the putRequest of CommitLog.handleHA /
submitReplicaRequest, RocketMQ 4.9.x. In Java the service is a thread that the HA connections
wake (notifyTransferSome) when a slave acks, and that completes each waiting request whose end
offset push2SlaveMaxOffset covers, or with FLUSH_SLAVE_TIMEOUT once slaveTimeout passed. Here
it is an actor of its own (the "transfer" group, on a SYNC_MASTER only):

- the store writer (the send actor) hands it each SYNC_MASTER WAIT send's answer, already
  encoded, as a TransferWait on their link (`GroupTransferRequests`, the writer's side), once
  the put (and a SYNC_FLUSH's flush) is done; it keeps each one until TransferDone says the
  answer left;
- the HAService reports push2SlaveMaxOffset as SlaveAcked on its own link;
- the answers go from here to the RemotingServer, which writes them to the producers.

A kill -9 of this actor loses no send: the writer takes back every wait not reported done and
answers it from the state page's acked offset (the local path it uses while no service is
linked), handing the rest to the replacement. A wait this actor answered just before it died
may be answered twice; the client drops the second answer (its opaque is no longer pending),
as NettyRemotingAbstract.processResponseCommand does. Causality: the writer flushes its
RemotingServer channel (a batch's events) before any link, so an answer from here cannot reach
a client ahead of the events of the batch that stored its message.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from actors.broker.context import BrokerContext
from actors.core import FrameOutbox, Link, Request, not_supported
from actors.runtime.link_records import SlaveAcked, TransferDone, TransferWait
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand

log = logging.getLogger(__name__)

HA_SERVICE: Final = "HAService"
DONE_BATCH: Final = 64  # answered waits reported to their writer at once past this many
DONE_MS: Final = 100  # else at the next tick this long after the first (not one wake-up a send)
UNDELIVERED_RETRY_MS: Final = 5  # an answer no channel took yet: tried again this soon


class GroupTransferService:
    """The transfer group's core (ProcessorCore, LinkedCore, BatchEndCore)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        outbox = ctx.outbox
        if not isinstance(outbox, FrameOutbox):
            raise TypeError("GroupTransferService needs an outbox that takes encoded frames")
        self.outbox: FrameOutbox = outbox
        self.acked: int = -1  # push2SlaveMaxOffset as last reported
        self.waits: list[tuple[TransferWait, Link]] = []
        self.done: dict[Link, list[int]] = {}  # answered waits not yet reported, per link
        self.done_due: int | None = None  # when the unreported ones go
        # answers no RemotingServer channel took yet (a replacement before its channel is up):
        # sent again each tick, and reported done only once they left
        self.undelivered: list[tuple[int, bytes, int, Link]] = []  # (conn, frame, token, link)
        self.answered: int = 0
        self.timed_out: int = 0

    # --- ProcessorCore ---------------------------------------------------------------------

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """No request code is routed here."""
        return None if req.cmd.is_oneway else not_supported(req.cmd)

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """An answer to a closed connection is dropped by the RemotingServer."""

    def tick(self, now_ms: int) -> int | None:
        """FLUSH_SLAVE_TIMEOUT for what waited past its deadline, the answered waits to their
        writers; ms to the next deadline."""
        if self.undelivered:
            pending, self.undelivered = self.undelivered, []
            for conn_id, frame, token, link in pending:
                self._deliver(conn_id, frame, token, link)
        keep = []
        for w, link in self.waits:
            if now_ms >= w.deadline_ms:
                self._timed_out(w, link)
            else:
                keep.append((w, link))
        self.waits = keep
        if self.done_due is not None and now_ms >= self.done_due:
            self._report_done()
        dues = [w.deadline_ms for w, _ in keep]
        if self.done_due is not None:
            dues.append(self.done_due)
        if self.undelivered:
            dues.append(now_ms + UNDELIVERED_RETRY_MS)
        return max(1, min(dues) - now_ms) if dues else None

    def end_batch(self, now_ms: int) -> None:
        """Tell each writer which of its waits were answered: at once past DONE_BATCH of them,
        else DONE_MS after the first (each report wakes the writer; what it has not heard of
        it answers again, harmlessly, only if this actor dies)."""
        if not self.done:
            return
        if sum(map(len, self.done.values())) >= DONE_BATCH:
            self._report_done()
        elif self.done_due is None:
            self.done_due = now_ms + DONE_MS

    def _report_done(self) -> None:
        done, self.done = self.done, {}
        self.done_due = None
        for link, tokens in done.items():
            if link.alive:
                link.send(TransferDone(tuple(tokens)))

    # --- LinkedCore ------------------------------------------------------------------------

    def on_link(self, link: Link, now_ms: int) -> None:
        """A writer or the HAService linked (the HAService reports at once)."""
        log.info("group transfer service: linked from %s", link.role)

    def on_link_record(self, link: Link, record: Any, now_ms: int) -> None:
        """TransferWait from a writer, SlaveAcked from the HAService."""
        if isinstance(record, TransferWait):
            if record.end_offset <= self.acked:
                self._answer(record, link)
            else:
                self.waits.append((record, link))
        elif isinstance(record, SlaveAcked):
            if record.offset > self.acked:
                self.acked = record.offset
                self._release()
        else:
            log.warning("group transfer service: unexpected %r from %s", record, link.role)

    def on_link_response(self, link: Link, resp: RemotingCommand, now_ms: int) -> None:
        """This core sends no requests."""

    def on_link_lost(self, link: Link, now_ms: int) -> None:
        """A writer died: its waits are still answered here (the messages are stored), but
        nobody is told any more; the HAService died: its replacement reports again."""
        self.done.pop(link, None)

    # --- answers ---------------------------------------------------------------------------

    def _release(self) -> None:
        acked = self.acked
        keep = []
        for w, link in self.waits:
            if w.end_offset <= acked:
                self._answer(w, link)
            else:
                keep.append((w, link))
        self.waits = keep

    def _answer(self, w: TransferWait, link: Link) -> None:
        self.answered += 1
        self._deliver(w.conn_id, w.frame, w.token, link)

    def _deliver(self, conn_id: int, frame: bytes, token: int, link: Link) -> None:
        """The answer to its RemotingServer channel; reported done only once it is queued
        there (else the writer would forget a wait whose answer never left)."""
        if self.outbox.send_frame(conn_id, frame):
            self.done.setdefault(link, []).append(token)
        else:
            self.undelivered.append((conn_id, frame, token, link))

    def _timed_out(self, w: TransferWait, link: Link) -> None:
        log.warning("slave timeout end_offset=%d acked=%d", w.end_offset, self.acked)
        frame = w.frame
        if not w.keep_code:
            resp = RemotingCommand.decode(memoryview(w.frame)[4:])
            resp.code = RS.FLUSH_SLAVE_TIMEOUT
            frame = resp.encode()
        self.timed_out += 1
        self._deliver(w.conn_id, frame, w.token, link)


class GroupTransferRequests:
    """The writer's side: the waits handed to the GroupTransferService and not reported done.
    Items are the send core's parked replies (anything with conn_id, resp, end_offset,
    slave_deadline_ms and keep_code)."""

    def __init__(self) -> None:
        self.link: Link | None = None
        self.open: dict[int, Any] = {}
        self._next = 0

    def linked(self, link: Link) -> None:
        """A (new) GroupTransferService."""
        self.link = link

    def hand_over(self, w: Any) -> bool:
        """Send the wait to the service (with the batch's output, after its events); False
        when none is linked (the writer keeps it)."""
        link = self.link
        if link is None or not link.alive:
            return False
        self._next += 1
        link.send(TransferWait(self._next, w.conn_id, w.end_offset, w.slave_deadline_ms,
                               w.keep_code, bytes(w.resp.encode())))  # fmt: skip
        self.open[self._next] = w
        return True

    def done(self, tokens: tuple[int, ...]) -> None:
        """TransferDone: those answers left the service."""
        for t in tokens:
            self.open.pop(t, None)

    def unlinked(self, link: Link) -> list[Any]:
        """The service died: every wait it had, for the writer to answer itself."""
        if link is not self.link:
            return []
        self.link = None
        taken = list(self.open.values())
        self.open.clear()
        return taken
