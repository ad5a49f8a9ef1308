"""Reading a SEND_BATCH_MESSAGE body: MessageExtBatchEncoder's side of a batch (§5.2).

Mirrors store/CommitLog.java MessageExtBatchEncoder (encode: the items of a batch body,
their lengths checked before a record is written), RocketMQ 4.9.x. The records themselves are
written by store.append_message_callback.
"""

from __future__ import annotations

from protocol.record import MAX_PROPERTIES_LENGTH, RecordError, batch_item_at
from store.put_message_result import PutMessageStatus

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
    pos = total = 0
    while pos < n_raw:
        # TOTALSIZE, MAGICCODE and BODYCRC are skipped, as MessageExtBatchEncoder skips them:
        # an item is as long as its body and properties lengths say
        try:
            flag, _b, bl, pa, pl = batch_item_at(raw, pos, n_raw)
        except RecordError:
            return PutMessageStatus.MESSAGE_ILLEGAL
        rpl = pl
        if extra:  # item props + (separator) + batch props
            rpl += extra + (1 if pl and raw[pa + pl - 1] != 2 else 0)
        if rpl > MAX_PROPERTIES_LENGTH:
            return PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        items.append((pos, flag, bl, pl, rpl))
        total += base + bl + rpl
        pos = pa + pl
    if not items:
        return PutMessageStatus.MESSAGE_ILLEGAL
    return items, total


