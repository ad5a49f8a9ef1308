"""Reading a SEND_BATCH_MESSAGE body: MessageExtBatchEncoder's side of a batch (§5.2).

Mirrors store/CommitLog.java MessageExtBatchEncoder (encode: the items of a batch body,
their lengths checked before a record is written), RocketMQ 4.9.x. The records themselves are
written by store.append_message_callback.
"""

from __future__ import annotations

from collections.abc import Callable
from struct import Struct
from struct import error as struct_error
from typing import Any

from store.put_message_result import PutMessageStatus

_U16_UNPACK = Struct(">H").unpack_from
# A batch item (§5.2): TOTALSIZE, MAGICCODE, BODYCRC, FLAG, body length; body; short props len.
BATCH_ITEM = Struct(">iiiii")
_ITEM_UNPACKERS: dict[int, Callable[[bytes, int], tuple[Any, ...]]] = {}


def item_unpacker(body_len: int) -> Callable[[bytes, int], tuple[Any, ...]]:
    """unpack_from of (FLAG, body length, PROPLEN) for items of this body length."""
    f = _ITEM_UNPACKERS.get(body_len)
    if f is None:
        if len(_ITEM_UNPACKERS) >= 256:
            _ITEM_UNPACKERS.clear()
        f = _ITEM_UNPACKERS[body_len] = Struct(f">12xii{body_len}xH").unpack_from
    return f


BatchItemSpan = tuple[int, int, int, int, int]


def batch_items(
    raw: bytes, bp: bytes, base: int
) -> tuple[list[BatchItemSpan], int] | PutMessageStatus:
    """Validate a batch body (§5.2) before anything is written.

    Returns ([(start, flag, body len, props len, stored props len)], total record bytes) where
    a record is `base + body len + stored props len` bytes; or the status rejecting the batch.
    """
    items: list[BatchItemSpan] = []
    n_raw = len(raw)
    extra = len(bp)
    unpack_item = BATCH_ITEM.unpack_from
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


