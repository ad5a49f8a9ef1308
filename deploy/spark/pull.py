"""A Spark task reads one queue range straight from its broker: pipelined PULL_MESSAGE calls.

Mirrors client/impl/consumer/PullAPIWrapper.java (pullKernelImpl + processPullResult: decode
the records, inflate compressed bodies, keep only messages whose tag is subscribed, as the
broker filters by tag hash only) over MQClientAPIImpl.pullMessageSync, with the pull flags of
a consumer that does not commit and does not suspend (sysFlag = FLAG_SUBSCRIPTION only). The
range [start, end) is cut into windows of pullBatchSize offsets; up to PIPELINE windows are in
flight on the one connection, and a window the broker answered only in part (its byte cap) or
skipped into (filtered messages) is continued from nextBeginOffset before the next is read,
so rows come out in queue-offset order. Runs on executors: no actor system, no bridge.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from deploy.spark.bridge_client import DataLossError, RocketMQSourceError
from deploy.wire import BlockingClient
from protocol.codes import PullSysFlag, RequestCode, ResponseCode
from protocol.command import RemotingCommand
from protocol.errors import ProtocolError
from protocol.headers import PullMessageRequestHeader
from protocol.message import decode_messages, stored_properties

log = logging.getLogger(__name__)

PIPELINE: Final = 16  # pull requests in flight per task (refilled when half are back)
ROWS_PER_BATCH: Final = 4096  # rows per Arrow record batch handed to Spark
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
    msgs: list[Any] = []
    batch = _BatchBuilder(r)
    for m in _messages(r):
        msgs.append(m)
        if len(msgs) >= ROWS_PER_BATCH:
            got = batch.build(msgs)
            if got.num_rows:
                yield got
            msgs = []
    if msgs:
        got = batch.build(msgs)
        if got.num_rows:
            yield got


class _BatchBuilder:
    """Messages to one Arrow record batch: per message only the fields as decoded; the
    properties strings are split into the map, tags, keys and msgId by Arrow compute kernels
    for the whole batch (what PullAPIWrapper's per-message tag check does, here vectorized)."""

    def __init__(self, r: PullRange) -> None:
        import pyarrow as pa

        from deploy.spark.schema import arrow_schema

        self.pa = pa
        self.r = r
        self.schema = arrow_schema()
        self.string = pa.string()
        self.ts = pa.timestamp("ms", tz="UTC")
        self.us = pa.timestamp("us", tz="UTC")
        self.consts = (pa.scalar(r.topic, self.string), pa.scalar(r.broker, self.string),
                       pa.scalar(r.queue_id, pa.int32()))  # fmt: skip
        self.wanted = None if r.tags is None else pa.array(sorted(r.tags), self.string)
        self.hosts: dict[bytes, str] = {}  # packed host -> "ip:port" (a handful per range)

    def _host(self, raw: bytes, m: Any, born: bool) -> str:
        text = self.hosts.get(raw)
        if text is None:
            text = self.hosts[raw] = m.born_address if born else m.store_address
        return text

    def build(self, msgs: list[Any]) -> Any:
        """One record batch of msgs (only the subscribed tags)."""
        import pyarrow.compute as pc

        pa, n, host, hosts = self.pa, len(msgs), self._host, self.hosts
        props = _Properties(pa, self._strings([stored_properties(m) for m in msgs]))
        uniq = props.field("UNIQ_KEY")
        if uniq.null_count:  # no UNIQ_KEY: the offset message id, as MessageExt.getMsgId
            uniq = pa.array([u if u is not None else m.offset_msg_id
                             for u, m in zip(uniq.to_pylist(), msgs, strict=True)], self.string)
        tags = props.field("TAGS")
        batch = pa.RecordBatch.from_arrays([
            pa.repeat(self.consts[0], n), pa.repeat(self.consts[1], n),
            pa.repeat(self.consts[2], n),
            pa.array([m.queue_offset for m in msgs], pa.int64()), uniq, tags,
            props.field("KEYS"), pa.array([m.body for m in msgs], pa.binary()), props.map(),
            pa.array([m.born_timestamp for m in msgs], self.ts).cast(self.us),
            pa.array([m.store_timestamp for m in msgs], self.ts).cast(self.us),
            pa.array([hosts.get(m.born_host) or host(m.born_host, m, True) for m in msgs],
                     self.string),
            pa.array([hosts.get(m.store_host) or host(m.store_host, m, False) for m in msgs],
                     self.string),
            pa.array([m.reconsume_times for m in msgs], pa.int32()),
        ], schema=self.schema)  # fmt: skip
        if self.wanted is not None:  # the client-side tag check (the broker matched hashes)
            batch = batch.filter(pc.fill_null(pc.is_in(tags, value_set=self.wanted), False))
        return batch

    def _strings(self, raws: list[bytes]) -> Any:
        pa = self.pa
        try:
            return pa.array(raws, pa.binary()).cast(self.string)
        except pa.ArrowInvalid:  # not UTF-8 (never written by Java): decoded as the parser does
            return pa.array([b.decode("utf-8", "replace") for b in raws], self.string)


class _Properties:
    """The properties strings (name\x01value\x02...) of a batch, split by Arrow kernels with
    protocol.message.parse_properties' rules: a pair splits at its first \x01, and pairs with
    an empty name or value are dropped (a repeated name, which no RocketMQ client writes, stays
    repeated in the map; field() takes its last value, as the parser does)."""

    def __init__(self, pa: Any, props: Any) -> None:
        import pyarrow.compute as pc

        self.pa, self.n = pa, len(props)
        self.pairs = pc.split_pattern(pc.utf8_rtrim(props, characters="\x02"), pattern="\x02")
        kv = pc.split_pattern(pc.list_flatten(self.pairs), pattern="\x01", max_splits=1)
        self.parents = pc.list_parent_indices(self.pairs)
        lengths = pc.list_value_length(kv)
        two = pc.equal(lengths, 2)
        self.keys = pc.list_element(pc.filter(kv, two), 0)
        self.values = pc.list_element(pc.filter(kv, two), 1)
        self.exact = pc.all(two).as_py()  # True: every pair is name\x01value (the usual case)
        if not self.exact:
            self.parents = pc.filter(self.parents, two)
        good = pc.and_(pc.greater(pc.utf8_length(self.keys), 0),
                       pc.greater(pc.utf8_length(self.values), 0))
        if not pc.all(good).as_py():
            self.exact = False
            self.keys, self.values = pc.filter(self.keys, good), pc.filter(self.values, good)
            self.parents = pc.filter(self.parents, good)

    def map(self) -> Any:
        """MAP<STRING,STRING>, one per message."""
        pa = self.pa
        if self.exact:
            return pa.MapArray.from_arrays(self.pairs.offsets, self.keys, self.values)
        offsets = [0] * (self.n + 1)  # rare: count again what each message kept
        for p in self.parents.to_pylist():
            offsets[p + 1] += 1
        for i in range(self.n):
            offsets[i + 1] += offsets[i]
        return pa.MapArray.from_arrays(pa.array(offsets, pa.int32()), self.keys, self.values)

    def field(self, name: str) -> Any:
        """One property of every message (null when absent; the last one when repeated)."""
        import pyarrow.compute as pc

        pa = self.pa
        hit = pc.equal(self.keys, name)
        rows = pc.filter(self.parents, hit)
        values = pc.filter(self.values, hit)
        if len(rows) == self.n and pc.all(pc.equal(rows, pa.array(range(self.n)))).as_py():
            return values  # once per message, the usual case
        at: list[int | None] = [None] * self.n
        for j, row in enumerate(rows.to_pylist()):
            at[row] = j
        return pc.take(values, pa.array(at, pa.int32()))


def _messages(r: PullRange) -> Iterator[Any]:
    """MessageExt of every offset in [start, end), in order."""
    if r.end <= r.start:
        return
    timeout_s = r.timeout_ms / 1000.0
    client = BlockingClient(r.addr)
    inflight: deque[tuple[int, int, int]] = deque()  # (opaque, offset asked, window end)
    next_window = r.start
    done = r.start  # every offset below has been read (or skipped as filtered or lost)
    try:
        while done < r.end:
            if len(inflight) <= PIPELINE // 2:  # refill in one write: fewer wake-ups
                cmds = []
                while next_window < r.end and len(inflight) < PIPELINE:
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
                for m in decode_messages(bytes(resp.body)):
                    qo = m.queue_offset
                    if done <= qo < r.end:
                        done = qo + 1
                        yield m
                done = max(done, min(nxt, r.end))
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
