"""A put whose record is written but whose dispatch fails (its consume-queue unit not written)
raises DispatchFailed: the writer must not go on (its next unit of that queue would pre-blank
the missing one and every consumer would skip the message). Its replacement opens the store
after the abrupt end and recovery dispatches the record: nothing is lost, and the queue's
offsets go on after it."""

from __future__ import annotations

from typing import Any

import pytest

from protocol.message_properties import properties_to_string
from store.consume_queue import ConsumeQueue
from store.dispatch_request import DispatchFailed
from store.message_ext_broker_inner import MessageExtBatch
from store.message_store import DefaultMessageStore
from tests.unit.store.store_helpers import msg, open_store, pull_all, small_config


def _batch(bodies: list[bytes]) -> MessageExtBatch:
    """A SEND_BATCH_MESSAGE body of these messages (each with its UNIQ_KEY) for queue 0 of T."""
    items = []
    for i, b in enumerate(bodies):
        p = properties_to_string({"UNIQ_KEY": f"U{i:031d}{b.hex()}", "TAGS": "A"}).encode()
        items.append((22 + len(b) + len(p)).to_bytes(4, "big") + bytes(12)
                     + len(b).to_bytes(4, "big") + b + len(p).to_bytes(2, "big") + p)  # fmt: skip
    return MessageExtBatch(topic="T", body=b"".join(items), queue_id=0,
                           batch_properties="CLUSTER\x01c1")  # fmt: skip


def _put(s: DefaultMessageStore, batch: bool, bodies: list[bytes], now_ms: int) -> int:
    """Put the bodies (one put each, or one batch); the queue offset of the first."""
    if batch:
        r = s.put_messages(_batch(bodies), now_ms)
        assert r.ok, r.status
        return r.logics_offset
    first = -1
    for b in bodies:
        r1 = s.put_message(msg(body=b), now_ms)
        assert r1.ok, r1.status
        first = r1.logics_offset if first < 0 else first
    return first


@pytest.mark.parametrize("batch", [False, True])
def test_a_written_record_whose_dispatch_failed_is_dispatched_by_recovery(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, batch: bool
) -> None:
    cfg = small_config(str(tmp_path))
    s = open_store(cfg)
    assert _put(s, batch, [b"first", b"second"], 1_000) == 0

    def full(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ConsumeQueue, "put_many" if batch else "put", full)
    with pytest.raises(DispatchFailed, match="T-0 offset" if not batch else "T-0 offsets 2-3"):
        _put(s, batch, [b"third", b"fourth"] if batch else [b"third"], 1_001)
    monkeypatch.undo()
    s.close_abruptly()  # the writer's process ends: nothing more is put by it

    s = open_store(cfg, 2_000)
    try:
        assert s.recovered_abnormally
        lost = [b"third", b"fourth"] if batch else [b"third"]
        nxt = 2 + len(lost)
        assert s.get_max_offset_in_queue("T", 0) == nxt
        assert _put(s, batch, [b"last"], 2_001) == nxt
        got = pull_all(s, "T", 0, 10)
        assert got == list(enumerate([b"first", b"second", *lost, b"last"]))
        assert s.check() == []
    finally:
        s.shutdown(3_000)
