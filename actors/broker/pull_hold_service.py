"""The PullRequestHoldService actor's core: suspended pulls, woken by arrivals or the sweep.

Mirrors broker/longpolling/PullRequestHoldService.java with its NotifyMessageArrivingListener
side, RocketMQ 4.9.x. In Java the service is a thread of the broker: the pull processor parks a
pull in its table, the store's dispatch calls notifyMessageArriving, and a woken pull is run
again on the pull executor. Here the service is an actor of its own (the "hold" group, no
request codes), joined by links (actors.runtime.links) to

- the pull actor: HoldPull records bring suspended pulls; each woken one goes back as a
  WakePull on the link it came on; ConnGone drops a closed connection's pulls. A pull actor
  that dies takes its pulls' answers with it (the RemotingServer answers them from its request
  ledger), so the pulls that came on its link are dropped here;
- the store writer (the send actor): ArrivalNotices wake what they satisfy (an empty one asks
  for a re-check of every held queue against the store), and HoldsChanged tells the writer
  whether any pull is held (actors.broker.notify_message_arriving_listener: HoldsReporter).

A pull can reach this actor after the notice of a message that arrived once the pull had read
the store (two links, no common order): each HoldPull is checked against the store's queue
end on arrival, and woken at once when the queue moved past it. Nothing is kept across a
restart: the pulls held here are answered by the pull actor when this actor's link closes
(actors.broker.suspended_pulls), and their clients pull again at once.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from actors.broker.context import BrokerContext
from actors.broker.expression_filter import SqlSubscriptionFilter, filter_of
from actors.broker.notify_message_arriving_listener import HOLDS_OFF_DELAY_MS, HoldsReporter
from actors.broker.pull_hold import HeldPull, PullRequestHoldService
from actors.broker.sql92 import Sql92Error, Sql92Filter, compile_sql92
from actors.core import Link, Request, not_supported
from actors.runtime.link_records import (
    ArrivalNotices,
    ConnGone,
    HoldPull,
    HoldsChanged,
    WakePull,
)
from protocol.command import RemotingCommand
from store.get_message_result import GetMessageStatus

log = logging.getLogger(__name__)

WRITER: Final = "send"
# gets per held SQL92 pull and arrival notice (800 units each: 12,800 records read at most)
ARRIVAL_LOOKS: Final = 16
SQL_CACHE_LIMIT: Final = 10_000


class PullHoldServiceCore:
    """The hold group's core (ProcessorCore, LinkedCore, BatchEndCore, HoldingCore)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.bc = bc = ctx.broker_config
        self.store = ctx.store
        self.hold = PullRequestHoldService(
            5_000 if bc.longPollingEnable else bc.shortPollingTimeMills)
        self.hold.arrival_match = self._arrival_matches
        self.writer: Link | None = None
        self.reporter = HoldsReporter()
        self.quiet_at: int | None = None  # "not holding" is reported at this time
        self._sql: dict[str, Sql92Filter] = {}

    def _notices_on(self) -> bool:
        """Arrivals wake pulls on a long-polling master only (Java's listener is not called
        on a slave); the sweep wakes them everywhere."""
        return bool(self.bc.longPollingEnable) and not self.bc.is_slave

    # --- ProcessorCore ---------------------------------------------------------------------

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """No request code is routed here."""
        return None if req.cmd.is_oneway else not_supported(req.cmd)

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """Connections are the pull actor's (ConnGone tells of them)."""

    def tick(self, now_ms: int) -> int | None:
        """The sweep (every 5 s, or shortPollingTimeMills without long polling) and the
        "not holding" report after its quiet delay."""
        if self.hold.due(now_ms) and len(self.hold):
            self._wake(self.hold.check_hold_request(now_ms, self._max_offset))
        wait = self.hold.ms_until_sweep(now_ms)
        if self.quiet_at is not None:
            if now_ms >= self.quiet_at:
                self.quiet_at = None
                if self.reporter.quiet_delay_over(bool(self.hold.table)):
                    self._report(False)
            else:
                wait = min(wait, self.quiet_at - now_ms)
        return wait

    def end_batch(self, now_ms: int) -> None:
        """Tell the writer at once when pulls are held again; "none held" only after a quiet
        delay (a consumer re-polling at once keeps the notices coming)."""
        report = self.reporter.after_batch(bool(self.hold.table))
        if report:
            self.quiet_at = None
            self._report(True)
        elif report is not None and self.quiet_at is None:
            self.quiet_at = now_ms + int(HOLDS_OFF_DELAY_MS)

    def _report(self, holding: bool) -> None:
        writer = self.writer
        if writer is not None and writer.alive:
            writer.send(HoldsChanged(holding))
            self.reporter.sent(holding)

    # --- LinkedCore ------------------------------------------------------------------------

    def on_link(self, link: Link, now_ms: int) -> None:
        """A (new) writer starts sending notices until told otherwise."""
        if link.role == WRITER:
            self.writer = link
            self.reporter = HoldsReporter()  # what it assumes: pulls may be held
            self.quiet_at = None
            # a writer that died may have stored messages whose notices never came
            self._recheck(now_ms)

    def on_link_record(self, link: Link, record: Any, now_ms: int) -> None:
        """Notices from the writer; suspended pulls from the pull actor."""
        if isinstance(record, HoldPull):
            self._suspend(link, record, now_ms)
        elif isinstance(record, ArrivalNotices):
            if not record.notices:  # a re-check request
                self._recheck(now_ms)
            elif self._notices_on() and len(self.hold):
                for topic, queue_id, max_offset, tags_code, _ts in record.notices:
                    self._wake(self.hold.notify_message_arriving(
                        topic, queue_id, max_offset, tags_code, now_ms, self._max_offset))
        elif isinstance(record, ConnGone):
            self.hold.drop_connection(record.conn_id)
        else:
            log.warning("hold service: unexpected %r from %s", record, link.role)

    def on_link_response(self, link: Link, resp: RemotingCommand, now_ms: int) -> None:
        """This core sends no requests."""

    def on_link_lost(self, link: Link, now_ms: int) -> None:
        """The writer died (its replacement links again), or a pull actor did: the pulls it
        handed over were answered from its ledger; they go nowhere now."""
        if link is self.writer:
            self.writer = None
            return
        n = self.hold.drop_link(link)
        if n:
            log.warning("hold service: %d held pull(s) of a dead pull actor dropped", n)

    # --- holding ---------------------------------------------------------------------------

    def _suspend(self, link: Link, rec: HoldPull, now_ms: int) -> None:
        flt = filter_of(rec.tag_codes, self._compiled(rec.sql))
        held = HeldPull(rec, link, rec.topic, rec.queue_id, rec.offset, rec.suspend_ms,
                        rec.timeout_ms, flt)  # fmt: skip
        self.hold.suspend(held)
        # a message that arrived after the pull read the store may have had its notice
        # before this record came: the queue's end says so
        if self._notices_on() and self._max_offset(rec.topic, rec.queue_id) > rec.offset:
            self._wake(self.hold.notify_message_arriving(
                rec.topic, rec.queue_id, self._max_offset(rec.topic, rec.queue_id), None,
                now_ms))  # fmt: skip

    def _compiled(self, sql: str | None) -> Sql92Filter | None:
        if sql is None:
            return None
        flt = self._sql.get(sql)
        if flt is None:
            try:
                flt = compile_sql92(sql)
            except Sql92Error:  # the pull processor compiled it: cannot happen
                log.exception("hold service: SQL92 %r does not compile", sql)
                return None
            if len(self._sql) >= SQL_CACHE_LIMIT:
                self._sql.clear()
            self._sql[sql] = flt
        return flt

    def _wake(self, woken: list[HeldPull]) -> None:
        for h in woken:
            link = h.link
            if link is not None and link.alive:
                link.send(WakePull(h.req.token))

    def _max_offset(self, topic: str, queue_id: int) -> int:
        return int(self.store.get_max_offset_in_queue(topic, queue_id))

    def _recheck(self, now_ms: int) -> None:
        """Every queue with held pulls against the store's end now (as the sweep looks)."""
        if not self._notices_on():
            return
        for key in list(self.hold.table):
            topic, _, qid = key.rpartition("@")
            self._wake(self.hold.notify_message_arriving(
                topic, int(qid), self._max_offset(topic, int(qid)), None, now_ms))

    def _arrival_matches(self, h: HeldPull, max_offset: int) -> bool:
        """notifyMessageArriving's isMatchedByCommitLog for a held SQL92 pull: does a record
        that arrived since the last look match? Each record is read once (checked_to moves
        past the ones that did not); other filters were decided by the tags code."""
        flt = h.filter
        if not isinstance(flt, SqlSubscriptionFilter):
            return True
        start = max(h.checked_to, h.pull_from_offset)
        # one get reads at most 800 units and stops at a consume-queue file's end: look again
        # from where it stopped (a notice can stand for a whole batch), up to ARRIVAL_LOOKS
        # gets a notice; what is left is read at the next notice or the hold sweep
        for _ in range(ARRIVAL_LOOKS):
            if start >= max_offset:
                return False
            res = self.store.get_message(
                "", h.topic, h.queue_id, start, 1, None, flt, 0, count_stats=False
            )
            try:
                if res.status is not GetMessageStatus.NO_MATCHED_MESSAGE:
                    return True  # found one, or a status the pull itself should answer
                if res.next_begin_offset <= start:
                    return False
                start = h.checked_to = res.next_begin_offset
            finally:
                res.release()
        return False
