"""ProduceAccumulator's split of a batch answer into one SendResult per message."""

from __future__ import annotations

from actors.client.produce_accumulator import split_batch_result
from actors.client.records import SendResult, SendStatus
from protocol.bodies import MessageQueue

MQ = MessageQueue("Orders", "broker-a", 2)


def test_split_batch_result_gives_each_message_its_ids_and_offset() -> None:
    batch = SendResult(SendStatus.FLUSH_DISK_TIMEOUT, "u0,u1,u2", "o0,o1,o2", MQ, 40,
                       region_id="r1", trace_on=False)
    parts = split_batch_result(batch)
    assert parts == [SendResult(SendStatus.FLUSH_DISK_TIMEOUT, f"u{i}", f"o{i}", MQ, 40 + i,
                                region_id="r1", trace_on=False) for i in range(3)]
    assert len({hash(p) for p in parts}) == 3 and parts[1].ok is False
    short = split_batch_result(SendResult(SendStatus.SEND_OK, "a,b", "x", MQ, 7))
    assert [(p.msg_id, p.offset_msg_id, p.queue_offset) for p in short] == \
        [("a", "", 7), ("b", "", 8)]  # fmt: skip
