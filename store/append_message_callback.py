"""Appending records: CommitLog.putMessage / putMessages and DefaultAppendMessageCallback.

Mirrors store/CommitLog.java (asyncPutMessage, asyncPutMessages,
DefaultAppendMessageCallback.doAppend) and MessageExtBatchEncoder, RocketMQ 4.9.x: validates,
encodes and appends records, then dispatches each to its consume queue and the index in the
same call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from struct import Struct
from struct import error as struct_error
from typing import Any, Final
from zlib import crc32

from protocol.record import (
    MESSAGE_MAGIC_CODE,
    RECORD_V4_HEAD,
    properties_to_string,
    string_to_properties,
)
from store.commitlog import (
    SCHEDULE_TOPIC,
    AppendError,
    java_int,
    prop_value,
)
from store.index import index_key_hashes, java_hash_bytes, key_hash
from store.mapped_file import MappedFile
from store.message_ext_broker_inner import MessageExtBatch, MessageExtBrokerInner
from store.message_store_fields import MessageStoreFields
from store.put_message_result import PutMessageResult, PutMessageStatus
from store.state_page import MAX_PHY_WORD

log = logging.getLogger(__name__)


_REC_PACK = RECORD_V4_HEAD.pack_into
_I16_PACK = Struct(">h").pack_into
_I32_UNPACK = Struct(">i").unpack_from
_U16_UNPACK = Struct(">H").unpack_from
# A batch item (§5.2): TOTALSIZE, MAGICCODE, BODYCRC, FLAG, body length; body; short props len.
_BATCH_ITEM = Struct(">iiiii")
_I16: Final = Struct(">h")
_ITEM_UNPACKERS: dict[int, Callable[[bytes, int], tuple[Any, ...]]] = {}


def _item_unpacker(body_len: int) -> Callable[[bytes, int], tuple[Any, ...]]:
    """unpack_from of (FLAG, body length, PROPLEN) for items of this body length."""
    f = _ITEM_UNPACKERS.get(body_len)
    if f is None:
        if len(_ITEM_UNPACKERS) >= 256:
            _ITEM_UNPACKERS.clear()
        f = _ITEM_UNPACKERS[body_len] = Struct(f">12xii{body_len}xH").unpack_from
    return f

# RECORD_V4_HEAD for a batch's records: the 48 bytes SYSFLAG..PREPAREDTRANSACTIONOFFSET are
# the same for every record of a batch and packed once (_REC_TAIL).
_REC_HEAD: Final = Struct(
    ">i"  # TOTALSIZE
    "i"  # MAGICCODE
    "i"  # BODYCRC
    "i"  # QUEUEID
    "i"  # FLAG
    "q"  # QUEUEOFFSET
    "q"  # PHYSICALOFFSET
    "48s"  # SYSFLAG .. PREPAREDTRANSACTIONOFFSET: _REC_TAIL
    "i"  # body length
)
_REC_TAIL: Final = Struct(
    ">i"  # SYSFLAG
    "q"  # BORNTIMESTAMP
    "8s"  # BORNHOST ip + port
    "q"  # STORETIMESTAMP
    "8s"  # STOREHOSTADDRESS ip + port
    "i"  # RECONSUMETIMES
    "q"  # PREPAREDTRANSACTIONOFFSET
)



_BatchItem = tuple[int, int, int, int, int]


def _batch_items(
    raw: bytes, bp: bytes, base: int
) -> tuple[list[_BatchItem], int] | PutMessageStatus:
    """Validate a batch body (§5.2) before anything is written.

    Returns ([(start, flag, body len, props len, stored props len)], total record bytes) where
    a record is `base + body len + stored props len` bytes; or the status rejecting the batch.
    """
    items: list[_BatchItem] = []
    n_raw = len(raw)
    extra = len(bp)
    unpack_item = _BATCH_ITEM.unpack_from
    u16 = _U16_UNPACK
    pos = total = 0
    try:
        while pos < n_raw:
            # TOTALSIZE, MAGICCODE and BODYCRC are skipped, as MessageExtBatchEncoder skips them:
            # an item is as long as its body and properties lengths say
            _total, _magic, _crc, flag, bl = unpack_item(raw, pos)
            pp = pos + 20 + bl
            if bl < 0 or pp + 2 > n_raw:
                return PutMessageStatus.MESSAGE_ILLEGAL
            pl = u16(raw, pp)[0]
            if pp + 2 + pl > n_raw:
                return PutMessageStatus.MESSAGE_ILLEGAL
            rpl = pl
            if extra:  # item props + (separator) + batch props
                rpl += extra + (1 if pl and raw[pp + 1 + pl] != 2 else 0)
            if rpl > 32767:
                return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
            items.append((pos, flag, bl, pl, rpl))
            total += base + bl + rpl
            pos = pp + 2 + pl
    except (ValueError, IndexError, struct_error):
        return PutMessageStatus.MESSAGE_ILLEGAL
    if not items:
        return PutMessageStatus.MESSAGE_ILLEGAL
    return items, total


def _record_keys(pb: bytes) -> list[bytes]:
    """Index keys of one record's encoded properties: UNIQ_KEY, then each KEYS entry."""
    out = []
    uniq = prop_value(pb, b"UNIQ_KEY\x01")
    if uniq:
        out.append(uniq)
    keys = prop_value(pb, b"KEYS\x01")
    if keys:
        out += [k for k in keys.split(b" ") if k]
    return out


def _key_hashes(pre: bytes, pre_h: int, keys: list[bytes]) -> list[int]:
    """abs(hashCode(pre + key)) of each key, hashed in one pass (pre_h = hashCode(pre))."""
    hashes = index_key_hashes(pre_h, keys)
    if -1 in hashes:
        hashes = [h if h >= 0 else key_hash(pre + k) for h, k in zip(hashes, keys, strict=True)]
    return hashes



class AppendMessageMixin(MessageStoreFields):
    """CommitLog.putMessage / putMessages of DefaultMessageStore."""

    def _topic_info(self, topic: str) -> tuple[bytes, bytes, int] | None:
        """(length byte + topic, b'topic#', hashCode('topic#') unsigned) or None if illegal."""
        info = self._topic_cache.get(topic)
        if info is None:
            raw = topic.encode()
            if not raw or len(raw) > 127:
                return None
            pre = raw + b"#"
            info = self._topic_cache[topic] = (
                bytes((len(raw),)) + raw,
                pre,
                java_hash_bytes(pre) & 0xFFFFFFFF,
            )
        return info

    def _topic_bytes(self, topic: str) -> bytes | None:
        info = self._topic_info(topic)
        return None if info is None else info[0]

    def _tags_code(self, pb: bytes) -> int:
        """Tag hash of the TAGS property in encoded properties (0 without tags)."""
        tags = prop_value(pb, b"TAGS\x01")
        if not tags:
            return 0
        tc = self._tags_cache.get(tags)
        return tc if tc is not None else self._tag_hash(tags)

    def _tag_hash(self, tags: bytes) -> int:
        """Hash a tag and remember it (store.index.TagCodes: bounded)."""
        return self.commitlog.tag_codes.get(tags)

    def put_message(self, msg: MessageExtBrokerInner, now_ms: int) -> PutMessageResult:
        """Append one message and dispatch it (CommitLog.putMessage + reput).

        `msg.properties_string` (str or already-encoded bytes) is used as-is when set; only
        TAGS / KEYS / UNIQ_KEY / DELAY are looked up in it, with bytes.find.
        """
        if not self._accepting:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        ps = msg.properties_string
        if ps is None:
            pb = properties_to_string(msg.properties).encode()
        elif ps.__class__ is bytes:
            pb = ps  # type: ignore[assignment]
        else:
            pb = ps.encode()  # type: ignore[union-attr]
        sys_flag = msg.sys_flag
        tran = sys_flag & 0xC
        dispatch_cq = tran != 4 and tran != 12
        if dispatch_cq and b"DELAY\x01" in pb and not msg.deliver_now:
            pb = self._apply_delay(msg, pb)
        topic = msg.topic
        info = self._topic_cache.get(topic) or self._topic_info(topic)
        if info is None:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        tb = info[0]
        body = msg.body
        blen = len(body)
        if blen > self._max_msg_size:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        plen = len(pb)
        if plen > 32767:
            return PutMessageResult(PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
        qid = msg.queue_id
        key = (topic, qid)
        qoff = self.topic_queue_table.get(key, 0) if dispatch_cq else 0
        born_host = msg.born_host
        store_host = msg.store_host
        tl = len(tb)
        size = 90 + blen + tl + plen
        cl = self.commitlog
        mf = cl._cur
        if (
            mf is not None
            and size + 8 <= mf.file_size - mf.wrote_position
            and len(born_host) == 8
            and len(store_host) == 8
        ):
            pos = mf.wrote_position
            phy = mf.file_from_offset + pos
            mm = mf.mm
            _REC_PACK(
                mm, pos, size, MESSAGE_MAGIC_CODE, crc32(body) & 0x7FFFFFFF, qid, msg.flag, qoff,
                phy, sys_flag & ~0x30, msg.born_timestamp, born_host, now_ms, store_host,
                msg.reconsume_times, msg.prepared_transaction_offset, blen,
            )  # fmt: skip
            p = pos + 88
            mm[p : p + blen] = body
            p += blen
            mm[p : p + tl] = tb
            p += tl
            _I16_PACK(mm, p, plen)
            mm[p + 2 : p + 2 + plen] = pb
            mf.wrote_position = pos + size
            cl.last_store_timestamp = now_ms
        else:
            try:
                phy, size = cl.append(
                    tb, body, pb, qid, msg.flag, qoff, sys_flag, msg.born_timestamp, born_host,
                    now_ms, store_host, msg.reconsume_times, msg.prepared_transaction_offset,
                )  # fmt: skip
            except AppendError:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        if topic == SCHEDULE_TOPIC:
            tags_code = self._deliver_time(pb, now_ms)
        else:
            tc = msg.tags_code
            tags_code = tc if tc is not None else self._tags_code(pb)
        if dispatch_cq:
            cq = self.consume_queues.get(key) or self._find_or_create_cq(topic, qid)
            cq.put(phy, size, tags_code, qoff)
            self.topic_queue_table[key] = qoff + 1
        if self._index_inline and tran != 12 and (b"KEYS\x01" in pb or b"UNIQ_KEY\x01" in pb):
            keys = _record_keys(pb)
            if keys:
                self.index.put_hashes(_key_hashes(info[1], info[2], keys), phy, now_ms, now_ms)
        end = phy + size
        st = self.state
        if st is not None:
            st.words[MAX_PHY_WORD] = end
        listener = self.arrival_listener
        if listener is not None and dispatch_cq:
            listener(topic, qid, qoff + 1, tags_code, now_ms)
        self.put_times_total += 1
        self.put_size_total += size
        return PutMessageResult(
            PutMessageStatus.PUT_OK, phy, size, qoff, now_ms, 1, end, store_host
        )

    def _deliver_time(self, pb: bytes, store_ts: int) -> int:
        lvl = prop_value(pb, b"DELAY\x01") or b""
        delays = self._delays
        n = min(max(int(lvl), 1), len(delays)) if lvl.isdigit() else 1
        return store_ts + delays[n - 1]

    def _apply_delay(self, msg: MessageExtBrokerInner, pb: bytes) -> bytes:
        """Park a delayed message in SCHEDULE_TOPIC_XXXX (CommitLog.asyncPutMessage)."""
        raw = prop_value(pb, b"DELAY\x01")
        level = java_int(raw) if raw is not None else None
        if level is None or level <= 0:
            return pb
        props = (
            msg.properties
            if msg.properties_string is None
            else string_to_properties(pb.decode("utf-8", "replace"))
        )
        level = min(level, len(self._delays))
        props["DELAY"] = str(level)
        props["REAL_TOPIC"] = msg.topic
        props["REAL_QID"] = str(msg.queue_id)
        msg.properties = props
        msg.topic = SCHEDULE_TOPIC
        msg.queue_id = level - 1
        msg.properties_string = None
        return properties_to_string(props).encode()

    def put_messages(self, batch: MessageExtBatch, now_ms: int) -> PutMessageResult:
        """Expand a batch body into consecutive records of one queue (MessageExtBatchEncoder).

        Every item is validated before any is written; when the whole batch fits the current
        file each record is written with one header pack and three copies from the body.
        """
        if not self._accepting:
            return PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE)
        if batch.sys_flag & 0xC:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        topic = batch.topic
        info = self._topic_info(topic)
        body = batch.body
        if info is None or len(body) > self.cfg.maxMessageSize or topic == SCHEDULE_TOPIC:
            return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        raw = body if body.__class__ is bytes else bytes(body)
        bprops = batch.batch_properties
        bp = bprops if bprops.__class__ is bytes else bprops.encode()  # type: ignore[attr-defined]
        delay = prop_value(bp, b"DELAY\x01") if bp and b"DELAY\x01" in bp else None
        if delay is not None:
            level = java_int(delay)  # asyncPutMessages: a delayed batch (its own DELAY) is
            if level is None or level > 0:  # refused, and one getDelayTimeLevel cannot parse
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
        tb, pre, pre_h = info
        tl = len(tb)
        qid = batch.queue_id
        key = (topic, qid)
        qoff0 = self.topic_queue_table.get(key, 0)
        born_host = batch.born_host
        store_host = batch.store_host
        cl = self.commitlog
        mf = cl._cur
        n_raw = len(raw)
        # a record is at most 69 + tl + len(bp) bytes longer than its item (>= 22 bytes)
        bound = n_raw + n_raw // 22 * (69 + tl + len(bp))
        if (
            mf is not None
            and bound + 8 <= mf.file_size - mf.wrote_position
            and len(born_host) == 8
            and len(store_host) == 8
        ):
            fast = self._write_batch_fast(batch, raw, bp, info, mf, qoff0, now_ms)
            if isinstance(fast, PutMessageStatus):
                return PutMessageResult(fast)
            units, items = fast
            qoff = qoff0 + len(units) // 3
        else:
            checked = _batch_items(raw, bp, 90 + tl)
            if isinstance(checked, PutMessageStatus):
                return PutMessageResult(checked)
            items = checked[0]
            slow = self._write_batch_slow(batch, raw, bp, tb, items, qoff0, now_ms)
            if slow is None:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
            units = slow
            qoff = qoff0 + len(units) // 3
        cl.last_store_timestamp = now_ms
        n = qoff - qoff0
        cq = self.consume_queues.get(key) or self._find_or_create_cq(topic, qid)
        cq.put_many(units, qoff0)
        self.topic_queue_table[key] = qoff
        offsets = units[0::3]
        if self._index_inline:
            self._index_batch(raw, bp, items[:n], offsets, pre, pre_h, now_ms)
        end = offsets[-1] + units[-2]
        st = self.state
        if st is not None:
            st.words[MAX_PHY_WORD] = end
        listener = self.arrival_listener
        if listener is not None:
            # one notice per distinct tags code, with the queue's new max (what the holds need)
            for tc in dict.fromkeys(units[2::3]):
                listener(topic, qid, qoff, tc, now_ms)
        self.put_times_total += n
        self.put_size_total += end - offsets[0]
        return PutMessageResult(
            PutMessageStatus.PUT_OK, offsets[0], end - offsets[0], qoff0, now_ms, n, end,
            store_host, offsets,
        )  # fmt: skip

    def _write_batch_fast(
        self,
        batch: MessageExtBatch,
        raw: bytes,
        bp: bytes,
        info: tuple[bytes, bytes, int],
        mf: MappedFile,
        qoff: int,
        now_ms: int,
    ) -> tuple[list[int], list[_BatchItem]] | PutMessageStatus:
        """Validate every item, then write the whole batch into mf with one copy.

        A record is [88-byte head][BODY][topic][PROPLEN PROPS] and an item is [TOTAL MAGIC CRC
        FLAG BODYLEN][BODY][PROPLEN PROPS]: per item one unpack, one pack of the head and pieces
        taken from the body; the pieces are joined and copied once after the last item passed,
        so a rejected batch writes nothing. The caller checked the batch fits mf.
        Returns (CQ units, items when the index is built here) or the rejecting status.
        """
        tb = info[0]
        base = 90 + len(tb)
        extra = len(bp)
        sep_bp = b"\x02" + bp
        fbase = mf.file_from_offset
        p0 = mf.wrote_position
        phy = fbase + p0
        tail = _REC_TAIL.pack(
            batch.sys_flag & ~0x30, batch.born_timestamp, batch.born_host, now_ms,
            batch.store_host, batch.reconsume_times, 0,
        )  # fmt: skip
        qid = batch.queue_id
        bp_tags = prop_value(bp, b"TAGS\x01") if bp else None
        # items whose properties start with tag_pre (b"TAGS\x01<value>\x02") have last_tc;
        # b"TAGS\x01\x02" (empty tags, code 0) is what a general lookup gives for it as well.
        # pr is an item's props piece: PROPLEN + PROPS, or PROPS alone with batch properties.
        tag_at = 0 if extra else 2
        # the last tag prefix and body length seen carry over from the previous batch
        tag_pre, tag_end, last_tc = self._tag_memo[tag_at]
        tags_cache = self._tags_cache
        inline = self._index_inline
        items: list[_BatchItem] = []
        units: list[int] = []
        pieces: list[bytes | memoryview] = []
        n_raw = len(raw)
        ub, item_unpack = self._unpack_memo
        head = _REC_HEAD.pack
        rv = memoryview(raw)  # body pieces as views: crc32 and the join read them in place
        pos = 0
        try:
            while pos < n_raw:
                try:  # FLAG, body length, PROPLEN in one unpack, for the last body length seen
                    flag, bl, pl = item_unpack(raw, pos)
                except struct_error:
                    bl = -1
                if bl != ub:
                    bl = _I32_UNPACK(raw, pos + 16)[0]
                    if bl < 0 or pos + 22 + bl > n_raw:
                        break
                    item_unpack = _item_unpacker(bl)
                    ub = bl
                    flag, bl, pl = item_unpack(raw, pos)
                a = pos + 20
                pp = a + bl
                pe = pp + 2 + pl  # past the end of raw: the loop ends with pos != n_raw
                b = rv[a:pp]
                if extra:  # item props + (separator) + batch props
                    rpl = pl + extra + (1 if pl and raw[pe - 1] != 2 else 0)
                    if rpl > 32767:
                        break
                    size = base + bl + rpl
                    pr = raw[pp + 2 : pe]
                    pieces += (
                        head(size, MESSAGE_MAGIC_CODE, crc32(b) & 0x7FFFFFFF, qid, flag, qoff,
                             phy, tail, bl),
                        b, tb, _I16.pack(rpl), pr, sep_bp if rpl - pl > extra else bp,
                    )  # fmt: skip
                else:
                    if pl > 32767:
                        break
                    rpl = pl
                    size = base + bl + pl
                    pr = raw[pp:pe]
                    pieces += (
                        head(size, MESSAGE_MAGIC_CODE, crc32(b) & 0x7FFFFFFF, qid, flag, qoff,
                             phy, tail, bl),
                        b, tb, pr,
                    )  # fmt: skip
                if pr[tag_at:tag_end] == tag_pre:
                    tc = last_tc
                else:
                    tc = 0
                    tags = prop_value(pr[tag_at:], b"TAGS\x01")
                    if tags is None:
                        tags = bp_tags
                    if tags:
                        c = tags_cache.get(tags)
                        tc = c if c is not None else self._tag_hash(tags)
                        te = tag_at + 5 + len(tags)
                        if pr.startswith(b"TAGS\x01", tag_at) and pr[te : te + 1] == b"\x02":
                            tag_pre = pr[tag_at : te + 1]
                            tag_end = te + 1
                            last_tc = tc
                units += (phy, size, tc)
                if inline:
                    items.append((pos, flag, bl, pl, rpl))
                phy += size
                qoff += 1
                pos = pe
        except (ValueError, IndexError, struct_error):
            pos = -1
        # a bad item: _batch_items names the first bad item's status, checked in the same order
        # as always (an item's DELAY is stored as it is, as MessageExtBatchEncoder does)
        if pos != n_raw or not units:
            checked = _batch_items(raw, bp, base)
            if isinstance(checked, PutMessageStatus):
                return checked
            if pos != n_raw:  # not reached: both passes apply the same checks
                return PutMessageStatus.MESSAGE_ILLEGAL
        p = phy - fbase
        mf.mm[p0:p] = b"".join(pieces)
        mf.wrote_position = p
        self._tag_memo[tag_at] = (tag_pre, tag_end, last_tc)
        self._unpack_memo = (ub, item_unpack)
        return units, items

    def _write_batch_slow(
        self,
        batch: MessageExtBatch,
        raw: bytes,
        bp: bytes,
        tb: bytes,
        items: list[_BatchItem],
        qoff: int,
        now_ms: int,
    ) -> list[int] | None:
        """Append validated items one record at a time (a batch near a file roll, IPv6 hosts)."""
        cl = self.commitlog
        mv = memoryview(raw)
        units: list[int] = []
        sys_flag = batch.sys_flag & ~0x30
        for start, flag, bl, pl, rpl in items:
            a = start + 22 + bl
            ip = raw[a : a + pl]
            if rpl != pl:
                ip = ip + bp if rpl - pl == len(bp) else ip + b"\x02" + bp
            try:
                phy, size = cl.append(
                    tb, mv[start + 20 : start + 20 + bl], ip, batch.queue_id, flag, qoff,
                    sys_flag, batch.born_timestamp, batch.born_host, now_ms, batch.store_host,
                    batch.reconsume_times, 0,
                )  # fmt: skip
            except AppendError:
                if not units:
                    return None
                break
            tags = prop_value(ip, b"TAGS\x01")
            units += (phy, size, java_hash_bytes(tags) if tags else 0)
            qoff += 1
        return units

    def _index_batch(
        self,
        raw: bytes,
        bp: bytes,
        items: list[_BatchItem],
        phys: list[int],
        pre: bytes,
        pre_h: int,
        now_ms: int,
    ) -> None:
        """Index entries (UNIQ_KEY, then KEYS) of a batch's records, hashed in one pass."""
        keys: list[bytes] = []
        kphys: list[int] = []
        for (start, _flag, bl, pl, rpl), phy in zip(items, phys, strict=True):
            a = start + 22 + bl
            ip = raw[a : a + pl]
            if rpl != pl:
                ip = ip + bp if rpl - pl == len(bp) else ip + b"\x02" + bp
            ks = _record_keys(ip)
            if ks:
                keys += ks
                kphys += [phy] * len(ks)
        if keys:
            hashes = _key_hashes(pre, pre_h, keys)
            self.index.put_hash_batch(hashes, kphys, [now_ms] * len(hashes), now_ms)
