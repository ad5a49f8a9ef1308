"""Commit log: the append-only record files every message goes through, and their one writer.

Mirrors store/CommitLog.java (asyncPutMessage, asyncPutMessages, appendData, the put lock,
topicQueueTable, DefaultAppendMessageCallback.doAppend, its FlushRealTimeService and
GroupCommitService), RocketMQ 4.9.x. The CommitLog owns its MappedFileQueue, the file being
written, the put lock, the queue offsets it hands out and its flush services; the one write
path (a single put, a batch, a slave's HA append) is here. Each record it writes goes to its
dispatcher (ReputMessageService: consume queue and index) in the same call; the files the
dispatch needs are made before the record's first byte is written (a full disk refuses the put
with CREATE_MAPEDFILE_FAILED and nothing written). Layout and encoder: protocol.record.

A record that does not fit (`size + 8 > remaining`) is replaced by an END_FILE blank
(`int remaining, int BLANK_MAGIC_CODE`) and goes to the start of the next file.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Final
from zlib import crc32

from protocol.codes import SCHEDULE_TOPIC as SCHEDULE_TOPIC
from protocol.java_number import NumberFormatError
from protocol.message import (
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
)
from protocol.message_properties import (
    DELAY,
    delay_level,
    delivery_tags_code,
    index_keys,
    properties_to_string,
    property_value,
    string_to_properties,
)
from protocol.record import (
    END_FILE_MIN_BLANK_LENGTH,
    MAX_PROPERTIES_LENGTH,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE,
    RecordError,
    pack_blank,
    pack_record_tail,
    read_total_and_magic,
    record_at,
    topic_field,
    write_record,
)
from store.allocate_service import AllocateMappedFileService
from store.config import StoreConfig
from store.create_retry_gate import CreateRetryGate
from store.dispatch_request import CommitLogDispatcher, CommitLogWalk, DispatchFailed, RecordChecker
from store.flush_service import FlushRealTimeService, Msync
from store.index import TagCodes
from store.mapped_file import MappedFile
from store.mapped_file_queue import MappedFileQueue
from store.message_ext_batch_encoder import (
    MessageExtBatchEncoder,
    check_items,
    item_body,
    merged_properties,
    record_fixed_size,
    records_size_bound,
)
from store.message_ext_broker_inner import MessageExtBatch, MessageExtBrokerInner
from store.put_message_result import PutMessageResult, PutMessageStatus
from store.store_stats_service import StoreStatsService

log = logging.getLogger(__name__)

# After a store file could not be created (a full disk), puts that need one are refused at once
# for this long before one tries again (the allocate thread retries every cleanResourceInterval)
CREATE_RETRY_MS: Final = 1000
_V4_FIXED_WITH_TOPIC_LENGTH: Final = MIN_RECORD_SIZE - 1  # + body + length byte + topic + props
_HOST_V6_EXTRA: Final = 12
_PREPARED: Final = TRANSACTION_PREPARED_TYPE
_ROLLBACK: Final = TRANSACTION_ROLLBACK_TYPE
_PS = PutMessageStatus


class AppendError(Exception):
    """A record that can never be stored (larger than a file)."""


class CommitLog:
    """The commit log files of one store and the operations on them (a reader's view maps the
    same files read-only and has no dispatcher)."""

    def __init__(
        self, cfg: StoreConfig, *, writable: bool = True,
        dispatcher: CommitLogDispatcher | None = None, stats: StoreStatsService | None = None,
        on_new_file: Callable[[], None] | None = None,
        on_flushed: Callable[[int], None] | None = None,
    ) -> None:  # fmt: skip
        """dispatcher: where each written record goes (a writer); on_new_file: a file was
        started (readers rescan); on_flushed(store time of the last record flushed)."""
        self.cfg = cfg
        self.file_size = cfg.mappedFileSizeCommitLog
        self.path = cfg.commitlog_path
        self.mfq = MappedFileQueue(self.path, self.file_size, writable=writable,
                                   warm=cfg.warmMapedFileEnable,
                                   warm_flush_pages=cfg.flushLeastPagesWhenWarmMapedFile
                                   if cfg.is_sync_flush else 0)  # fmt: skip
        self.writable = writable
        self._cur: MappedFile | None = None  # the file being written
        self.last_store_timestamp = 0
        self.topic_queue_table: dict[tuple[str, int], int] = {}  # next queue offset per queue
        self.put_lock = threading.Lock()  # GroupCommitService's writers; the broker is one thread
        self.tag_codes = TagCodes()  # TAGS hashes
        self.checker = RecordChecker(cfg.delay_levels_ms, self.tag_codes)
        self.batch_encoder = MessageExtBatchEncoder(self.tag_codes)
        self.create_gate = CreateRetryGate(CREATE_RETRY_MS)  # CREATE_MAPEDFILE_FAILED
        self.stats = stats if stats is not None else StoreStatsService()
        self.allocator: AllocateMappedFileService | None = None  # the next segment, warmed
        self._dispatcher = dispatcher
        self._on_new_file = on_new_file
        self.flush_service = FlushRealTimeService(
            cfg, self, on_flushed, dispatcher.published_end if dispatcher is not None else None)
        self._delays = cfg.delay_levels_ms
        self._max_msg_size = cfg.maxMessageSize

    # ---- services --------------------------------------------------------------------------
    def start(self, now_ms: int, slave: bool, msync: Msync | None, madvise: Msync | None) -> None:
        """A master's first file made and warmed before serving (a slave's starts where the
        master's first byte for it falls), the next one preallocated and warmed; the flush and
        allocate threads (with ctypes). OSError when the first file cannot be made."""
        mfq = self.mfq
        if not slave and not mfq.files:
            self._cur = mfq.get_last_mapped_file(0)
            self._new_file()
        elif self._cur is not None and self.cfg.warmMapedFileEnable:
            mfq.warm(self._cur)  # after a restart: pre-touch the unwritten tail before serving
        self.preallocate_next(now_ms)
        while mfq.warm_next_step(self.file_size):
            pass
        self.flush_service.start(now_ms, msync)
        if madvise is not None and self.allocator is None:
            self.allocator = AllocateMappedFileService(
                mfq, madvise, msync if mfq.warm_flush_pages else None
            )

    def stop_services(self) -> None:
        """Stop the flush and allocate threads (after their rounds)."""
        self.flush_service.close()
        if self.allocator is not None:
            self.allocator.close()
            self.allocator = None

    def preallocate_next(self, now_ms: int) -> None:
        """The next file, made on this thread (no allocate thread, or at start); a full disk
        leaves it to a put (or the next clean pass) to try again."""
        try:
            self.mfq.preallocate_next()
        except OSError as exc:
            self.create_gate.note_failed(now_ms, exc)

    def request_allocation(self, now_ms: int) -> None:
        """The next file again (after a full disk): by the allocate thread, else here."""
        if self.allocator is not None:
            self.allocator.request()
        else:
            self.preallocate_next(now_ms)

    def _new_file(self) -> None:
        if self._on_new_file is not None:
            self._on_new_file()
        if self.allocator is not None:
            self.allocator.request()  # the segment after this one, made and warmed ahead

    # ---- room ------------------------------------------------------------------------------
    def room(self, need: int) -> bool:
        """A record of `need` bytes can be appended without creating a file (or it can never
        fit: AppendError follows)."""
        return self.mfq.has_room(need, END_FILE_MIN_BLANK_LENGTH, self._cur)

    def _make_room(self, need: int, topic: str, qid: int, qoff: int, units: int, keys: int,
                   now_ms: int) -> PutMessageStatus | None:  # fmt: skip
        """Create the files a put needs before it writes a byte: the next commit-log file for
        `need` bytes (0: none) and what its dispatch needs. None when they are there; else
        CREATE_MAPEDFILE_FAILED with nothing written (and for CREATE_RETRY_MS after it)."""
        gate = self.create_gate
        disp = self._dispatcher
        assert disp is not None
        try:
            if need and not self.room(need):
                if not gate.may_try(now_ms):
                    return _PS.CREATE_MAPEDFILE_FAILED
                if self.mfq.files:
                    self.mfq.preallocate_next()
                else:
                    self.mfq.get_last_mapped_file(0)
            if not disp.has_room(topic, qid, qoff, units, keys):
                if not gate.may_try(now_ms):
                    return _PS.CREATE_MAPEDFILE_FAILED
                disp.reserve(topic, qid, qoff, units, keys, now_ms)
        except OSError as exc:
            self.create_gate.note_failed(now_ms, exc)
            return _PS.CREATE_MAPEDFILE_FAILED
        self.create_gate.note_created()
        return None

    def _current(self, need: int) -> MappedFile:
        """The file to write a record of `need` bytes into (blank-pads and rolls if needed)."""
        mf = self._cur
        if mf is None:
            mf = self.mfq.get_last_mapped_file(0)
            assert mf is not None
            self._cur = mf
        remaining = mf.file_size - mf.wrote_position
        if need + END_FILE_MIN_BLANK_LENGTH > remaining:
            if need + END_FILE_MIN_BLANK_LENGTH > self.file_size:
                raise AppendError(f"record of {need} bytes cannot fit a {self.file_size}-byte file")
            if remaining >= END_FILE_MIN_BLANK_LENGTH:
                wp = mf.wrote_position
                mf.mm[wp : wp + END_FILE_MIN_BLANK_LENGTH] = pack_blank(remaining)
            mf.wrote_position = mf.file_size
            mf = self.mfq.get_last_mapped_file(mf.file_end_offset)
            assert mf is not None
            self._cur = mf
            self._new_file()
        return mf

    # ---- the write path ----------------------------------------------------------------------
    def put_message(self, msg: MessageExtBrokerInner, now_ms: int) -> PutMessageResult:
        """asyncPutMessage: a delayed message parked in SCHEDULE_TOPIC_XXXX (msg is changed,
        as Java changes it), then put_message_fields. `msg.properties_string` (str or encoded
        bytes) is stored as it is when set (protocol.record's rule reads it)."""
        ps = msg.properties_string
        if ps is None:
            pb = properties_to_string(msg.properties).encode()
        elif ps.__class__ is bytes:
            pb = ps  # type: ignore[assignment]
        else:
            pb = ps.encode()  # type: ignore[union-attr]
        sys_flag = msg.sys_flag
        tran = sys_flag & TRANSACTION_TYPE_MASK
        delay = 0
        if b"DELAY\x01" in pb:
            parks = tran != _PREPARED and tran != _ROLLBACK and not msg.deliver_now
            if parks or msg.topic == SCHEDULE_TOPIC:
                # getDelayTimeLevel: Integer.parseInt throws on a DELAY that is not a number
                # (Java then answers SYSTEM_ERROR); checkMessageAndReturnSize calls such a record
                # in SCHEDULE_TOPIC_XXXX bad, so one is never written
                level = delay_level(pb)
                if level is None:  # nothing written; the request ends in SYSTEM_ERROR
                    raise NumberFormatError(property_value(pb, DELAY) or b"")
                if level > 0 and parks:
                    pb = self._park(msg, pb, level)
                    level = min(level, len(self._delays))
                delay = level
        r = self.put_message_fields(
            msg.topic, msg.queue_id, msg.body, pb, sys_flag, msg.flag, msg.born_timestamp,
            msg.born_host, msg.store_host, msg.reconsume_times, msg.tags_code, now_ms,
            msg.prepared_transaction_offset, delay,
        )  # fmt: skip
        if r.__class__ is tuple:
            phy, size, qoff = r  # type: ignore[misc]
            return PutMessageResult(_PS.PUT_OK, phy, size, qoff, now_ms, 1, phy + size,
                                    msg.store_host)  # fmt: skip
        return PutMessageResult(r)  # type: ignore[arg-type]

    def put_message_fields(
        self, topic: str, qid: int, body: bytes | memoryview, pb: bytes, sys_flag: int,
        flag: int, born_ts: int, born_host: bytes, store_host: bytes, reconsume_times: int,
        tags_code: int | None, now_ms: int, prepared_offset: int = 0, delay: int | None = None,
    ) -> tuple[int, int, int] | PutMessageStatus:
        """The write path of one message from its fields (no message object): its record
        encoded into the file being written, dispatched and published; (phy, size, queue
        offset) or the refusing status. `pb`: the encoded properties; `tags_code` None: the
        TAGS hash; `delay`: the level put_message read (None: not read yet)."""
        if delay is None and b"DELAY\x01" in pb:
            r = self.put_message(MessageExtBrokerInner(
                topic, body, flag, {}, qid, sys_flag, born_ts, born_host, store_host,
                reconsume_times, prepared_offset, tags_code, pb), now_ms)  # fmt: skip
            return (r.wrote_offset, r.wrote_bytes, r.logics_offset) if r.ok else r.status
        tran = sys_flag & TRANSACTION_TYPE_MASK
        to_queue = tran != _PREPARED and tran != _ROLLBACK  # it gets a consume-queue unit
        tb = topic_field(topic)
        if tb is None or len(body) > self._max_msg_size:
            return _PS.MESSAGE_ILLEGAL
        if len(pb) > MAX_PROPERTIES_LENGTH:
            return _PS.PROPERTIES_SIZE_EXCEEDED
        key = (topic, qid)
        qoff = self.topic_queue_table.get(key, 0) if to_queue else 0
        size = _V4_FIXED_WITH_TOPIC_LENGTH + len(body) + len(tb) + len(pb)
        if len(born_host) != 8:
            size += _HOST_V6_EXTRA
        if len(store_host) != 8:
            size += _HOST_V6_EXTRA
        disp = self._dispatcher
        assert disp is not None
        keys = None
        nkeys = 0
        if disp.index_inline and tran != _ROLLBACK and (b"KEYS\x01" in pb or b"UNIQ_KEY\x01" in pb):
            keys = index_keys(pb)
            nkeys = len(keys)
        mf = self._cur
        if (mf is None or size + END_FILE_MIN_BLANK_LENGTH > mf.file_size - mf.wrote_position
                or not disp.has_room(topic, qid, qoff, to_queue, nkeys)):  # fmt: skip
            # a file to create first: nothing is written when it cannot be
            status = self._make_room(size, topic, qid, qoff, to_queue, nkeys, now_ms)
            if status is not None:
                return status
            try:
                mf = self._current(size)
            except AppendError:
                return _PS.MESSAGE_ILLEGAL
        pos = mf.wrote_position
        phy = mf.file_from_offset + pos
        write_record(mf.mm, pos, size, crc32(body) & 0x7FFFFFFF, qid, flag, qoff, phy, sys_flag,
                     born_ts, born_host, now_ms, store_host, reconsume_times, prepared_offset,
                     body, tb, pb)  # fmt: skip
        mf.wrote_position = pos + size
        self.last_store_timestamp = now_ms
        if tags_code is None:
            tags_code = self.batch_encoder.tags_code(pb)
        if delay and delay > 0 and topic == SCHEDULE_TOPIC:  # the delivery time, as recovery
            when = delivery_tags_code(delay, now_ms, self._delays)
            if when is not None:
                tags_code = when
        if to_queue:
            self.topic_queue_table[key] = qoff + 1
        try:
            disp.dispatch(topic, qid, phy, size, tags_code, now_ms, qoff, sys_flag, keys, now_ms,
                          phy + size)  # fmt: skip
        except Exception as exc:
            raise DispatchFailed(f"{topic}-{qid} offset {qoff} at {phy}: {exc!r}") from exc
        stats = self.stats
        stats.put_times_total += 1
        stats.put_size_total += size
        return phy, size, qoff

    def _park(self, msg: MessageExtBrokerInner, pb: bytes, level: int) -> bytes:
        """Park a message with DELAY `level` > 0 in SCHEDULE_TOPIC_XXXX: its real topic and
        queue kept as properties, the level capped, the properties rendered again (msg is
        changed, as Java changes it)."""
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
        """asyncPutMessages: a batch body's items as consecutive records of one queue
        (MessageExtBatchEncoder). Every item is checked before any is written; when the whole
        batch fits the current file it is written in one copy."""
        if batch.sys_flag & TRANSACTION_TYPE_MASK:
            return PutMessageResult(_PS.MESSAGE_ILLEGAL)
        topic = batch.topic
        tb = topic_field(topic)
        body = batch.body
        if tb is None or len(body) > self._max_msg_size or topic == SCHEDULE_TOPIC:
            return PutMessageResult(_PS.MESSAGE_ILLEGAL)
        raw = body if body.__class__ is bytes else bytes(body)
        bprops = batch.batch_properties
        bp = bprops if bprops.__class__ is bytes else bprops.encode()  # type: ignore[attr-defined]
        if bp and b"DELAY\x01" in bp:
            level = delay_level(bp)  # a DELAY it cannot parse ends the request; a delayed
            if level is None:  # batch (its own DELAY > 0) is refused
                raise NumberFormatError(property_value(bp, DELAY) or b"")
            if level > 0:
                return PutMessageResult(_PS.MESSAGE_ILLEGAL)
        qid = batch.queue_id
        key = (topic, qid)
        qoff0 = self.topic_queue_table.get(key, 0)
        disp = self._dispatcher
        assert disp is not None
        inline = disp.index_inline
        mf = self._cur
        tail = pack_record_tail(batch.sys_flag, batch.born_timestamp, batch.born_host, now_ms,
                                batch.store_host, batch.reconsume_times, 0)  # fmt: skip
        if (mf is not None and len(batch.born_host) == 8 and len(batch.store_host) == 8
                and records_size_bound(len(raw), tb, bp) + END_FILE_MIN_BLANK_LENGTH
                <= mf.file_size - mf.wrote_position):  # fmt: skip
            p0 = mf.wrote_position
            enc = self.batch_encoder.encode(raw, bp, tb, qid, qoff0, mf.file_from_offset + p0,
                                            tail, inline)  # fmt: skip
            if isinstance(enc, PutMessageStatus):
                return PutMessageResult(enc)
            pieces, units, items = enc
            n = len(units) // 3
            if not disp.has_room(topic, qid, qoff0, n, 0):
                status = self._make_room(0, topic, qid, qoff0, n, 0, now_ms)
                if status is not None:
                    return PutMessageResult(status)
            data = b"".join(pieces)
            mf.mm[p0 : p0 + len(data)] = data
            mf.wrote_position = p0 + len(data)
        else:
            got = self._put_batch_by_record(batch, raw, bp, tb, qoff0, now_ms)
            if isinstance(got, PutMessageStatus):
                return PutMessageResult(got)
            units, items = got
            n = len(units) // 3
        self.last_store_timestamp = now_ms
        qoff = qoff0 + n
        self.topic_queue_table[key] = qoff
        offsets = units[0::3]
        keys: list[bytes] = []
        kphys: list[int] = []
        if inline:
            keys, kphys = self.batch_encoder.index_entries(raw, bp, items[:n], offsets)
        try:
            disp.dispatch_batch(topic, qid, units, qoff0, keys, kphys, now_ms)
        except Exception as exc:
            raise DispatchFailed(f"{topic}-{qid} offsets {qoff0}-{qoff - 1}: {exc!r}") from exc
        end = offsets[-1] + units[-2]
        disp.publish(end)
        # one notice per distinct tags code, with the queue's new max (what the holds need)
        for tc in dict.fromkeys(units[2::3]):
            disp.notify(topic, qid, qoff, tc, now_ms)
        self.stats.put_times_total += n
        self.stats.put_size_total += end - offsets[0]
        return PutMessageResult(
            _PS.PUT_OK, offsets[0], end - offsets[0], qoff0, now_ms, n, end, batch.store_host,
            offsets,
        )  # fmt: skip

    def _put_batch_by_record(
        self, batch: MessageExtBatch, raw: bytes, bp: bytes, tb: bytes, qoff: int, now_ms: int
    ) -> tuple[list[int], list[tuple[int, int, int, int, int]]] | PutMessageStatus:
        """A batch near a file roll (or with IPv6 hosts), record by record once every item was
        checked; (units, items) or the status. A batch over a second roll is cut there."""
        checked = check_items(raw, bp, record_fixed_size(tb))
        if isinstance(checked, PutMessageStatus):
            return checked
        items, total = checked
        total = min(total, self.file_size - END_FILE_MIN_BLANK_LENGTH)  # its first roll at least
        topic, qid = batch.topic, batch.queue_id
        disp = self._dispatcher
        assert disp is not None
        if not self.room(total) or not disp.has_room(topic, qid, qoff, len(items), 0):
            status = self._make_room(total, topic, qid, qoff, len(items), 0, now_ms)
            if status is not None:
                return status
        mv = memoryview(raw)
        units: list[int] = []
        for item in items:
            flag = item[1]
            props = merged_properties(raw, bp, item)
            try:
                phy, size = self._append(tb, item_body(mv, item), props, qid, flag, qoff,
                                         batch.sys_flag, batch.born_timestamp, batch.born_host,
                                         now_ms, batch.store_host,
                                         batch.reconsume_times)  # fmt: skip
            except (AppendError, OSError):  # OSError: a second roll (a batch over a file)
                if not units:
                    return _PS.MESSAGE_ILLEGAL
                break
            units += (phy, size, self.batch_encoder.tags_code(props))
            qoff += 1
        return units, items

    def _append(
        self, tb: bytes, body: bytes | memoryview, props: bytes, qid: int, flag: int, qoff: int,
        sys_flag: int, born_ts: int, born_host: bytes, store_ts: int, store_host: bytes,
        reconsume_times: int,
    ) -> tuple[int, int]:
        """Write one record (rolling to the next file if needed); (phy, size)."""
        total = _V4_FIXED_WITH_TOPIC_LENGTH + len(body) + len(tb) + len(props)
        total += (len(born_host) - 8) + (len(store_host) - 8)
        mf = self._current(total)
        pos = mf.wrote_position
        phy = mf.file_from_offset + pos
        write_record(mf.mm, pos, total, crc32(body) & 0x7FFFFFFF, qid, flag, qoff, phy, sys_flag,
                     born_ts, born_host, store_ts, store_host, reconsume_times, 0, body, tb,
                     props)  # fmt: skip
        mf.wrote_position = pos + total
        return phy, total

    def append_data(self, start: int, data: bytes | memoryview, now_ms: int) -> bool:
        """appendData: raw commit-log bytes a master sent for offset `start` (a slave); False
        when `start` is not this log's end, the bytes do not fit its file, or the file cannot
        be made (the HA client reconnects)."""
        if not data:
            return True
        if self.mfq.files and start != self.max_offset:
            return False
        try:
            mf = self.mfq.get_last_mapped_file(start)  # the first file where the master's starts
        except OSError as exc:  # a full disk: the HA client reconnects and tries again
            self.create_gate.note_failed(now_ms, exc)
            return False
        if mf is None or mf.file_from_offset + mf.wrote_position != start:
            return False
        p = mf.wrote_position
        n = len(data)
        if p + n > mf.file_size:
            return False
        if p == 0:
            self._new_file()
        mf.mm[p : p + n] = data
        mf.wrote_position = p + n
        self._cur = mf if mf.wrote_position < mf.file_size else None
        return True

    # ---- positions and flushing ----------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        """Offset one past the last written byte."""
        mf = self._cur
        if mf is not None:
            return mf.file_from_offset + mf.wrote_position
        return self.mfq.get_max_offset()

    @property
    def min_offset(self) -> int:
        """Start offset of the first file (0 when empty)."""
        m = self.mfq.get_min_offset()
        return 0 if m < 0 else m

    @property
    def flushed_offset(self) -> int:
        """Offset known to be on disk."""
        return self.mfq.flushed_where

    @property
    def current_file(self) -> MappedFile | None:
        """The file being written (None before the first record, and after a full file)."""
        return self._cur

    def flush(self, least_pages: int = 0, max_bytes: int = 0) -> int:
        """msync what is written (FlushRealTimeService.flush); returns the flushed offset."""
        return self.flush_service.flush(least_pages, max_bytes)

    def roll_next_file(self, offset: int) -> int:
        """Start of the file after the one holding offset."""
        return offset + self.file_size - offset % self.file_size

    # ---- read ------------------------------------------------------------------------------
    def get_data(self, phy: int, size: int) -> memoryview | None:
        """A view of size bytes at phy, or None when that file is gone."""
        return self.mfq.select(phy, size)

    def record_size_at(self, phy: int) -> int:
        """TOTALSIZE of the message record at phy, or -1."""
        head = self.mfq.select(phy, 8)
        if head is None:
            return -1
        total, magic = read_total_and_magic(head, 0)
        return total if magic == MESSAGE_MAGIC_CODE else -1

    def store_timestamp_at(self, phy: int, size: int) -> int:
        """STORETIMESTAMP of the record at phy, or -1."""
        data = self.mfq.select(phy, size)
        try:
            r = None if data is None else record_at(data, 0, len(data))
        except RecordError:
            return -1
        return -1 if r is None else r[8]

    def walk(self, start: int, check_crc: bool, limit: int | None = None) -> CommitLogWalk:
        """The valid records from start (dispatch_request.CommitLogWalk)."""
        return CommitLogWalk(self.mfq, self.checker, start, check_crc, limit)

    # ---- recovery and a slave's reput ---------------------------------------------------------
    def note_reput(self, queue_offsets: dict[tuple[str, int], int], last_store_ts: int) -> None:
        """A slave's reput dispatched records: their queues' next offsets, the last store time."""
        self.topic_queue_table.update(queue_offsets)
        if last_store_ts >= 0:
            self.last_store_timestamp = last_store_ts

    def note_recovered(self, queue_offsets: dict[tuple[str, int], int], last_store_ts: int) -> None:
        """recoverTopicQueueTable after recovery, and the store time of the last record."""
        self.topic_queue_table = queue_offsets
        self.last_store_timestamp = last_store_ts

    def truncate_dirty(self, offset: int) -> None:
        """Drop everything at or after offset."""
        self.mfq.truncate_dirty_files(offset)
        self.mfq.flushed_where = min(self.mfq.flushed_where, offset)
        self._resume_writing()

    def set_recovered(self, end: int) -> None:
        """After recovery: positions of every file from the valid end offset."""
        self.mfq.set_recovered(end)
        self._resume_writing()

    def _resume_writing(self) -> None:
        """The file to go on writing: the last one, unless it is full."""
        files = self.mfq.files
        self._cur = files[-1] if files and files[-1].wrote_position < files[-1].file_size else None

    def close(self) -> None:
        """Stop the services and unmap every file."""
        self.stop_services()
        self.mfq.close()
        self._cur = None

