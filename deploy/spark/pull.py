"""A Spark task reads one queue range straight from its broker: pipelined PULL_MESSAGE calls.

Mirrors client/impl/consumer/PullAPIWrapper.java (pullKernelImpl + processPullResult: decode
the records, inflate compressed bodies, keep only messages whose tag is subscribed, as the
broker filters by tag hash only) over MQClientAPIImpl.pullMessageSync, with the pull flags of
a consumer that does not commit and does not suspend (sysFlag = FLAG_SUBSCRIPTION only). The
range [start, end) is cut into windows of pullBatchSize offsets; windows covering up to
IN_FLIGHT offsets (4 to 64 windows) are in flight on the one connection, and a window the
broker answered only in part (its byte cap) or skipped into (filtered messages) is continued
from nextBeginOffset before the next is read, so rows come out in queue-offset order. The
requests are pre-encoded and the answers read in place (deploy.spark.pull_connection); a batch
is built from the answers' bytes where they were received; each answer's status and offsets
are read by the client's processPullResponse (actors.client.mq_client_api, without copying
the body). Runs on executors: no actor system, no bridge.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from actors.client.client_requests import process_pull_response, pull_frames
from actors.client.errors import MQBrokerError
from actors.client.records import PullResult, PullStatus
from actors.runtime.tls import TlsConfig
from deploy.spark.bridge_client import DataLossError, RocketMQSourceError
from deploy.spark.decoder import BatchBuilder, Gathered
from deploy.spark.pull_connection import Answer, PullConnection
from deploy.wire import parse_addr
from protocol.acl import SessionCredentials
from protocol.codes import PullSysFlag, ResponseCode
from protocol.errors import ProtocolError
from protocol.headers import PullMessageRequestHeader

log = logging.getLogger(__name__)

# offsets asked for ahead per task (refilled when half are back): enough that the broker
# still has requests while the task builds a batch (4096 rows), or both wait in turn
IN_FLIGHT: Final = 2048
ROWS_PER_BATCH: Final = 4096  # rows per Arrow record batch handed to Spark (or fewer: the
# ones whose answers fill the connection's arena)
RETRIES: Final = 5  # SYSTEM_BUSY and other transient answers, with a growing pause
BUSY_PAUSE_S: Final = 0.05
_TRANSIENT: Final = frozenset((ResponseCode.SYSTEM_BUSY, ResponseCode.SYSTEM_ERROR,
                               ResponseCode.SERVICE_NOT_AVAILABLE))  # fmt: skip


@dataclass(frozen=True, slots=True)
class PullRange:
    """What one task reads (the body of a RocketMQPartition)."""

    topic: str
    broker: str
    queue_id: int
    addr: str
    start: int
    end: int
    group: str
    sub_expression: str
    tags: frozenset[str] | None
    batch_size: int
    timeout_ms: int
    fail_on_data_loss: bool
    credentials: SessionCredentials | None = None  # ACL: every pull signed
    tls: TlsConfig | None = None  # useTLS


def _header(r: PullRange) -> PullMessageRequestHeader:
    return PullMessageRequestHeader(
        consumer_group=r.group, topic=r.topic, queue_id=r.queue_id, queue_offset=r.start,
        max_msg_nums=r.batch_size, sys_flag=PullSysFlag.FLAG_SUBSCRIPTION, commit_offset=0,
        suspend_timeout_millis=0, sub_version=0, subscription=r.sub_expression,
        expression_type="TAG",
    )  # fmt: skip


def read_range(r: PullRange) -> Iterator[Any]:
    """Arrow record batches of every message in [r.start, r.end) (tag-filtered)."""
    if r.end <= r.start:
        return
    builder = BatchBuilder(r.topic, r.broker, r.queue_id, r.tags)
    frames = pull_frames(_header(r), r.credentials)
    conn = PullConnection(parse_addr(r.addr), frames, tls=r.tls)
    try:
        yield from _batches(r, conn, builder)
    finally:
        conn.close()


def _batches(r: PullRange, conn: PullConnection, builder: BatchBuilder) -> Iterator[Any]:
    """Every offset in [start, end), in order, a batch at a time."""
    timeout_s = r.timeout_ms / 1000.0
    depth = max(4, min(64, IN_FLIGHT // r.batch_size))  # windows in flight
    # (opaque, offset asked, window end, attempts) of each pull in flight, in window order
    inflight: deque[tuple[int, int, int, int]] = deque()
    next_window = r.start
    done = r.start  # every offset below has been read (or skipped as filtered or lost)
    gathered = Gathered()
    while done < r.end:
        if len(inflight) <= depth // 2:  # refill in one write: fewer wake-ups
            asks: list[tuple[int, int]] = []
            while next_window < r.end and len(inflight) + len(asks) < depth:
                wend = min(next_window + r.batch_size, r.end)
                asks.append((next_window, wend))
                next_window = wend
            if asks:
                sent = _send(conn, r, [(o, e - o) for o, e in asks])
                inflight.extend((q, o, e, 0) for q, (o, e) in zip(sent, asks))
        opaque, offset, wend, attempt = inflight[0]
        got = _answer(conn, r, opaque, offset, timeout_s)
        if got is None:  # the arena is full: hand on the batch it holds, then reuse it
            if len(gathered):
                yield builder.build(gathered, conn.data)
                gathered = Gathered()
            conn.reclaim()
            continue
        inflight.popleft()
        resp = got.cmd
        code = resp.code
        if code in _TRANSIENT and attempt < RETRIES:  # asked again after a growing pause
            log.warning("pull %s answered %d (%s); again", _where(r, offset), code,
                        resp.remark)  # fmt: skip
            time.sleep(BUSY_PAUSE_S * (attempt + 1))
            (q,) = _send(conn, r, [(offset, wend - offset)])
            inflight.appendleft((q, offset, wend, attempt + 1))
            continue
        try:
            head = process_pull_response(resp, r.addr, body=False)
        except MQBrokerError as exc:
            raise RocketMQSourceError(f"pulling {_where(r, offset)} from {r.addr}: code "
                                      f"{code} {exc.message}") from None  # fmt: skip
        nxt = head.next_begin_offset
        before = done
        if head.status is PullStatus.FOUND:
            done = gathered.gather(conn.view, got.lo, got.hi, done, r.end)
            done = max(done, min(nxt, r.end))
            if len(gathered) >= ROWS_PER_BATCH:
                yield builder.build(gathered, conn.data)
                gathered = Gathered()
                conn.settle()
        elif head.status is PullStatus.NO_MATCHED_MSG:  # nothing matched up to nxt
            done = max(done, min(nxt, r.end))
        else:  # NO_NEW_MSG, OFFSET_ILLEGAL: the range's offsets are not there
            done = max(done, _lost(r, head, offset))
        if done < wend:  # the rest of this window first (byte cap, filtered messages)
            if done == before and offset >= before:
                raise RocketMQSourceError(f"pulling {_where(r, offset)} from {r.addr} "
                                          f"made no progress (nextBeginOffset {nxt})")
            (q,) = _send(conn, r, [(done, wend - done)])
            inflight.appendleft((q, done, wend, 0))
        next_window = max(next_window, done)
    if len(gathered):
        yield builder.build(gathered, conn.data)


def _send(conn: PullConnection, r: PullRange, pulls: list[tuple[int, int]]) -> list[int]:
    try:
        return conn.send(pulls)
    except OSError as exc:
        raise RocketMQSourceError(f"pulling {_where(r, pulls[0][0])} from {r.addr}: "
                                  f"{exc}") from None  # fmt: skip


def _answer(conn: PullConnection, r: PullRange, opaque: int, offset: int, timeout_s: float
            ) -> Answer | None:  # fmt: skip
    """The pull's answer (None: no room in the arena)."""
    try:
        return conn.answer(opaque, timeout_s)
    except (OSError, TimeoutError, ProtocolError) as exc:
        raise RocketMQSourceError(f"pulling {_where(r, offset)} from {r.addr}: "
                                  f"{exc}") from None  # fmt: skip


def _lost(r: PullRange, head: PullResult, offset: int) -> int:
    """A pull found its offset gone (below min) or past the queue's end: data loss. Raises,
    or with failOnDataLoss=false logs and returns the offset to go on from."""
    lo, hi = head.min_offset, head.max_offset
    if offset < lo:
        what = f"offsets [{offset}, {min(lo, r.end)}) were removed (retention)"
        resume = min(lo, r.end)
    else:
        what = f"the queue now ends at {hi}, before the planned end {r.end}"
        resume = r.end
    msg = f"{_where(r, offset)}: {what}"
    if r.fail_on_data_loss:
        raise DataLossError(msg + " (failOnDataLoss=true)")
    log.warning("%s; skipped (failOnDataLoss=false)", msg)
    return resume


def _where(r: PullRange, offset: int) -> str:
    return f"{r.topic}/{r.broker}/{r.queue_id} at offset {offset}"
