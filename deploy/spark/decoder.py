"""Pull bodies to Arrow record batches, column-wise: the Spark task's MessageDecoder.

Mirrors common/message/MessageDecoder.java decodes() with PullAPIWrapper.processPullResult's
client-side tag check, for a reader that wants columns, not a MessageExt per message. A
record of the common kind (IPv4 hosts, body not compressed) costs one struct unpack and two
memoryview slices; bodies and properties strings are joined into one buffer each and become
Arrow arrays without a Python object per value; the properties strings are split into the
map, tags, keys and msgId by Arrow compute kernels for the whole batch. IPv6 hosts and
compressed bodies go through protocol.message.decode_message_ext (inflated as a consumer does).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from itertools import accumulate
from typing import Any, Final

from protocol.message import (
    COMPRESSED_FLAG,
    MESSAGE_MAGIC_CODE,
    MessageDecodeError,
    MessageExt,
    create_offset_msg_id,
    decode_message_ext,
    stored_properties,
)
from protocol.record import RECORD_V4_HEAD, V4_FIXED_SIZE, V6_FLAGS, unpack_host

_SLOW: Final = V6_FLAGS | COMPRESSED_FLAG  # records decode_message_ext decodes
_MIN_RECORD: Final = V4_FIXED_SIZE + 3  # an empty body, topic and properties
_I16 = struct.Struct(">h")
# positions in a RECORD_V4_HEAD tuple
_QOFF, _PHY, _SYSFLAG, _BORN_TS, _BORN_HOST, _STORE_TS, _STORE_HOST, _RECONSUME = (
    5, 6, 7, 8, 9, 10, 11, 12)  # fmt: skip


class Gathered:
    """The records of one batch as found in the pull bodies: their head tuples and, for the
    common kind, four positions each in the joined bodies (body start and end, properties
    start and end); records decode_message_ext decoded keep their body and properties."""

    __slots__ = ("chunks", "heads", "nbytes", "offsets", "slow")

    def __init__(self) -> None:
        self.heads: list[tuple[Any, ...]] = []
        self.chunks: list[memoryview] = []  # the pull bodies, joined at build()
        self.offsets: list[int] = []  # 4 per common record, into the joined chunks
        self.slow: list[tuple[int, bytes, bytes]] = []  # (row, body, properties)
        self.nbytes = 0  # bytes of the chunks (bounds a batch's buffers)

    def __len__(self) -> int:
        return len(self.heads)

    def gather(self, buf: memoryview, done: int, end: int) -> int:
        """Take the records of one pull body with queue offsets in [done, end), in order;
        returns the offset after the last one taken (done when none). A record that does not
        parse ends the body, as decode_messages does."""
        heads, offsets = self.heads, self.offsets
        unpack, i16 = RECORD_V4_HEAD.unpack_from, _I16.unpack_from
        base = self.nbytes
        n = len(buf)
        pos = 0
        while pos + V4_FIXED_SIZE <= n:
            h = unpack(buf, pos)
            total = h[0]
            rend = pos + total
            if h[1] != MESSAGE_MAGIC_CODE or total < _MIN_RECORD or rend > n:
                break
            qoff = h[_QOFF]
            if qoff < done or qoff >= end:
                pos = rend
                continue
            if h[_SYSFLAG] & _SLOW:
                try:
                    m = decode_message_ext(buf, pos)
                except MessageDecodeError:
                    break
                self.slow.append((len(heads), m.body, stored_properties(m)))
                heads.append(_head_of(m))
            else:
                tpos = pos + V4_FIXED_SIZE + h[-1]
                if tpos < pos + V4_FIXED_SIZE or tpos + 3 > rend:
                    break
                ppos = tpos + 1 + buf[tpos]
                if ppos + 2 > rend or ppos + 2 + i16(buf, ppos)[0] != rend:
                    break
                heads.append(h)
                offsets += (base + pos + V4_FIXED_SIZE, base + tpos, base + ppos + 2,
                            base + rend)  # fmt: skip
            done = qoff + 1
            pos = rend
        if pos:
            self.chunks.append(buf[:pos])
            self.nbytes += pos
        return done


def _head_of(m: MessageExt) -> tuple[Any, ...]:
    """A RECORD_V4_HEAD-shaped tuple of a decoded message (the fields build() reads)."""
    return (m.store_size, MESSAGE_MAGIC_CODE, m.body_crc, m.queue_id, m.flag,
            m.queue_offset, m.commit_log_offset, m.sys_flag, m.born_timestamp, m.born_host,
            m.store_timestamp, m.store_host, m.reconsume_times,
            m.prepared_transaction_offset, len(m.body))  # fmt: skip


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

    def build(self, g: Gathered) -> Any:
        """One record batch of the gathered records (only the subscribed tags)."""
        import pyarrow.compute as pc

        pa, n = self.pa, len(g)
        cols = list(zip(*g.heads, strict=True))
        bodies, raw_props = self._parts(g)
        props = _Properties(pa, self._strings(raw_props), self._every)
        uniq = props.field("UNIQ_KEY")
        if uniq.null_count:  # no UNIQ_KEY: the offset message id, as MessageExt.getMsgId
            uniq = pa.array([u if u is not None else create_offset_msg_id(h, phy)
                             for u, h, phy in zip(uniq.to_pylist(), cols[_STORE_HOST],
                                                  cols[_PHY], strict=True)], self.string)
        tags = props.field("TAGS")
        batch = pa.RecordBatch.from_arrays([
            pa.repeat(self.consts[0], n), pa.repeat(self.consts[1], n),
            pa.repeat(self.consts[2], n), pa.array(cols[_QOFF], pa.int64()), uniq, tags,
            props.field("KEYS"), bodies, props.map(),
            pa.array(cols[_BORN_TS], self.ts).cast(self.us),
            pa.array(cols[_STORE_TS], self.ts).cast(self.us),
            self._hosts(cols[_BORN_HOST]), self._hosts(cols[_STORE_HOST]),
            pa.array(cols[_RECONSUME], pa.int32()),
        ], schema=self.schema)  # fmt: skip
        if self.wanted is not None:  # the client-side tag check (the broker matched hashes)
            batch = batch.filter(pc.fill_null(pc.is_in(tags, value_set=self.wanted), False))
        return batch

    def _parts(self, g: Gathered) -> tuple[Any, Any]:
        """(bodies, properties strings) as binary arrays: slices of the joined pull bodies
        taken by Arrow (the positions cut them into body, topic, properties, next head)."""
        pa = self.pa
        offsets = g.offsets
        common = len(offsets) // 4
        whole = pa.Array.from_buffers(pa.binary(), 4 * common, [
            None, pa.array([*offsets, offsets[-1] if offsets else 0], pa.int32()).buffers()[1],
            pa.py_buffer(b"".join(g.chunks))])  # fmt: skip
        if not g.slow:
            return (whole.take(self._every(common, 0, 4)),
                    whole.take(self._every(common, 2, 4)))  # fmt: skip
        at_body, at_props = [], []  # rows in order: 4k (+2) for the k-th common record,
        slow = iter(g.slow)  # 4 * common + j for the j-th decoded one
        nxt = next(slow, None)
        k = j = 0
        for row in range(len(g)):
            if nxt is not None and nxt[0] == row:
                at_body.append(4 * common + j)
                j += 1
                nxt = next(slow, None)
            else:
                at_body.append(4 * k)
                k += 1
            at_props.append(at_body[-1] + (2 if at_body[-1] < 4 * common else 0))
        bodies = pa.concat_arrays([whole, _binary(pa, [b for _, b, _ in g.slow])])
        props = pa.concat_arrays([whole, _binary(pa, [p for _, _, p in g.slow])])
        return (bodies.take(pa.array(at_body, pa.int32())),
                props.take(pa.array(at_props, pa.int32())))  # fmt: skip

    def _every(self, n: int, start: int, step: int) -> Any:
        """The n indices start, start + step, ... (from one kept 0, 1, 2, ...)."""
        import pyarrow.compute as pc

        if len(self.count) < n:
            self.count = self.pa.array(range(max(n, 2 * len(self.count))), self.pa.int32())
        got = self.count.slice(0, n)
        if step != 1:
            got = pc.multiply(got, step)
        return pc.add(got, start) if start else got

    def _hosts(self, raw: tuple[bytes, ...]) -> Any:
        hosts = self.hosts
        seen = set(raw)
        for h in seen.difference(hosts):
            ip, port = unpack_host(h)
            hosts[h] = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
        if len(seen) == 1:  # the usual case: one producer host, one broker
            return self.pa.repeat(self.pa.scalar(hosts[raw[0]], self.string), len(raw))
        return self.pa.array(list(map(hosts.__getitem__, raw)), self.string)

    def _strings(self, raws: Any) -> Any:
        pa = self.pa
        try:
            return raws.cast(self.string)
        except pa.ArrowInvalid:  # not UTF-8 (never written by Java): decoded as the parser does
            return pa.array([b.decode("utf-8", "replace") for b in raws.to_pylist()],
                            self.string)  # fmt: skip


def _binary(pa: Any, parts: list[bytes]) -> Any:
    """A BinaryArray of the parts: one joined buffer and their running lengths."""
    offsets = pa.array(list(accumulate(map(len, parts), initial=0)), pa.int32())
    return pa.Array.from_buffers(pa.binary(), len(parts),
                                 [None, offsets.buffers()[1], pa.py_buffer(b"".join(parts))])


class _Properties:
    """The properties strings (name\x01value\x02...) of a batch, split by Arrow kernels with
    protocol.message.parse_properties' rules: a pair splits at its first \x01, and pairs with
    an empty name or value are dropped (a repeated name, which no RocketMQ client writes, stays
    repeated in the map; field() takes its last value, as the parser does)."""

    def __init__(self, pa: Any, props: Any, every: Callable[[int, int, int], Any]) -> None:
        import pyarrow.compute as pc

        self.pa, self.n, self.rows = pa, len(props), every(len(props), 0, 1)
        self.pairs = pc.split_pattern(pc.utf8_rtrim(props, characters="\x02"), pattern="\x02")
        kv = pc.split_pattern(pc.list_flatten(self.pairs), pattern="\x01", max_splits=1)
        self.parents = pc.list_parent_indices(self.pairs)
        two = pc.equal(pc.list_value_length(kv), 2)
        self.exact = pc.all(two).as_py()  # True: every pair is name\x01value (the usual case)
        if self.exact:  # names and values alternate in the flattened pairs
            flat, m = pc.list_flatten(kv), len(kv)
            self.keys, self.values = flat.take(every(m, 0, 2)), flat.take(every(m, 1, 2))
        else:
            kv = pc.filter(kv, two)
            self.keys, self.values = pc.list_element(kv, 0), pc.list_element(kv, 1)
            self.parents = pc.filter(self.parents, two)
        if len(self.keys) and (pc.min(pc.utf8_length(self.keys)).as_py() == 0
                               or pc.min(pc.utf8_length(self.values)).as_py() == 0):
            good = pc.and_(pc.greater(pc.utf8_length(self.keys), 0),
                           pc.greater(pc.utf8_length(self.values), 0))
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
        if len(rows) == self.n and pc.all(pc.equal(rows, self.rows)).as_py():
            return values  # once per message, the usual case
        at: list[int | None] = [None] * self.n
        for j, row in enumerate(rows.to_pylist()):
            at[row] = j
        return pc.take(values, pa.array(at, pa.int32()))
