"""A SEND_BATCH_MESSAGE body into the records it becomes: CommitLog's MessageExtBatchEncoder.

Mirrors store/CommitLog.java MessageExtBatchEncoder (encode: each item of the body checked,
its properties merged with the batch's, its record laid out) with the batch half of
DefaultAppendMessageCallback.doAppend, RocketMQ 4.9.x. Layouts: protocol.record. The CommitLog
writes what this returns: in one copy when the whole batch fits the current file, record by
record otherwise. Pure: no I/O.
"""

from __future__ import annotations

from struct import error as struct_error
from typing import Final
from zlib import crc32

from protocol.message_properties import TAGS, index_keys, property_value
from protocol.record import (
    BATCH_ITEM_FIXED,
    BATCH_ITEM_HEAD,
    MAX_PROPERTIES_LENGTH,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE,
    RecordError,
    batch_item_at,
    batch_item_unpacker,
    pack_properties_length,
    record_head_packer,
)
from store.index import TagCodes
from store.put_message_result import PutMessageStatus

_ITEM_HEAD: Final = BATCH_ITEM_HEAD.size  # where an item's body starts
_ITEM_UNPACK = BATCH_ITEM_HEAD.unpack_from
_EMPTY_TAGS: Final = b"TAGS\x01\x02"

# (start, FLAG, body length, properties length, stored properties length) of one item
BatchItemSpan = tuple[int, int, int, int, int]


class MalformedBatchError(ValueError):
    """A batch body that does not read as items (none at all, an item cut short, lengths past
    the end): MessageExtBatchEncoder throws reading it (BufferUnderflowException and the like)
    and the exception ends the request, which the broker answers SYSTEM_ERROR. Nothing is
    written."""


def record_fixed_size(topic_with_length: bytes) -> int:
    """A record's size less its body and properties (the topic's length byte included)."""
    return MIN_RECORD_SIZE - 1 + len(topic_with_length)


def records_size_bound(body_size: int, topic_with_length: bytes, batch_props: bytes) -> int:
    """At most how many record bytes a batch body of body_size becomes: each record is at most
    this much longer than its item (>= BATCH_ITEM_FIXED bytes): its fixed part less the item's,
    and the batch's properties with a separator."""
    extra = record_fixed_size(topic_with_length) - BATCH_ITEM_FIXED + len(batch_props) + 1
    return body_size + body_size // BATCH_ITEM_FIXED * extra


def item_body(raw: memoryview, item: BatchItemSpan) -> memoryview:
    """An item's body, a view into the batch body."""
    a = item[0] + _ITEM_HEAD
    return raw[a : a + item[2]]


def merged_properties(raw: bytes, bp: bytes, item: BatchItemSpan) -> bytes:
    """An item's stored properties: its own, then (a separator and) the batch's."""
    start, _flag, bl, pl, rpl = item
    a = start + BATCH_ITEM_FIXED + bl
    ip = raw[a : a + pl]
    if rpl != pl:
        ip = ip + bp if rpl - pl == len(bp) else ip + b"\x02" + bp
    return ip


def check_items(
    raw: bytes, bp: bytes, base: int
) -> tuple[list[BatchItemSpan], int] | PutMessageStatus:
    """Every item of a batch body checked before anything is written: (the items, the record
    bytes they become, a record being `base` + body + stored properties) or the status that
    refuses the batch; MalformedBatchError for a body that does not read."""
    items: list[BatchItemSpan] = []
    n_raw = len(raw)
    extra = len(bp)
    pos = total = 0
    while pos < n_raw:
        # TOTALSIZE, MAGICCODE and BODYCRC are skipped, as MessageExtBatchEncoder skips them:
        # an item is as long as its body and properties lengths say
        try:
            flag, _b, bl, pa, pl = batch_item_at(raw, pos, n_raw)
        except RecordError as exc:
            raise MalformedBatchError(f"batch item {len(items)} at byte {pos} of "
                                      f"{n_raw}: {exc}") from None  # fmt: skip
        rpl = pl
        if extra:  # item props + (separator) + batch props
            rpl += extra + (1 if pl and raw[pa + pl - 1] != 2 else 0)
        if rpl > MAX_PROPERTIES_LENGTH:
            return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        items.append((pos, flag, bl, pl, rpl))
        total += base + bl + rpl
        pos = pa + pl
    if not items:
        raise MalformedBatchError("the batch body is empty")
    return items, total


class MessageExtBatchEncoder:
    """The records of one batch, laid out for one copy; remembers across batches the last
    item body length (its unpacker) and each leading TAGS prefix with its hash."""

    def __init__(self, tag_codes: TagCodes) -> None:
        self.tag_codes = tag_codes
        # per tag offset (0: items with batch properties, 2: without) the last
        # b"TAGS\x01<v>\x02" prefix seen, where it ends and its code
        self._tag_memo: dict[int, tuple[bytes, int, int]] = {
            at: (_EMPTY_TAGS, at + len(_EMPTY_TAGS), 0) for at in (0, 2)
        }
        self._unpack_memo = (0, batch_item_unpacker(0))

    def encode(
        self, raw: bytes, bp: bytes, tb: bytes, qid: int, qoff: int, phy: int, tail: bytes,
        want_items: bool,
    ) -> tuple[list[bytes | memoryview], list[int], list[BatchItemSpan]] | PutMessageStatus:
        """The records of the batch body `raw` from queue offset qoff at commit-log offset phy:
        (the pieces to join into the file, the consume-queue units as flat (phy, size,
        tagsCode) triples, the items when want_items, for their index keys), or the status that
        refuses the batch. `tail` is pack_record_tail() of the batch's shared fields.

        A record is [head][BODY][topic][PROPLEN PROPS] and an item is [TOTAL MAGIC CRC FLAG
        BODYLEN][BODY][PROPLEN PROPS]: per item one unpack, one head pack and pieces taken from
        the body (views: crc32 and the join read them in place); a rejected batch writes
        nothing. The tagsCode is the hash of the merged properties' last TAGS (Java's map):
        the batch's own when it has one."""
        base = record_fixed_size(tb)
        extra = len(bp)
        sep_bp = b"\x02" + bp
        bp_tags = property_value(bp, TAGS) if bp else None
        bp_tc = self.tag_codes.get(bp_tags) if bp_tags is not None else 0
        # pr is an item's props piece: PROPLEN + PROPS, or PROPS alone with batch properties
        tag_at = 0 if extra else 2
        tag_pre, tag_end, last_tc = self._tag_memo[tag_at]
        codes = self.tag_codes
        items: list[BatchItemSpan] = []
        units: list[int] = []
        pieces: list[bytes | memoryview] = []
        n_raw = len(raw)
        ub, item_unpack = self._unpack_memo
        head = record_head_packer(len(tail))
        rv = memoryview(raw)
        pos = 0
        try:
            while pos < n_raw:
                try:  # FLAG, body length, PROPLEN in one unpack, for the last body length seen
                    flag, bl, pl = item_unpack(raw, pos)
                except struct_error:
                    bl = -1
                if bl != ub:
                    bl = _ITEM_UNPACK(raw, pos)[4]
                    if bl < 0 or pos + BATCH_ITEM_FIXED + bl > n_raw:
                        break
                    item_unpack = batch_item_unpacker(bl)
                    ub = bl
                    flag, bl, pl = item_unpack(raw, pos)
                a = pos + _ITEM_HEAD
                pp = a + bl
                pe = pp + 2 + pl  # past the end of raw: the loop ends with pos != n_raw
                b = rv[a:pp]
                if extra:  # item props + (separator) + batch props
                    rpl = pl + extra + (1 if pl and raw[pe - 1] != 2 else 0)
                    if rpl > MAX_PROPERTIES_LENGTH:
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
                    if pl > MAX_PROPERTIES_LENGTH:
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
                        tc = codes.get(tags)
                        te = tag_at + len(TAGS) + len(tags)
                        if pr.startswith(TAGS, tag_at) and pr[te : te + 1] == b"\x02":
                            tag_pre = pr[tag_at : te + 1]
                            tag_end = te + 1
                            last_tc = tc
                units += (phy, size, tc)
                if want_items:
                    items.append((pos, flag, bl, pl, rpl))
                phy += size
                qoff += 1
                pos = pe
        except (ValueError, IndexError, struct_error):
            pos = -1
        # a bad item: check_items names the first bad item's status, checked in the same order
        # (an item's DELAY is stored as it is, as MessageExtBatchEncoder does)
        if pos != n_raw or not units:
            checked = check_items(raw, bp, base)  # raises MalformedBatchError for a torn body
            if isinstance(checked, PutMessageStatus):
                return checked
            raise AssertionError("check_items passed a batch the encoder could not read")
        self._tag_memo[tag_at] = (tag_pre, tag_end, last_tc)
        self._unpack_memo = (ub, item_unpack)
        return pieces, units, items

    def tags_code(self, props: bytes) -> int:
        """The hash of a record's TAGS (0 without)."""
        tags = property_value(props, TAGS)
        return self.tag_codes.get(tags) if tags is not None else 0

    @staticmethod
    def index_entries(
        raw: bytes, bp: bytes, items: list[BatchItemSpan], phys: list[int]
    ) -> tuple[list[bytes], list[int]]:
        """The index keys of a batch's records (UNIQ_KEY, then KEYS; protocol.record's rule)
        and the phy offset of the record each belongs to."""
        keys: list[bytes] = []
        kphys: list[int] = []
        for item, phy in zip(items, phys, strict=True):
            ks = index_keys(merged_properties(raw, bp, item))
            if ks:
                keys += ks
                kphys += [phy] * len(ks)
        return keys, kphys
