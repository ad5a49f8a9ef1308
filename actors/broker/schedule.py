"""Delivers delayed messages parked in SCHEDULE_TOPIC_XXXX to their real topic and queue.

Mirrors store/schedule/ScheduleMessageService.java, RocketMQ 4.9.x (spec §9.6). An actor of its
own here (the "schedule" group: GET_ALL_DELAY_OFFSET is routed to it), with a pure core: no
Thespian, no clock. It reads the store read-only; what it delivers goes to the store writer (the
send actor) as SERVICE_PUT_MESSAGES requests on their link (actors.broker.processors.
service_put), one per level and run. Two runs of a level may be under way (the next is read
while the writer stores the last); a level's offset moves only once the writer answered that
the messages are stored, and the writer stores a run only where its level's last one ended (one
that failed stops the runs sent after it). One timer per delay level (first run 1000 ms after
start); each run reads the level's queue (queue id = level - 1) from its saved offset and
re-stores every due entry under REAL_TOPIC / REAL_QID; it re-arms when the next entry is due
(the countdown, as Java does), after DELAY_FOR_A_WHILE (100 ms) when the queue is drained or a
put fails, and after DELAY_FOR_A_PERIOD (10 s) on an unexpected error. Offsets go to
`<storePathRootDir>/config/delayOffset.json` every flushDelayOffsetInterval and when the actor
stops.

A replacement (after a kill -9) starts from delayOffset.json and, before its first run, asks
the writer how far it delivered each level (SERVICE_DELAY_PROGRESS): nothing delivered since
the last persist is delivered again, and the writer refuses a run it stored already. Only a
writer killed with a delivery under way can leave one stored but unanswered, delivered again
later: at-least-once, as RocketMQ is after a crash. A slave's service delivers nothing; it
answers GET_ALL_DELAY_OFFSET with the copy of its master's offsets that SlaveSynchronize wrote.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Final

from actors.broker.processors.service_put import (
    DelayRun,
    delay_progress,
    delay_progress_request,
    put_outcomes,
    put_request,
    run_answer,
)
from actors.core import Link, Request, not_supported
from protocol.bodies import DelayOffsetSerializeWrapper
from protocol.codes import RMQ_SYS_TRANS_HALF_TOPIC, RequestCode
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from protocol.message import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    MessageExt,
)
from store.commitlog import SCHEDULE_TOPIC
from store.config import StoreConfig, parse_delay_levels
from store.config_files import BackgroundWriter, read_json_with_bak, write_text_atomic
from store.consume_queue import PRE_BLANK_SIZE
from store.message_ext_broker_inner import MessageExtBrokerInner

log = logging.getLogger(__name__)

FIRST_DELAY_TIME: Final = 1000
DELAY_FOR_A_WHILE: Final = 100
DELAY_FOR_A_PERIOD: Final = 10_000
DEFAULT_FLUSH_INTERVAL: Final = 10_000
MAX_PER_TICK: Final = 256  # deliveries per level and run (one request to the writer)
WRITER: Final = "send"
RUNS_UNDER_WAY: Final = 2  # per level: the next run is read while the writer stores the last
GET_ALL_DELAY_OFFSET: Final = int(RequestCode.GET_ALL_DELAY_OFFSET)
DELAY_OFFSET_FILE: Final = "delayOffset.json"
_NOT_DELIVERABLE: Final = frozenset({RMQ_SYS_TRANS_HALF_TOPIC, SCHEDULE_TOPIC})


def delay_offset_path(store_config: StoreConfig) -> str:
    """StorePathConfigHelper.getDelayOffsetStorePath."""
    root = os.path.expanduser(store_config.storePathRootDir or ".")
    return os.path.join(root, "config", DELAY_OFFSET_FILE)


def read_persisted_offsets(store_config: StoreConfig) -> bytes:
    """delayOffset.json (else its .bak) as last written; an empty table when neither parses
    (a slave's copy of its master's offsets: SlaveSynchronize.syncDelayOffset)."""
    text = read_json_with_bak(delay_offset_path(store_config))
    return (text if text is not None else encode_offsets({})).encode()


def encode_offsets(table: dict[int, int]) -> str:
    """delayOffset.json text: fastjson's shape, integer keys unquoted (spec §4.4)."""
    inner = ",".join(f"{k}:{v}" for k, v in sorted(table.items()))
    return '{"offsetTable":{' + inner + "}}"


def build_delivery(msg: MessageExt) -> MessageExtBrokerInner | None:
    """ScheduleMessageService.messageTimeup: the message to store under its real topic, or None
    when the parked record has no usable REAL_TOPIC / REAL_QID."""
    props = dict(msg.properties)
    topic = props.get(PROPERTY_REAL_TOPIC)
    raw_qid = props.get(PROPERTY_REAL_QUEUE_ID)
    if not topic or raw_qid is None:
        return None
    try:
        queue_id = int(raw_qid)
    except ValueError:
        return None
    # Java renders the stored text from the parked record's properties before it clears DELAY
    # from the map: the delivered record keeps DELAY (and WAIT, REAL_TOPIC, REAL_QID)
    inner = MessageExtBrokerInner.from_stored(msg, topic, queue_id, props)
    inner.deliver_now = True
    return inner


class ScheduleMessageService:
    """The schedule group's core (ProcessorCore, LinkedCore, ClosingCore): per-level delivery
    timers over the store, puts through the writer."""

    def __init__(
        self,
        store: Any,
        store_config: StoreConfig,
        *,
        deliver: bool = True,
        path: str | None = None,
        max_per_tick: int = MAX_PER_TICK,
    ) -> None:
        self.store = store
        self.store_config = store_config
        self.deliver = deliver  # False on a slave: its offsets are its master's copy
        delays = parse_delay_levels(store_config.messageDelayLevel)
        self.delays: dict[int, int] = {i + 1: d for i, d in enumerate(delays)}
        self.path = path if path is not None else delay_offset_path(store_config)
        # MessageStoreConfig.flushDelayOffsetInterval's default (not a StoreConfig setting)
        self.flush_interval = DEFAULT_FLUSH_INTERVAL
        self.max_per_tick = max(1, max_per_tick)
        self.offsets: dict[int, int] = {}
        self.next_run: dict[int, int] = {}  # level -> due time (ms); empty until started
        self.next_persist = 0
        self.file_writer: BackgroundWriter | None = None  # periodic persists run on its thread
        self.dirty = False
        self.delivered = 0
        self._put_failing: set[int] = set()  # levels whose last delivery put failed (logged)
        self.writer: Link | None = None  # the store writer's link
        self.progress_known = False  # the writer said how far it delivered (after a link)
        self.under_way: list[DelayRun] = []  # with the writer, in request order
        if deliver:
            self.load()

    # --- persistence (ConfigManager) ---------------------------------------------------------

    def load(self) -> bool:
        """Read delayOffset.json (or its .bak); False when neither is usable."""
        text = read_json_with_bak(self.path)
        if text is None:
            return False
        try:
            table = DelayOffsetSerializeWrapper.from_json(text).offset_table
        except Exception:
            log.warning("unreadable %s, starting delay offsets from 0", self.path)
            return False
        # every level's offset is kept, a level not configured now too (ConfigManager.decode
        # puts the whole table): dropped, it would be persisted away, and a level configured
        # again later would deliver its whole queue a second time
        self.offsets = {k: v for k, v in table.items() if v >= 0}
        log.info("delay offsets loaded %s", self.offsets)
        return True

    def persist(self, background: bool = False) -> None:
        """Write delayOffset.json atomically (only when an offset moved); with `background`, on
        the writer thread so the fsyncs never stall this actor's runs."""
        if not self.dirty or not self.deliver:
            return
        text = encode_offsets(self.offsets)
        if background:
            if self.file_writer is None:
                self.file_writer = BackgroundWriter("delay-offset-writer")
            self.file_writer.submit(self.path, text)
        else:
            if self.file_writer is not None:
                self.file_writer.close()  # an older text queued there must not land after this
                self.file_writer = None
            write_text_atomic(self.path, text)
        self.dirty = False

    def encode(self) -> str:
        """The offsets as delayOffset.json text (GET_ALL_DELAY_OFFSET body)."""
        return encode_offsets(self.offsets)

    def close(self) -> None:
        """The actor stops: persist the offsets (a background write still queued lands
        first); never raises."""
        try:
            if self.file_writer is not None:
                self.file_writer.close()
                self.file_writer = None
            self.persist()
        except Exception:
            log.exception("persisting %s failed", self.path)

    # --- ProcessorCore: GET_ALL_DELAY_OFFSET -------------------------------------------------

    def process(self, req: Request, now_ms: int) -> RemotingCommand | None:
        """GET_ALL_DELAY_OFFSET (AdminBrokerProcessor.getAllDelayOffset): the live table; a
        slave answers the copy of its master's that SlaveSynchronize wrote."""
        cmd = req.cmd
        if cmd.code != GET_ALL_DELAY_OFFSET:
            return None if cmd.is_oneway else not_supported(cmd)
        body = self.encode().encode() if self.deliver else read_persisted_offsets(
            self.store_config)
        return cmd.make_response(RS.SUCCESS, None, None, body)

    def on_connection_closed(self, conn_id: int, now_ms: int) -> None:
        """Nothing per connection."""

    # --- LinkedCore: the writer ---------------------------------------------------------------

    def on_link(self, link: Link, now_ms: int) -> None:
        """A (new) writer: first ask how far it delivered each level."""
        if link.role != WRITER or not self.deliver:
            return
        self.writer = link
        self.progress_known = False
        self.under_way.clear()
        link.request(delay_progress_request())

    def on_link_record(self, link: Link, record: Any, now_ms: int) -> None:
        """No typed record comes to this core."""
        log.warning("schedule: unexpected %r from %s", record, link.role)

    def on_link_response(self, link: Link, resp: RemotingCommand, now_ms: int) -> None:
        """The writer's answers, in the order of the requests."""
        if link is not self.writer:
            return
        if not self.progress_known:
            for level, offset in delay_progress(resp).items():
                if offset > self.offsets.get(level, 0):
                    log.info("delay level %d: the writer delivered up to %d (saved: %d)", level,
                             offset, self.offsets.get(level, 0))  # fmt: skip
                    self.offsets[level] = offset
                    self.dirty = True
            self.progress_known = True
            return
        if not self.under_way:
            log.warning("schedule: an answer with no delivery under way")
            return
        self._delivered(self.under_way.pop(0), resp, now_ms)

    def on_link_lost(self, link: Link, now_ms: int) -> None:
        """The writer died: what it did not answer is delivered again through the next one."""
        if link is not self.writer:
            return
        self.writer = None
        for d in self.under_way:
            self.next_run[d.level] = now_ms
        self.under_way.clear()

    # --- timers ------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> int | None:
        """Run every level whose timer is due; ms until the next wanted tick."""
        if not self.deliver:
            return None
        if not self.next_run:  # start(): first run after FIRST_DELAY_TIME
            for level in self.delays:
                self.next_run[level] = now_ms + FIRST_DELAY_TIME
            self.next_persist = now_ms + self.flush_interval
        writer = self.writer
        ready = writer is not None and writer.alive and self.progress_known
        for level, due in self.next_run.items():
            if due > now_ms or not ready:
                continue
            if sum(1 for d in self.under_way if d.level == level) >= RUNS_UNDER_WAY:
                continue
            try:
                wait = self._run_level(level, now_ms)
            except Exception:
                log.exception("delay level %d run failed", level)
                wait = DELAY_FOR_A_PERIOD
            self.next_run[level] = now_ms + wait
        if now_ms >= self.next_persist:
            self.next_persist = now_ms + self.flush_interval
            try:
                self.persist(background=True)
            except Exception:
                log.exception("persisting %s failed", self.path)
        nxt = min(min(self.next_run.values()), self.next_persist)
        if not ready:  # no writer yet: look again a while later
            nxt = max(nxt, now_ms + DELAY_FOR_A_WHILE)
        return max(0, nxt - now_ms)

    def _run_level(self, level: int, now_ms: int) -> int:
        """DeliverDelayedMessageTimerTask.executeOnTimeup: send the due entries to the writer,
        from where the level's last run under way ends (else its offset); ms to re-arm."""
        store = self.store
        store.get_max_offset_in_queue(SCHEDULE_TOPIC, level - 1)  # a reader's view: synced
        cq = store.consume_queues.get((SCHEDULE_TOPIC, level - 1))
        if cq is None:
            return DELAY_FOR_A_WHILE
        ahead = [d.end for d in self.under_way if d.level == level]
        start = offset = ahead[-1] if ahead else self.offsets.get(level, 0)
        reset = False
        if not ahead:  # correctDelayOffset / executeOnTimeup: within the queue's bounds
            min_off, max_off = cq.get_min_offset_in_queue(), cq.get_max_offset_in_queue()
            if offset < min_off:
                log.warning("delay level %d offset %d below queue min %d", level, offset, min_off)
                start = offset = min_off
                reset = True
            elif offset > max_off:
                log.warning("delay level %d offset %d above queue max %d", level, offset, max_off)
                start = offset = max_off
                reset = True
        max_off = cq.get_max_offset_in_queue()
        limit = now_ms + self.delays[level]
        wait = DELAY_FOR_A_WHILE
        messages: list[MessageExtBrokerInner] = []
        nexts: list[int] = []
        while offset < max_off:
            if len(messages) >= self.max_per_tick:
                wait = 0
                break
            unit = cq.get_unit(offset)
            if unit is None or unit[1] == PRE_BLANK_SIZE:
                offset += 1
                continue
            phy, _size, deliver_ts = unit
            if deliver_ts > limit:  # clock skew: later than now + delay(level) means due now
                deliver_ts = now_ms
            if deliver_ts > now_ms:
                wait = deliver_ts - now_ms  # the countdown to the next entry
                break
            msg = store.look_message_by_offset(phy)
            inner = build_delivery(msg) if msg is not None else None
            if inner is None or inner.topic in _NOT_DELIVERABLE:
                log.error("delay level %d offset %d: undeliverable record skipped", level, offset)
                offset += 1
                continue
            offset += 1
            messages.append(inner)
            nexts.append(offset)
        if offset != start or reset:  # even skipped entries only: the writer's record follows
            run = DelayRun(level, start, offset, tuple(nexts), reset)
            assert self.writer is not None  # tick runs levels only then
            self.writer.request(put_request(messages, run=run))
            self.under_way.append(run)
        elif level not in self.offsets:
            self.offsets[level] = offset
            self.dirty = True
        return wait

    def _delivered(self, run: DelayRun, resp: RemotingCommand, now_ms: int) -> None:
        """The writer's answer to a run: the level's offset is where the writer's record of it
        says; a run that stopped at a failure (or was refused) is tried again after a while."""
        level = run.level
        answer = run_answer(resp)
        if answer is None:  # an error answer: nothing stored, try again
            log.warning("delay level %d: the writer answered %d %s", level, resp.code,
                        resp.remark)  # fmt: skip
            self.next_run[level] = now_ms + DELAY_FOR_A_WHILE
            return
        offset, refused = answer
        outcomes = put_outcomes(resp)
        stored = 0
        for o in outcomes:
            if not o.ok:
                break
            stored += 1
        self.delivered += stored
        if offset != self.offsets.get(level) or level not in self.offsets:
            self.offsets[level] = offset
            self.dirty = True
        if refused:  # an earlier run stopped short (its answer re-armed the level)
            return
        if stored < len(run.nexts):
            if level not in self._put_failing:  # once, not every 100 ms (a full disk)
                self._put_failing.add(level)
                status = outcomes[stored].status if stored < len(outcomes) else "no answer"
                log.warning("delay level %d offset %d: put failed %s (tried again every %d ms)",
                            level, offset, status, DELAY_FOR_A_WHILE)  # fmt: skip
            self.next_run[level] = now_ms + DELAY_FOR_A_WHILE
        elif level in self._put_failing:
            self._put_failing.discard(level)
            log.info("delay level %d delivers again from offset %d", level, run.start)
