"""Appending records: CommitLog.putMessage / putMessages and DefaultAppendMessageCallback.

Mirrors store/CommitLog.java (asyncPutMessage, asyncPutMessages,
DefaultAppendMessageCallback.doAppend), RocketMQ 4.9.x: validates, encodes and appends records
(a batch body read by store.message_ext_batch_encoder), then dispatches each to its consume
queue and the index in the same call.

Every file a put needs (the next commit-log file, a consume queue's next file, a "sync" index
file) is made before the put writes a byte (`_make_room`): a file that cannot be made (a full
disk) refuses the put with CREATE_MAPEDFILE_FAILED and leaves the store as it was, so no
record is ever written without its consume-queue unit, nor published half written.
"""

from __future__ import annotations

import logging
from struct import error as struct_error
from zlib import crc32

from protocol.record import (
    BATCH_ITEM_HEAD,
    MESSAGE_MAGIC_CODE,
    TAGS,
    batch_item_unpacker,
    delay_level,
    delivery_tags_code,
    index_keys,
    pack_properties_length,
    pack_record_tail,
    properties_to_string,
    property_value,
    record_head_packer,
    string_to_properties,
    write_record,
)
from store.build_index_dispatcher import key_hashes
from store.commitlog import (
    SCHEDULE_TOPIC,
    AppendError,
)
from store.consume_queue import ConsumeQueue
from store.index import java_hash_bytes
from store.mapped_file import MappedFile
from store.message_ext_batch_encoder import BatchItemSpan, batch_items
from store.message_ext_broker_inner import MessageExtBatch, MessageExtBrokerInner
from store.message_store_fields import MessageStoreFields
from store.put_message_result import PutMessageResult, PutMessageStatus
from store.state_page import MAX_PHY_WORD

log = logging.getLogger(__name__)


_ITEM_HEAD_UNPACK = BATCH_ITEM_HEAD.unpack_from


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
        tags = property_value(pb, TAGS)
        if tags is None:
            return 0
        tc = self._tags_cache.get(tags)
        return tc if tc is not None else self._tag_hash(tags)

    def _tag_hash(self, tags: bytes) -> int:
        """Hash a tag and remember it (store.index.TagCodes: bounded)."""
        return self.commitlog.tag_codes.get(tags)

    def _make_room(
        self, need: int, cq: ConsumeQueue | None, qoff: int, units: int, keys: int, now_ms: int
    ) -> PutMessageStatus | None:
        """Create the files a put needs before it writes a byte: the next commit-log file for
        a record of `need` bytes (0: none), the consume queue's for `units` units at qoff, the
        index's for `keys` entries ("sync" index). None when they are there; else
        CREATE_MAPEDFILE_FAILED (CommitLog.asyncPutMessage) with nothing written. After a
        failure, puts that need a file are refused at once for CREATE_RETRY_MS (logged once;
        the next creation that works is logged too)."""
        gate = self._create_gate
        cl = self.commitlog
        try:
            if need and not cl.room(need):
                if not gate.may_try(now_ms):
                    return PutMessageStatus.CREATE_MAPEDFILE_FAILED
                cl.make_room()
            if cq is not None and not cq.has_room(qoff, units):
                if not gate.may_try(now_ms):
                    return PutMessageStatus.CREATE_MAPEDFILE_FAILED
                cq.reserve(qoff, units)
            if keys and not self.index.has_room(keys):
                if not gate.may_try(now_ms):
                    return PutMessageStatus.CREATE_MAPEDFILE_FAILED
                self.index.reserve(keys, now_ms)
        except OSError as exc:
            self.note_create_failed(now_ms, exc)
            return PutMessageStatus.CREATE_MAPEDFILE_FAILED
        self.note_files_created()
        return None

    def note_create_failed(self, now_ms: int, exc: OSError) -> None:
        """A store file could not be made: puts that need one wait CREATE_RETRY_MS (logged once
        until one can be made again)."""
        if self._create_gate.failed(now_ms, str(exc)):
            log.error("a store file cannot be created (%s): sends that need a new file are "
                      "refused (CREATE_MAPEDFILE_FAILED) until there is space", exc)

    def note_files_created(self) -> None:
        """Store files could be made (here or by the allocate thread): sends need not wait."""
        if self._create_gate.succeeded():
            log.info("store files can be created again: sends accepted")

    def _index_file_error(self) -> None:
        """Index entries of a stored record could not be written (IndexService logged why): the
        store takes no more puts until an index file can be written again (RunningFlags'
        WRITE_INDEX_FILE_ERROR, which Java never clears; here the disk check does)."""
        self.running_flags.make_index_file_error()
        self._accepting = False

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
        topic = msg.topic
        delay = 0
        parks = dispatch_cq and not msg.deliver_now
        if b"DELAY\x01" in pb and (parks or topic == SCHEDULE_TOPIC):
            # getDelayTimeLevel: Integer.parseInt throws on a DELAY that is not a number (Java
            # then answers SYSTEM_ERROR); checkMessageAndReturnSize calls such a record in
            # SCHEDULE_TOPIC_XXXX bad, so one is never written
            level = delay_level(pb)
            if level is None:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
            if level > 0 and parks:
                pb = self._apply_delay(msg, pb, level)
                topic = msg.topic
                level = min(level, len(self._delays))
            delay = level
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
        fits = mf is not None and size + 8 <= mf.file_size - mf.wrote_position
        cq = None
        if dispatch_cq:
            cq = self.consume_queues.get(key) or self._find_or_create_cq(topic, qid)
        keys = None
        if self._index_inline and tran != 12 and (b"KEYS\x01" in pb or b"UNIQ_KEY\x01" in pb):
            keys = index_keys(pb)
        # a unit past its consume-queue file's allocated blocks (a file's start included, or
        # in a queue without a file, or after a gap) may need a file or blocks
        if not fits or (cq is not None and (
            cq._cur is None or qoff * 20 != cq._max_pos
            or (qoff + 1) * 20 - cq._cur.file_from_offset > cq._cur.allocated
        ) and not cq.has_room(qoff, 1)) or (keys and not self.index.has_room(len(keys))
        ):  # fmt: skip
            # a file to create first: nothing is written when it cannot be
            status = self._make_room(size, cq, qoff, 1, len(keys) if keys else 0, now_ms)
            if status is not None:
                return PutMessageResult(status)
            fits = False  # the roll (if any) happens in CommitLog.append
        if fits and len(born_host) == 8 and len(store_host) == 8:
            assert mf is not None
            pos = mf.wrote_position
            phy = mf.file_from_offset + pos
            mm = mf.mm
            write_record(
                mm, pos, size, crc32(body) & 0x7FFFFFFF, qid, msg.flag, qoff, phy, sys_flag,
                msg.born_timestamp, born_host, now_ms, store_host, msg.reconsume_times,
                msg.prepared_transaction_offset, body, tb, pb,
            )  # fmt: skip
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
        tc = msg.tags_code
        tags_code = tc if tc is not None else self._tags_code(pb)
        if delay > 0 and topic == SCHEDULE_TOPIC:
            when = delivery_tags_code(delay, now_ms, self._delays)
            if when is not None:
                tags_code = when
        if cq is not None:
            cq.put(phy, size, tags_code, qoff)
            self.topic_queue_table[key] = qoff + 1
        if keys:
            hashes = key_hashes(info[1], info[2], keys)
            if self.index.put_hashes(hashes, phy, now_ms, now_ms) < len(hashes):
                self._index_file_error()  # (reserved above: a racing full disk only)
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

    def _apply_delay(self, msg: MessageExtBrokerInner, pb: bytes, level: int) -> bytes:
        """Park a message with DELAY `level` > 0 in SCHEDULE_TOPIC_XXXX (asyncPutMessage)."""
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
        if bp and b"DELAY\x01" in bp:
            level = delay_level(bp)  # asyncPutMessages: a delayed batch (its own DELAY) is
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
            checked = batch_items(raw, bp, 90 + tl)
            if isinstance(checked, PutMessageStatus):
                return PutMessageResult(checked)
            items, total = checked
            total = min(total, cl.file_size - 8)  # over a whole file: its first roll at least
            cq = self.consume_queues.get(key) or self._find_or_create_cq(topic, qid)
            if not cl.room(total) or not cq.has_room(qoff0, len(items)):
                status = self._make_room(total, cq, qoff0, len(items), 0, now_ms)
                if status is not None:
                    return PutMessageResult(status)
            slow = self._write_batch_slow(batch, raw, bp, tb, items, qoff0, now_ms)
            if slow is None:
                return PutMessageResult(PutMessageStatus.MESSAGE_ILLEGAL)
            units = slow
            qoff = qoff0 + len(units) // 3
        cl.last_store_timestamp = now_ms
        n = qoff - qoff0
        cq = self.consume_queues[key]  # made by the room check before the write
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
    ) -> tuple[list[int], list[BatchItemSpan]] | PutMessageStatus:
        """Validate every item, make the consume queue's room for its units, then write the
        whole batch into mf with one copy.

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
        tail = pack_record_tail(
            batch.sys_flag, batch.born_timestamp, batch.born_host, now_ms,
            batch.store_host, batch.reconsume_times, 0,
        )  # fmt: skip
        qid = batch.queue_id
        # the merged properties' last TAGS: the batch's own, when it has one, for every item
        bp_tags = property_value(bp, TAGS) if bp else None
        # items whose properties start with tag_pre (b"TAGS\x01<value>\x02") have last_tc;
        # b"TAGS\x01\x02" (empty tags, code 0) is what a general lookup gives for it as well.
        # pr is an item's props piece: PROPLEN + PROPS, or PROPS alone with batch properties.
        tag_at = 0 if extra else 2
        # the last tag prefix and body length seen carry over from the previous batch
        tag_pre, tag_end, last_tc = self._tag_memo[tag_at]
        tags_cache = self._tags_cache
        bp_tc = self._tag_hash(bp_tags) if bp_tags is not None else 0
        inline = self._index_inline
        items: list[BatchItemSpan] = []
        units: list[int] = []
        pieces: list[bytes | memoryview] = []
        n_raw = len(raw)
        ub, item_unpack = self._unpack_memo
        head = record_head_packer(len(tail))
        rv = memoryview(raw)  # body pieces as views: crc32 and the join read them in place
        pos = 0
        try:
            while pos < n_raw:
                try:  # FLAG, body length, PROPLEN in one unpack, for the last body length seen
                    flag, bl, pl = item_unpack(raw, pos)
                except struct_error:
                    bl = -1
                if bl != ub:
                    bl = _ITEM_HEAD_UNPACK(raw, pos)[4]
                    if bl < 0 or pos + 22 + bl > n_raw:
                        break
                    item_unpack = batch_item_unpacker(bl)
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
                        b, tb, pack_properties_length(rpl), pr,
                        sep_bp if rpl - pl > extra else bp,
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
                if bp_tags is not None:
                    tc = bp_tc
                elif pr[tag_at:tag_end] == tag_pre and pr.find(b"\x02TAGS\x01", tag_end - 1) < 0:
                    tc = last_tc
                else:
                    tc = 0
                    tags = property_value(pr[tag_at:], TAGS)
                    if tags is not None:
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
            checked = batch_items(raw, bp, base)
            if isinstance(checked, PutMessageStatus):
                return checked
            if pos != n_raw:  # not reached: both passes apply the same checks
                return PutMessageStatus.MESSAGE_ILLEGAL
        n = len(units) // 3
        topic = batch.topic
        cq = self.consume_queues.get((topic, qid)) or self._find_or_create_cq(topic, qid)
        if not cq.has_room(qoff - n, n):
            status = self._make_room(0, cq, qoff - n, n, 0, now_ms)
            if status is not None:
                return status
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
        items: list[BatchItemSpan],
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
            except (AppendError, OSError):  # OSError: a second roll (a batch over a file)
                if not units:
                    return None
                break
            tags = property_value(ip, TAGS)
            units += (phy, size, java_hash_bytes(tags) if tags is not None else 0)
            qoff += 1
        return units

    def _index_batch(
        self,
        raw: bytes,
        bp: bytes,
        items: list[BatchItemSpan],
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
            ks = index_keys(ip)
            if ks:
                keys += ks
                kphys += [phy] * len(ks)
        if keys:
            hashes = key_hashes(pre, pre_h, keys)
            if self.index.put_hash_batch(hashes, kphys, [now_ms] * len(hashes), now_ms) < len(
                hashes
            ):
                self._index_file_error()
