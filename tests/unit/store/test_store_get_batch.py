"""get_message's whole-batch step (store.get_message_result.whole_batch, no filter)
answers exactly what the unit-by-unit loop does."""

from __future__ import annotations

import random

import pytest

from store import message_store_read
from store.get_message_result import GetMessageResult, whole_batch
from store.message_filter import TagFilter
from store.message_store_reader import MessageStoreReader
from tests.unit.store.store_helpers import msg, open_store, small_config


def _fields(res: GetMessageResult) -> tuple[object, ...]:
    out = (res.status, res.next_begin_offset, res.min_offset, res.max_offset,
           res.message_count, res.buffer_total_size, list(res.message_queue_offsets),
           res.suggest_pull_from_slave, res.buffer)  # fmt: skip
    res.release()
    return out


@pytest.mark.parametrize("memory_ratio", [40, 0])  # all in memory; everything "on disk"
def test_whole_batch_matches_the_unit_loop(tmp_path: object, memory_ratio: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    taken = []  # the whole-batch step's answers (a spy around the real function)

    def spy(*a: object) -> bool:
        taken.append(whole_batch(*a))  # type: ignore[arg-type]
        return taken[-1]

    monkeypatch.setattr(message_store_read, "whole_batch", spy)
    cfg = small_config(str(tmp_path), accessMessageInMemoryMaxRatio=memory_ratio,
                       maxTransferCountOnMessageInMemory=20,
                       maxTransferBytesOnMessageInMemory=6000)  # fmt: skip
    rng = random.Random(7)
    s = open_store(cfg)
    try:
        for i in range(300):  # interleaved queues, sizes that roll the 16 KiB files often
            body = bytes([i % 251]) * rng.choice((10, 100, 700, 1500))
            assert s.put_message(msg(body=body, qid=rng.randrange(3)), 1_000 + i).ok
        reader = MessageStoreReader(cfg)
        star = TagFilter(None)  # the same '*', through the unit loop
        try:
            for store in (s, reader):
                for qid in range(3):
                    top = store.get_max_offset_in_queue("T", qid)
                    for offset in range(-1, top + 2):
                        for max_msgs in (1, 3, 32):
                            for max_bytes in (None, 2000):
                                args = ("G", "T", qid, offset, max_msgs, max_bytes)
                                fast = _fields(store.get_message(*args, None, 0))
                                loop = _fields(store.get_message(*args, star, 0))
                                assert fast == loop, (qid, offset, max_msgs, max_bytes)
        finally:
            reader.close()
    finally:
        s.shutdown(10_000)
    # both ways were compared: batches it took, batches it left to the loop
    assert (True in taken) == (memory_ratio > 0) and False in taken
