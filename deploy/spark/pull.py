"""A Spark task reads one queue range straight from its broker: pipelined PULL_MESSAGE calls.

Mirrors client/impl/consumer/PullAPIWrapper.java (pullKernelImpl + processPullResult: decode
the records, inflate compressed bodies, keep only messages whose tag is subscribed, as the
broker filters by tag hash only) over MQClientAPIImpl.pullMessageSync, with the pull flags of
a consumer that does not commit and does not suspend (sysFlag = FLAG_SUBSCRIPTION only). The
range [start, end) is cut into windows of pullBatchSize offsets; windows covering up to
IN_FLIGHT offsets (4 to 64 windows) are in flight on the one connection, and a window the
broker answered only in part (its byte cap) or skipped into (filtered messages) is continued
from nextBeginOffset before the next is read, so rows come out in queue-offset order. Runs
on executors: no actor system, no bridge.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from deploy.spark.bridge_client import DataLossError, RocketMQSourceError
from deploy.spark.decoder import BatchBuilder, Gathered
from deploy.wire import BlockingClient
from protocol.codes import PullSysFlag, RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError
from protocol.headers import PullMessageRequestHeader

log = logging.getLogger(__name__)

# offsets asked for ahead per task (refilled when half are back): enough that the broker
# still has requests while the task builds a batch (4096 rows), or both wait in turn
IN_FLIGHT: Final = 2048
ROWS_PER_BATCH: Final = 4096  # rows per Arrow record batch handed to Spark
BYTES_PER_BATCH: Final = 64 * 1024 * 1024  # or fewer: a batch's binary offsets are int32
RETRIES: Final = 5  # SYSTEM_BUSY and other transient answers, with a growing pause
BUSY_PAUSE_S: Final = 0.05


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


def _pull(r: PullRange, offset: int, nums: int) -> RemotingCommand:
    return RemotingCommand.request(RequestCode.PULL_MESSAGE, PullMessageRequestHeader(
        consumer_group=r.group, topic=r.topic, queue_id=r.queue_id, queue_offset=offset,
        max_msg_nums=nums, sys_flag=PullSysFlag.FLAG_SUBSCRIPTION, commit_offset=0,
        suspend_timeout_millis=0, sub_version=0, subscription=r.sub_expression,
        expression_type="TAG",
    ).to_ext())  # fmt: skip


def read_range(r: PullRange) -> Iterator[Any]:
    """Arrow record batches of every message in [r.start, r.end) (tag-filtered)."""
    builder = BatchBuilder(r.topic, r.broker, r.queue_id, r.tags)
    for gathered in _gather(r):
        got = builder.build(gathered)
        if got.num_rows:
            yield got


def _gather(r: PullRange) -> Iterator[Gathered]:
    """The records of every offset in [start, end), in order, a batch's worth at a time."""
    if r.end <= r.start:
        return
    timeout_s = r.timeout_ms / 1000.0
    depth = max(4, min(64, IN_FLIGHT // r.batch_size))  # windows in flight
    client = BlockingClient(r.addr)
    inflight: deque[tuple[int, int, int]] = deque()  # (opaque, offset asked, window end)
    next_window = r.start
    done = r.start  # every offset below has been read (or skipped as filtered or lost)
    gathered = Gathered()
    try:
        while done < r.end:
            if len(inflight) <= depth // 2:  # refill in one write: fewer wake-ups
                cmds = []
                while next_window < r.end and len(inflight) < depth:
                    wend = min(next_window + r.batch_size, r.end)
                    cmds.append(_pull(r, next_window, wend - next_window))
                    inflight.append((cmds[-1].opaque, next_window, wend))
                    next_window = wend
                if cmds:
                    client.send(*cmds)
            opaque, offset, wend = inflight.popleft()
            resp = _answer(client, r, opaque, offset, wend, timeout_s)
            code = resp.code
            nxt = int((resp.ext_fields or {}).get("nextBeginOffset", offset))
            before = done
            if code == ResponseCode.SUCCESS:
                done = gathered.gather(memoryview(resp.body), done, r.end)
                done = max(done, min(nxt, r.end))
                if len(gathered) >= ROWS_PER_BATCH or gathered.nbytes >= BYTES_PER_BATCH:
                    if len(gathered):  # (nothing when every record walked was a re-read)
                        yield gathered
                    gathered = Gathered()
            elif code == ResponseCode.PULL_RETRY_IMMEDIATELY:  # nothing matched up to nxt
                done = max(done, min(nxt, r.end))
            elif code in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED):
                done = max(done, _lost(r, resp, offset))
            else:
                raise RocketMQSourceError(f"pulling {_where(r, offset)} from {r.addr}: code "
                                          f"{code} {resp.remark or ''}")  # fmt: skip
            if done < wend:  # the rest of this window first (byte cap, filtered messages)
                if done == before and offset >= before:
                    raise RocketMQSourceError(f"pulling {_where(r, offset)} from {r.addr} "
                                              f"made no progress (nextBeginOffset {nxt})")
                cmd = _pull(r, done, wend - done)
                client.send(cmd)
                inflight.appendleft((cmd.opaque, done, wend))
            next_window = max(next_window, done)
        if len(gathered):
            yield gathered
    finally:
        client.close()


def _answer(client: BlockingClient, r: PullRange, opaque: int, offset: int, wend: int,
            timeout_s: float) -> RemotingCommand:  # fmt: skip
    """The pull's answer; transient refusals (SYSTEM_BUSY, ...) are asked again."""
    for attempt in range(RETRIES + 1):
        try:
            resp = client.wait_response(opaque, timeout_s)
        except (OSError, TimeoutError, ProtocolError) as exc:
            raise RocketMQSourceError(f"pulling {_where(r, offset)} from {r.addr}: "
                                      f"{exc}") from None  # fmt: skip
        if resp.code not in (ResponseCode.SYSTEM_BUSY, ResponseCode.SYSTEM_ERROR,
                             ResponseCode.SERVICE_NOT_AVAILABLE) or attempt == RETRIES:
            return resp
        log.warning("pull %s answered %d (%s); again", _where(r, offset), resp.code,
                    resp.remark)  # fmt: skip
        time.sleep(BUSY_PAUSE_S * (attempt + 1))
        cmd = _pull(r, offset, wend - offset)
        client.send(cmd)
        opaque = cmd.opaque
    raise AssertionError("unreachable")


def _lost(r: PullRange, resp: RemotingCommand, offset: int) -> int:
    """A pull found its offset gone (below min) or past the queue's end: data loss. Raises,
    or with failOnDataLoss=false logs and returns the offset to go on from."""
    ext = resp.ext_fields or {}
    lo, hi = int(ext.get("minOffset", 0)), int(ext.get("maxOffset", 0))
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
