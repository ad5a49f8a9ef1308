"""Pull bodies to Arrow record batches, column-wise: the Spark task's MessageDecoder.

Mirrors common/message/MessageDecoder.java decodes() with PullAPIWrapper.processPullResult's
client-side tag check, for a reader that wants columns, not a MessageExt per message. The pull
answers stay where the connection read them (deploy.spark.pull_connection's arena); per
record of the common kind (IPv4 hosts, body not compressed) the walk unpacks five fields and
notes five positions in that buffer (into a typed array Arrow takes as it is); Arrow kernels
then cut the fixed heads, bodies and properties strings out of the buffer, read the heads'
big-endian fields and split the properties into the map, tags, keys and msgId for the whole
batch. Every column is a copy: nothing of the buffer is kept. IPv6 hosts and compressed
bodies go through protocol.message.decode_message_ext (inflated as a consumer does).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any, Final

from protocol.message import (
    COMPRESSED_FLAG,
    MessageDecodeError,
    MessageExt,
    create_offset_msg_id,
    decode_message_ext,
    stored_properties,
)
from protocol.record import (
    BORN_HOST_POS,
    BORN_TIMESTAMP_POS,
    PHYSICAL_OFFSET_POS,
    RECONSUME_TIMES_POS_V4,
    STORE_HOST_POS_V4,
    STORE_TIMESTAMP_POS_V4,
    V6_FLAGS,
    RecordError,
    record_at,
    unpack_host,
)

_SLOW: Final = V6_FLAGS | COMPRESSED_FLAG  # records decode_message_ext decodes
# (position, width) of the head fields read by Arrow (protocol.record's layout, IPv4 hosts)
_PHY, _BORN_TS, _BORN_HOST = (PHYSICAL_OFFSET_POS, 8), (BORN_TIMESTAMP_POS, 8), (BORN_HOST_POS, 8)
_STORE_TS, _STORE_HOST = (STORE_TIMESTAMP_POS_V4, 8), (STORE_HOST_POS_V4, 8)
_RECONSUME = (RECONSUME_TIMES_POS_V4, 4)


class Gathered:
    """The records of one batch as found in the buffer the pull answers were read into: their
    queue offsets and, for the common kind, five positions each (where its head, body, topic
    and properties start, and its end); records decode_message_ext decoded are kept whole."""

    __slots__ = ("last", "offsets", "ordered", "qoffs", "slow")

    def __init__(self) -> None:
        self.qoffs = array("q")  # every row's queue offset, in order
        self.offsets = array("i")  # 5 per common record, into the buffer (Arrow's int32)
        self.slow: list[tuple[int, MessageExt]] = []  # (row, decoded message)
        self.ordered = True  # the common records lie in the buffer in row order
        self.last = 0  # where the records walked so far end in the buffer

    def __len__(self) -> int:
        return len(self.qoffs)

    def gather(self, buf: memoryview, lo: int, hi: int, done: int, end: int) -> int:
        """Take the records of the pull body buf[lo:hi] with queue offsets in [done, end), in
        order; returns the offset after the last one taken (done when none). A record that
        does not parse ends the body, as decode_messages does."""
        qoffs, add = self.qoffs, self.offsets.extend
        if lo < self.last:  # an answer read ahead of its turn, earlier in the buffer
            self.ordered = False
        pos = lo
        while True:
            try:
                r = record_at(buf, pos, hi)
            except RecordError:
                break
            if r is None:
                break
            rend = pos + r[0]
            qoff = r[4]
            if qoff < done or qoff >= end:
                pos = rend
                continue
            if r[6] & _SLOW:
                try:
                    m = decode_message_ext(buf[:rend], pos)
                except MessageDecodeError:
                    break
                self.slow.append((len(qoffs), m))
            else:  # head, body, topic length byte, properties and end positions
                add((pos, r[12], r[14] - 1, r[16], rend))
            qoffs.append(qoff)
            done = qoff + 1
            pos = rend
        if pos > self.last:
            self.last = pos
        return done


class BatchBuilder:
    """Gathered records of one queue range to Arrow record batches of the source's schema."""

    def __init__(self, topic: str, broker: str, queue_id: int,
                 tags: frozenset[str] | None) -> None:  # fmt: skip
        import pyarrow as pa

        from deploy.spark.schema import arrow_schema

        self.pa = pa
        self.schema = arrow_schema()
        self.string = pa.string()
        self.ts = pa.timestamp("ms", tz="UTC")
        self.us = pa.timestamp("us", tz="UTC")
        self.consts = (pa.scalar(topic, self.string), pa.scalar(broker, self.string),
                       pa.scalar(queue_id, pa.int32()))  # fmt: skip
        self.wanted = None if tags is None else pa.array(sorted(tags), self.string)
        self.hosts: dict[bytes, str] = {}  # packed host -> "ip:port" (a handful per range)
        self.count = pa.array([], pa.int32())  # 0, 1, 2, ... (grown on demand)
        self.every: dict[tuple[int, int, int], Any] = {}  # (n, start, step) -> indices
        # compute arguments as Arrow scalars: a Python value costs a failed import per call
        self.false, self.two, self.zero = pa.scalar(False), pa.scalar(2, pa.int32()), pa.scalar(
            0, pa.int32())  # fmt: skip
        self.names = {k: pa.scalar(k, self.string) for k in ("UNIQ_KEY", "TAGS", "KEYS")}

    def build(self, g: Gathered, data: Any) -> Any:
        """One record batch of the gathered records (only the subscribed tags); `data` is the
        buffer their positions are in (the batch keeps nothing of it)."""
        import pyarrow.compute as pc

        pa, n = self.pa, len(g)
        cols = _Columns(self, g, data)
        props = _Properties(self, self._strings(cols.props))
        uniq = props.field("UNIQ_KEY")
        if uniq.null_count:  # no UNIQ_KEY: the offset message id, as MessageExt.getMsgId
            uniq = pa.array([u if u is not None else create_offset_msg_id(h, phy)
                             for u, h, phy in zip(uniq.to_pylist(), cols.store_raw.to_pylist(),
                                                  cols.phy.to_pylist(), strict=True)],
                            self.string)  # fmt: skip
        tags = props.field("TAGS")
        batch = pa.RecordBatch.from_arrays([
            pa.repeat(self.consts[0], n), pa.repeat(self.consts[1], n),
            pa.repeat(self.consts[2], n), pa.Array.from_buffers(pa.int64(), n, [
                None, pa.py_buffer(g.qoffs)]), uniq, tags,
            props.field("KEYS"), cols.bodies, props.map(),
            cols.born_ts.view(self.ts).cast(self.us), cols.store_ts.view(self.ts).cast(self.us),
            self._hosts(cols.born_raw), self._hosts(cols.store_raw), cols.reconsume,
        ], schema=self.schema)  # fmt: skip
        if self.wanted is not None:  # the client-side tag check (the broker matched hashes)
            batch = batch.filter(pc.fill_null(pc.is_in(tags, value_set=self.wanted),
                                              self.false))  # fmt: skip
        return batch

    def _every(self, n: int, start: int, step: int) -> Any:
        """The n indices start, start + step, ... (from one kept 0, 1, 2, ...; the last few
        kept too: most batches of a range have one size)."""
        import pyarrow.compute as pc

        got = self.every.get((n, start, step))
        if got is not None:
            return got
        if len(self.count) < n:
            self.count = self.pa.array(range(max(n, 2 * len(self.count))), self.pa.int32())
        got = self.count.slice(0, n)
        if step != 1:
            got = pc.multiply(got, self.pa.scalar(step, self.pa.int32()))
        if start:
            got = pc.add(got, self.pa.scalar(start, self.pa.int32()))
        if len(self.every) >= 32:
            self.every.clear()
        self.every[n, start, step] = got
        return got

    def _hosts(self, raw: Any) -> Any:
        """Packed hosts (binary) to "ip:port" strings, decoded once per distinct host."""
        pa, hosts = self.pa, self.hosts
        coded = raw.dictionary_encode()
        distinct = coded.dictionary.to_pylist()
        for h in distinct:
            if h not in hosts:
                ip, port = unpack_host(h)
                hosts[h] = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
        if len(distinct) == 1:  # the usual case: one producer host, one broker
            return pa.repeat(pa.scalar(hosts[distinct[0]], self.string), len(raw))
        return pa.array([hosts[h] for h in distinct], self.string).take(coded.indices)

    def _strings(self, raws: Any) -> Any:
        pa = self.pa
        try:
            return raws.cast(self.string)
        except pa.ArrowInvalid:  # not UTF-8 (never written by Java): decoded as the parser does
            return pa.array([b.decode("utf-8", "replace") for b in raws.to_pylist()],
                            self.string)  # fmt: skip


class _Columns:
    """A batch's per-record columns in row order: the common records' parts cut out of the
    buffer the answers were read into by Arrow (copies), the decoded ones' from their
    MessageExt."""

    def __init__(self, b: BatchBuilder, g: Gathered, data: Any) -> None:
        import pyarrow.compute as pc

        pa = b.pa
        offsets = g.offsets
        common = len(offsets) // 5
        if common and not g.ordered:  # answers read ahead of their turn: by position
            offsets, part = _by_position(pa, offsets)
        else:

            def part(j: int) -> Any:  # the indices of every record's part j
                return b._every(common, j, 5)

        # the spans head, body, topic, properties, gap (to the next record) of each record
        whole = pa.Array.from_buffers(pa.binary(), len(offsets) - 1, [
            None, pa.py_buffer(offsets), pa.py_buffer(data)]) if common else pa.array(
            [], pa.binary())  # fmt: skip
        heads = whole.take(part(0))

        def cut(at: tuple[int, int]) -> Any:
            return pc.binary_slice(heads, at[0], at[0] + at[1])

        def number(at: tuple[int, int], kind: Any) -> Any:  # big-endian in the head
            raw = pc.binary_reverse(cut(at))
            return pa.Array.from_buffers(kind, len(raw), [None, raw.buffers()[2]])

        self.bodies = whole.take(part(1))
        self.props = whole.take(part(3))
        self.phy = number(_PHY, pa.int64())
        self.born_ts, self.store_ts = number(_BORN_TS, pa.int64()), number(_STORE_TS, pa.int64())
        self.born_raw, self.store_raw = cut(_BORN_HOST), cut(_STORE_HOST)
        self.reconsume = number(_RECONSUME, pa.int32())
        if g.slow:
            self._merge(b, g, common)

    def _merge(self, b: BatchBuilder, g: Gathered, common: int) -> None:
        """Put the decoded records among the common ones, in row order."""
        pa = b.pa
        order, k, j = [], 0, common  # row -> index in (common ones + decoded ones)
        slow_rows = {row for row, _ in g.slow}
        for row in range(len(g)):
            if row in slow_rows:
                order.append(j)
                j += 1
            else:
                order.append(k)
                k += 1
        at = pa.array(order, pa.int32())
        ms = [m for _, m in g.slow]

        def merged(mine: Any, theirs: list[Any], kind: Any) -> Any:
            return pa.concat_arrays([mine, pa.array(theirs, kind)]).take(at)

        binary, i64 = pa.binary(), pa.int64()
        self.bodies = merged(self.bodies, [m.body for m in ms], binary)
        self.props = merged(self.props, [stored_properties(m) for m in ms], binary)
        self.phy = merged(self.phy, [m.commit_log_offset for m in ms], i64)
        self.born_ts = merged(self.born_ts, [m.born_timestamp for m in ms], i64)
        self.store_ts = merged(self.store_ts, [m.store_timestamp for m in ms], i64)
        self.born_raw = merged(self.born_raw, [m.born_host for m in ms], binary)
        self.store_raw = merged(self.store_raw, [m.store_host for m in ms], binary)
        self.reconsume = merged(self.reconsume, [m.reconsume_times for m in ms], pa.int32())


def _by_position(pa: Any, offsets: array) -> tuple[array, Callable[[int], Any]]:
    """The records' positions sorted by where they are in the buffer (Arrow's offsets only
    grow) and, per part, the indices of each row's record in that order."""
    n = len(offsets) // 5
    order = sorted(range(n), key=lambda k: offsets[5 * k])
    ranked, rank = array("i"), [0] * n
    for r, k in enumerate(order):
        ranked.extend(offsets[5 * k : 5 * k + 5])
        rank[k] = 5 * r

    def part(j: int) -> Any:
        return pa.array([r + j for r in rank], pa.int32())

    return ranked, part


class _Properties:
    """The properties strings (name\x01value\x02...) of a batch, split by Arrow kernels with
    protocol.message.parse_properties' rules: a pair splits at its first \x01, and pairs with
    an empty name or value are dropped (a repeated name, which no RocketMQ client writes, stays
    repeated in the map; field() takes its last value, as the parser does)."""

    def __init__(self, b: BatchBuilder, props: Any) -> None:
        import pyarrow.compute as pc

        every = b._every
        self.b, self.pa, self.n, self.rows = b, b.pa, len(props), every(len(props), 0, 1)
        self.pairs = pc.split_pattern(pc.utf8_rtrim(props, characters="\x02"), pattern="\x02")
        kv = pc.split_pattern(pc.list_flatten(self.pairs), pattern="\x01", max_splits=1)
        self.parents = pc.list_parent_indices(self.pairs)
        two = pc.equal(pc.list_value_length(kv), b.two)
        self.exact = pc.all(two).as_py()  # True: every pair is name\x01value (the usual case)
        if self.exact:  # names and values alternate in the flattened pairs
            flat, m = pc.list_flatten(kv), len(kv)
            self.keys, self.values = flat.take(every(m, 0, 2)), flat.take(every(m, 1, 2))
        else:
            kv = pc.filter(kv, two)
            self.keys, self.values = pc.list_element(kv, 0), pc.list_element(kv, 1)
            self.parents = pc.filter(self.parents, two)
        klen, vlen = pc.binary_length(self.keys), pc.binary_length(self.values)
        if len(self.keys) and (pc.min(klen).as_py() == 0 or pc.min(vlen).as_py() == 0):
            good = pc.and_(pc.greater(klen, b.zero), pc.greater(vlen, b.zero))
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
        hit = pc.equal(self.keys, self.b.names[name])
        rows = pc.filter(self.parents, hit)
        values = pc.filter(self.values, hit)
        if len(rows) == self.n and pc.all(pc.equal(rows, self.rows)).as_py():
            return values  # once per message, the usual case
        at: list[int | None] = [None] * self.n
        for j, row in enumerate(rows.to_pylist()):
            at[row] = j
        return pc.take(values, pa.array(at, pa.int32()))
