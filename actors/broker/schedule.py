"""Delivers delayed messages parked in SCHEDULE_TOPIC_XXXX to their real topic and queue.

Mirrors store/schedule/ScheduleMessageService.java, RocketMQ 4.9.x (spec §9.6). A pure core:
no Thespian, no clock; the send processor's tick() drives it, because the send actor owns THE
store writer. One timer per delay level (first run 1000 ms after start); each run reads the
level's queue (queue id = level - 1) from its saved offset and re-stores every due entry under
REAL_TOPIC / REAL_QID; it re-arms after DELAY_FOR_A_WHILE (100 ms) when the next entry is not
due, the queue is drained or a put fails, and after DELAY_FOR_A_PERIOD (10 s) on an unexpected
error. Offsets go to `<storePathRootDir>/config/delayOffset.json` every flushDelayOffsetInterval
and at clean shutdown.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Final

from protocol.bodies import DelayOffsetSerializeWrapper
from protocol.codes import RMQ_SYS_TRANS_HALF_TOPIC
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
from store.put_message_result import PutMessageStatus

log = logging.getLogger(__name__)

FIRST_DELAY_TIME: Final = 1000
DELAY_FOR_A_WHILE: Final = 100
DELAY_FOR_A_PERIOD: Final = 10_000
DEFAULT_FLUSH_INTERVAL: Final = 10_000
MAX_PER_TICK: Final = 256  # deliveries per tick: the send actor serves no request meanwhile
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
    """Per-level delivery timers over THE store writer (ScheduleMessageService)."""

    def __init__(
        self,
        store: Any,
        store_config: StoreConfig,
        *,
        path: str | None = None,
        max_per_tick: int = MAX_PER_TICK,
    ) -> None:
        self.store = store
        delays = parse_delay_levels(store_config.messageDelayLevel)
        self.delays: dict[int, int] = {i + 1: d for i, d in enumerate(delays)}
        self.path = path if path is not None else delay_offset_path(store_config)
        # MessageStoreConfig.flushDelayOffsetInterval's default (not a StoreConfig setting)
        self.flush_interval = DEFAULT_FLUSH_INTERVAL
        self.max_per_tick = max(1, max_per_tick)
        self.offsets: dict[int, int] = {}
        self.next_run: dict[int, int] = {}  # level -> due time (ms); empty until started
        self.next_persist = 0
        self.writer: BackgroundWriter | None = None  # periodic persists run on its thread
        self.dirty = False
        self.delivered = 0
        self._put_failing: set[int] = set()  # levels whose last delivery put failed (logged)
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
        the writer thread so the fsyncs never stall the store writer's requests."""
        if not self.dirty:
            return
        text = encode_offsets(self.offsets)
        if background:
            if self.writer is None:
                self.writer = BackgroundWriter("delay-offset-writer")
            self.writer.submit(self.path, text)
        else:
            if self.writer is not None:
                self.writer.close()  # an older text queued there must not land after this one
                self.writer = None
            write_text_atomic(self.path, text)
        self.dirty = False

    def encode(self) -> str:
        """The offsets as delayOffset.json text (GET_ALL_DELAY_OFFSET body)."""
        return encode_offsets(self.offsets)

    def shutdown(self) -> None:
        """Persist the offsets (clean shutdown; a background write still queued lands first);
        never raises."""
        try:
            if self.writer is not None:
                self.writer.close()
                self.writer = None
            self.persist()
        except Exception:
            log.exception("persisting %s failed", self.path)

    # --- timers ------------------------------------------------------------------------------

    def tick(self, now_ms: int) -> int:
        """Run every level whose timer is due; ms until the next wanted tick."""
        if not self.next_run:  # start(): first run after FIRST_DELAY_TIME
            for level in self.delays:
                self.next_run[level] = now_ms + FIRST_DELAY_TIME
            self.next_persist = now_ms + self.flush_interval
        budget = self.max_per_tick
        for level, due in self.next_run.items():
            if due > now_ms:
                continue
            if budget <= 0:
                self.next_run[level] = now_ms  # out of budget: run again right away
                continue
            try:
                budget, wait = self._run_level(level, now_ms, budget)
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
        return max(0, nxt - now_ms)

    def _run_level(self, level: int, now_ms: int, budget: int) -> tuple[int, int]:
        """DeliverDelayedMessageTimerTask.executeOnTimeup: (budget left, ms to re-arm)."""
        store = self.store
        cq = store.consume_queues.get((SCHEDULE_TOPIC, level - 1))
        if cq is None:
            return budget, DELAY_FOR_A_WHILE
        start = offset = self.offsets.get(level, 0)
        min_off = cq.get_min_offset_in_queue()
        if offset < min_off:
            log.warning("delay level %d offset %d below queue min %d", level, offset, min_off)
            offset = min_off
        max_off = cq.get_max_offset_in_queue()
        if offset > max_off:  # correctDelayOffset / executeOnTimeup: never past the queue's end
            log.warning("delay level %d offset %d above queue max %d", level, offset, max_off)
            offset = max_off
        limit = now_ms + self.delays[level]
        wait = DELAY_FOR_A_WHILE
        while offset < max_off:
            if budget <= 0:
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
                break
            msg = store.look_message_by_offset(phy)
            inner = build_delivery(msg) if msg is not None else None
            if inner is None or inner.topic in _NOT_DELIVERABLE:
                log.error("delay level %d offset %d: undeliverable record skipped", level, offset)
                offset += 1
                continue
            result = store.put_message(inner, now_ms)
            if result.status is not PutMessageStatus.PUT_OK:
                if level not in self._put_failing:  # once, not every 100 ms (a full disk)
                    self._put_failing.add(level)
                    log.warning("delay level %d offset %d: put to %s failed %s (tried again "
                                "every %d ms)", level, offset, inner.topic, result.status.name,
                                DELAY_FOR_A_WHILE)  # fmt: skip
                break
            if level in self._put_failing:
                self._put_failing.discard(level)
                log.info("delay level %d delivers again from offset %d", level, offset)
            offset += 1
            budget -= 1
            self.delivered += 1
        if offset != start or level not in self.offsets:
            self.offsets[level] = offset
            self.dirty = True
        return budget, wait
