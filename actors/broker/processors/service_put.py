"""The store writer's puts for the broker's service actors, and the requests that ask for them.

Mirrors the store calls RocketMQ 4.9.x's ScheduleMessageService (messageTimeup's putMessage of
a due delayed message) and TransactionalMessageCheckService (putBackHalfMsgQueue, the discard
to TRANS_CHECK_MAX_TIME_TOPIC) make in the broker's one JVM. Here those services are actors of
their own that read the store read-only; the one store writer (the send actor) stores for
them what they send on their link as SERVICE_PUT_MESSAGES requests (protocol.codes.
BrokerServiceCode): messages stored in order, stopping at the first that fails, each one's
outcome in the answer. The requests come only on links (negative connection ids); the
RemotingServer routes neither code to any processor.

A ScheduleMessageService run (`DelayRun`: a level, the schedule queue offsets it covers, the
offset after each message) keeps the writer's record of how far each level is delivered, and a
run is stored only where the last one of its level ended: so a run sent while an earlier one is
under way (the service pipelines two) is refused when that earlier one stopped at a failure
(its messages would go out of order, and twice once the failed one is tried again), and a
replacement service never delivers twice what this writer stored. SERVICE_DELAY_PROGRESS
answers that record (what a replacement resumes from, when it is further than its
delayOffset.json); a run whose start the service corrected (correctDelayOffset) resets it.

Wire: the request body is a msgpack array of messages, each [topic, body, flag, properties,
queue id, sys flag, born timestamp, born host, store host, reconsume times, prepared
transaction offset, deliver now]; ext fields ensureTopic ("true": create the topic as a
send-back does), and for a run delayLevel, delayFrom, delayEnd, delayNext (the offset after each
message, comma-separated) and delayReset ("true"). The answer's body is a msgpack array of
[status name, wrote offset, queue offset] per message tried; a run's answer carries
delayProgress (the level's offset after it) and delayRefused ("true": nothing was tried).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgpack

from actors.broker.topic_config import PERM_READ, PERM_WRITE, TopicConfig
from actors.core import Request, not_supported
from protocol.codes import BrokerServiceCode
from protocol.codes import ResponseCode as RS
from protocol.command import RemotingCommand
from store.message_ext_broker_inner import MessageExtBrokerInner
from store.put_message_result import PutMessageStatus

log = logging.getLogger(__name__)

PUT_MESSAGES: Final = int(BrokerServiceCode.SERVICE_PUT_MESSAGES)
DELAY_PROGRESS: Final = int(BrokerServiceCode.SERVICE_DELAY_PROGRESS)
SERVICE_CODES: Final = frozenset({PUT_MESSAGES, DELAY_PROGRESS})
RW: Final = PERM_READ | PERM_WRITE
PUT_OK: Final = PutMessageStatus.PUT_OK.name


@dataclass(frozen=True, slots=True)
class DelayRun:
    """The part of a level's schedule queue one SERVICE_PUT_MESSAGES request delivers."""

    level: int
    start: int  # the queue offset the run read from
    end: int  # the offset after everything it read (skipped entries included)
    nexts: tuple[int, ...]  # the offset after each message it carries
    reset: bool = False  # its start was corrected: the writer's record starts over there

    def after(self, stored: int) -> int:
        """The level's offset once the first `stored` messages are stored."""
        if stored >= len(self.nexts):
            return self.end
        return self.nexts[stored - 1] if stored else self.start


@dataclass(frozen=True, slots=True)
class PutOutcome:
    """What the writer did with one message of a SERVICE_PUT_MESSAGES request."""

    status: str  # a PutMessageStatus name
    wrote_offset: int
    logics_offset: int

    @property
    def ok(self) -> bool:
        """Stored."""
        return self.status == PUT_OK


def _message_fields(m: MessageExtBrokerInner) -> list[Any]:
    return [m.topic, bytes(m.body), m.flag, m.properties, m.queue_id, m.sys_flag,
            m.born_timestamp, m.born_host, m.store_host, m.reconsume_times,
            m.prepared_transaction_offset, m.deliver_now]  # fmt: skip


def put_request(messages: Sequence[MessageExtBrokerInner], *, ensure_topic: bool = False,
                run: DelayRun | None = None) -> RemotingCommand:  # fmt: skip
    """SERVICE_PUT_MESSAGES for `messages` (a ScheduleMessageService's `run` of a level)."""
    ext: dict[str, str] = {}
    if ensure_topic:
        ext["ensureTopic"] = "true"
    if run is not None:
        ext.update(delayLevel=str(run.level), delayFrom=str(run.start), delayEnd=str(run.end),
                   delayNext=",".join(map(str, run.nexts)))  # fmt: skip
        if run.reset:
            ext["delayReset"] = "true"
    body = msgpack.packb([_message_fields(m) for m in messages], use_bin_type=True)
    return RemotingCommand.request(PUT_MESSAGES, ext, body)


def decode_run(ext: dict[str, str]) -> DelayRun | None:
    """The run a request carries (None: not a delivery; ValueError when malformed)."""
    if "delayLevel" not in ext:
        return None
    return DelayRun(int(ext["delayLevel"]), int(ext["delayFrom"]), int(ext["delayEnd"]),
                    tuple(int(x) for x in ext.get("delayNext", "").split(",") if x),
                    ext.get("delayReset") == "true")  # fmt: skip


def run_answer(resp: RemotingCommand) -> tuple[int, bool] | None:
    """(the level's offset the writer recorded, whether it refused the run) of a run's answer."""
    ext = resp.ext_fields or {}
    if resp.code != RS.SUCCESS or "delayProgress" not in ext:
        return None
    return int(ext["delayProgress"]), ext.get("delayRefused") == "true"


def decode_messages(body: Any) -> list[MessageExtBrokerInner]:
    """The messages of a SERVICE_PUT_MESSAGES body (ValueError when it is not one)."""
    try:
        items = msgpack.unpackb(body, use_list=True, raw=False)
        return [MessageExtBrokerInner(
            topic=t, body=b, flag=f, properties=dict(p), queue_id=q, sys_flag=sf,
            born_timestamp=bt, born_host=bh, store_host=sh, reconsume_times=rt,
            prepared_transaction_offset=pto, deliver_now=bool(dn))
            for t, b, f, p, q, sf, bt, bh, sh, rt, pto, dn in items]  # fmt: skip
    except (ValueError, TypeError, msgpack.ExtraData, msgpack.FormatError,
            msgpack.StackError) as exc:  # fmt: skip
        raise ValueError(f"bad SERVICE_PUT_MESSAGES body: {exc}") from None


def put_outcomes(resp: RemotingCommand) -> list[PutOutcome]:
    """The outcome of each message the writer tried ([] for an error answer)."""
    if resp.code != RS.SUCCESS:
        log.warning("service put refused: %d %s", resp.code, resp.remark)
        return []
    return [PutOutcome(str(s), int(w), int(q))
            for s, w, q in msgpack.unpackb(resp.body, use_list=True, raw=False)]  # fmt: skip


def delay_progress_request() -> RemotingCommand:
    """SERVICE_DELAY_PROGRESS."""
    return RemotingCommand.request(DELAY_PROGRESS)


def delay_progress(resp: RemotingCommand) -> dict[int, int]:
    """level -> the schedule queue offset past the last delivery this writer stored."""
    if resp.code != RS.SUCCESS or not resp.body:
        return {}
    return {int(k): int(v) for k, v in json.loads(bytes(resp.body)).items()}


class ServicePutProcessor:
    """The writer's side: serves the two codes for the service actors' links."""

    def __init__(self, ctx: Any, emit_topic: Callable[[TopicConfig], None]) -> None:
        self.ctx = ctx
        self.emit_topic = emit_topic
        # level -> schedule queue offset past the last delivery stored (this process's life)
        self.delay_progress: dict[int, int] = {}

    def process(self, req: Request, now_ms: int) -> RemotingCommand:
        """Answer one request of a service actor."""
        cmd = req.cmd
        if req.conn_id >= 0:  # a client's: these codes travel on links only
            return not_supported(cmd)
        if cmd.code == DELAY_PROGRESS:
            body = json.dumps({str(k): v for k, v in self.delay_progress.items()}).encode()
            return cmd.make_response(RS.SUCCESS, None, None, body)
        ext = cmd.ext_fields or {}
        try:
            messages = decode_messages(cmd.body)
            run = decode_run(ext)
        except (ValueError, KeyError) as exc:
            return cmd.make_response(RS.SYSTEM_ERROR, str(exc))
        if run is not None:
            known = self.delay_progress.get(run.level)
            if known is not None and known != run.start and not run.reset:
                # not where the level's last run ended: an earlier run failed, or this one
                # was stored already
                return cmd.make_response(RS.SUCCESS, None, {
                    "delayProgress": str(known), "delayRefused": "true"},
                    msgpack.packb([], use_bin_type=True))  # fmt: skip
        ensure = ext.get("ensureTopic") == "true"
        outcomes: list[list[Any]] = []
        store = self.ctx.store
        for m in messages:
            if ensure:
                tc, created = self.ctx.topics.create_in_send_back(m.topic, 1, RW)
                if created:
                    self.emit_topic(tc)
            r = store.put_message(m, now_ms)
            outcomes.append([r.status.name, r.wrote_offset, r.logics_offset])
            if r.status is not PutMessageStatus.PUT_OK:
                break
        resp_ext = None
        if run is not None:
            stored = sum(1 for o in outcomes if o[0] == PUT_OK)
            self.delay_progress[run.level] = run.after(stored)
            resp_ext = {"delayProgress": str(run.after(stored))}
        return cmd.make_response(RS.SUCCESS, None, resp_ext,
                                 msgpack.packb(outcomes, use_bin_type=True))  # fmt: skip
